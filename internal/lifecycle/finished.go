package lifecycle

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// IsFinished reports whether the TrainJob is Complete or Failed, and when it
// became so: the lastTransitionTime of that condition, from which its TTL
// and retention count. Both conditions are terminal.
func IsFinished(tj *trainer.TrainJob) (bool, metav1.Time) {
	if c := tj.FinishedCondition(); c != nil {
		return true, c.LastTransitionTime
	}
	return false, metav1.Time{}
}

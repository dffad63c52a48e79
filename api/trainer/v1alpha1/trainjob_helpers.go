package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// FinishedCondition returns the Complete or Failed condition of the TrainJob
// if one is True, and nil while it has not finished. The finish time is the
// condition's lastTransitionTime.
func (tj *TrainJob) FinishedCondition() *metav1.Condition {
	for i := range tj.Status.Conditions {
		c := &tj.Status.Conditions[i]
		if (c.Type == TrainJobComplete || c.Type == TrainJobFailed) && c.Status == metav1.ConditionTrue {
			return c
		}
	}
	return nil
}

package ttl

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
)

// retained is the expiry set by the cluster's retention policy (Kueue
// KEP-1618), for a TrainJob whose own TTL does not apply:
//
//   - finished and Failed, with afterFailed set: finish time + afterFailed;
//   - finished, with afterFinished set: finish time + afterFinished;
//   - not finished, suspended (Suspended=True) with afterSuspended set: the
//     time it was suspended + afterSuspended.
//
// An unset policy never deletes; 0 deletes at once.
func retained(tj *trainer.TrainJob, p *configv1alpha1.TrainJobRetentionPolicy) *Expiry {
	if p == nil {
		return nil
	}
	if done := tj.FinishedCondition(); done != nil {
		if tj.Spec.TTLSecondsAfterFinished != nil {
			return nil // the TrainJob's own TTL wins
		}
		policy, d := metrics.PolicyAfterFinished, p.AfterFinished
		if done.Type == trainer.TrainJobFailed && p.AfterFailed != nil {
			policy, d = metrics.PolicyAfterFailed, p.AfterFailed
		}
		if d == nil {
			return nil
		}
		return &Expiry{
			Since:  done.LastTransitionTime.Time,
			At:     done.LastTransitionTime.Add(d.Duration),
			Policy: policy,
			Reason: fmt.Sprintf("%s and the cluster's retention policy %s of %s expired", describe(done), policy, d.Duration),
		}
	}
	if p.AfterSuspended == nil {
		return nil
	}
	for _, c := range tj.Status.Conditions {
		if c.Type == trainer.TrainJobSuspended && c.Status == metav1.ConditionTrue {
			return &Expiry{
				Since:  c.LastTransitionTime.Time,
				At:     c.LastTransitionTime.Add(p.AfterSuspended.Duration),
				Policy: metrics.PolicyAfterSuspended,
				Reason: fmt.Sprintf("it has been suspended since %s and the cluster's retention policy afterSuspended of %s expired",
					c.LastTransitionTime.UTC().Format(time.RFC3339), p.AfterSuspended.Duration),
			}
		}
	}
	return nil
}

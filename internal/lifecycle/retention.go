/*
Copyright The trainjob-operator Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package lifecycle

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// retained is the expiry set by the cluster's retention policy (Kueue
// KEP-1618), for a TrainJob whose own TTL does not apply:
//
//   - finished and Failed, with afterFailed set: finish time + afterFailed;
//   - finished, with afterFinished set: finish time + afterFinished;
//   - suspended after it ran, with afterSuspended set: the time it was last
//     suspended (Suspended=True) + afterSuspended. See suspendedSince for
//     what counts.
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
		policy, d := PolicyAfterFinished, p.AfterFinished
		if done.Type == trainer.TrainJobFailed && p.AfterFailed != nil {
			policy, d = PolicyAfterFailed, p.AfterFailed
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
	since, ok := suspendedSince(tj)
	if !ok {
		return nil
	}
	return &Expiry{
		Since:  since.Time,
		At:     since.Add(p.AfterSuspended.Duration),
		Policy: PolicyAfterSuspended,
		Reason: fmt.Sprintf("it has been suspended since %s and the cluster's retention policy afterSuspended of %s expired",
			since.UTC().Format(time.RFC3339), p.AfterSuspended.Duration),
	}
}

// suspendedSince is when a TrainJob that afterSuspended may delete was
// suspended. afterSuspended retires work that was stopped and left, not
// work waiting its turn, so a TrainJob counts only if all of these hold:
//
//   - its spec still asks for suspension: Suspended=True may be stale on a
//     TrainJob a user or Kueue has just resumed;
//   - it is Suspended=True: its Pods are gone, since then;
//   - it ran before (status.startTime is set): a TrainJob created
//     suspended and never resumed is waiting to be started;
//   - it is not queued in Kueue (kueue.x-k8s.io/queue-name): Kueue keeps a
//     queued TrainJob suspended until it is admitted, and suspends it again
//     when it is preempted, to wait for admission once more. Kueue retires
//     the workloads it deactivates with its own retention policy.
func suspendedSince(tj *trainer.TrainJob) (metav1.Time, bool) {
	if !ptr.Deref(tj.Spec.Suspend, false) || tj.Status.StartTime == nil || queued(tj) {
		return metav1.Time{}, false
	}
	c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended)
	if c == nil || c.Status != metav1.ConditionTrue {
		return metav1.Time{}, false
	}
	return c.LastTransitionTime, true
}

// queued reports whether a TrainJob is in a Kueue queue.
func queued(tj *trainer.TrainJob) bool {
	_, labelled := tj.Labels[trainer.KueueQueueNameLabel]
	_, annotated := tj.Annotations[trainer.KueueQueueNameLabel]
	return labelled || annotated
}

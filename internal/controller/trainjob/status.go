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

package trainjob

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
)

// conditionOrder is the order conditions are kept in: the most telling
// first.
var conditionOrder = []string{
	trainer.TrainJobFailed,
	trainer.TrainJobComplete,
	trainer.TrainJobSuspended,
	trainer.TrainJobCreated,
}

// setCondition sets a condition of tj with meta.SetStatusCondition, for the
// generation of tj it was decided on, and keeps conditions in
// conditionOrder. The transition time, now by the controller's clock,
// changes only when the status does.
func setCondition(tj *trainer.TrainJob, c metav1.Condition, now metav1.Time) {
	c.ObservedGeneration, c.LastTransitionTime = tj.Generation, now
	if !meta.SetStatusCondition(&tj.Status.Conditions, c) {
		return
	}
	slices.SortStableFunc(tj.Status.Conditions, func(a, b metav1.Condition) int {
		return rank(a.Type) - rank(b.Type)
	})
}

func rank(t string) int {
	if i := slices.Index(conditionOrder, t); i >= 0 {
		return i
	}
	return len(conditionOrder)
}

// decideFinished sets Failed or Complete when the TrainJob has finished, and
// reports whether it has. fail is a failure found in this reconcile.
func decideFinished(tj *trainer.TrainJob, fail *failure, now metav1.Time) bool {
	if fail == nil {
		for _, js := range tj.Status.JobsStatus {
			if len(js.FailedReplicas) > 0 {
				fail = &failure{reason: trainer.TrainJobJobFailedReason, message: fmt.Sprintf("%d Job(s) of replicated Job %q failed", len(js.FailedReplicas), js.Name)}
				break
			}
		}
	}
	if fail != nil {
		setCondition(tj, metav1.Condition{
			Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: fail.reason, Message: fail.message,
		}, now)
		return true
	}
	if !shapePinned(&tj.Status) {
		return false
	}
	msg, ok := successReached(&tj.Status)
	if !ok {
		return false
	}
	setCondition(tj, metav1.Condition{
		Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: trainer.TrainJobJobsCompletedReason, Message: msg,
	}, now)
	tj.Status.CompletionTime = &now
	return true
}

// successReached reports whether the TrainJob's success policy is met by the
// outcomes recorded in status, and says how. Without a success policy
// pinned (Jobs an earlier version created), every Job of the trainer step
// (of every step, if there is none) must have succeeded.
func successReached(status *trainer.TrainJobStatus) (string, bool) {
	policy := status.SuccessPolicy
	if policy == nil {
		policy = &trainer.SuccessPolicy{Operator: trainer.OperatorAll}
		for _, js := range status.JobsStatus {
			if js.Trainer {
				policy.TargetReplicatedJobs = []string{js.Name}
			}
		}
	}
	var done, total int32
	for _, js := range status.JobsStatus {
		if len(policy.TargetReplicatedJobs) > 0 && !slices.Contains(policy.TargetReplicatedJobs, js.Name) {
			continue
		}
		done += int32(len(js.SucceededReplicas))
		total += js.Replicas
	}
	which := "every replicated Job"
	switch targets := policy.TargetReplicatedJobs; {
	case len(targets) == 1:
		which = "replicated Job " + targets[0]
	case len(targets) > 1:
		which = "replicated Jobs " + strings.Join(targets, ", ")
	}
	if policy.Operator == trainer.OperatorAny {
		return fmt.Sprintf("A Job of %s succeeded", which), done > 0
	}
	return fmt.Sprintf("All %d Job(s) of %s succeeded", total, which), done >= total
}

// updateJobsStatus recomputes the counts of jobsStatus from the children and
// the recorded outcomes.
func updateJobsStatus(status *trainer.TrainJobStatus, children []child) {
	for i := range status.JobsStatus {
		js := &status.JobsStatus[i]
		js.Ready, js.Active, js.Suspended = 0, 0, 0
		js.Succeeded, js.Failed = int32(len(js.SucceededReplicas)), int32(len(js.FailedReplicas))
		for _, c := range children {
			if c.step != js.Name || c.job.DeletionTimestamp != nil {
				continue
			}
			if o, _ := jobOutcome(c.job); o != running {
				continue
			}
			job := c.job
			if job.Status.Active > 0 {
				js.Active++
			}
			if ptr.Deref(job.Spec.Suspend, false) {
				js.Suspended++
			}
			// Ready as JobSet counts it: the Job's ready and succeeded Pods
			// reach its parallelism, or its completions if fewer.
			pods := ptr.Deref(job.Spec.Parallelism, 1)
			if job.Spec.Completions != nil {
				pods = min(pods, *job.Spec.Completions)
			}
			if ptr.Deref(job.Status.Ready, 0)+job.Status.Succeeded >= pods {
				js.Ready++
			}
		}
	}
}

// writeStatus writes next's status, with its state, if it differs from
// tj's, and returns the TrainJob as stored. The events of what changed are
// recorded (created, the message of the event of Jobs created, if any), and
// the finish counted and the timings observed, once the write made at now
// succeeded; the next reconcile waits until the cache shows the write.
func (r *Reconciler) writeStatus(ctx context.Context, tj, next *trainer.TrainJob, created string, now time.Time) (*trainer.TrainJob, error) {
	next.Status.State = lifecycle.State(next)
	if equality.Semantic.DeepEqual(tj.Status, next.Status) {
		return tj, nil
	}
	if err := r.client.Status().Update(ctx, next); err != nil {
		return nil, err
	}
	r.writes.expect(next)
	r.emitEvents(tj, next, created)
	countFinished(tj, next)
	r.timings.observe(tj, next, now)
	return next, nil
}

// createdJobs is how many Jobs of the TrainJob's current attempt status
// says were created.
func createdJobs(status *trainer.TrainJobStatus) int32 {
	var n int32
	for _, js := range status.JobsStatus {
		if !js.Waiting {
			n += js.Replicas
		}
	}
	return n
}

// emitEvents records an event for each condition that changed between the
// stored status and the new one, in the order they happen in a TrainJob's
// life, and one with the message created, if any: more of its Jobs were
// created. It runs after the status write succeeded.
func (r *Reconciler) emitEvents(old, cur *trainer.TrainJob, created string) {
	if created != "" {
		r.recorder.Eventf(cur, nil, corev1.EventTypeNormal, "Created", "CreateJobs", "%s", created)
	}
	for _, t := range slices.Backward(conditionOrder) {
		n := meta.FindStatusCondition(cur.Status.Conditions, t)
		if n == nil {
			continue
		}
		if o := meta.FindStatusCondition(old.Status.Conditions, t); o != nil && o.Status == n.Status && o.Reason == n.Reason {
			continue
		}
		eventType, reason, action := corev1.EventTypeNormal, n.Reason, ""
		switch {
		case t == trainer.TrainJobCreated && n.Status == metav1.ConditionFalse:
			eventType, action = corev1.EventTypeWarning, "CreateJobs"
		case t == trainer.TrainJobSuspended && n.Status == metav1.ConditionTrue:
			reason, action = "Suspended", "Suspend"
		case t == trainer.TrainJobSuspended && n.Reason == trainer.TrainJobResumedReason:
			reason, action = "Resumed", "Resume"
		case t == trainer.TrainJobComplete && n.Status == metav1.ConditionTrue:
			reason, action = "Completed", "Complete"
		case t == trainer.TrainJobFailed && n.Status == metav1.ConditionTrue:
			eventType, action = corev1.EventTypeWarning, "Fail"
		default:
			continue
		}
		r.recorder.Eventf(cur, nil, eventType, reason, action, "%s", n.Message)
	}
}

// countFinished counts a TrainJob that has just finished.
func countFinished(old, cur *trainer.TrainJob) {
	if c := finishedBy(old, cur); c != nil {
		metrics.Finished.WithLabelValues(c.Type, c.Reason).Inc()
		if c.Reason == trainer.TrainJobDeadlineExceededReason {
			metrics.DeadlineExceeded.Inc()
		}
	}
}

// finishedBy returns the condition that finished cur where old had not
// finished: what the status write from old to cur concluded. Nil if that
// write finished nothing.
func finishedBy(old, cur *trainer.TrainJob) *metav1.Condition {
	if old.FinishedCondition() != nil {
		return nil
	}
	for _, t := range []string{trainer.TrainJobComplete, trainer.TrainJobFailed} {
		if c := meta.FindStatusCondition(cur.Status.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			return c
		}
	}
	return nil
}

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
	"fmt"
	"regexp"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
)

// Restarts (JobSet's failurePolicy), one level up from a JobSet's:
//
//   - A TrainJob whose runtime has a failurePolicy (pinned in
//     status.failurePolicy with its shape) does not fail with its first
//     failed Job: the first rule matching one of the Jobs found failed in
//     this reconcile decides, the earliest failed of those it matches; with
//     no rule matching, the TrainJob restarts (RestartJobSet).
//   - FailJobSet fails it (reason FailJobSetFailurePolicyAction);
//     RestartJobSet restarts it unless restartsCountTowardsMax reached
//     maxRestarts, which fails it (reason ReachedMaxRestarts);
//     RestartJobSetAndIgnoreMaxRestarts restarts it without counting.
//   - A restart is one status write: restarts counted up, every replicated
//     Job's recorded outcomes and counts cleared and its Jobs waiting to
//     be created. Only once it is stored are the Jobs of the attempt before
//     deleted (released from the tracking finalizer first, then deleted
//     with foreground propagation). A Job labelled with an earlier restart
//     attempt than status.restarts is never a child of the current attempt:
//     its outcome is never counted, and it is deleted whenever seen. So a
//     restart happens once whatever fails or restarts around it: a failed
//     write leaves nothing done, and the failed Job that caused it is of the
//     attempt before as soon as the write is stored.
//   - The new attempt's Jobs take the names of the old ones: each is created
//     once the old Job of its name is gone (Recreate), or once all of the
//     old Jobs are (BlockingRecreate). Stages (dependsOn) start over.
//   - A restart never races a deadline: a TrainJob whose active deadline
//     has passed fails with DeadlineExceeded instead. A suspended TrainJob
//     restarts too, its new Jobs created suspended, as JobSet does.

// restartEvent is the event of a restart, and its action.
type restartEvent struct {
	action          trainer.FailurePolicyAction
	reason, message string
}

// attemptOf is the restart attempt a child Job belongs to, from its label;
// 0 when it has none (Jobs created before restarts existed).
func attemptOf(job *batchv1.Job) int32 {
	n, err := strconv.ParseInt(job.Labels[trainer.JobSetRestartAttemptLabel], 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}

// ofEarlierAttempt reports whether job belongs to a restart attempt before
// the TrainJob's current one.
func ofEarlierAttempt(tj *trainer.TrainJob, job *batchv1.Job) bool {
	return attemptOf(job) < tj.Status.Restarts
}

// applyFailurePolicy decides what the failures found do to the TrainJob
// under its failure policy: fail it (the failure returned), or restart it
// (its status changed for the new attempt, and the event returned).
func applyFailurePolicy(tj *trainer.TrainJob, failures []jobFailure, now metav1.Time) (*failure, *restartEvent) {
	if expired, _ := activeDeadline(tj, now.Time); expired != nil {
		return expired, nil
	}
	policy := tj.Status.FailurePolicy
	rule, f := matchRule(policy, failures)
	action, ruleName := trainer.RestartJobSet, "the default action"
	if rule != nil {
		action, ruleName = rule.Action, "rule "+rule.Name
	}
	switch action {
	case trainer.FailJobSet:
		return &failure{reason: trainer.TrainJobFailJobSetReason, message: fmt.Sprintf(
			"applying FailJobSet failure policy action (%s): %s", ruleName, f.message)}, nil
	case trainer.RestartJobSet:
		if tj.Status.RestartsCountTowardsMax >= policy.MaxRestarts {
			return &failure{reason: trainer.TrainJobReachedMaxRestartsReason, message: fmt.Sprintf(
				"reached the failure policy's maxRestarts (%d): %s", policy.MaxRestarts, f.message)}, nil
		}
		tj.Status.RestartsCountTowardsMax++
	}
	tj.Status.Restarts++
	for i := range tj.Status.JobsStatus {
		js := &tj.Status.JobsStatus[i]
		*js = trainer.JobStatus{Name: js.Name, Replicas: js.Replicas, Trainer: js.Trainer, Waiting: true}
	}
	return nil, &restartEvent{
		action: action,
		reason: string(action) + "FailurePolicyAction",
		message: fmt.Sprintf("Restart %d (%d of maxRestarts %d counted), applying %s failure policy action (%s): %s",
			tj.Status.Restarts, tj.Status.RestartsCountTowardsMax, policy.MaxRestarts, action, ruleName, f.message),
	}
}

// matchRule returns the first rule of policy that matches one of the
// failures, and the earliest failure it matches; with none, nil and the
// earliest failure.
func matchRule(policy *trainer.FailurePolicy, failures []jobFailure) (*trainer.FailurePolicyRule, jobFailure) {
	byTime := slices.Clone(failures)
	slices.SortStableFunc(byTime, func(a, b jobFailure) int { return a.at.Compare(b.at) })
	for i := range policy.Rules {
		for _, f := range byTime {
			if ruleMatches(&policy.Rules[i], f) {
				return &policy.Rules[i], f
			}
		}
	}
	return nil, byTime[0]
}

// ruleMatches reports whether a rule matches a failed Job, as JobSet
// matches them: the reason among onJobFailureReasons, a pattern of
// onJobFailureMessagePatterns found in the message (an invalid one matches
// nothing; the runtime's are checked when a TrainJob is created), the
// replicated Job among targetReplicatedJobs; an empty list matches any.
func ruleMatches(rule *trainer.FailurePolicyRule, f jobFailure) bool {
	if len(rule.OnJobFailureReasons) > 0 && !slices.Contains(rule.OnJobFailureReasons, f.jobReason) {
		return false
	}
	if len(rule.TargetReplicatedJobs) > 0 && !slices.Contains(rule.TargetReplicatedJobs, f.step) {
		return false
	}
	if len(rule.OnJobFailureMessagePatterns) == 0 {
		return true
	}
	return slices.ContainsFunc(rule.OnJobFailureMessagePatterns, func(p string) bool {
		re, err := regexp.Compile(p)
		return err == nil && re.MatchString(f.jobMessage)
	})
}

// jobsOf returns the Jobs of children.
func jobsOf(children []child) []*batchv1.Job {
	jobs := make([]*batchv1.Job, 0, len(children))
	for _, c := range children {
		jobs = append(jobs, c.job)
	}
	return jobs
}

// emitRestart records the event of a restart, and counts it, once it is
// stored.
func (r *Reconciler) emitRestart(tj *trainer.TrainJob, e *restartEvent) {
	r.recorder.Eventf(tj, nil, corev1.EventTypeWarning, e.reason, "Restart", "%s", e.message)
	metrics.Restarts.WithLabelValues(string(e.action)).Inc()
}

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
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
)

// Suspend and resume (KEP-2322, one level up):
//
//   - suspend: every child Job is suspended, and the Job controller deletes
//     its Pods. Suspended=True is set only once every child whose outcome is
//     not recorded has been seen suspended with no Pod left; until then
//     Suspended=False with reason Suspending.
//   - resume: every child Job is resumed. The resume itself is read from
//     the stored condition, not from the children, so it happens once:
//     Suspended=False with reason Resumed, and startTime reset to now so the
//     active deadline counts from the resume. Work already done (finished
//     children) is kept. A child whose resume fails is retried without
//     moving startTime again.
//   - startTime is first set when the TrainJob is not suspended, whether or
//     not its Jobs could be created: a TrainJob that cannot start is active
//     and its deadline runs. A TrainJob created suspended has none until it
//     is resumed.

// followSuspend sets spec.suspend of every running child to the TrainJob's.
// A child is resumed with the scheduling directives plan gives its Pods
// (their labels, annotations, node selector, node affinity, tolerations and
// scheduling gates), which runtimePatches change while the TrainJob is
// suspended: Kueue writes the flavor it admits the TrainJob on there.
// The cache holds child Jobs without their Pod template, so the Job to
// resume is read from the API server. Kubernetes lets the directives change
// only while the Job is suspended with no Pod left, so a child still
// stopping is resumed later, when its change brings the TrainJob back. plan
// is nil when the runtime could not be read or the TrainJob can no longer be
// built on it: a TrainJob without changes to its runtime resumes as it is,
// one with them waits. The PodGroup of a runtime's podGroupPolicy is brought
// up to date before the first child resumes.
func (r *Reconciler) followSuspend(ctx context.Context, tj *trainer.TrainJob, children []child, plan *jobplan.Plan) error {
	want := ptr.Deref(tj.Spec.Suspend, false)
	patched := patched(tj)
	var counted *trainer.TrainJobStatus
	var errs []error
	podGroupChecked := false
	for _, c := range children {
		if o, _ := jobOutcome(c.job); o != running || c.job.DeletionTimestamp != nil || ptr.Deref(c.job.Spec.Suspend, false) == want {
			continue
		}
		if want {
			errs = append(errs, r.setJobSuspend(ctx, c.job, true))
			continue
		}
		if step := plannedStep(plan, c.step); step != nil && len(step.DependsOn) > 0 {
			// As JobSet: the Jobs of a replicated Job resume once its
			// dependencies are reached again.
			if counted == nil {
				counted = tj.Status.DeepCopy()
				updateJobsStatus(counted, children)
			}
			if ok, _ := reached(counted, step.DependsOn); !ok {
				continue
			}
		}
		if !podGroupChecked && plan != nil && plan.PodGroup != nil {
			// The PodGroup first, as it is now: the Pods about to be
			// created are scheduled by it.
			podGroupChecked = true
			blocked, err := r.ensurePodGroup(ctx, tj, plan.PodGroup)
			if err == nil && blocked != nil {
				err = fmt.Errorf("resuming: %s", blocked.Message)
			}
			if err != nil {
				return err
			}
		}
		desired := plannedJob(plan, c.job.Name)
		if desired == nil {
			if plan == nil && patched {
				errs = append(errs, fmt.Errorf("resuming Job %s: the TrainJob's runtime could not be read or built, so its runtime patches cannot be applied", klog.KObj(c.job)))
				continue
			}
			errs = append(errs, r.setJobSuspend(ctx, c.job, false))
			continue
		}
		var live batchv1.Job
		if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(c.job), &live); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("reading Job %s to resume it: %w", klog.KObj(c.job), err))
			}
			continue
		}
		switch {
		case jobplan.SameSchedulingDirectives(&live, desired):
			errs = append(errs, r.setJobSuspend(ctx, c.job, false))
		case suspendedWithoutPods(&live):
			errs = append(errs, r.resumeWithDirectives(ctx, &live, desired))
			c.job.Spec.Suspend = live.Spec.Suspend
		default:
			ctrl.LoggerFrom(ctx).V(2).Info("Waiting for the Pods of a child Job to stop before giving it new scheduling directives", "job", klog.KObj(c.job))
		}
	}
	return errors.Join(errs...)
}

// plannedStep is the step of plan named name, nil if there is none.
func plannedStep(plan *jobplan.Plan, name string) *jobplan.Step {
	if plan == nil {
		return nil
	}
	for i := range plan.Steps {
		if plan.Steps[i].Name == name {
			return &plan.Steps[i]
		}
	}
	return nil
}

// plannedJob is the Job of plan named name, nil if there is none.
func plannedJob(plan *jobplan.Plan, name string) *batchv1.Job {
	if plan == nil {
		return nil
	}
	for _, job := range plan.Jobs {
		if job.Name == name {
			return job
		}
	}
	return nil
}

// resumeWithDirectives resumes a suspended child Job, job as the API server
// has it, with the scheduling directives of desired, in one patch. A Job
// that ran has its startTime cleared first: without Kubernetes 1.36's
// MutableSchedulingDirectivesForSuspendedJobs (beta, on by default), only a
// suspended Job without a startTime may take new directives, and the Job
// controller clears it on suspension only with that gate, as JobSet and
// Kueue clear it themselves.
func (r *Reconciler) resumeWithDirectives(ctx context.Context, job, desired *batchv1.Job) error {
	if job.Status.StartTime != nil {
		if err := r.client.Status().Patch(ctx, job, client.RawPatch(types.MergePatchType, []byte(`{"status":{"startTime":null}}`))); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("clearing the startTime of Job %s to give it new scheduling directives: %w", klog.KObj(job), err)
		}
	}
	next := jobplan.WithSchedulingDirectives(job, desired)
	next.Spec.Suspend = ptr.To(false)
	if err := r.client.Patch(ctx, next, client.MergeFromWithOptions(job, client.MergeFromWithOptimisticLock{})); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("resuming Job %s with new scheduling directives: %w", klog.KObj(job), err)
	}
	*job = *next
	ctrl.LoggerFrom(ctx).V(2).Info("Resumed a child Job with new scheduling directives", "job", klog.KObj(job))
	return nil
}

// patched reports whether the TrainJob changes its runtime's Pods: runtime
// patches (Kueue's among them), or Kubeflow v2.0 and v2.1's overrides.
func patched(tj *trainer.TrainJob) bool {
	return len(tj.Spec.RuntimePatches) > 0 || len(tj.Spec.PodTemplateOverrides) > 0 || len(tj.Spec.PodSpecOverrides) > 0
}

// setJobSuspend sets spec.suspend of a child Job.
func (r *Reconciler) setJobSuspend(ctx context.Context, job *batchv1.Job, suspend bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend)
	if err := r.client.Patch(ctx, job, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting suspend=%t on Job %s: %w", suspend, klog.KObj(job), err)
	}
	return nil
}

// decideSuspend keeps the Suspended condition of a running TrainJob, from
// its children as followSuspend left them, and the Jobs of earlier restart
// attempts, still being deleted. A suspended TrainJob is Suspended once no
// Job it created has a Pod left: the Jobs of replicated Jobs still waiting
// to be created (later stages, a restart's new attempt) have none, and one
// that created nothing yet is Suspended at once.
func decideSuspend(tj *trainer.TrainJob, children []child, earlier []*batchv1.Job, now metav1.Time) {
	if !ptr.Deref(tj.Spec.Suspend, false) {
		return
	}
	if !shapePinned(&tj.Status) {
		// Suspended before any Job was created: its deadline counts from
		// the resume.
		tj.Status.StartTime = nil
	}
	// Children created but not seen at all (the cache behind) count as
	// running.
	left := 0
	for _, m := range missingChildren(&tj.Status, tj.Name, children) {
		if created(tj, m.step) {
			left++
		}
	}
	for _, c := range children {
		o, _ := jobOutcome(c.job)
		switch {
		case o == running && c.job.DeletionTimestamp == nil && !suspendedWithoutPods(c.job):
			left++
		case o == failed && hasPods(c.job):
			// Failed by the Job controller's verdict, its Pods still
			// terminating.
			left++
		}
	}
	for _, job := range earlier {
		if hasPods(job) {
			left++
		}
	}
	c := metav1.Condition{
		Type: trainer.TrainJobSuspended, Status: metav1.ConditionTrue, Reason: trainer.TrainJobSuspendedReason,
		Message: "The TrainJob is suspended and no Pod of its Jobs is left",
	}
	if left > 0 {
		c = metav1.Condition{
			Type: trainer.TrainJobSuspended, Status: metav1.ConditionFalse, Reason: trainer.TrainJobSuspendingReason,
			Message: "The TrainJob is being suspended: Pods of its Jobs are still running, or not every Job has been seen stopped yet",
		}
	}
	setCondition(tj, c, now)
}

// settleStart keeps the startTime of a running TrainJob and records its
// resume: startTime is set when it first runs unsuspended, and reset with
// Suspended=False (reason Resumed) when it is resumed, so that the active
// deadline counts from then. The resume is read from the stored condition,
// so it happens once.
func settleStart(tj *trainer.TrainJob, now metav1.Time) {
	if ptr.Deref(tj.Spec.Suspend, false) {
		return
	}
	if cur := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended); cur != nil && cur.Reason != trainer.TrainJobResumedReason {
		setCondition(tj, metav1.Condition{
			Type:    trainer.TrainJobSuspended,
			Status:  metav1.ConditionFalse,
			Reason:  trainer.TrainJobResumedReason,
			Message: "The TrainJob was resumed",
		}, now)
		tj.Status.StartTime = &now
	}
	if tj.Status.StartTime == nil {
		tj.Status.StartTime = &now
	}
}

// suspendedWithoutPods reports whether a Job is suspended and none of its
// Pods is left, running or terminating: the Job controller has reported it
// suspended, or the Job was created suspended and its spec never changed
// since (generation 1; 0 before the API server stored it), so no Pod was
// ever created for it.
func suspendedWithoutPods(job *batchv1.Job) bool {
	if !ptr.Deref(job.Spec.Suspend, false) || hasPods(job) {
		return false
	}
	if job.Generation <= 1 {
		return true
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

// observed is what a reconcile sees of a TrainJob's children and runtime.
// Everything the decision needs is read here; nothing is changed.
type observed struct {
	// children are the Jobs the TrainJob owns: those the cache shows, and
	// those of its pinned shape the cache does not show but the API server
	// does.
	children []child
	// relabel are the children found in the API server only, because
	// their labels were changed: the act phase puts the labels back.
	relabel []child
	// vanished are the children of the pinned shape that went away before
	// their outcome was recorded. Looked for only once all of the
	// TrainJob's Jobs were created, while it runs.
	vanished []missingChild
	// others are the Jobs labelled for the TrainJob's name that it does
	// not own: an earlier TrainJob's of the same name, or orphans.
	others []*batchv1.Job
	// previous are the TrainJob's Jobs of restart attempts before its
	// current one: deleted, never counted.
	previous []*batchv1.Job
	// service is the Service of the TrainJob's name; noService is set when
	// there is none (and not when it could not be read).
	service   *corev1.Service
	noService bool
	// plan is the TrainJob's children as its runtime builds them now, and
	// blocked, when plan is nil, the Created=False condition that says why
	// there is none. Read only while the TrainJob runs and its Jobs are not
	// all created, or some are to be resumed: they are resumed with the
	// scheduling directives of the plan.
	plan    *jobplan.Plan
	blocked *metav1.Condition
	// runtime is what plan was built from: the TrainJob's snapshot once
	// it created Jobs and has one (fromSnapshot), the runtime as it is
	// otherwise.
	runtime      jobplan.Runtime
	fromSnapshot bool
	// errs are the reads that failed. The decision is still made on what
	// was read, so the active deadline is enforced whatever else fails;
	// the errors are retried.
	errs []error
}

// getTrainJob reads the TrainJob of key from the cache. It returns nil if
// the TrainJob does not exist, and wait set while the cache has not caught
// up with this process's last status write to it: the reconcile then waits
// for the write's event. The TrainJob is returned with wait too, as the
// cache holds it.
func (r *Reconciler) getTrainJob(ctx context.Context, key types.NamespacedName) (tj *trainer.TrainJob, wait bool, err error) {
	// The write awaited is looked up before the cache is read: its event,
	// should it come between the two, leaves the cache caught up.
	awaited := r.writes.expected(key)
	if tj, err = r.cachedTrainJob(ctx, key); tj == nil || err != nil {
		return tj, false, err
	}
	switch {
	case awaited == nil:
		return tj, false, nil
	case !awaited.behind(tj):
		r.writes.observe(tj)
		return tj, false, nil
	case r.writes.wait(key, awaited):
		return tj, true, nil
	}
	// The write's event came meanwhile: the cache holds it now.
	tj, err = r.cachedTrainJob(ctx, key)
	return tj, false, err
}

// cachedTrainJob reads the TrainJob of key from the cache, nil if it does
// not exist.
func (r *Reconciler) cachedTrainJob(ctx context.Context, key types.NamespacedName) (*trainer.TrainJob, error) {
	var tj trainer.TrainJob
	if err := r.client.Get(ctx, key, &tj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return &tj, nil
}

// observe reads what the TrainJob's decision depends on: its children (with
// the failures their failed Pods decide), what became of those the cache
// does not show, its Service and, until its Jobs
// are all created, its runtime. Without the list of its children nothing
// can be decided, and it returns that error; the other reads that fail are
// in obs.errs.
func (r *Reconciler) observe(ctx context.Context, tj *trainer.TrainJob) (*observed, error) {
	obs := &observed{}
	var err error
	if obs.children, obs.others, obs.previous, err = r.listChildren(ctx, tj); err != nil {
		return nil, err
	}
	obs.errs = append(obs.errs, r.lookUpMissing(ctx, tj, obs))
	if tj.DeletionTimestamp == nil {
		obs.errs = append(obs.errs, r.readPodFailures(ctx, tj, obs.children))
	}
	svc, err := r.getService(ctx, tj)
	obs.service, obs.noService, obs.errs = svc, svc == nil && err == nil, append(obs.errs, err)
	if tj.FinishedCondition() != nil || tj.DeletionTimestamp != nil ||
		allCreated(tj) && !resuming(tj, obs.children) {
		return obs, nil
	}
	var planErr error
	obs.runtime, obs.fromSnapshot, obs.plan, obs.blocked, planErr = r.plan(ctx, tj, createdAny(tj, obs))
	obs.errs = append(obs.errs, planErr)
	return obs, nil
}

// listChildren returns the Jobs labelled for the TrainJob: those it owns as
// children of its current restart attempt, any that an earlier TrainJob of
// the same name owned, and its own of earlier restart attempts.
func (r *Reconciler) listChildren(ctx context.Context, tj *trainer.TrainJob) ([]child, []*batchv1.Job, []*batchv1.Job, error) {
	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, client.InNamespace(tj.Namespace), client.MatchingFields{childIndex: tj.Name}); err != nil {
		return nil, nil, nil, fmt.Errorf("listing Jobs of TrainJob %s: %w", klog.KObj(tj), err)
	}
	var owned []child
	var others, previous []*batchv1.Job
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if ctrlOwnerUID(job) != tj.UID {
			others = append(others, job)
			continue
		}
		if ofEarlierAttempt(tj, job) {
			previous = append(previous, job)
			continue
		}
		c, ok := childOf(job)
		if !ok {
			ctrl.LoggerFrom(ctx).Info("Ignoring child Job without valid replicated-job labels", "job", klog.KObj(job))
			continue
		}
		owned = append(owned, c)
	}
	return owned, others, previous, nil
}

// lookUpMissing reads from the API server the children of the pinned shape
// that the cache does not show and whose outcome is not recorded. A Job of
// the child's name is the child only if its controller is this TrainJob,
// whatever its labels: one whose labels were changed (the cache holds only
// Jobs labelled for a TrainJob) is added to obs.children, and to
// obs.relabel so the cache sees it again. Once all of a replicated Job's Jobs
// were created, a name of it with no Job, or held by a Job that is not this
// TrainJob's, is a child gone without its outcome recorded (someone
// removed the tracking finalizer): it is added to obs.vanished. Before, it
// may not have been created yet.
func (r *Reconciler) lookUpMissing(ctx context.Context, tj *trainer.TrainJob, obs *observed) error {
	if !shapePinned(&tj.Status) {
		return nil
	}
	if due, ok := lifecycle.JobsExpiry(tj); ok && !r.clock.Now().Before(due) {
		// The runtime's ttlSecondsAfterFinished deleted them.
		return nil
	}
	for _, m := range missingChildren(&tj.Status, tj.Name, obs.children) {
		var job batchv1.Job
		err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: tj.Namespace, Name: m.job}, &job)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading child Job %s/%s: %w", tj.Namespace, m.job, err)
		}
		if err == nil && ctrlOwnerUID(&job) == tj.UID && ofEarlierAttempt(tj, &job) {
			if !slices.ContainsFunc(obs.previous, func(p *batchv1.Job) bool { return p.UID == job.UID }) {
				obs.previous = append(obs.previous, &job)
			}
			continue
		}
		if err == nil && ctrlOwnerUID(&job) == tj.UID {
			c := child{job: &job, step: m.step, replica: m.replica}
			obs.children = append(obs.children, c)
			if labelsChanged(tj, c) {
				obs.relabel = append(obs.relabel, c)
			}
			continue
		}
		if !created(tj, m.step) || tj.DeletionTimestamp != nil || tj.FinishedCondition() != nil {
			continue // not created yet, or its outcome no longer matters
		}
		obs.vanished = append(obs.vanished, m)
	}
	return nil
}

// resuming reports whether a child of the unsuspended TrainJob is still
// suspended.
func resuming(tj *trainer.TrainJob, children []child) bool {
	if ptr.Deref(tj.Spec.Suspend, false) {
		return false
	}
	return slices.ContainsFunc(children, func(c child) bool {
		o, _ := jobOutcome(c.job)
		return o == running && c.job.DeletionTimestamp == nil && ptr.Deref(c.job.Spec.Suspend, false)
	})
}

// getService reads the Service of the TrainJob's name from the cache.
func (r *Reconciler) getService(ctx context.Context, tj *trainer.TrainJob) (*corev1.Service, error) {
	key := jobplan.ServiceKey(tj)
	var svc corev1.Service
	err := r.client.Get(ctx, key, &svc)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Service %s: %w", key, err)
	}
	return &svc, nil
}

// plan builds the TrainJob's children from its runtime: from its snapshot
// once it created Jobs (started) and has one, from the runtime as it is
// otherwise. When that is not possible it returns the Created=False
// condition that says why, and an error only for failures worth
// retrying.
func (r *Reconciler) plan(ctx context.Context, tj *trainer.TrainJob, started bool) (rt jobplan.Runtime, fromSnapshot bool, _ *jobplan.Plan, _ *metav1.Condition, _ error) {
	if started {
		snap, err := r.readSnapshot(ctx, tj)
		if err != nil {
			return rt, false, nil, nil, err
		}
		if snap != nil {
			rt, fromSnapshot = *snap, true
		}
	}
	if !fromSnapshot {
		var err error
		rt, err = jobplan.Resolve(ctx, r.client, tj)
		if apierrors.IsNotFound(err) {
			return rt, false, nil, &metav1.Condition{
				Type:    trainer.TrainJobCreated,
				Status:  metav1.ConditionFalse,
				Reason:  trainer.TrainJobRuntimeNotFoundReason,
				Message: fmt.Sprintf("%s %q not found%s (spec.runtimeRef); the TrainJob starts once it exists", rt.Kind, rt.Name, rt.Where(tj)),
			}, nil
		}
		if err != nil {
			return rt, false, nil, nil, fmt.Errorf("reading %s %s: %w", rt.Kind, rt.Name, err)
		}
	}
	plan, err := jobplan.Build(tj, rt, r.planOptions...)
	if err != nil {
		return rt, fromSnapshot, nil, &metav1.Condition{
			Type:    trainer.TrainJobCreated,
			Status:  metav1.ConditionFalse,
			Reason:  trainer.TrainJobInvalidRuntimeReason,
			Message: err.Error(),
		}, nil
	}
	return rt, fromSnapshot, plan, nil, nil
}

// resumePlan is the plan the TrainJob's suspended Jobs resume by, with its
// scheduling directives, stages and PodGroup: nil for a TrainJob without a
// snapshot, patches or stages, whose Jobs resume as they were made. (A
// staged one without a snapshot is one an earlier version started: its
// stages resume in order, by the runtime as it is.)
func (o *observed) resumePlan(tj *trainer.TrainJob) *jobplan.Plan {
	if o.plan == nil || o.fromSnapshot || patched(tj) ||
		slices.ContainsFunc(o.plan.Steps, func(s jobplan.Step) bool { return len(s.DependsOn) > 0 }) {
		return o.plan
	}
	return nil
}

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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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

// listChildren returns the Jobs labelled for the TrainJob: those it owns as
// children, and any that an earlier TrainJob of the same name owned.
func (r *Reconciler) listChildren(ctx context.Context, tj *trainer.TrainJob) ([]child, []*batchv1.Job, error) {
	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, client.InNamespace(tj.Namespace), client.MatchingFields{childIndex: tj.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing Jobs of TrainJob %s: %w", klog.KObj(tj), err)
	}
	var owned []child
	var others []*batchv1.Job
	for i := range jobs.Items {
		job := &jobs.Items[i]
		if ctrlOwnerUID(job) != tj.UID {
			others = append(others, job)
			continue
		}
		c, ok := childOf(job)
		if !ok {
			ctrl.LoggerFrom(ctx).Info("Ignoring child Job without valid replicated-job labels", "job", klog.KObj(job))
			continue
		}
		owned = append(owned, c)
	}
	return owned, others, nil
}

// shapePinned reports whether status holds the TrainJob's replicated Jobs.
func shapePinned(status *trainer.TrainJobStatus) bool {
	if len(status.JobsStatus) == 0 {
		return false
	}
	for _, js := range status.JobsStatus {
		if js.Replicas < 1 {
			return false
		}
	}
	return true
}

// pinShape records the replicated Jobs of plan in status, keeping any
// outcome already recorded.
func pinShape(status *trainer.TrainJobStatus, plan *jobplan.Plan) {
	byName := map[string]trainer.JobStatus{}
	for _, js := range status.JobsStatus {
		byName[js.Name] = js
	}
	status.JobsStatus = status.JobsStatus[:0]
	for _, s := range plan.Steps {
		js := byName[s.Name]
		js.Name, js.Replicas, js.Trainer = s.Name, s.Replicas, s.Trainer
		status.JobsStatus = append(status.JobsStatus, js)
	}
}

// missingChild is a child of the pinned shape that is not observed.
type missingChild struct {
	job     string
	step    string
	replica int32
}

// missingChildren returns the children of the pinned shape that are neither
// among children nor recorded.
func missingChildren(status *trainer.TrainJobStatus, trainJob string, children []child) []missingChild {
	have := map[string]bool{}
	for _, c := range children {
		have[c.job.Name] = true
	}
	var missing []missingChild
	for _, js := range status.JobsStatus {
		for replica := range js.Replicas {
			name := jobplan.JobName(trainJob, js.Name, replica)
			if !have[name] && recordedOutcome(&js, replica) == running {
				missing = append(missing, missingChild{job: name, step: js.Name, replica: replica})
			}
		}
	}
	return missing
}

// lookUpMissing reads from the API server the children of the pinned shape
// that the cache does not show and whose outcome is not recorded. A Job of
// the child's name is the child only if its controller is this TrainJob,
// whatever its labels: one whose labels were changed (the cache holds only
// Jobs labelled for a TrainJob) is returned as a child, and its labels put
// back so the cache sees it again. Once all of a TrainJob's Jobs were
// created, a name with no Job, or held by a Job that is not this
// TrainJob's, is a child gone without its outcome recorded (someone
// removed the tracking finalizer): it is recorded as failed in tj's
// status, and the first one is returned as the failure. Before, it may
// not have been created yet.
func (r *Reconciler) lookUpMissing(ctx context.Context, tj *trainer.TrainJob, children []child) ([]child, *failure, error) {
	if !shapePinned(&tj.Status) {
		return nil, nil, nil
	}
	allCreated := meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobCreated)
	var found []child
	var first *failure
	for _, m := range missingChildren(&tj.Status, tj.Name, children) {
		var job batchv1.Job
		err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: tj.Namespace, Name: m.job}, &job)
		if err != nil && !apierrors.IsNotFound(err) {
			return found, first, fmt.Errorf("reading child Job %s/%s: %w", tj.Namespace, m.job, err)
		}
		if err == nil && ctrlOwnerUID(&job) == tj.UID {
			c := child{job: &job, step: m.step, replica: m.replica}
			if err := r.restoreLabels(ctx, tj, c); err != nil {
				return found, first, err
			}
			found = append(found, c)
			continue
		}
		if !allCreated || tj.DeletionTimestamp != nil || tj.FinishedCondition() != nil {
			continue // not created yet, or its outcome no longer matters
		}
		record(jobStatusFor(&tj.Status, m.step), m.replica, failed)
		if first == nil {
			first = &failure{reason: trainer.TrainJobJobDeletedReason, message: fmt.Sprintf(
				"Job %s disappeared before its outcome was recorded (its %s finalizer was removed by someone else); it is not run again", m.job, trainer.JobTrackingFinalizer)}
		}
	}
	return found, first, nil
}

// restoreLabels puts back the labels by which the cache and the index find
// a child Job, if they were changed.
func (r *Reconciler) restoreLabels(ctx context.Context, tj *trainer.TrainJob, c child) error {
	want := jobplan.ChildLabels(tj.Name, c.step, c.replica)
	changed := false
	for k, v := range want {
		changed = changed || c.job.Labels[k] != v
	}
	if !changed {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": want}})
	if err != nil {
		return err
	}
	if err := r.client.Patch(ctx, c.job, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("restoring the labels of child Job %s: %w", klog.KObj(c.job), err)
	}
	ctrl.LoggerFrom(ctx).Info("Restored the labels of a child Job", "job", klog.KObj(c.job))
	return nil
}

// creation is what ensureChildren did.
type creation struct {
	// created are the Jobs this reconcile created.
	created []child
	// retryAfter is set when the TrainJob waits on something no event
	// reports: a name held by another TrainJob's Job or Service, a Job
	// refused as invalid by something that may change (an admission
	// policy).
	retryAfter time.Duration
}

// ensureChildren creates the Jobs of a TrainJob that are missing, until all
// were created once; from then on a missing child is never created again
// (lookUpMissing finds out what became of it). It pins the TrainJob's shape
// into status and keeps the Created condition: True once every child
// exists, False with the reason while one cannot be created: the runtime
// is missing or invalid, or changed since the first Jobs were created; a
// name is held by a Job this TrainJob does not own; the API server refused
// a Job. others are the Jobs labelled for the TrainJob's name that it does
// not own.
func (r *Reconciler) ensureChildren(ctx context.Context, tj *trainer.TrainJob, children []child, others []*batchv1.Job, now metav1.Time) (creation, error) {
	var out creation
	foreignSvc, svcErr := r.ensureService(ctx, tj)
	if meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobCreated) {
		return out, svcErr
	}

	plan, cond, err := r.plan(ctx, tj)
	if plan == nil {
		if cond != nil {
			setCondition(tj, *cond, now)
		}
		return out, errors.Join(svcErr, err)
	}
	if !shapePinned(&tj.Status) || len(children) == 0 {
		// Nothing was created yet: the runtime's shape as it is now.
		pinShape(&tj.Status, plan)
	} else if msg := shapeChange(&tj.Status, plan); msg != "" {
		setCondition(tj, metav1.Condition{
			Type: trainer.TrainJobCreated, Status: metav1.ConditionFalse, Reason: trainer.TrainJobRuntimeChangedReason,
			Message: fmt.Sprintf("%s %s changed after the first Jobs of the TrainJob were created: %s. The TrainJob keeps the replicated Jobs it started with: restore the runtime, or delete the TrainJob",
				jobplan.KindOf(tj), tj.Spec.RuntimeRef.Name, msg),
		}, now)
		return out, svcErr
	}

	missing := map[string]bool{}
	for _, m := range missingChildren(&tj.Status, tj.Name, children) {
		missing[m.job] = true
	}
	var taken, refused *metav1.Condition
	var errs []error
	for _, job := range plan.Jobs {
		if !missing[job.Name] {
			continue
		}
		if i := slices.IndexFunc(others, func(o *batchv1.Job) bool { return o.Name == job.Name }); i >= 0 {
			taken = cmp.Or(taken, nameTaken(tj, "Job", others[i]))
			continue
		}
		err := r.client.Create(ctx, job)
		if apierrors.IsAlreadyExists(err) {
			// Ours, created by an earlier reconcile the cache has not
			// caught up with; or not ours at all.
			var live batchv1.Job
			if err = r.apiReader.Get(ctx, client.ObjectKeyFromObject(job), &live); err == nil && ctrlOwnerUID(&live) != tj.UID {
				taken = cmp.Or(taken, nameTaken(tj, "Job", &live))
				continue
			}
		}
		switch {
		case err == nil:
			if c, ok := childOf(job); ok {
				out.created = append(out.created, c)
			}
		case apierrors.IsNotFound(err):
			// Read back after AlreadyExists, it was gone: try again.
			errs = append(errs, fmt.Errorf("creating Job %s: it was just deleted", klog.KObj(job)))
		default:
			errs = append(errs, fmt.Errorf("creating Job %s: %w", klog.KObj(job), err))
			if refused == nil && isRefusal(err) {
				refused = &metav1.Condition{
					Type: trainer.TrainJobCreated, Status: metav1.ConditionFalse, Reason: trainer.TrainJobJobRefusedReason,
					Message: fmt.Sprintf("The API server refused Job %s: %v", job.Name, err),
				}
			}
		}
	}
	if foreignSvc != nil {
		// Without its own Service, the Pods' DNS names do not resolve.
		taken = cmp.Or(taken, nameTaken(tj, "Service", foreignSvc))
	}
	if len(out.created) > 0 {
		ctrl.LoggerFrom(ctx).V(2).Info("Created child Jobs", "count", len(out.created))
	}
	switch {
	case taken != nil:
		setCondition(tj, *taken, now)
		out.retryAfter = waitRetry
	case refused != nil:
		setCondition(tj, *refused, now)
		if !slices.ContainsFunc(errs, func(err error) bool { return !apierrors.IsInvalid(err) }) {
			// Validation refuses the same Job until something changes:
			// the runtime (its watch brings the TrainJob back), or an
			// admission policy, looked at again now and then. The
			// deadline still runs.
			out.retryAfter = invalidRetry
			return out, svcErr
		}
	case len(errs) == 0:
		setCondition(tj, createdCondition(tj), now)
	}
	return out, errors.Join(append(errs, svcErr)...)
}

func createdCondition(tj *trainer.TrainJob) metav1.Condition {
	total := int32(0)
	for _, js := range tj.Status.JobsStatus {
		total += js.Replicas
	}
	return metav1.Condition{
		Type:    trainer.TrainJobCreated,
		Status:  metav1.ConditionTrue,
		Reason:  trainer.TrainJobJobsCreatedReason,
		Message: fmt.Sprintf("Created %d Jobs from %s %s", total, jobplan.KindOf(tj), tj.Spec.RuntimeRef.Name),
	}
}

// isRefusal reports whether the API server answered a create with a
// refusal worth telling the user about, rather than a transient failure.
func isRefusal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// nameTaken is the Created=False condition of a TrainJob one of whose
// children's names is held by obj, which it does not own.
func nameTaken(tj *trainer.TrainJob, kind string, obj metav1.Object) *metav1.Condition {
	holder := "no owner"
	if ref := metav1.GetControllerOf(obj); ref != nil {
		holder = fmt.Sprintf("%s %s (UID %s)", ref.Kind, ref.Name, ref.UID)
		if ref.Kind == trainer.TrainJobKind && ref.Name == tj.Name {
			holder = fmt.Sprintf("an earlier TrainJob %s (UID %s)", ref.Name, ref.UID)
		}
	}
	state := ""
	if obj.GetDeletionTimestamp() != nil {
		state = ", being deleted"
	}
	return &metav1.Condition{
		Type: trainer.TrainJobCreated, Status: metav1.ConditionFalse, Reason: trainer.TrainJobNameTakenReason,
		Message: fmt.Sprintf("%s %s/%s is not this TrainJob's: it belongs to %s%s. The TrainJob starts once the name is free",
			kind, obj.GetNamespace(), obj.GetName(), holder, state),
	}
}

// shapeChange says how plan's replicated Jobs differ from those pinned in
// status, or returns "" if they do not.
func shapeChange(status *trainer.TrainJobStatus, plan *jobplan.Plan) string {
	describe := func(steps []jobplan.Step) string {
		var parts []string
		for _, s := range steps {
			parts = append(parts, fmt.Sprintf("%s×%d", s.Name, s.Replicas))
		}
		return strings.Join(parts, ", ")
	}
	var pinned []jobplan.Step
	for _, js := range status.JobsStatus {
		pinned = append(pinned, jobplan.Step{Name: js.Name, Replicas: js.Replicas, Trainer: js.Trainer})
	}
	if slices.Equal(pinned, plan.Steps) {
		return ""
	}
	return fmt.Sprintf("its replicated Jobs were %s and are now %s", describe(pinned), describe(plan.Steps))
}

// ensureService creates the headless Service that gives the Pods their DNS
// names, if it is missing. It returns the Service of that name if it is not
// the TrainJob's.
func (r *Reconciler) ensureService(ctx context.Context, tj *trainer.TrainJob) (*corev1.Service, error) {
	key := jobplan.ServiceKey(tj)
	var svc corev1.Service
	err := r.client.Get(ctx, key, &svc)
	switch {
	case err == nil:
		if !metav1.IsControlledBy(&svc, tj) {
			return &svc, nil
		}
		return nil, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading Service %s: %w", key, err)
	}
	want := jobplan.Service(tj)
	err = r.client.Create(ctx, want)
	if apierrors.IsAlreadyExists(err) {
		// Not in the cache, which holds the Services labelled for a
		// TrainJob: someone else's, unless ours is on its way.
		if err = r.apiReader.Get(ctx, key, &svc); err == nil && !metav1.IsControlledBy(&svc, tj) {
			return &svc, nil
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("creating Service %s: %w", klog.KObj(want), err)
	}
	return nil, nil
}

// deleteService deletes the TrainJob's headless Service once it finished.
// Kept, a finished TrainJob's Service would cost the cluster for as long as
// the TrainJob stays: kube-controller-manager's endpoint controllers match
// every Pod change in the namespace against every Service there.
func (r *Reconciler) deleteService(ctx context.Context, tj *trainer.TrainJob) error {
	key := jobplan.ServiceKey(tj)
	var svc corev1.Service
	err := r.client.Get(ctx, key, &svc)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Service %s: %w", key, err)
	}
	if !metav1.IsControlledBy(&svc, tj) || svc.DeletionTimestamp != nil {
		return nil
	}
	err = r.client.Delete(ctx, &svc, client.Preconditions{UID: &svc.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Service %s: %w", klog.KObj(&svc), err)
	}
	return nil
}

// plan resolves the TrainJob's runtime and builds its children. When that is
// not possible it returns the Created=False condition that says why, and an
// error only for failures worth retrying.
func (r *Reconciler) plan(ctx context.Context, tj *trainer.TrainJob) (*jobplan.Plan, *metav1.Condition, error) {
	rt, err := jobplan.Resolve(ctx, r.client, tj)
	if apierrors.IsNotFound(err) {
		return nil, &metav1.Condition{
			Type:    trainer.TrainJobCreated,
			Status:  metav1.ConditionFalse,
			Reason:  trainer.TrainJobRuntimeNotFoundReason,
			Message: fmt.Sprintf("%s %q not found%s (spec.runtimeRef); the TrainJob starts once it exists", rt.Kind, rt.Name, rt.Where(tj)),
		}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s %s: %w", rt.Kind, rt.Name, err)
	}
	plan, err := jobplan.Build(tj, rt)
	if err != nil {
		return nil, &metav1.Condition{
			Type:    trainer.TrainJobCreated,
			Status:  metav1.ConditionFalse,
			Reason:  trainer.TrainJobInvalidRuntimeReason,
			Message: err.Error(),
		}, nil
	}
	return plan, nil, nil
}

// setJobSuspend sets spec.suspend of a child Job.
func (r *Reconciler) setJobSuspend(ctx context.Context, job *batchv1.Job, suspend bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend)
	if err := r.client.Patch(ctx, job, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting suspend=%t on Job %s: %w", suspend, klog.KObj(job), err)
	}
	return nil
}

// stopChildren suspends every child that is still running, so that the Job
// controller deletes its Pods. It is called on every reconcile of a finished
// TrainJob, so a failed attempt is retried until no child runs.
func (r *Reconciler) stopChildren(ctx context.Context, children []child) error {
	var errs []error
	for _, c := range children {
		if o, _ := jobOutcome(c.job); o != running || c.job.DeletionTimestamp != nil || ptr.Deref(c.job.Spec.Suspend, false) {
			continue
		}
		errs = append(errs, r.setJobSuspend(ctx, c.job, true))
	}
	return errors.Join(errs...)
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
			if ptr.Deref(job.Status.Ready, 0)+job.Status.Succeeded >= ptr.Deref(job.Spec.Parallelism, 1) {
				js.Ready++
			}
		}
	}
}

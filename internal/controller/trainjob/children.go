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
	"github.com/trainjob-operator/trainjob-operator/internal/runtime"
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
func pinShape(status *trainer.TrainJobStatus, plan *runtime.Plan) {
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

// missingChildren returns the children of the pinned shape that are neither
// among children nor recorded.
func missingChildren(status *trainer.TrainJobStatus, trainJob string, children []child) []types.NamespacedName {
	have := map[string]bool{}
	for _, c := range children {
		have[c.job.Name] = true
	}
	var missing []types.NamespacedName
	for _, js := range status.JobsStatus {
		for replica := range js.Replicas {
			name := runtime.JobName(trainJob, js.Name, replica)
			if !have[name] && recordedOutcome(&js, replica) == running {
				missing = append(missing, types.NamespacedName{Name: name})
			}
		}
	}
	return missing
}

// findVanished records as failed the children that were created but are gone
// without their outcome recorded (someone removed the tracking finalizer).
// The cache may simply not have seen a new child yet, so each is looked up in
// the API server before it is declared gone.
func (r *Reconciler) findVanished(ctx context.Context, tj *trainer.TrainJob, children []child) (*failure, error) {
	if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobCreated) || !shapePinned(&tj.Status) {
		return nil, nil
	}
	var first *failure
	for _, m := range missingChildren(&tj.Status, tj.Name, children) {
		var job batchv1.Job
		err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: tj.Namespace, Name: m.Name}, &job)
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return first, fmt.Errorf("reading child Job %s/%s: %w", tj.Namespace, m.Name, err)
		}
		for i := range tj.Status.JobsStatus {
			js := &tj.Status.JobsStatus[i]
			for replica := range js.Replicas {
				if runtime.JobName(tj.Name, js.Name, replica) == m.Name {
					record(js, replica, failed)
				}
			}
		}
		if first == nil {
			first = &failure{reason: trainer.TrainJobJobDeletedReason, message: fmt.Sprintf(
				"Job %s disappeared before its outcome was recorded (its %s finalizer was removed by someone else); it is not run again", m.Name, trainer.JobTrackingFinalizer)}
		}
	}
	return first, nil
}

// ensureChildren creates the child Jobs and the Service that are missing,
// resolving the runtime only when something has to be created. It pins the
// TrainJob's shape into status and sets the Created condition.
func (r *Reconciler) ensureChildren(ctx context.Context, tj *trainer.TrainJob, children []child, now metav1.Time) error {
	svcErr := r.ensureService(ctx, tj)
	if shapePinned(&tj.Status) && len(missingChildren(&tj.Status, tj.Name, children)) == 0 {
		setCondition(&tj.Status.Conditions, createdCondition(tj), now)
		return svcErr
	}

	plan, cond, err := r.plan(ctx, tj)
	if plan == nil {
		if cond != nil {
			setCondition(&tj.Status.Conditions, *cond, now)
		}
		return errors.Join(svcErr, err)
	}
	if !shapePinned(&tj.Status) {
		pinShape(&tj.Status, plan)
	}
	missing := map[string]bool{}
	for _, m := range missingChildren(&tj.Status, tj.Name, children) {
		missing[m.Name] = true
	}
	var errs []error
	created := 0
	for _, job := range plan.Jobs {
		if !missing[job.Name] {
			continue
		}
		if err := r.client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("creating Job %s: %w", klog.KObj(job), err))
			continue
		}
		created++
	}
	if len(errs) > 0 {
		return errors.Join(append(errs, svcErr)...)
	}
	if created > 0 {
		ctrl.LoggerFrom(ctx).V(2).Info("Created child Jobs", "count", created)
	}
	setCondition(&tj.Status.Conditions, createdCondition(tj), now)
	return svcErr
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
		Message: fmt.Sprintf("Created %d Jobs from %s %s", total, runtime.KindOf(tj), tj.Spec.RuntimeRef.Name),
	}
}

// ensureService creates the headless Service that gives the Pods their DNS
// names, if it is missing.
func (r *Reconciler) ensureService(ctx context.Context, tj *trainer.TrainJob) error {
	key := runtime.ServiceKey(tj)
	var svc corev1.Service
	err := r.client.Get(ctx, key, &svc)
	switch {
	case err == nil:
		if !metav1.IsControlledBy(&svc, tj) {
			ctrl.LoggerFrom(ctx).Info("A Service of the TrainJob's name exists and is not the TrainJob's; Pod DNS names may not resolve", "service", klog.KObj(&svc))
		}
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading Service %s: %w", key, err)
	}
	want := runtime.Service(tj)
	if err := r.client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Service %s: %w", klog.KObj(want), err)
	}
	return nil
}

// deleteService deletes the TrainJob's headless Service once it finished.
// Kept, a finished TrainJob's Service would cost the cluster for as long as
// the TrainJob stays: kube-controller-manager's endpoint controllers match
// every Pod change in the namespace against every Service there.
func (r *Reconciler) deleteService(ctx context.Context, tj *trainer.TrainJob) error {
	key := runtime.ServiceKey(tj)
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
func (r *Reconciler) plan(ctx context.Context, tj *trainer.TrainJob) (*runtime.Plan, *metav1.Condition, error) {
	rt, err := runtime.Resolve(ctx, r.client, tj)
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
	plan, err := runtime.Build(tj, rt)
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

package trainjob

import (
	"context"
	"errors"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// syncSuspend makes the running children follow spec.suspend (KEP-2322, one
// level up) and keeps the Suspended condition and startTime:
//
//   - suspend: every child Job is suspended, and the Job controller deletes
//     its Pods. Suspended=True is set only once no child Pod is left.
//   - resume: every child Job is resumed; Suspended=False with reason Resumed
//     and startTime is reset to now, so the active deadline counts from the
//     resume. Work already done (finished children) is kept.
//   - startTime is first set when the TrainJob's Jobs exist and it is not
//     suspended; a TrainJob created suspended has none until it is resumed.
func (r *Reconciler) syncSuspend(ctx context.Context, tj *trainer.TrainJob, children []child, now metav1.Time) error {
	want := ptr.Deref(tj.Spec.Suspend, false)
	var errs []error
	podsGone, resuming := true, false
	for _, c := range children {
		if o, _ := jobOutcome(c.job); o != running || c.job.DeletionTimestamp != nil {
			continue
		}
		if ptr.Deref(c.job.Spec.Suspend, false) != want {
			errs = append(errs, r.setJobSuspend(ctx, c.job, want))
			podsGone = false
			resuming = resuming || !want
			continue
		}
		if want && !suspendedWithoutPods(c.job) {
			podsGone = false
		}
	}

	created := meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobCreated)
	switch {
	case want && podsGone && created:
		setCondition(&tj.Status.Conditions, metav1.Condition{
			Type:    trainer.TrainJobSuspended,
			Status:  metav1.ConditionTrue,
			Reason:  trainer.TrainJobSuspendedReason,
			Message: "The TrainJob is suspended and no Pod of its Jobs is left",
		}, now)
	case !want && (meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobSuspended) || resuming):
		setCondition(&tj.Status.Conditions, metav1.Condition{
			Type:    trainer.TrainJobSuspended,
			Status:  metav1.ConditionFalse,
			Reason:  trainer.TrainJobResumedReason,
			Message: "The TrainJob was resumed",
		}, now)
		tj.Status.StartTime = &now
	}
	if !want && created && tj.Status.StartTime == nil {
		tj.Status.StartTime = &now
	}
	return errors.Join(errs...)
}

// suspendedWithoutPods reports whether the Job controller has suspended a
// Job and none of its Pods is left, running or terminating.
func suspendedWithoutPods(job *batchv1.Job) bool {
	if !ptr.Deref(job.Spec.Suspend, false) || job.Status.Active > 0 || ptr.Deref(job.Status.Terminating, 0) > 0 {
		return false
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

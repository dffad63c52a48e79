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
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// A child Job's failure, read from its failed Pod.
//
// The Job controller gives a Job its failure verdict (FailureTarget) in a
// sync it runs a second after the Pod event that decides it (its
// syncJobBatchPeriod). For most Jobs of a restarting runtime, the Pod event
// alone decides it: a Job of backoffLimit 0 with none of the policies that
// could forgive a Pod its failure fails with its first failed Pod, with
// reason BackoffLimitExceeded. For those, the controller reads the verdict
// from the Pod, a second earlier, and acts on it as it acts on
// FailureTarget; a restart then deletes the Job at once, which the Job
// controller syncs at once too (the deletion changes the Job's
// generation), and the Pods of the attempt go a second sooner.
//
// Only failed Pods are watched (a field selector on status.phase), so the
// manager holds no Pod that runs; and only what decides the verdict is kept
// of them.

const (
	// backoffLimitMessage is the message of the Job controller's
	// BackoffLimitExceeded verdict, which failure policy rules may match.
	backoffLimitMessage = "Job has reached the specified backoff limit"
	// defaultBackoffLimit is a Job's backoffLimit when none is set, as the
	// API server defaults it.
	defaultBackoffLimit = 6
)

// FailedPodCache is what the manager caches of Pods: the failed Pods of
// TrainJobs (owned selects them by label), stripped to what decides a
// Job's verdict.
func FailedPodCache(owned labels.Selector) cache.ByObject {
	return cache.ByObject{
		Label:     owned,
		Field:     fields.OneTermEqualSelector("status.phase", string(corev1.PodFailed)),
		Transform: stripPod,
	}
}

// stripPod keeps of a Pod what failsJob reads, and the labels it is found
// by.
func stripPod(o any) (any, error) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	var annotations map[string]string
	if ix, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]; ok {
		annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: ix}
	}
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp,
			Labels: pod.Labels, Annotations: annotations, OwnerReferences: pod.OwnerReferences, Finalizers: pod.Finalizers,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}, nil
}

// enqueueFailingPodOwner enqueues, at once, the TrainJob of a Pod that
// failed on its own (not deleted): the cache holds failed Pods only, so a
// Pod's creation there is its failure.
func enqueueFailingPodOwner() handler.TypedEventHandler[*corev1.Pod, reconcile.Request] {
	return handler.TypedFuncs[*corev1.Pod, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if name := e.Object.Labels[trainer.TrainJobNameLabel]; name != "" && e.Object.DeletionTimestamp == nil {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: e.Object.Namespace, Name: name}})
			}
		},
	}
}

// failsJob reports whether pod decides job's failure beyond doubt, as the
// Job controller will find it in its next sync: pod is one of job's Pods
// still tracked (its finalizer on), failed on its own rather than deleted
// (a Pod deleted for the Job's deadline, suspension or success policy is
// killed before its Job's condition is written), and job is one that fails
// with its first failed Pod and has not ended: backoffLimit 0, neither
// backoffLimitPerIndex, podFailurePolicy nor successPolicy, run by the Job
// controller, neither suspended nor deleted. The controller evaluates a
// new failure before any success, and a Job that has no Pods left to run is
// finished, so no success can come first.
func failsJob(job *batchv1.Job, pod *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(pod)
	if pod.Status.Phase != corev1.PodFailed || pod.DeletionTimestamp != nil || ref == nil || ref.UID != job.UID ||
		!controllerutil.ContainsFinalizer(pod, batchv1.JobTrackingFinalizer) {
		return false
	}
	spec := &job.Spec
	if job.DeletionTimestamp != nil || ptr.Deref(spec.Suspend, false) ||
		ptr.Deref(spec.ManagedBy, batchv1.JobControllerName) != batchv1.JobControllerName ||
		ptr.Deref(spec.BackoffLimit, defaultBackoffLimit) != 0 ||
		spec.BackoffLimitPerIndex != nil || spec.PodFailurePolicy != nil || spec.SuccessPolicy != nil {
		return false
	}
	if ptr.Deref(spec.CompletionMode, batchv1.NonIndexedCompletion) == batchv1.IndexedCompletion {
		// A Pod of an index past completions (after a scale-down) does
		// not count.
		ix, err := strconv.Atoi(pod.Annotations[batchv1.JobCompletionIndexAnnotation])
		if err != nil || ix < 0 || ix >= int(ptr.Deref(spec.Completions, 0)) {
			return false
		}
	}
	return !slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool {
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobFailed, batchv1.JobFailureTarget, batchv1.JobSuccessCriteriaMet:
			return c.Status == corev1.ConditionTrue
		}
		return false
	})
}

// withFailureVerdict is a copy of job with the verdict the Job controller
// gives it for a failed Pod that decides it: FailureTarget,
// BackoffLimitExceeded, with its message.
func withFailureVerdict(job *batchv1.Job, at time.Time) *batchv1.Job {
	out := job.DeepCopy()
	out.Status.Conditions = append(out.Status.Conditions, batchv1.JobCondition{
		Type:               batchv1.JobFailureTarget,
		Status:             corev1.ConditionTrue,
		Reason:             batchv1.JobReasonBackoffLimitExceeded,
		Message:            backoffLimitMessage,
		LastProbeTime:      metav1.NewTime(at),
		LastTransitionTime: metav1.NewTime(at),
	})
	return out
}

// readPodFailures gives the TrainJob's running children whose failed Pod
// decides their failure (failsJob) the Job controller's verdict. The
// failed Pods come from the cache; a Job that one of them would fail is
// read again from the API server before the verdict is given, so a Job
// that ended or changed since the cache saw it is not failed on an old
// view.
func (r *Reconciler) readPodFailures(ctx context.Context, tj *trainer.TrainJob, children []child) error {
	if !slices.ContainsFunc(children, func(c child) bool { o, _ := jobOutcome(c.job); return o == running }) {
		return nil
	}
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(tj.Namespace), client.MatchingLabels{trainer.TrainJobNameLabel: tj.Name}); err != nil {
		return fmt.Errorf("listing failed Pods of TrainJob %s: %w", klog.KObj(tj), err)
	}
	var errs []error
	for i := range children {
		c := &children[i]
		if o, _ := jobOutcome(c.job); o != running {
			continue
		}
		k := slices.IndexFunc(pods.Items, func(p corev1.Pod) bool { return failsJob(c.job, &p) })
		if k < 0 {
			continue
		}
		var live batchv1.Job
		if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(c.job), &live); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("reading child Job %s: %w", klog.KObj(c.job), err))
			}
			continue
		}
		if failsJob(&live, &pods.Items[k]) {
			c.job = withFailureVerdict(c.job, r.clock.Now())
		}
	}
	return errors.Join(errs...)
}

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
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// failingJob is a running Job of one Indexed Pod that fails with its first
// failed Pod, and failedPod that Pod, failed.
func failingJob() (*batchv1.Job, *corev1.Pod) {
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "tj-node-0", Namespace: testNS, UID: "job-uid"},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0), Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](2),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
		},
		Status: batchv1.JobStatus{Active: 2},
	}
	return job, failedPod(job, "tj-node-0-1-abcde", 1)
}

// failedPod is a failed Pod of index ix of job, still tracked.
func failedPod(job *batchv1.Job, name string, ix int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: job.Namespace, UID: types.UID(name),
			Labels:          map[string]string{trainer.TrainJobNameLabel: "tj"},
			Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: strconv.Itoa(ix)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
			Finalizers:      []string{batchv1.JobTrackingFinalizer},
		},
		Status: corev1.PodStatus{Phase: corev1.PodFailed},
	}
}

func TestFailsJob(t *testing.T) {
	cases := map[string]struct {
		job  func(*batchv1.Job)
		pod  func(*corev1.Pod)
		want bool
	}{
		"a tracked Pod failed on its own, backoffLimit 0": {want: true},
		"a Pod still running":                             {pod: func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }},
		"a Pod that succeeded":                            {pod: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }},
		"a Pod deleted (for a deadline, a suspension, a success policy)": {
			pod: func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(now)) },
		},
		"a Pod already counted (no tracking finalizer)": {pod: func(p *corev1.Pod) { p.Finalizers = nil }},
		"a Pod of another Job":                          {pod: func(p *corev1.Pod) { p.OwnerReferences[0].UID = "other" }},
		"a Pod of no controller":                        {pod: func(p *corev1.Pod) { p.OwnerReferences = nil }},
		"a Pod of an index past completions":            {pod: func(p *corev1.Pod) { p.Annotations[batchv1.JobCompletionIndexAnnotation] = "2" }},
		"a Pod of no index":                             {pod: func(p *corev1.Pod) { p.Annotations = nil }},
		"a NonIndexed Job's Pod of no index": {
			job: func(j *batchv1.Job) { j.Spec.CompletionMode = nil },
			pod: func(p *corev1.Pod) { p.Annotations = nil }, want: true,
		},
		"backoffLimit 1":                      {job: func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To[int32](1) }},
		"backoffLimit not set (6)":            {job: func(j *batchv1.Job) { j.Spec.BackoffLimit = nil }},
		"backoffLimitPerIndex":                {job: func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr.To[int32](0) }},
		"a podFailurePolicy":                  {job: func(j *batchv1.Job) { j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{} }},
		"a successPolicy":                     {job: func(j *batchv1.Job) { j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{} }},
		"a suspended Job":                     {job: func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }},
		"a Job being deleted":                 {job: func(j *batchv1.Job) { j.DeletionTimestamp = ptr.To(metav1.NewTime(now)) }},
		"a Job managed by another controller": {job: func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue") }},
		"a Job managed by the Job controller, by name": {
			job: func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To(batchv1.JobControllerName) }, want: true,
		},
		"a Job already Complete": {job: func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}},
		"a Job whose success criteria were met": {job: func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}}
		}},
		"a Job already given its verdict": {job: func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue}}
		}},
		"a Job resumed (Suspended=False)": {job: func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuspended, Status: corev1.ConditionFalse}}
		}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			job, pod := failingJob()
			if tc.job != nil {
				tc.job(job)
			}
			if tc.pod != nil {
				tc.pod(pod)
			}
			if got := failsJob(job, pod); got != tc.want {
				t.Errorf("failsJob = %t, want %t", got, tc.want)
			}
		})
	}
}

// A failed Pod that decides its Job's failure fails the TrainJob as the
// Job's verdict would, without waiting for it; one that does not, or whose
// Job the API server shows ended, changes nothing.
func TestFailedPodFailsItsJob(t *testing.T) {
	twoWorkers := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj())
	workers := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed").
		StartTime(earlier).JobsStatus(trainer.JobStatus{Name: "worker", Replicas: 2})
	child := func(i int, backoffLimit int32) *batchv1.Job {
		job := childJob(t, workers.Obj(), twoWorkers, i)
		job.UID = types.UID(job.Name)
		job.Spec.BackoffLimit = ptr.To(backoffLimit)
		job.Spec.Completions, job.Spec.CompletionMode = ptr.To[int32](1), ptr.To(batchv1.IndexedCompletion)
		return utiltesting.WrapJob(job).Active(1).Obj()
	}
	failedMsg := "Job tj-worker-0 failed: BackoffLimitExceeded: Job has reached the specified backoff limit"
	failed := trainer.TrainJobStatus{
		State:      trainer.TrainJobStateFailed,
		Conditions: []metav1.Condition{cond(trainer.TrainJobFailed, "True", trainer.TrainJobJobFailedReason, failedMsg, now)},
		JobsStatus: []trainer.JobStatus{{Name: "worker", Replicas: 2, Failed: 1, FailedReplicas: []int32{0}, Active: 1, Ready: 1}},
		StartTime:  ptr.To(metav1.NewTime(earlier)),
	}
	runningStatus := trainer.TrainJobStatus{
		State:      trainer.TrainJobStateRunning,
		JobsStatus: []trainer.JobStatus{{Name: "worker", Replicas: 2, Active: 2, Ready: 2}},
		StartTime:  ptr.To(metav1.NewTime(earlier)),
	}
	cases := map[string]struct {
		backoffLimit int32
		// live is the Job as the API server has it, when the cache is
		// behind.
		live       func(*batchv1.Job)
		wantStatus trainer.TrainJobStatus
		wantEvents []string
		// wantStopped is whether the other Job is suspended.
		wantStopped bool
	}{
		"backoffLimit 0: the TrainJob fails at once": {
			wantStatus: failed, wantEvents: []string{"Warning FailedJobs " + failedMsg}, wantStopped: true,
		},
		"backoffLimit 1: the Job controller decides": {backoffLimit: 1, wantStatus: runningStatus},
		"the API server shows the Job Complete": {
			live: func(j *batchv1.Job) {
				j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
			},
			wantStatus: runningStatus,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			worker0, worker1 := child(0, tc.backoffLimit), child(1, tc.backoffLimit)
			pod := failedPod(worker0, "tj-worker-0-0-abcde", 0)
			var funcs *interceptor.Funcs
			if tc.live != nil {
				funcs = &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if err := c.Get(ctx, key, obj, opts...); err != nil {
						return err
					}
					if job, ok := obj.(*batchv1.Job); ok && job.UID == worker0.UID {
						tc.live(job)
					}
					return nil
				}}
			}
			f := newFixture(t, nil, workers.Clone().Obj(), worker0, worker1, pod)
			if funcs != nil {
				// The API server reads go through the interceptor; the
				// cache's do not.
				f.r.apiReader = utiltesting.NewClientBuilder(funcs, workers.Clone().Obj(), worker0.DeepCopy(), worker1.DeepCopy()).Build()
			}
			if err := f.reconcile(t, "tj"); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if diff := cmp.Diff(tc.wantStatus, f.trainJob(t, "tj").Status, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, f.events(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// The failed Job is left to the Job controller, which ends it.
			want := []jobState{{Name: "tj-worker-0", Finalizers: tracked}, {Name: "tj-worker-1", Finalizers: tracked}}
			if tc.wantStopped {
				want = []jobState{{Name: "tj-worker-0"}, {Name: "tj-worker-1", Suspend: true}}
			}
			if diff := cmp.Diff(want, jobStates(f.jobs(t)), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Jobs (-want +got):\n%s", diff)
			}
		})
	}
}

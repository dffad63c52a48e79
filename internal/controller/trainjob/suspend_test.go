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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// Suspended=True only once every child has been seen with no Pod: a child
// the cache does not show yet is not a child without Pods.
func TestSuspendedOnlyOnceEveryChildIsSeenStopped(t *testing.T) {
	twoWorkers := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj())
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed").
		StartTime(earlier).Suspend(true).JobsStatus(trainer.JobStatus{Name: "worker", Replicas: 2}).Obj()
	stopped := utiltesting.WrapJob(childJob(t, tj, twoWorkers, 0)).SuspendedByController(now).Obj()
	running := utiltesting.WrapJob(childJob(t, tj, twoWorkers, 1)).Active(1).Obj()
	// The cache shows tj-worker-0 only; tj-worker-1 still has its Pod.
	f := newFixture(t, &interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if jobs, ok := list.(*batchv1.JobList); ok {
				var seen []batchv1.Job
				for _, j := range jobs.Items {
					if j.Name != running.Name {
						seen = append(seen, j)
					}
				}
				jobs.Items = seen
			}
			return nil
		},
	}, tj, stopped, running)
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	c := meta.FindStatusCondition(f.trainJob(t, "tj").Status.Conditions, trainer.TrainJobSuspended)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != trainer.TrainJobSuspendingReason {
		t.Errorf("Suspended = %+v, want False (%s) while tj-worker-1 has a Pod", c, trainer.TrainJobSuspendingReason)
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %v, want none until the TrainJob is suspended", ev)
	}
}

// startTime is reset once per resume. A child whose resume keeps failing
// does not push the deadline back at every reconcile.
func TestStartTimeResetOncePerResume(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	base := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Deadline(600).JobsStatus(nodeStep)
	suspendedTJ := base.Clone().StartTime(earlier).
		Condition(cond(trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason, "suspended", earlier)).Obj()
	job := utiltesting.WrapJob(childJob(t, suspendedTJ, spec, 0)).SuspendedByController(earlier).Obj()
	patchErr := errors.New("admission webhook denied the request")
	f := newFixture(t, &interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*batchv1.Job); ok {
				return patchErr
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}, suspendedTJ, job)

	_ = f.reconcile(t, "tj") // the resume patch fails

	first := f.trainJob(t, "tj")
	if first.Status.StartTime == nil || !first.Status.StartTime.Time.Equal(now) {
		t.Fatalf("startTime after the resume = %v, want %v", first.Status.StartTime, now)
	}
	// Later reconciles, the child still suspended.
	f.clock.Step(10 * time.Second)
	for range 3 {
		_ = f.reconcile(t, "tj")
	}
	got := f.trainJob(t, "tj")
	if diff := cmp.Diff(first.Status.StartTime, got.Status.StartTime); diff != "" {
		t.Errorf("startTime moved after the resume (-first +now):\n%s", diff)
	}
}

// A TrainJob suspended before its Jobs could all be created has no Pod to
// wait for: its deadline does not count the time suspended, and counts
// from the resume.
func TestSuspendedBeforeCreatedResumesItsDeadline(t *testing.T) {
	refused := cond(trainer.TrainJobCreated, "False", trainer.TrainJobJobRefusedReason, "quota", earlier)
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Deadline(600).StartTime(earlier).Suspend(true).Condition(refused).Obj()
	f := newFixture(t, nil, tj)
	_ = f.reconcile(t, "tj")
	if got := f.trainJob(t, "tj").Status.StartTime; got != nil {
		t.Fatalf("startTime %v kept while suspended: the deadline would count the time suspended", got)
	}
	resumed := f.trainJob(t, "tj")
	resumed.Spec.Suspend = ptr.To(false)
	if err := f.client.Update(context.Background(), resumed); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(time.Hour)
	_ = f.reconcile(t, "tj")
	if got := f.trainJob(t, "tj").Status.StartTime; got == nil || !got.Time.Equal(now.Add(time.Hour)) {
		t.Errorf("startTime after the resume = %v, want %v", got, now.Add(time.Hour))
	}
}

// A Job whose spec changed since it was created (resumed once) is not
// taken for one without Pods before the Job controller says it is
// suspended, even while its status shows none yet.
func TestResumedJobNotTakenForPodless(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Suspend(true).StartTime(earlier).JobsStatus(nodeStep).Obj()
	job := childJob(t, tj, spec, 0)
	job.Generation = 3 // created suspended, resumed, suspended again; its status not updated yet
	f := newFixture(t, nil, tj, job)
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(f.trainJob(t, "tj").Status.Conditions, trainer.TrainJobSuspended); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Suspended = %+v, want False until the Job controller reports the Job suspended", c)
	}
}

// A TrainJob admitted by Kueue resumes with the flavor Kueue patched in: its
// children, created suspended before the patch or preempted on another
// flavor, get the patch's scheduling directives in the patch that resumes
// them, read from the API server (the cache holds Jobs without their Pod
// template), the old flavor's removed; a Job that ran has its startTime
// cleared first; a child whose Pods have not stopped yet waits, and without
// its runtime a patched TrainJob does not resume at all.
func TestResumeAppliesRuntimePatches(t *testing.T) {
	twoWorkers := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj())
	flavor := trainer.RuntimePatch{Manager: trainer.KueueManager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
			Name: "worker", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
				Metadata: &trainer.PatchMetadata{Labels: map[string]string{"kueue.x-k8s.io/podset": "worker"}},
				Spec: &trainer.PodSpecPatch{
					NodeSelector: map[string]string{"zone": "b"},
					Tolerations:  []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}},
				},
			}}},
		}}}},
	}}
	queued := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed").
		Suspend(true).JobsStatus(trainer.JobStatus{Name: "worker", Replicas: 2})
	queued.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: trainer.KueueManager}}
	admitted := queued.Clone().Suspend(false).Obj()
	admitted.Spec.RuntimePatches = []trainer.RuntimePatch{flavor}
	// tj-worker-0 ran on an earlier flavor (pool=a), was preempted and has
	// no Pod left; tj-worker-1's Pod is still stopping.
	stopped := utiltesting.WrapJob(childJob(t, queued.Obj(), twoWorkers, 0)).SuspendedByController(earlier).Obj()
	stopped.Generation = 3
	stopped.Status.StartTime = ptr.To(metav1.NewTime(earlier))
	stopped.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a"}
	stopping := utiltesting.WrapJob(childJob(t, queued.Obj(), twoWorkers, 1)).Active(1).Obj()
	stopping.Generation = 3
	for _, j := range []*batchv1.Job{stopped, stopping} {
		j.Spec.Template.Labels[batchv1.JobNameLabel] = j.Name // given by the API server
	}
	// The cache strips a Job's Pod template; the API server has it.
	cacheLike := &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if jobs, ok := list.(*batchv1.JobList); ok {
			for i := range jobs.Items {
				jobs.Items[i].Spec.Template = corev1.PodTemplateSpec{}
			}
		}
		return nil
	}}

	t.Run("with its runtime", func(t *testing.T) {
		f := newFixture(t, cacheLike, admitted.DeepCopy(), stopped.DeepCopy(), stopping.DeepCopy(), twoWorkers.ClusterRuntime("torch-distributed"))
		if err := f.reconcile(t, "tj"); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		jobs := map[string]batchv1.Job{}
		for _, name := range []string{"tj-worker-0", "tj-worker-1"} {
			var j batchv1.Job
			if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: name}, &j); err != nil {
				t.Fatal(err)
			}
			jobs[name] = j
		}
		got := jobs["tj-worker-0"]
		if ptr.Deref(got.Spec.Suspend, true) {
			t.Errorf("tj-worker-0 is still suspended")
		}
		if got.Status.StartTime != nil {
			t.Errorf("tj-worker-0 startTime = %v, want it cleared before its directives changed", got.Status.StartTime)
		}
		pod := got.Spec.Template
		if !cmp.Equal(pod.Spec.NodeSelector, map[string]string{"zone": "b"}) || len(pod.Spec.Tolerations) != 1 ||
			pod.Labels["kueue.x-k8s.io/podset"] != "worker" || pod.Labels[batchv1.JobNameLabel] != "tj-worker-0" {
			t.Errorf("tj-worker-0 Pod template = labels %v, nodeSelector %v, tolerations %v; want the new flavor's alone and the API server's label kept",
				pod.Labels, pod.Spec.NodeSelector, pod.Spec.Tolerations)
		}
		if w := jobs["tj-worker-1"]; !ptr.Deref(w.Spec.Suspend, false) || w.Spec.Template.Spec.NodeSelector != nil {
			t.Errorf("tj-worker-1, whose Pod still runs, was changed: suspend %v, nodeSelector %v", w.Spec.Suspend, w.Spec.Template.Spec.NodeSelector)
		}
	})
	t.Run("without its runtime", func(t *testing.T) {
		f := newFixture(t, cacheLike, admitted.DeepCopy(), stopped.DeepCopy(), stopping.DeepCopy())
		if err := f.reconcile(t, "tj"); err == nil || !strings.Contains(err.Error(), "its runtime patches cannot be applied") {
			t.Errorf("Reconcile error = %v, want the patches named", err)
		}
		if j := f.jobs(t)[0]; j.Name != "tj-worker-0" || !ptr.Deref(j.Spec.Suspend, false) {
			t.Errorf("tj-worker-0 was resumed without its runtime patches")
		}
		// It waits for its runtime, which starts it when it appears.
		if got := waitingIndexValue(f.trainJob(t, "tj")); len(got) != 1 || got[0] != runtimeKey(trainer.ClusterTrainingRuntimeKind, testNS, "torch-distributed") {
			t.Errorf("waiting index = %v, want the runtime's key", got)
		}
	})
}

// A staged TrainJob suspended before its later stages exist is Suspended
// once the Jobs it created have no Pod left: the replicated Jobs still to
// be created have none. Kueue queues a TrainJob by suspending it at
// creation, so every queued TrainJob with initializers is in this state.
func TestStagedTrainJobSuspendedBeforeItsLaterStages(t *testing.T) {
	workers := utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj()
	workers.DependsOn = []trainer.DependsOn{{Name: "init", Status: trainer.DependsOnComplete}}
	staged := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("init").Obj(), workers)
	base := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed")
	cases := map[string]struct {
		trainJob *trainer.TrainJob
		jobs     []client.Object
	}{
		"suspended while its first stage ran": {
			trainJob: base.Clone().StartTime(earlier).Suspend(true).
				JobsStatus(trainer.JobStatus{Name: "init", Replicas: 1}, trainer.JobStatus{Name: "worker", Replicas: 2, Waiting: true}).Obj(),
			jobs: []client.Object{utiltesting.WrapJob(childJob(t, base.Obj(), staged, 0)).SuspendedByController(now).Obj()},
		},
		"created suspended (queued by Kueue)": {
			trainJob: base.Clone().Suspend(true).Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil, append(tc.jobs, tc.trainJob, staged.ClusterRuntime("torch-distributed"))...)
			if err := f.reconcile(t, "tj"); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			got := f.trainJob(t, "tj")
			if c := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobSuspended); c == nil || c.Status != metav1.ConditionTrue {
				t.Errorf("Suspended = %+v, want True: the replicated Job waiting for its stage has no Pod", c)
			}
			if diff := cmp.Diff([]jobState{{Name: "tj-init-0", Suspend: true, Finalizers: tracked}}, jobStates(f.jobs(t))); diff != "" {
				t.Errorf("Jobs (-want +got):\n%s", diff)
			}
		})
	}
}

// Suspended while a restart replaces its Jobs: not Suspended while Pods of
// the attempt before are still going, though the new attempt has no Job
// yet.
func TestSuspendedDuringARestart(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().Torch()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(earlier).Suspend(true).
		JobsStatus(trainer.JobStatus{Name: "node", Replicas: 1, Trainer: true, Waiting: true}).Obj()
	tj.Status.Restarts = 1
	old := childJob(t, utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj(), spec, 0)
	old.Finalizers = nil
	f := newFixture(t, nil, tj, utiltesting.WrapJob(old).Active(2).Obj(), spec.ClusterRuntime("torch-distributed"))
	if _, err := f.reconcileResult(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	c := meta.FindStatusCondition(f.trainJob(t, "tj").Status.Conditions, trainer.TrainJobSuspended)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != trainer.TrainJobSuspendingReason {
		t.Errorf("Suspended = %+v, want False (%s) while the attempt before has Pods", c, trainer.TrainJobSuspendingReason)
	}
	// The attempt before is gone (deleted by that reconcile): Suspended,
	// the new attempt's Job created suspended.
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	c = meta.FindStatusCondition(f.trainJob(t, "tj").Status.Conditions, trainer.TrainJobSuspended)
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Suspended = %+v once the attempt before is gone, want True", c)
	}
	if diff := cmp.Diff([]jobState{{Name: "tj-node-0", Suspend: true, Finalizers: tracked}}, jobStates(f.jobs(t))); diff != "" {
		t.Errorf("Jobs (-want +got):\n%s", diff)
	}
}

// A Job with the Job controller's failure verdict (FailureTarget) may
// still have Pods terminating: a suspended TrainJob is Suspended only once
// they are gone too.
func TestSuspendedWaitsForTheFailedJobsPods(t *testing.T) {
	twoWorkers := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj())
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed").
		StartTime(earlier).Suspend(true).JobsStatus(trainer.JobStatus{Name: "worker", Replicas: 2}).Obj()
	children := func(failedPods int32) []child {
		var cs []child
		for i, job := range []*batchv1.Job{
			utiltesting.WrapJob(childJob(t, tj, twoWorkers, 0)).Active(failedPods).FailureTarget("BackoffLimitExceeded", earlier).Obj(),
			utiltesting.WrapJob(childJob(t, tj, twoWorkers, 1)).SuspendedByController(now).Obj(),
		} {
			c, ok := childOf(job)
			if !ok {
				t.Fatalf("child %d: no replicated Job or replica in its labels", i)
			}
			cs = append(cs, c)
		}
		return cs
	}
	for pods, want := range map[int32]metav1.ConditionStatus{1: metav1.ConditionFalse, 0: metav1.ConditionTrue} {
		got := tj.DeepCopy()
		decideSuspend(got, children(pods), nil, metav1.NewTime(now))
		if c := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobSuspended); c == nil || c.Status != want {
			t.Errorf("with %d Pods of the failed Job left: Suspended = %+v, want %s", pods, c, want)
		}
	}
}

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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestReleasedJobs(t *testing.T) {
	clk := testingclock.NewFakeClock(now)
	r := newReleasedJobs(clk)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "1"}}
	again := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "2"}}
	if r.pending(job) {
		t.Fatal("a Job never released is recent")
	}
	r.expect(job)
	clk.SetTime(now.Add(releasedFor - time.Second))
	if !r.pending(job) {
		t.Error("a Job just released is not recent")
	}
	if r.pending(again) {
		t.Error("a new Job of the same name counts as released")
	}
	clk.SetTime(now.Add(releasedFor + time.Nanosecond))
	if r.pending(job) {
		t.Error("a release past releasedFor is still trusted")
	}
	r.expect(job)
	r.forget(job)
	if r.pending(job) {
		t.Error("a forgotten Job is recent")
	}
}

// A finalizer removed is not removed again while the cache still shows it:
// a reconcile acts on the Jobs it listed, which may be older than the
// removal, and a second patch would fail its test. A reconcile that sees
// the Job without the finalizer forgets the removal.
func TestFinalizerRemovedOnceWhileTheCacheIsBehind(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	job := childJob(t, tj, utiltesting.MakeRuntimeSpec(), 0)
	patches := 0
	f := newFixture(t, &interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
	}, tj, job.DeepCopy())
	ctx := context.Background()
	for range 2 {
		if err := f.r.releaseFinalizer(ctx, job.DeepCopy()); err != nil {
			t.Fatalf("releaseFinalizer: %v", err)
		}
	}
	if patches != 1 {
		t.Errorf("%d patches, want 1: the removal was tried again on the cache's older copy", patches)
	}
	if diff := cmp.Diff([]jobState{{Name: "tj-node-0"}}, jobStates(f.jobs(t)), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Jobs (-want +got):\n%s", diff)
	}
	released := f.jobs(t)[0]
	if err := f.r.releaseFinalizer(ctx, &released); err != nil {
		t.Fatalf("releaseFinalizer: %v", err)
	}
	if f.r.released.pending(&released) {
		t.Error("the removal is still awaited once the cache shows it")
	}
}

// The outcome of a finished child must be stored before its finalizer goes:
// when the status write fails, the finalizer stays.
func TestFinalizerKeptWhenStatusWriteFails(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(earlier).JobsStatus(nodeStep).Obj()
	job := utiltesting.WrapJob(childJob(t, tj, spec, 0)).Succeeded(now).Obj()
	writeErr := errors.New("etcd is unhappy")
	f := newFixture(t, &interceptor.Funcs{
		SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
			return writeErr
		},
	}, tj, job)

	if err := f.reconcile(t, "tj"); !errors.Is(err, writeErr) {
		t.Fatalf("Reconcile error = %v, want %v", err, writeErr)
	}
	if diff := cmp.Diff([]jobState{{Name: "tj-node-0", Finalizers: tracked}}, jobStates(f.jobs(t))); diff != "" {
		t.Errorf("Jobs (-want +got):\n%s", diff)
	}
	if got := f.trainJob(t, "tj"); meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobComplete) {
		t.Error("TrainJob is Complete although its status write failed")
	}
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %v emitted although the status write failed", ev)
	}
}

func TestDeletedTrainJobReleasesChildren(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	job := childJob(t, tj, spec, 0)

	t.Run("being deleted", func(t *testing.T) {
		deletingTJ := tj.DeepCopy()
		deletingTJ.Finalizers = []string{"example.com/keep"}
		deletingTJ.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		f := newFixture(t, nil, deletingTJ, job.DeepCopy())
		if err := f.reconcile(t, "tj"); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if diff := cmp.Diff([]jobState{{Name: "tj-node-0"}}, jobStates(f.jobs(t)), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Jobs (-want +got):\n%s", diff)
		}
	})
	t.Run("gone", func(t *testing.T) {
		f := newFixture(t, nil, deleting(job.DeepCopy()))
		if err := f.reconcile(t, "tj"); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if jobs := f.jobs(t); len(jobs) != 0 {
			t.Errorf("Jobs left: %v", jobStates(jobs))
		}
	})
	t.Run("replaced by a TrainJob of the same name", func(t *testing.T) {
		// The earlier TrainJob was deleted (background cascade) and its
		// Job is still there: it is released, and not taken for the new
		// TrainJob's child.
		newer := utiltesting.MakeTrainJob("tj", testNS).UID("uid-2").Obj()
		f := newFixture(t, nil, newer, job.DeepCopy(), spec.ClusterRuntime("torch-distributed"))
		if err := f.reconcile(t, "tj"); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if diff := cmp.Diff([]jobState{{Name: "tj-node-0"}}, jobStates(f.jobs(t)), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Jobs (-want +got):\n%s", diff)
		}
		if c := meta.FindStatusCondition(f.trainJob(t, "tj").Status.Conditions, trainer.TrainJobCreated); c == nil || c.Status != metav1.ConditionFalse || c.Reason != trainer.TrainJobNameTakenReason {
			t.Errorf("Created = %+v, want False (%s)", c, trainer.TrainJobNameTakenReason)
		}
	})
}

// The runtime template's ttlSecondsAfterFinished keeps its JobSet meaning:
// the TrainJob's Jobs go that long after it finishes; the TrainJob and its
// status stay.
func TestJobsGoAtTheRuntimesTTL(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().Torch()
	spec.Template.Spec.TTLSecondsAfterFinished = ptr.To[int32](60)
	f := newFixture(t, nil, utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj(), spec.ClusterRuntime("torch-distributed"))
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if got := f.trainJob(t, "tj").Status.JobsTTLSecondsAfterFinished; ptr.Deref(got, -1) != 60 {
		t.Fatalf("jobsTTLSecondsAfterFinished %v, want the runtime's 60 pinned with the first Jobs", got)
	}
	f.setJob(t, "tj-node-0", func(w *utiltesting.JobWrapper) *utiltesting.JobWrapper { return w.Succeeded(now) })
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	finished := f.trainJob(t, "tj").FinishedCondition()
	if finished == nil {
		t.Fatal("not finished")
	}

	f.clock.Step(59 * time.Second)
	res, err := f.reconcileResult(t, "tj")
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if len(f.jobs(t)) != 1 {
		t.Fatalf("Jobs %v before the runtime's TTL, want tj-node-0", jobStates(f.jobs(t)))
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > time.Second {
		t.Errorf("RequeueAfter = %v, want the second left to the runtime's TTL", res.RequeueAfter)
	}

	f.clock.Step(time.Second)
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if jobs := f.jobs(t); len(jobs) != 0 {
		t.Errorf("Jobs %v after the runtime's TTL, want none", jobStates(jobs))
	}
	tj := f.trainJob(t, "tj")
	if c := tj.FinishedCondition(); c == nil || c.Type != trainer.TrainJobComplete || !c.LastTransitionTime.Equal(&finished.LastTransitionTime) {
		t.Errorf("TrainJob finished %+v, want it Complete as before", c)
	}
	if len(tj.Status.JobsStatus) != 1 || tj.Status.JobsStatus[0].Succeeded != 1 {
		t.Errorf("jobsStatus %+v, want the succeeded Job still counted", tj.Status.JobsStatus)
	}
	// Nothing more to do: no requeue, no write.
	if res, err := f.reconcileResult(t, "tj"); err != nil || res.RequeueAfter != 0 {
		t.Errorf("Reconcile once the Jobs are gone = %+v, %v; want nothing to come back for", res, err)
	}
	if got := f.trainJob(t, "tj"); got.ResourceVersion != tj.ResourceVersion {
		t.Errorf("status written again once the Jobs were gone: resourceVersion %s, was %s", got.ResourceVersion, tj.ResourceVersion)
	}
}

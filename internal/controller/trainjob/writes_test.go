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
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// A write to an earlier TrainJob of the same name is not taken for the new
// one's.
func TestStatusWritesIgnoreAnotherTrainJobOfTheName(t *testing.T) {
	w := newStatusWrites()
	old := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	old.ResourceVersion = "5"
	w.add("4", old, now)
	again := utiltesting.MakeTrainJob("tj", testNS).UID("uid-2").Obj()
	again.ResourceVersion = "4"
	if got := w.latest(again, now); got != again {
		t.Errorf("latest gave %s's write for %s", got.UID, again.UID)
	}
	if n := w.len(); n != 0 {
		t.Errorf("%d writes remembered, want 0", n)
	}
}

// A cache behind the writes gets the last one written; a cache that caught
// up gets its own copy, and the writes are forgotten.
func TestStatusWritesFollowTheLastWrite(t *testing.T) {
	w := newStatusWrites()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	tj.ResourceVersion = "5"
	w.add("4", tj, now)
	second := tj.DeepCopy()
	second.ResourceVersion = "6"
	second.Spec.TTLSecondsAfterFinished = nil
	w.add("5", second, now)
	cached := tj.DeepCopy()
	cached.ResourceVersion = "4"
	if got := w.latest(cached, now); got.ResourceVersion != "6" {
		t.Errorf("behind at version 4: got version %s, want the last write, 6", got.ResourceVersion)
	}
	cached.ResourceVersion = "6"
	if got := w.latest(cached, now); got != cached || w.len() != 0 {
		t.Errorf("caught up: got %p (cached %p), %d writes remembered; want the cache's copy and none", got, cached, w.len())
	}
}

// A write is forgotten once rememberFor has passed since the last write to
// its TrainJob, on the controller's clock.
func TestStatusWritesExpire(t *testing.T) {
	w := newStatusWrites()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	tj.ResourceVersion = "5"
	w.add("4", tj, now)
	tj.ResourceVersion = "6"
	w.add("5", tj, now.Add(20*time.Second))
	behind := tj.DeepCopy()
	behind.ResourceVersion = "4"
	if got := w.latest(behind, now.Add(rememberFor+time.Second)); got.ResourceVersion != "6" {
		t.Fatalf("the first write's age dropped the second: got version %s, want 6", got.ResourceVersion)
	}
	if got := w.latest(behind, now.Add(20*time.Second+rememberFor)); got != behind || w.len() != 0 {
		t.Errorf("after the last write expired: got version %s, %d remembered; want the cache's copy and none", got.ResourceVersion, w.len())
	}
}

// A reconcile that runs before the watch brings the controller's own status
// write decides on what it wrote, not on the cache's older copy: its write
// is not refused as a conflict, and the TrainJob does not wait for a retry.
func TestReconcileFollowsItsOwnWrite(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	var stale *trainer.TrainJob // what a cache behind the writes holds
	conflicts := 0
	f := newFixture(t, &interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if got, ok := obj.(*trainer.TrainJob); ok && stale != nil {
				stale.DeepCopyInto(got)
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			if apierrors.IsConflict(err) {
				conflicts++
			}
			return err
		},
	}, tj, utiltesting.MakeRuntimeSpec().ClusterRuntime("torch-distributed"))

	before := f.trainJob(t, "tj")
	if err := f.reconcile(t, "tj"); err != nil { // creates the Job, stores Running
		t.Fatalf("Reconcile: %v", err)
	}
	// The Job starts; the cache has not seen the write yet.
	jobs := f.jobs(t)
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs, want 1", len(jobs))
	}
	jobs[0].Status.Active = 1
	if err := f.client.Status().Update(context.Background(), &jobs[0]); err != nil {
		t.Fatal(err)
	}
	stale = before
	res, err := f.reconcileResult(t, "tj")
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	stale = nil
	if conflicts != 0 || res.RequeueAfter == conflictRetry {
		t.Errorf("%d conflicting status writes (result %+v), want none: the reconcile decided on the cache's copy", conflicts, res)
	}
	got := f.trainJob(t, "tj")
	if got.Status.State != trainer.TrainJobStateRunning {
		t.Errorf("state %q, want %s: the write that created the Jobs was lost", got.Status.State, trainer.TrainJobStateRunning)
	}
	if len(got.Status.JobsStatus) != 1 || got.Status.JobsStatus[0].Active != 1 {
		t.Errorf("jobsStatus %+v, want the Job active", got.Status.JobsStatus)
	}

	// Once the cache shows the last write, nothing of it is kept.
	if n := f.r.writes.len(); n != 1 {
		t.Errorf("writes remembered before the cache caught up: %d, want 1", n)
	}
	if !f.r.writes.observer().Update(event.UpdateEvent{ObjectOld: before, ObjectNew: got}) {
		t.Error("the observer filtered an update out")
	}
	if n := f.r.writes.len(); n != 0 {
		t.Errorf("writes remembered after the cache caught up: %d, want 0", n)
	}
}

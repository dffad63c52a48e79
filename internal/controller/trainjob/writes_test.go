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
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// awaiting returns a store awaiting the status write that stored a
// TrainJob at version 5, and that TrainJob.
func awaiting() (*statusWrites, *trainer.TrainJob) {
	w := newStatusWrites(testingclock.NewFakeClock(now))
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	tj.ResourceVersion = "5"
	w.expect(tj)
	return w, tj
}

// A write to an earlier TrainJob of the same name is not awaited for the
// new one.
func TestStatusWritesIgnoreAnotherTrainJobOfTheName(t *testing.T) {
	w, old := awaiting()
	again := utiltesting.MakeTrainJob("tj", testNS).UID("uid-2").Obj()
	again.ResourceVersion = "4"
	if w.expected(client.ObjectKeyFromObject(again)).behind(again) {
		t.Errorf("%s's write awaited for %s", old.UID, again.UID)
	}
	w.observe(again)
	if n := w.len(); n != 0 {
		t.Errorf("%d writes remembered, want 0", n)
	}
}

// A cache behind the last write waits for it; a cache that caught up with
// it, or moved past it, does not, and the write is forgotten.
func TestStatusWritesAwaitTheLastWrite(t *testing.T) {
	for name, cachedAt := range map[string]string{"at the last write": "6", "past it": "17"} {
		t.Run(name, func(t *testing.T) {
			w, tj := awaiting()
			second := tj.DeepCopy()
			second.ResourceVersion = "6"
			w.expect(second)
			key := client.ObjectKeyFromObject(tj)
			cached := tj.DeepCopy()
			for _, rv := range []string{"4", "5"} {
				cached.ResourceVersion = rv
				if !w.expected(key).behind(cached) {
					t.Errorf("behind at version %s: not waiting for the last write, 6", rv)
				}
				if w.observe(cached) || w.len() != 1 {
					t.Errorf("behind at version %s: the write was forgotten", rv)
				}
			}
			cached.ResourceVersion = cachedAt
			if w.expected(key).behind(cached) {
				t.Errorf("caught up: still waiting")
			}
			w.observe(cached)
			if n := w.len(); n != 0 {
				t.Errorf("caught up: %d writes remembered, want none", n)
			}
		})
	}
}

// A version that is not a number cannot be told older: nothing waits on it.
func TestStatusWritesDoNotWaitOnWhatCannotBeCompared(t *testing.T) {
	w, tj := awaiting()
	cached := tj.DeepCopy()
	cached.ResourceVersion = "a4"
	if w.expected(client.ObjectKeyFromObject(tj)).behind(cached) {
		t.Error("waiting on version a4")
	}
}

// A write is forgotten once rememberFor has passed since the last write to
// its TrainJob, on the controller's clock.
func TestStatusWritesExpire(t *testing.T) {
	clk := testingclock.NewFakeClock(now)
	w := newStatusWrites(clk)
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	tj.ResourceVersion = "5"
	w.expect(tj)
	clk.SetTime(now.Add(20 * time.Second))
	tj.ResourceVersion = "6"
	w.expect(tj)
	key := client.ObjectKeyFromObject(tj)
	behind := tj.DeepCopy()
	behind.ResourceVersion = "4"
	clk.SetTime(now.Add(rememberFor + time.Second))
	if !w.expected(key).behind(behind) {
		t.Fatal("the first write's age dropped the second")
	}
	clk.SetTime(now.Add(20*time.Second + rememberFor + time.Nanosecond))
	if w.expected(key).behind(behind) || w.len() != 0 {
		t.Errorf("after the last write expired: still waiting, %d remembered; want none", w.len())
	}
}

// A reconcile waits only while the write it looked up is still awaited: the
// write's event may come between the look-up and the wait. The observer
// passes the event of a write only if a reconcile waits for it.
func TestStatusWritesWait(t *testing.T) {
	w, tj := awaiting()
	key := client.ObjectKeyFromObject(tj)
	older := tj.DeepCopy()
	older.ResourceVersion = "4"
	p := w.observer()
	update := event.UpdateEvent{ObjectOld: older, ObjectNew: tj}

	awaited := w.expected(key)
	if p.Update(update) {
		t.Error("the observer passed a write's event that nothing waits for")
	}
	if w.wait(key, awaited) {
		t.Error("waiting for a write whose event came since it was looked up")
	}

	w.expect(tj)
	if !w.wait(key, w.expected(key)) {
		t.Fatal("not waiting for a write still awaited")
	}
	if p.Update(event.UpdateEvent{ObjectOld: older, ObjectNew: older}) {
		t.Error("the observer passed an event older than the write awaited")
	}
	if !p.Update(update) || w.len() != 0 {
		t.Errorf("the observer filtered out the event a reconcile waits for, or kept the write (%d remembered)", w.len())
	}

	w.expect(tj)
	if p.Delete(event.DeleteEvent{Object: tj}) || w.len() != 0 {
		t.Errorf("on the TrainJob's deletion: %d writes remembered, want none; the event is left to the other predicates", w.len())
	}
}

// A reconcile that runs before the watch brings the controller's own status
// write waits for it rather than decide on the cache's older copy: its
// write is not refused as a conflict, the TrainJob does not wait for a
// retry, and the write's event brings it back.
func TestReconcileWaitsForItsOwnWrite(t *testing.T) {
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
	written := f.trainJob(t, "tj")
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
	if got := f.trainJob(t, "tj"); got.ResourceVersion != written.ResourceVersion {
		t.Errorf("status written on the cache's older copy: resourceVersion %s, was %s", got.ResourceVersion, written.ResourceVersion)
	}
	if res.RequeueAfter != rememberFor {
		t.Errorf("waiting reconcile's result %+v, want a requeue when the wait ends, %v", res, rememberFor)
	}

	// The cache catches up: the write's event brings the TrainJob back, and
	// nothing of the write is kept.
	if n := f.r.writes.len(); n != 1 {
		t.Errorf("writes remembered before the cache caught up: %d, want 1", n)
	}
	if !f.r.writes.observer().Update(event.UpdateEvent{ObjectOld: before, ObjectNew: written}) {
		t.Error("the observer filtered out the update a reconcile waits for")
	}
	if n := f.r.writes.len(); n != 0 {
		t.Errorf("writes remembered after the cache caught up: %d, want 0", n)
	}
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if conflicts != 0 {
		t.Errorf("%d conflicting status writes, want none", conflicts)
	}
	got := f.trainJob(t, "tj")
	if got.Status.State != trainer.TrainJobStateRunning {
		t.Errorf("state %q, want %s: the write that created the Jobs was lost", got.Status.State, trainer.TrainJobStateRunning)
	}
	if len(got.Status.JobsStatus) != 1 || got.Status.JobsStatus[0].Active != 1 {
		t.Errorf("jobsStatus %+v, want the Job active", got.Status.JobsStatus)
	}
}

// A reconcile that waits for its write comes back by the active deadline
// if it falls before the wait ends.
func TestWaitForWriteKeepsTheDeadline(t *testing.T) {
	f := newFixture(t, nil)
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(now.Add(-50 * time.Second)).Deadline(60).Obj()
	if res := f.r.waitForWrite(context.Background(), tj); res.RequeueAfter != 10*time.Second {
		t.Errorf("RequeueAfter = %v, want the 10s left to the deadline", res.RequeueAfter)
	}
	tj = utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(now.Add(-50 * time.Second)).Deadline(40).Obj()
	if res := f.r.waitForWrite(context.Background(), tj); res.RequeueAfter != rememberFor {
		t.Errorf("deadline passed: RequeueAfter = %v, want the end of the wait, %v", res.RequeueAfter, rememberFor)
	}
}

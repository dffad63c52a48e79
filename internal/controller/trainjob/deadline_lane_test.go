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
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Deadlines set before the lane's controller starts are handed to its
// queue when it does, each at its soonest time; later ones go to the queue
// directly. The queue hands an item out only once its time has come.
func TestDeadlineLaneHandsDeadlinesToItsQueue(t *testing.T) {
	a := types.NamespacedName{Namespace: testNS, Name: "a"}
	b := types.NamespacedName{Namespace: testNS, Name: "b"}
	l := newDeadlineLane()
	l.after(a, 30*time.Second)
	l.after(a, 10*time.Second)
	l.after(a, 40*time.Second)

	clk := testingclock.NewFakeClock(now)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clk})
	defer q.ShutDown()
	if err := l.source().Start(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	l.after(b, 20*time.Second)

	clk.Step(10*time.Second - time.Millisecond)
	if got := settledLen(q); got != 0 {
		t.Fatalf("%d items out before any time came", got)
	}
	clk.Step(time.Millisecond)
	if got := next(t, q); got != a {
		t.Fatalf("got %v at 10s, want %v", got, a)
	}
	clk.Step(10 * time.Second)
	if got := next(t, q); got != b {
		t.Fatalf("got %v at 20s, want %v", got, b)
	}
	clk.Step(time.Minute)
	if got := settledLen(q); got != 0 {
		t.Fatalf("%d more items out, want none: %v was handed over once, at its soonest time", got, a)
	}
}

// settledLen returns the queue's length once its delaying loop has had time
// to move what is due.
func settledLen(q workqueue.TypedRateLimitingInterface[reconcile.Request]) int {
	time.Sleep(50 * time.Millisecond)
	return q.Len()
}

func next(t *testing.T, q workqueue.TypedRateLimitingInterface[reconcile.Request]) types.NamespacedName {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("nothing handed out")
		}
		time.Sleep(time.Millisecond)
	}
	item, _ := q.Get()
	q.Done(item)
	return item.NamespacedName
}

// One reconcile at a time runs on a TrainJob, from either controller;
// reconciles of other TrainJobs do not wait; nothing is kept once done.
func TestKeyLocksSerializeOneTrainJob(t *testing.T) {
	k := newKeyLocks()
	a := types.NamespacedName{Namespace: testNS, Name: "a"}
	b := types.NamespacedName{Namespace: testNS, Name: "b"}

	unlockA := k.lock(a)
	var second atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer k.lock(a)()
		second.Store(true)
	}()
	k.lock(b)() // another TrainJob goes ahead
	time.Sleep(50 * time.Millisecond)
	if second.Load() {
		t.Fatal("a second reconcile ran on the TrainJob while the first held it")
	}
	unlockA()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the second reconcile never ran")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.locks) != 0 {
		t.Errorf("%d locks kept after every reconcile ended", len(k.locks))
	}
}

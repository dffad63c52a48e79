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
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// DeadlineControllerName names the controller that reconciles TrainJobs at
// their active deadlines, and its workqueue.
const DeadlineControllerName = "trainjob-deadline"

// deadlineWorkers is how many TrainJobs the deadline lane reconciles at
// once: as many deadlines as fall in the same second on a busy cluster,
// each a status write and the stopping of its Jobs (about 100 ms when the
// API server is busy). Idle workers cost nothing.
const deadlineWorkers = 20

// deadlineLane brings TrainJobs back at their active deadlines on workers
// of their own. A requeue in the TrainJob controller's queue, even ahead of
// every event, waits for one of its workers to be free: with deadlines
// falling in the same second (start times are whole seconds) and the
// workers busy with what the previous ones set off, a deadline was
// enforced 100 to 200 ms late where it is otherwise 20 ms. The lane's
// workers run the same Reconcile; keyLocks keeps them from running it on a
// TrainJob the controller's workers are on.
type deadlineLane struct {
	mu    sync.Mutex
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
	// pending are the deadlines set before the lane's controller started.
	pending map[types.NamespacedName]time.Duration
}

func newDeadlineLane() *deadlineLane {
	return &deadlineLane{pending: map[types.NamespacedName]time.Duration{}}
}

// after brings key back on the lane in d. A TrainJob already due sooner
// keeps its sooner time; a deadline that moved later is looked at again
// at the earlier one, which schedules the later one.
func (l *deadlineLane) after(key types.NamespacedName, d time.Duration) {
	l.mu.Lock()
	q := l.queue
	if q == nil {
		if p, ok := l.pending[key]; !ok || d < p {
			l.pending[key] = d
		}
	}
	l.mu.Unlock()
	if q != nil {
		q.AddAfter(reconcile.Request{NamespacedName: key}, d)
	}
}

// source feeds the lane's controller: it hands over the deadlines set
// before it started.
func (l *deadlineLane) source() source.Source {
	return source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.queue = q
		for key, d := range l.pending {
			q.AddAfter(reconcile.Request{NamespacedName: key}, d)
		}
		l.pending = nil
		return nil
	})
}

// keyLocks lets one reconcile at a time run on a TrainJob, whichever
// controller's worker runs it.
type keyLocks struct {
	mu    sync.Mutex
	locks map[types.NamespacedName]*keyLock
}

type keyLock struct {
	sync.Mutex
	// holders counts the reconciles holding or waiting for the lock.
	holders int
}

func newKeyLocks() *keyLocks {
	return &keyLocks{locks: map[types.NamespacedName]*keyLock{}}
}

// lock waits until no other reconcile runs on key, and returns what ends
// this one's turn.
func (k *keyLocks) lock(key types.NamespacedName) (unlock func()) {
	k.mu.Lock()
	l := k.locks[key]
	if l == nil {
		l = &keyLock{}
		k.locks[key] = l
	}
	l.holders++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.holders--; l.holders == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

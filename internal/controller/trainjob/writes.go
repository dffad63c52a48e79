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
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// rememberFor bounds how long a reconcile waits for the cache to show a
// status write. The watch brings a write within a second or so; past it,
// the reconcile decides on what the cache holds, which costs at worst a
// write refused as a conflict.
const rememberFor = 30 * time.Second

// writesAwaited bounds how many TrainJobs' writes are awaited at once: one
// entry a TrainJob, the least recently used forgotten first.
const writesAwaited = 16384

// statusWrites is an expectations store, in the manner of Kueue's
// (pkg/util/expectations): for each TrainJob, the resourceVersion its last
// status write stored, until the cache shows that version or a later one.
// A reconcile that starts before the watch has brought the write (a child
// Job's change, typically, comes first) waits for it rather than decide on
// the cache's older copy: that costs a write the API server refuses as a
// conflict, and a second's wait for the retry. The write's event brings
// back the reconcile that waited (observer).
type statusWrites struct {
	// mu makes a look-up and the change that follows it one step; the
	// cache's own lock covers one call.
	mu sync.Mutex
	// awaited holds an *awaitedWrite for each types.NamespacedName.
	awaited *cache.LRUExpireCache
}

func newStatusWrites(clk cache.Clock) *statusWrites {
	return &statusWrites{awaited: cache.NewLRUExpireCacheWithClock(writesAwaited, clk)}
}

// awaitedWrite is a status write the cache may not show yet.
type awaitedWrite struct {
	uid             types.UID
	resourceVersion string
	// waiting is set once a reconcile waits for the write's event.
	waiting bool
}

// behind reports whether obj, as the cache holds it, is older than the
// write w. A TrainJob of another UID (one created again under the name) is
// not behind it, nor is one whose version cannot be compared: waiting for
// what cannot be told apart would not end.
func (w *awaitedWrite) behind(obj client.Object) bool {
	if w == nil || obj.GetUID() != w.uid {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), w.resourceVersion)
	return err == nil && c < 0
}

// expect records a status write that stored stored.
func (s *statusWrites) expect(stored *trainer.TrainJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.awaited.Add(client.ObjectKeyFromObject(stored), &awaitedWrite{uid: stored.UID, resourceVersion: stored.ResourceVersion}, rememberFor)
}

// expected returns the write awaited for the TrainJob of key, nil if none.
func (s *statusWrites) expected(key types.NamespacedName) *awaitedWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookup(key)
}

func (s *statusWrites) lookup(key types.NamespacedName) *awaitedWrite {
	if v, ok := s.awaited.Get(key); ok {
		return v.(*awaitedWrite)
	}
	return nil
}

// wait records that a reconcile waits for w, the write awaited for the
// TrainJob of key, and reports whether it does: not if the cache caught up
// with w since w was looked up, or w was forgotten.
func (s *statusWrites) wait(key types.NamespacedName, w *awaitedWrite) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lookup(key) != w {
		return false
	}
	w.waiting = true
	return true
}

// observe forgets the write awaited for obj once the cache holds obj at
// its version or a later one, and reports whether a reconcile waited for
// it.
func (s *statusWrites) observe(obj client.Object) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	w := s.lookup(key)
	if w == nil || w.behind(obj) {
		return false
	}
	s.awaited.Remove(key)
	return w.waiting
}

func (s *statusWrites) forget(key types.NamespacedName) { s.awaited.Remove(key) }

// len is how many TrainJobs have a write awaited.
func (s *statusWrites) len() int { return len(s.awaited.Keys()) }

// observer is a predicate that shows s every TrainJob event the cache
// receives and passes an update only if a reconcile waits for the write it
// brings: the controller's own writes are otherwise filtered out
// (trainJobUpdates). It comes first in a predicate.Or, which stops at the
// first predicate that says yes.
func (s *statusWrites) observer() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool { return s.observe(e.ObjectNew) },
		DeleteFunc: func(e event.DeleteEvent) bool {
			s.forget(client.ObjectKeyFromObject(e.Object))
			return false
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

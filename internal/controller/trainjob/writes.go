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
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// maxReplaced bounds the versions remembered for one TrainJob: writes that
// follow each other faster than the watch are few.
const maxReplaced = 8

// rememberFor bounds how long a write is remembered. The watch brings it
// within a second or so; a write whose event came before it was recorded
// (the watch can beat the response) would otherwise stay until the
// TrainJob's next event, which for a finished TrainJob may be its deletion.
const rememberFor = 30 * time.Second

// statusWrites remembers what this process's status writes stored, for each
// TrainJob, until the cache catches up with them (a cacheLag). A reconcile
// that follows its own write before the watch has brought it (a child
// Job's change, typically, arrives first) decides on the TrainJob as
// written rather than on the cache's older copy. Deciding on the older copy
// costs a write the API server refuses as a conflict, and a second's wait
// for the retry.
type statusWrites struct {
	lag cacheLag[types.NamespacedName, statusWrite]
}

func newStatusWrites() *statusWrites {
	return &statusWrites{lag: cacheLag[types.NamespacedName, statusWrite]{keep: rememberFor}}
}

type statusWrite struct {
	// replaced are the resourceVersions the writes replaced, oldest first:
	// a cached TrainJob at one of them is behind the write.
	replaced []string
	stored   *trainer.TrainJob
}

// behind reports whether the cache's TrainJob, of uid at resourceVersion
// rv, is older than the stored one.
func (s statusWrite) behind(uid types.UID, rv string) bool {
	return s.stored.UID == uid && slices.Contains(s.replaced, rv)
}

// latest returns the TrainJob a reconcile should decide on: the last one
// this process stored if the cache's copy, cached, is older than it; cached
// otherwise.
func (w *statusWrites) latest(cached *trainer.TrainJob, now time.Time) *trainer.TrainJob {
	key := client.ObjectKeyFromObject(cached)
	s, ok := w.lag.get(key, now)
	if !ok {
		return cached
	}
	if s.behind(cached.UID, cached.ResourceVersion) {
		return s.stored.DeepCopy()
	}
	// The cache has caught up, or moved past the writes.
	w.lag.forgetIf(key, func(s statusWrite) bool { return !s.behind(cached.UID, cached.ResourceVersion) })
	return cached
}

// add records, at now, a status write that replaced resourceVersion
// replaced and stored stored.
func (w *statusWrites) add(replaced string, stored *trainer.TrainJob, now time.Time) {
	cp := stored.DeepCopy()
	cp.ManagedFields = nil // as in the cache
	w.lag.update(client.ObjectKeyFromObject(stored), now, func(cur statusWrite, ok bool) statusWrite {
		if !ok || cur.stored.UID != stored.UID {
			cur = statusWrite{}
		}
		versions := append(slices.Clone(cur.replaced), replaced)
		if len(versions) > maxReplaced {
			versions = versions[len(versions)-maxReplaced:]
		}
		return statusWrite{replaced: versions, stored: cp}
	})
}

// observe forgets the writes to obj once the cache holds a version they did
// not replace: the cache has caught up.
func (w *statusWrites) observe(obj client.Object) {
	w.lag.forgetIf(client.ObjectKeyFromObject(obj), func(s statusWrite) bool {
		return !s.behind(obj.GetUID(), obj.GetResourceVersion())
	})
}

func (w *statusWrites) forget(key types.NamespacedName) { w.lag.forget(key) }

// len is how many TrainJobs have writes the cache has not caught up with.
func (w *statusWrites) len() int { return w.lag.len() }

// observer is a predicate that passes every event, and lets w see the
// TrainJob each one brings to the cache, so that w holds only what the
// cache is behind on. It must come before the predicates that filter:
// controller-runtime stops at the first that says no.
func (w *statusWrites) observer() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			w.observe(e.ObjectNew)
			return true
		},
		DeleteFunc: func(e event.DeleteEvent) bool {
			w.forget(client.ObjectKeyFromObject(e.Object))
			return true
		},
	}
}

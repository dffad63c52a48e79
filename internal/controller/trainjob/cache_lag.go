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
)

// cacheLag remembers what this process wrote that the cache may not show
// yet, for a while on the controller's clock: a reconcile that follows its
// own write before the watch has brought it decides on what it wrote, not
// on the cache's older copy. An entry goes when its owner says the cache
// caught up, or when it is older than keep: a write whose event came before
// it was recorded would otherwise stay until the object's next event.
type cacheLag[K comparable, V any] struct {
	keep    time.Duration
	mu      sync.Mutex
	entries map[K]lagEntry[V]
}

type lagEntry[V any] struct {
	value V
	at    time.Time
}

// pruneEvery is how many additions go between two sweeps of the expired
// entries that nothing looked up again.
const pruneEvery = 1024

// update sets the entry of k to what change makes of the current one (ok
// false if there is none, or it expired), written at now.
func (l *cacheLag[K, V]) update(k K, now time.Time, change func(cur V, ok bool) V) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.entries == nil {
		l.entries = map[K]lagEntry[V]{}
	}
	cur, ok := l.lookup(k, now)
	l.entries[k] = lagEntry[V]{value: change(cur, ok), at: now}
	if len(l.entries)%pruneEvery == 0 {
		for key, e := range l.entries {
			if now.Sub(e.at) >= l.keep {
				delete(l.entries, key)
			}
		}
	}
}

// get returns the entry of k, unless there is none or it expired.
func (l *cacheLag[K, V]) get(k K, now time.Time) (V, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lookup(k, now)
}

// lookup is get with the lock held; it drops an expired entry.
func (l *cacheLag[K, V]) lookup(k K, now time.Time) (V, bool) {
	e, ok := l.entries[k]
	if ok && now.Sub(e.at) >= l.keep {
		delete(l.entries, k)
		ok = false
	}
	if !ok {
		var zero V
		return zero, false
	}
	return e.value, true
}

// forgetIf drops the entry of k if caughtUp says the cache holds it now.
func (l *cacheLag[K, V]) forgetIf(k K, caughtUp func(V) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.entries[k]; ok && caughtUp(e.value) {
		delete(l.entries, k)
	}
}

// forget drops the entry of k.
func (l *cacheLag[K, V]) forget(k K) {
	l.forgetIf(k, func(V) bool { return true })
}

// len is how many entries are remembered, expired ones not yet dropped
// included.
func (l *cacheLag[K, V]) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}

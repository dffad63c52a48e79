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
	"testing"
	"time"
)

// Entries last keep on the given clock, are dropped when asked for after
// that or once the owner says the cache caught up, and those nothing asks
// for again are swept as more are added.
func TestCacheLag(t *testing.T) {
	l := cacheLag[string, int]{keep: time.Minute}
	l.update("a", now, func(int, bool) int { return 1 })
	l.update("a", now.Add(30*time.Second), func(cur int, ok bool) int {
		if !ok || cur != 1 {
			t.Errorf("update saw %d, %v; want the current 1", cur, ok)
		}
		return cur + 1
	})
	if v, ok := l.get("a", now.Add(89*time.Second)); !ok || v != 2 {
		t.Errorf("get within keep of the last update = %d, %v; want 2", v, ok)
	}
	if _, ok := l.get("a", now.Add(90*time.Second)); ok || l.len() != 0 {
		t.Errorf("an entry older than keep is still there (%d entries)", l.len())
	}

	l.update("b", now, func(int, bool) int { return 7 })
	l.forgetIf("b", func(v int) bool { return v != 7 })
	if _, ok := l.get("b", now); !ok {
		t.Error("forgetIf dropped an entry the cache had not caught up with")
	}
	l.forgetIf("b", func(v int) bool { return v == 7 })
	if _, ok := l.get("b", now); ok {
		t.Error("forgetIf kept an entry the cache caught up with")
	}

	// Entries nothing looks up again go in the next sweep.
	for i := range pruneEvery - 1 {
		l.update(string(rune('A'+i%26))+string(rune(i)), now, func(int, bool) int { return i })
	}
	l.update("last", now.Add(time.Hour), func(int, bool) int { return 0 })
	if n := l.len(); n != 1 {
		t.Errorf("%d entries after a sweep an hour later, want the 1 just added", n)
	}
}

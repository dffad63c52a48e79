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
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestInParallelRunsEachOnceBounded: every index runs once, at most
// childRequests at a time, and more than one at a time when there are more.
func TestInParallelRunsEachOnceBounded(t *testing.T) {
	for _, n := range []int{0, 1, 2, childRequests, 3*childRequests + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ran := make([]int, n)
			var inFlight, most atomic.Int32
			// Each call waits until min(n, childRequests) are in flight, so
			// the test hangs, not passes, if they ran one after another.
			want := int32(min(n, childRequests))
			var mu sync.Mutex
			cond := sync.NewCond(&mu)
			started := int32(0)
			inParallel(n, func(i int) {
				now := inFlight.Add(1)
				for {
					m := most.Load()
					if now <= m || most.CompareAndSwap(m, now) {
						break
					}
				}
				mu.Lock()
				started++
				cond.Broadcast()
				for started < want {
					cond.Wait()
				}
				mu.Unlock()
				ran[i]++
				inFlight.Add(-1)
			})
			for i, c := range ran {
				if c != 1 {
					t.Errorf("index %d ran %d times, want once", i, c)
				}
			}
			if got := most.Load(); got > childRequests || (n > 1 && got < 2) {
				t.Errorf("at most %d at a time, want between 2 and %d", got, childRequests)
			}
		})
	}
}

// TestEachInParallelJoinsErrorsInOrder: the errors come back in the items'
// order, whatever order the calls finished in.
func TestEachInParallelJoinsErrorsInOrder(t *testing.T) {
	items := []int{0, 1, 2, 3}
	err := eachInParallel(items, func(i int) error {
		if i%2 == 1 {
			return fmt.Errorf("item %d", i)
		}
		return nil
	})
	if err == nil || err.Error() != "item 1\nitem 3" {
		t.Fatalf("error %v, want item 1 then item 3", err)
	}
	if err := eachInParallel(items, func(int) error { return nil }); err != nil {
		t.Fatalf("error %v, want none", err)
	}
	if !errors.Is(eachInParallel([]int{0}, func(int) error { return errTest }), errTest) {
		t.Fatal("the error of a single item is lost")
	}
}

var errTest = errors.New("test")

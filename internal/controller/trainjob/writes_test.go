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

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

	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// Any start time and deadline: no panic, a deadline never before the start,
// exactly activeDeadlineSeconds after it when it fires at all, and a
// requeue never negative.
func FuzzActiveDeadline(f *testing.F) {
	f.Add(int64(1767225600), int64(60), int64(30))
	f.Add(int64(0), int64(1), int64(-1))
	f.Add(int64(1767225600), int64(9_000_000_000_000_000_000), int64(0))
	f.Add(int64(253402300799), int64(9223372036), int64(1))
	f.Add(int64(-62135596800), int64(9223372037), int64(0))
	f.Fuzz(func(t *testing.T, startUnix, seconds, nowOffset int64) {
		if seconds < 1 {
			t.Skip("the API refuses activeDeadlineSeconds under 1")
		}
		start := time.Unix(startUnix, 0).UTC()
		tj := utiltesting.MakeTrainJob("tj", "ns").StartTime(start).Deadline(seconds).Obj()
		due, ok := lifecycle.ActiveDeadline(tj)
		if ok {
			if due.Before(start) {
				t.Fatalf("deadline %s before the start %s", due, start)
			}
			if got := due.Sub(start); got != time.Duration(seconds)*time.Second {
				t.Fatalf("deadline %v after the start, want %ds", got, seconds)
			}
		}
		now := start.Add(time.Duration(nowOffset) * time.Second)
		fail, next := activeDeadline(tj, now)
		switch {
		case !ok && (fail != nil || !next.IsZero()):
			t.Fatalf("no deadline, yet failure %v and requeue at %s", fail, next)
		case ok && fail == nil && !next.After(now):
			t.Fatalf("deadline %s not passed at %s, yet not after it", next, now)
		case ok && fail != nil && now.Before(due):
			t.Fatalf("failed at %s, before the deadline %s", now, due)
		}
	})
}

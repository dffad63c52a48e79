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

package lifecycle

import (
	"testing"
	"time"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestActiveDeadline(t *testing.T) {
	started := utiltesting.MakeTrainJob("tj", "ns").StartTime(now).Deadline(60)
	cases := map[string]struct {
		trainJob   *trainer.TrainJob
		wantDue    time.Time
		wantPaused bool
	}{
		"running: startTime plus the deadline": {trainJob: started.Clone().Obj(), wantDue: now.Add(time.Minute)},
		"no deadline":                          {trainJob: utiltesting.MakeTrainJob("tj", "ns").StartTime(now).Obj()},
		"not started":                          {trainJob: utiltesting.MakeTrainJob("tj", "ns").Deadline(60).Obj()},
		"suspended: paused":                    {trainJob: started.Clone().Suspend(true).Obj(), wantPaused: true},
		"created suspended: paused":            {trainJob: utiltesting.MakeTrainJob("tj", "ns").Suspend(true).Deadline(60).Obj(), wantPaused: true},
		"finished: over":                       {trainJob: started.Clone().Condition(complete(now)).Obj()},
		"finished while suspended: over":       {trainJob: started.Clone().Suspend(true).Condition(complete(now)).Obj()},
		"managed by MultiKueue: not here":      {trainJob: started.Clone().ManagedBy(MultiKueue).Obj()},
		"beyond any clock":                     {trainJob: utiltesting.MakeTrainJob("tj", "ns").StartTime(now).Deadline(9_000_000_000_000_000_000).Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			due, ok := ActiveDeadline(tc.trainJob)
			if ok != !tc.wantDue.IsZero() || !due.Equal(tc.wantDue) {
				t.Errorf("ActiveDeadline = %s, %v; want %s", due, ok, tc.wantDue)
			}
			if got := DeadlinePaused(tc.trainJob); got != tc.wantPaused {
				t.Errorf("DeadlinePaused = %v, want %v", got, tc.wantPaused)
			}
		})
	}
}

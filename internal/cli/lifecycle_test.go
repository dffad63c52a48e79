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

package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// trainctl get and describe show what the controllers will do: when a
// TrainJob is deleted and by which rule, and when its deadline falls, are
// the lifecycle layer's answers, for TrainJobs of every kind, one managed
// by MultiKueue included.
func TestShowsWhatTheControllersDo(t *testing.T) {
	created := cond(trainer.TrainJobCreated, "True", trainer.TrainJobJobsCreatedReason, now.Add(-time.Hour))
	done := cond(trainer.TrainJobComplete, "True", trainer.TrainJobJobsCompletedReason, now.Add(-2*time.Minute))
	suspended := cond(trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason, now.Add(-time.Minute))
	base := func(name string) *utiltesting.TrainJobWrapper {
		return utiltesting.MakeTrainJob(name, "ns").UID(name).Condition(created)
	}
	deleting := base("deleting").Condition(done).TTL(0).Obj()
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	tjs := []*trainer.TrainJob{
		base("running").StartTime(now.Add(-10 * time.Minute)).Deadline(3600).Obj(),
		base("suspended").Suspend(true).StartTime(now.Add(-10 * time.Minute)).Deadline(3600).Condition(suspended).Obj(),
		base("waiting").Suspend(true).Condition(suspended).Obj(),
		base("queued").Label(trainer.KueueQueueNameLabel, "q").Suspend(true).StartTime(now.Add(-10 * time.Minute)).Condition(suspended).Obj(),
		base("ttl").Condition(done).TTL(300).Obj(),
		base("retained").Condition(done).Obj(),
		base("multikueue").ManagedBy(lifecycle.MultiKueue).Condition(done).TTL(0).Obj(),
		base("multikueue-running").ManagedBy(lifecycle.MultiKueue).StartTime(now.Add(-10 * time.Minute)).Deadline(60).Obj(),
		deleting,
	}
	retention := &configv1alpha1.TrainJobRetentionPolicy{
		AfterFinished:  &metav1.Duration{Duration: time.Hour},
		AfterSuspended: &metav1.Duration{Duration: 24 * time.Hour},
	}
	for _, tj := range tjs {
		t.Run(tj.Name, func(t *testing.T) {
			exp := lifecycle.ExpiryOf(tj, retention)
			var out bytes.Buffer
			if err := (&description{tj: tj}).print(&out, retention, now); err != nil {
				t.Fatal(err)
			}
			timeline := out.String()
			deleted := deletedIn(tj, retention, now)
			if exp == nil {
				if deleted != "-" || strings.Contains(timeline, "deletion due") {
					t.Errorf("never deleted by the controllers, yet get shows %q and describe:\n%s", deleted, timeline)
				}
			} else {
				want := until(exp.At, now) + " (" + exp.Policy + ")"
				if deleted != want || !strings.Contains(timeline, "deletion due ("+exp.Policy+")") {
					t.Errorf("deleted by %s at %s, yet get shows %q and describe:\n%s", exp.Policy, exp.At, deleted, timeline)
				}
			}
			deadline := deadlineIn(tj, now)
			due, runs := lifecycle.ActiveDeadline(tj)
			switch {
			case lifecycle.ManagedElsewhere(tj) && deadline != "-":
				t.Errorf("managed elsewhere, yet get shows a deadline %q", deadline)
			case runs && !lifecycle.ManagedElsewhere(tj) && deadline != until(due, now):
				t.Errorf("deadline at %s, yet get shows %q", due, deadline)
			case lifecycle.DeadlinePaused(tj) && deadline != "paused":
				t.Errorf("deadline paused, yet get shows %q", deadline)
			}
		})
	}
}

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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

var now = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func cond(t, status, reason string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, LastTransitionTime: metav1.NewTime(at)}
}

func TestTable(t *testing.T) {
	created := trainer.JobStatus{Name: "node", Replicas: 1, Trainer: true}
	make := func(name string) *utiltesting.TrainJobWrapper {
		w := utiltesting.MakeTrainJob(name, "ns")
		w.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
		return w
	}
	tjs := []trainer.TrainJob{
		*make("pending").Condition(cond(trainer.TrainJobCreated, "False", trainer.TrainJobRuntimeNotFoundReason, now)).Obj(),
		*make("running").NumNodes(4).JobsStatus(created).StartTime(now.Add(-10*time.Minute)).Deadline(3600).
			TrainerStatus(45, 600, now.Add(-2*time.Minute)).Obj(),
		*make("suspended").Suspend(true).JobsStatus(created).StartTime(now.Add(-10 * time.Minute)).Deadline(3600).
			Condition(cond(trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason, now.Add(-time.Minute))).Obj(),
		// Waiting to be started or admitted: afterSuspended does not count.
		*make("waiting").Suspend(true).JobsStatus(created).
			Condition(cond(trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason, now.Add(-time.Minute))).Obj(),
		*make("done").JobsStatus(created).TTL(300).StartTime(now.Add(-30*time.Minute)).TrainerStatus(100, 0, now.Add(-2*time.Minute)).
			Condition(cond(trainer.TrainJobComplete, "True", trainer.TrainJobJobsCompletedReason, now.Add(-2*time.Minute))).Obj(),
		*make("failed").JobsStatus(created).StartTime(now.Add(-30 * time.Minute)).
			Condition(cond(trainer.TrainJobFailed, "True", trainer.TrainJobDeadlineExceededReason, now.Add(-2*time.Minute))).Obj(),
	}
	retention := &configv1alpha1.TrainJobRetentionPolicy{
		AfterFinished:  &metav1.Duration{Duration: time.Hour},
		AfterSuspended: &metav1.Duration{Duration: 24 * time.Hour},
	}
	var out bytes.Buffer
	if err := printTable(&out, tjs, retention, nil, false, now); err != nil {
		t.Fatal(err)
	}
	want := `NAME        STATE                       NODES   PROGRESS   ETA   STARTED   DEADLINE IN   DELETED IN                     AGE
pending     Created (RuntimeNotFound)   -       -          -     -         -             -                              60m
running     Running                     4       45%        8m    10m ago   50m           -                              60m
suspended   Suspended                   -       -          -     10m ago   paused        23h (afterSuspended)           60m
waiting     Suspended                   -       -          -     -         -             -                              60m
done        Complete                    -       100%       -     30m ago   -             3m (ttlSecondsAfterFinished)   60m
failed      Failed (DeadlineExceeded)   -       -          -     30m ago   -             58m (afterFinished)            60m
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

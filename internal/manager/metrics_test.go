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

package manager

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestMetricsView(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	started := created.Add(4 * time.Second)
	failedAt := created.Add(66 * time.Second)
	cond := func(typ, reason string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(failedAt)}
	}
	base := func() *utiltesting.TrainJobWrapper {
		w := utiltesting.MakeTrainJob("tj", "ns").UID("u")
		w.CreationTimestamp = metav1.NewTime(created)
		return w
	}
	for name, tc := range map[string]struct {
		tj   *trainer.TrainJob
		want metrics.TrainJob
	}{
		"new": {
			tj:   base().Obj(),
			want: metrics.TrainJob{UID: "u", State: "Created", Created: created},
		},
		"refused": {
			tj:   base().Condition(cond(trainer.TrainJobCreated, trainer.TrainJobJobRefusedReason, metav1.ConditionFalse)).Obj(),
			want: metrics.TrainJob{UID: "u", State: "Created", Reason: "JobRefused", Created: created},
		},
		"running": {
			tj:   base().StartTime(started).JobsStatus(trainer.JobStatus{Name: "node"}).Obj(),
			want: metrics.TrainJob{UID: "u", State: "Running", Created: created, Started: started},
		},
		"suspending": {
			tj: base().Suspend(true).StartTime(started).
				Condition(cond(trainer.TrainJobSuspended, trainer.TrainJobSuspendingReason, metav1.ConditionFalse)).Obj(),
			want: metrics.TrainJob{UID: "u", State: "Suspending", Created: created, Started: started},
		},
		"deadline exceeded": {
			tj: base().Deadline(60).StartTime(started).
				Condition(cond(trainer.TrainJobFailed, trainer.TrainJobDeadlineExceededReason, metav1.ConditionTrue)).Obj(),
			want: metrics.TrainJob{
				UID: "u", State: "Failed", Reason: "DeadlineExceeded", Created: created, Started: started,
				DeadlineDue: started.Add(time.Minute), DeadlineEnforced: failedAt,
			},
		},
		"complete": {
			tj: base().StartTime(started).
				Condition(cond(trainer.TrainJobComplete, trainer.TrainJobJobsCompletedReason, metav1.ConditionTrue)).Obj(),
			want: metrics.TrainJob{UID: "u", State: "Complete", Reason: "AllJobsCompleted", Created: created, Started: started},
		},
		"a reason of another controller": {
			tj: base().ManagedBy("kueue.x-k8s.io/multikueue").
				Condition(cond(trainer.TrainJobFailed, "SomethingElse", metav1.ConditionTrue)).Obj(),
			want: metrics.TrainJob{UID: "u", State: "Failed", Reason: "Other", Created: created},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, metricsView(tc.tj)); diff != "" {
				t.Errorf("metricsView (-want +got):\n%s", diff)
			}
		})
	}
}

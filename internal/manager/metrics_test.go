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
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestMetricsView(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	started := created.Add(4 * time.Second)
	changed := created.Add(66 * time.Second)
	cond := func(typ, reason string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(changed)}
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
		"new: since its creation": {
			tj:   base().Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Created", Since: created},
		},
		"refused: since Created=False": {
			tj:   base().Condition(cond(trainer.TrainJobCreated, trainer.TrainJobJobRefusedReason, metav1.ConditionFalse)).Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Created", Reason: "JobRefused", Since: changed},
		},
		"running: since it started": {
			tj:   base().StartTime(started).JobsStatus(trainer.JobStatus{Name: "node"}).Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Running", Since: started},
		},
		"resumed: since the resume, its start": {
			tj: base().StartTime(started).JobsStatus(trainer.JobStatus{Name: "node"}).
				Condition(cond(trainer.TrainJobSuspended, trainer.TrainJobResumedReason, metav1.ConditionFalse)).Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Running", Since: started},
		},
		"suspending: since Suspended=False Suspending": {
			tj: base().Suspend(true).StartTime(started).
				Condition(cond(trainer.TrainJobSuspended, trainer.TrainJobSuspendingReason, metav1.ConditionFalse)).Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Suspending", Since: changed},
		},
		"suspending, not yet recorded: no time": {
			tj: base().Suspend(true).StartTime(started).
				Condition(cond(trainer.TrainJobSuspended, trainer.TrainJobResumedReason, metav1.ConditionFalse)).Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Suspending"},
		},
		"suspended: since Suspended=True": {
			tj: base().Suspend(true).StartTime(started).
				Condition(cond(trainer.TrainJobSuspended, trainer.TrainJobSuspendedReason, metav1.ConditionTrue)).Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Suspended", Since: changed},
		},
		"deadline exceeded": {
			tj: base().Deadline(60).StartTime(started).
				Condition(cond(trainer.TrainJobFailed, trainer.TrainJobDeadlineExceededReason, metav1.ConditionTrue)).Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Failed", Reason: "DeadlineExceeded", Since: changed},
		},
		"running, with progress reported": {
			tj:   base().StartTime(started).JobsStatus(trainer.JobStatus{Name: "node"}).TrainerStatus(45, 600, changed).Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Running", Since: started, Progress: &metrics.Progress{Percent: ptr.To[int32](45), RemainingSeconds: ptr.To[int32](600), Reported: changed}},
		},
		"complete, with progress reported: none exported": {
			tj: base().StartTime(started).TrainerStatus(100, 0, changed).
				Condition(cond(trainer.TrainJobComplete, trainer.TrainJobJobsCompletedReason, metav1.ConditionTrue)).Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Complete", Reason: "AllJobsCompleted", Since: changed},
		},
		"complete": {
			tj: base().StartTime(started).
				Condition(cond(trainer.TrainJobComplete, trainer.TrainJobJobsCompletedReason, metav1.ConditionTrue)).Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Complete", Reason: "AllJobsCompleted", Since: changed},
		},
		"a reason of another controller": {
			tj: base().ManagedBy("kueue.x-k8s.io/multikueue").
				Condition(cond(trainer.TrainJobFailed, "SomethingElse", metav1.ConditionTrue)).Obj(),
			want: metrics.TrainJob{Namespace: "ns", Name: "tj", State: "Failed", Reason: "Other", Since: changed},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, metricsView(tc.tj)); diff != "" {
				t.Errorf("metricsView (-want +got):\n%s", diff)
			}
		})
	}
}

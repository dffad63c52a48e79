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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestState(t *testing.T) {
	cond := func(t, status, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason}
	}
	waiting := trainer.JobStatus{Name: "node", Replicas: 1, Waiting: true}
	created := trainer.JobStatus{Name: "init", Replicas: 1}
	restarting := utiltesting.MakeTrainJob("tj", "ns").JobsStatus(waiting).Obj()
	restarting.Status.Restarts = 1
	cases := map[string]struct {
		trainJob *trainer.TrainJob
		want     string
	}{
		"new":                                {utiltesting.MakeTrainJob("tj", "ns").Obj(), trainer.TrainJobStateCreated},
		"runtime missing":                    {utiltesting.MakeTrainJob("tj", "ns").Condition(cond(trainer.TrainJobCreated, "False", trainer.TrainJobRuntimeNotFoundReason)).Obj(), trainer.TrainJobStateCreated},
		"pinned, no Job created yet":         {utiltesting.MakeTrainJob("tj", "ns").JobsStatus(waiting).Obj(), trainer.TrainJobStateCreated},
		"first stage created":                {utiltesting.MakeTrainJob("tj", "ns").JobsStatus(created, waiting).Obj(), trainer.TrainJobStateRunning},
		"a later stage refused":              {utiltesting.MakeTrainJob("tj", "ns").JobsStatus(created, waiting).Condition(cond(trainer.TrainJobCreated, "False", trainer.TrainJobJobRefusedReason)).Obj(), trainer.TrainJobStateCreated},
		"restarting":                         {restarting, trainer.TrainJobStateRunning},
		"Created=True of an earlier version": {utiltesting.MakeTrainJob("tj", "ns").Condition(cond(trainer.TrainJobCreated, "True", trainer.TrainJobJobsCreatedReason)).Obj(), trainer.TrainJobStateRunning},
		"suspending":                         {utiltesting.MakeTrainJob("tj", "ns").Suspend(true).JobsStatus(created).Obj(), trainer.TrainJobStateSuspending},
		"suspended":                          {utiltesting.MakeTrainJob("tj", "ns").Suspend(true).Condition(cond(trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason)).Obj(), trainer.TrainJobStateSuspended},
		"resumed":                            {utiltesting.MakeTrainJob("tj", "ns").JobsStatus(created).Condition(cond(trainer.TrainJobSuspended, "False", trainer.TrainJobResumedReason)).Obj(), trainer.TrainJobStateRunning},
		"complete":                           {utiltesting.MakeTrainJob("tj", "ns").Condition(cond(trainer.TrainJobComplete, "True", trainer.TrainJobJobsCompletedReason)).Obj(), trainer.TrainJobStateComplete},
		"failed while suspended":             {utiltesting.MakeTrainJob("tj", "ns").Suspend(true).Condition(cond(trainer.TrainJobFailed, "True", trainer.TrainJobDeadlineExceededReason)).Obj(), trainer.TrainJobStateFailed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := State(tc.trainJob); got != tc.want {
				t.Errorf("State = %s, want %s", got, tc.want)
			}
		})
	}
}

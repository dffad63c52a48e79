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

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// What a failed Job does under a failure policy, as JobSet decides it.
func TestFailurePolicy(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().ReplicatedJobs(
		utiltesting.MakeReplicatedJob("init").Obj(), utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj())
	base := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed")
	plan, err := jobplan.Build(base.Obj(), jobplan.Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch-distributed", Spec: spec.Obj()})
	if err != nil {
		t.Fatal(err)
	}
	children := func(failedReason string) []child {
		var out []child
		for i, job := range plan.Jobs {
			c, _ := childOf(job)
			w := utiltesting.WrapJob(c.job).Active(1)
			if i == 1 {
				w = utiltesting.WrapJob(c.job).Failed(failedReason, earlier.Add(time.Minute))
			}
			c.job = w.Obj()
			out = append(out, c)
		}
		return out
	}
	running := func(policy *trainer.FailurePolicy, restarts, counted int32) *trainer.TrainJob {
		tj := base.Clone().StartTime(earlier).
			JobsStatus(trainer.JobStatus{Name: "init", Replicas: 1}, trainer.JobStatus{Name: "worker", Replicas: 2}).Obj()
		tj.Status.SuccessPolicy = &trainer.SuccessPolicy{Operator: trainer.OperatorAll}
		tj.Status.FailurePolicy, tj.Status.Restarts, tj.Status.RestartsCountTowardsMax = policy, restarts, counted
		return tj
	}
	failJobSet := trainer.FailurePolicyRule{Name: "oom", Action: trainer.FailJobSet, OnJobFailureMessagePatterns: []string{"backoff limit"}, OnJobFailureReasons: []string{"BackoffLimitExceeded"}}
	cases := map[string]struct {
		trainJob     *trainer.TrainJob
		failedReason string
		wantRestart  string // the event's reason; "" for none
		wantFailed   string // the Failed reason; "" for none
		wantRestarts int32
		wantCounted  int32
	}{
		"no failure policy: the TrainJob fails": {
			trainJob: running(nil, 0, 0), failedReason: "BackoffLimitExceeded", wantFailed: trainer.TrainJobJobFailedReason,
		},
		"no rule matches: restart, counted": {
			trainJob: running(&trainer.FailurePolicy{MaxRestarts: 2}, 0, 0), failedReason: "BackoffLimitExceeded",
			wantRestart: "RestartJobSetFailurePolicyAction", wantRestarts: 1, wantCounted: 1,
		},
		"the restarts are spent: ReachedMaxRestarts": {
			trainJob: running(&trainer.FailurePolicy{MaxRestarts: 2}, 2, 2), failedReason: "BackoffLimitExceeded",
			wantFailed: trainer.TrainJobReachedMaxRestartsReason, wantRestarts: 2, wantCounted: 2,
		},
		"maxRestarts 0: the first failure fails it, as in JobSet": {
			trainJob: running(&trainer.FailurePolicy{}, 0, 0), failedReason: "BackoffLimitExceeded",
			wantFailed: trainer.TrainJobReachedMaxRestartsReason,
		},
		"a FailJobSet rule matching reason and message": {
			trainJob: running(&trainer.FailurePolicy{MaxRestarts: 5, Rules: []trainer.FailurePolicyRule{failJobSet}}, 0, 0), failedReason: "BackoffLimitExceeded",
			wantFailed: trainer.TrainJobFailJobSetReason,
		},
		"a FailJobSet rule whose reason does not match: restart": {
			trainJob: running(&trainer.FailurePolicy{MaxRestarts: 5, Rules: []trainer.FailurePolicyRule{failJobSet}}, 0, 0), failedReason: "DeadlineExceeded",
			wantRestart: "RestartJobSetFailurePolicyAction", wantRestarts: 1, wantCounted: 1,
		},
		"a rule for another replicated Job: restart": {
			trainJob:     running(&trainer.FailurePolicy{MaxRestarts: 5, Rules: []trainer.FailurePolicyRule{{Name: "init", Action: trainer.FailJobSet, TargetReplicatedJobs: []string{"init"}}}}, 0, 0),
			failedReason: "BackoffLimitExceeded", wantRestart: "RestartJobSetFailurePolicyAction", wantRestarts: 1, wantCounted: 1,
		},
		"restart ignoring maxRestarts, with none left": {
			trainJob:     running(&trainer.FailurePolicy{MaxRestarts: 1, Rules: []trainer.FailurePolicyRule{{Name: "any", Action: trainer.RestartJobSetAndIgnoreMaxRestarts}}}, 3, 1),
			failedReason: "BackoffLimitExceeded", wantRestart: "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction", wantRestarts: 4, wantCounted: 1,
		},
		"the deadline passed: DeadlineExceeded, no restart": {
			trainJob: func() *trainer.TrainJob {
				tj := running(&trainer.FailurePolicy{MaxRestarts: 5}, 0, 0)
				tj.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
				return tj
			}(),
			failedReason: "BackoffLimitExceeded", wantFailed: trainer.TrainJobDeadlineExceededReason,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obs := &observed{children: children(tc.failedReason), plan: plan}
			d := decide(tc.trainJob, obs, metav1.NewTime(now))
			if err := d.settle(metav1.NewTime(now)); err != nil {
				t.Fatal(err)
			}
			gotRestart := ""
			if d.restart != nil {
				gotRestart = d.restart.reason
			}
			gotFailed := ""
			if c := d.next.FinishedCondition(); c != nil && c.Type == trainer.TrainJobFailed {
				gotFailed = c.Reason
			}
			if gotRestart != tc.wantRestart || gotFailed != tc.wantFailed {
				t.Errorf("restart %q, failed %q; want restart %q, failed %q (conditions %+v)", gotRestart, gotFailed, tc.wantRestart, tc.wantFailed, d.next.Status.Conditions)
			}
			if d.next.Status.Restarts != tc.wantRestarts || d.next.Status.RestartsCountTowardsMax != tc.wantCounted {
				t.Errorf("restarts %d (%d counted), want %d (%d)", d.next.Status.Restarts, d.next.Status.RestartsCountTowardsMax, tc.wantRestarts, tc.wantCounted)
			}
			if d.restart == nil {
				return
			}
			// The new attempt starts from nothing: nothing recorded or
			// counted, every replicated Job waiting, nothing created until
			// the Jobs of the attempt before, all of them, are gone.
			want := []trainer.JobStatus{{Name: "init", Replicas: 1, Waiting: true}, {Name: "worker", Replicas: 2, Waiting: true}}
			if diff := cmp.Diff(want, d.next.Status.JobsStatus); diff != "" {
				t.Errorf("jobsStatus after the restart (-want +got):\n%s", diff)
			}
			if len(d.create.jobs) != 0 || len(d.children) != 0 || len(d.previous) != len(plan.Jobs) {
				t.Errorf("to create %d, children %d, previous %d; want 0, 0, %d", len(d.create.jobs), len(d.children), len(d.previous), len(plan.Jobs))
			}
		})
	}
}

// The Jobs of earlier attempts are never children: they are deleted, and
// the Jobs of their names created once they are gone.
func TestRestartAttemptsOfJobs(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", testNS).Obj()
	tj.Status.Restarts = 2
	job := utiltesting.WrapJob(&batchv1.Job{}).Obj()
	for label, want := range map[string]bool{"": true, "0": true, "1": true, "2": false, "3": false, "x": true} {
		job.Labels = map[string]string{}
		if label != "" {
			job.Labels[trainer.JobSetRestartAttemptLabel] = label
		}
		if got := ofEarlierAttempt(tj, job); got != want {
			t.Errorf("restart-attempt %q at restarts 2: earlier %t, want %t", label, got, want)
		}
	}
}

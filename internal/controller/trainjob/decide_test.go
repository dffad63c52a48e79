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
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The decision is pure: these tests give it what a reconcile observed and
// what the create phase did, and read what it decided, with no client.
func TestDecide(t *testing.T) {
	twoWorkers := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj())
	threeWorkers := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Replicas(3).Obj())
	base := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed")
	pinned := trainer.JobStatus{Name: "worker", Replicas: 2}
	waitingPinned := trainer.JobStatus{Name: "worker", Replicas: 2, Waiting: true}
	// tj-worker-0 failed with BackoffLimitExceeded, tj-worker-1 runs.
	worker0Failed := trainer.TrainJobStatus{
		Conditions: []metav1.Condition{
			cond(trainer.TrainJobFailed, "True", trainer.TrainJobJobFailedReason, "Job tj-worker-0 failed: BackoffLimitExceeded: Job has reached the specified backoff limit", now),
		},
		JobsStatus: []trainer.JobStatus{{Name: "worker", Replicas: 2, Failed: 1, FailedReplicas: []int32{0}}},
		StartTime:  ptr.To(metav1.NewTime(earlier)),
	}
	created := base.Clone().StartTime(earlier).JobsStatus(pinned)
	planOf := func(tj *trainer.TrainJob, spec *utiltesting.RuntimeSpecWrapper) *jobplan.Plan {
		t.Helper()
		plan, err := jobplan.Build(tj, jobplan.Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch-distributed", Spec: spec.Obj()})
		if err != nil {
			t.Fatalf("building children: %v", err)
		}
		return plan
	}
	childOfPlan := func(tj *trainer.TrainJob, spec *utiltesting.RuntimeSpecWrapper, i int) child {
		c, ok := childOf(planOf(tj, spec).Jobs[i])
		if !ok {
			t.Fatalf("child %d has no replicated-job labels", i)
		}
		return c
	}
	with := func(c child, f func(*utiltesting.JobWrapper) *utiltesting.JobWrapper) child {
		c.job = f(utiltesting.WrapJob(c.job)).Obj()
		return c
	}
	otherTrainJobs := utiltesting.WrapJob(planOf(base.Clone().UID("uid-0").Obj(), twoWorkers).Jobs[1]).Obj()
	// staged: an initializer, then two workers once it is Complete.
	staged := func() *utiltesting.RuntimeSpecWrapper {
		workers := utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj()
		workers.DependsOn = []trainer.DependsOn{{Name: "init", Status: trainer.DependsOnComplete}}
		return utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("init").Obj(), workers)
	}()
	stagedAll := &trainer.SuccessPolicy{Operator: trainer.OperatorAll}
	initCreated := trainer.JobStatus{Name: "init", Replicas: 1}
	stagedTJ := base.Clone().StartTime(earlier).JobsStatus(initCreated, waitingPinned)
	stagedTJ.Status.SuccessPolicy = stagedAll

	cases := map[string]struct {
		trainJob *trainer.TrainJob
		observed observed
		// createdAll is set when the create phase created every Job it
		// was given.
		createdAll bool

		wantCreate         []string
		wantSnapshot       bool
		wantCreatedMessage string
		wantFinished       bool
		wantStatus         trainer.TrainJobStatus
		wantDeadline       time.Time
		wantRetryAfter     time.Duration
	}{
		"nothing created yet: the shape is pinned, every Job is to be created": {
			trainJob:           base.Clone().Obj(),
			observed:           observed{plan: planOf(base.Obj(), twoWorkers)},
			createdAll:         true,
			wantCreate:         []string{"tj-worker-0", "tj-worker-1"},
			wantCreatedMessage: "Created 2 Jobs from ClusterTrainingRuntime torch-distributed",
			wantStatus: trainer.TrainJobStatus{
				JobsStatus:    []trainer.JobStatus{pinned},
				SuccessPolicy: &trainer.SuccessPolicy{Operator: trainer.OperatorAll},
				Network:       pinnedNetwork,
				StartTime:     ptr.To(metav1.NewTime(now)),
			},
		},
		"a stage waits: only the Jobs of the first step are created, after the runtime's snapshot": {
			trainJob: base.Clone().Obj(),
			observed: observed{
				plan:    planOf(base.Obj(), staged),
				runtime: jobplan.Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch-distributed", Spec: staged.Obj()},
			},
			wantSnapshot:       true,
			createdAll:         true,
			wantCreate:         []string{"tj-init-0"},
			wantCreatedMessage: "Created 1 of 3 Jobs from ClusterTrainingRuntime torch-distributed; replicated Job worker waits for init to be Complete",
			wantStatus: trainer.TrainJobStatus{
				JobsStatus:    []trainer.JobStatus{initCreated, waitingPinned},
				SuccessPolicy: stagedAll,
				Network:       pinnedNetwork,
				StartTime:     ptr.To(metav1.NewTime(now)),
			},
		},
		"a stage's dependency is still running: nothing is created, and its Jobs are not taken for gone": {
			trainJob: stagedTJ.Clone().Obj(),
			observed: observed{plan: planOf(base.Obj(), staged), children: []child{with(childOfPlan(base.Obj(), staged, 0), func(j *utiltesting.JobWrapper) *utiltesting.JobWrapper { return j.Active(1) })}},
			wantStatus: func() trainer.TrainJobStatus {
				st := *stagedTJ.Clone().Obj().Status.DeepCopy()
				st.JobsStatus[0].Ready, st.JobsStatus[0].Active = 1, 1
				return st
			}(),
		},
		"a stage's dependency completed: the next stage is created, and waits no more": {
			trainJob:           stagedTJ.Clone().Obj(),
			observed:           observed{plan: planOf(base.Obj(), staged), children: []child{with(childOfPlan(base.Obj(), staged, 0), func(j *utiltesting.JobWrapper) *utiltesting.JobWrapper { return j.Succeeded(now) })}},
			createdAll:         true,
			wantCreate:         []string{"tj-worker-0", "tj-worker-1"},
			wantCreatedMessage: "Created 3 Jobs from ClusterTrainingRuntime torch-distributed",
			wantStatus: trainer.TrainJobStatus{
				JobsStatus: []trainer.JobStatus{
					{Name: "init", Replicas: 1, Succeeded: 1, SucceededReplicas: []int32{0}},
					{Name: "worker", Replicas: 2},
				},
				SuccessPolicy: stagedAll,
				StartTime:     ptr.To(metav1.NewTime(earlier)),
			},
		},
		"a name held by another TrainJob's Job: that Job is not created, and the TrainJob waits": {
			trainJob:   base.Clone().Obj(),
			observed:   observed{plan: planOf(base.Obj(), twoWorkers), others: []*batchv1.Job{otherTrainJobs}},
			createdAll: true,
			wantCreate: []string{"tj-worker-0"},
			wantStatus: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{func() metav1.Condition {
					c := *nameTaken(base.Obj(), "Job", otherTrainJobs)
					c.LastTransitionTime = metav1.NewTime(now)
					return c
				}()},
				// Still waiting: a Job of it is not created.
				JobsStatus:    []trainer.JobStatus{waitingPinned},
				SuccessPolicy: &trainer.SuccessPolicy{Operator: trainer.OperatorAll},
				Network:       pinnedNetwork,
				StartTime:     ptr.To(metav1.NewTime(now)),
			},
			wantRetryAfter: waitRetry,
		},
		"the runtime changed after the first Jobs were created: nothing more is created": {
			trainJob: base.Clone().StartTime(earlier).JobsStatus(waitingPinned).Obj(),
			observed: observed{
				plan:     planOf(base.Obj(), threeWorkers),
				children: []child{childOfPlan(base.Obj(), twoWorkers, 0)},
			},
			wantStatus: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{cond(trainer.TrainJobCreated, "False", trainer.TrainJobRuntimeChangedReason,
					"ClusterTrainingRuntime torch-distributed changed after the first Jobs of the TrainJob were created: its replicated Jobs were worker×2 and are now worker×3. The TrainJob keeps the replicated Jobs it started with: restore the runtime, or delete the TrainJob", now)},
				JobsStatus: []trainer.JobStatus{waitingPinned},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
		},
		"a child failed: Failed, nothing created, its outcome recorded": {
			trainJob: created.Clone().Obj(),
			observed: observed{children: []child{
				with(childOfPlan(created.Obj(), twoWorkers, 0), func(w *utiltesting.JobWrapper) *utiltesting.JobWrapper {
					return w.Failed("BackoffLimitExceeded", earlier)
				}),
				childOfPlan(created.Obj(), twoWorkers, 1),
			}},
			wantFinished: true,
			wantStatus:   worker0Failed,
		},
		"a child with the Job controller's verdict, its Pods terminating: Failed at once": {
			trainJob: created.Clone().Obj(),
			observed: observed{children: []child{
				with(childOfPlan(created.Obj(), twoWorkers, 0), func(w *utiltesting.JobWrapper) *utiltesting.JobWrapper {
					return w.Active(2).FailureTarget("BackoffLimitExceeded", earlier)
				}),
				childOfPlan(created.Obj(), twoWorkers, 1),
			}},
			wantFinished: true,
			wantStatus:   worker0Failed,
		},
		"a child gone without its outcome: Failed": {
			trainJob: created.Clone().Obj(),
			observed: observed{
				children: []child{childOfPlan(created.Obj(), twoWorkers, 1)},
				vanished: []missingChild{{job: "tj-worker-0", step: "worker", replica: 0}},
			},
			wantFinished: true,
			wantStatus: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobFailed, "True", trainer.TrainJobJobDeletedReason,
						"Job tj-worker-0 disappeared before its outcome was recorded (its trainer.kubeflow.org/job-tracking finalizer was removed by someone else); it is not run again", now),
				},
				JobsStatus: []trainer.JobStatus{{Name: "worker", Replicas: 2, Failed: 1, FailedReplicas: []int32{0}}},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
		},
		"being deleted: nothing is recorded or created": {
			trainJob: func() *trainer.TrainJob {
				tj := created.Clone().Obj()
				tj.DeletionTimestamp = ptr.To(metav1.NewTime(now))
				return tj
			}(),
			observed: observed{children: []child{
				with(childOfPlan(created.Obj(), twoWorkers, 0), func(w *utiltesting.JobWrapper) *utiltesting.JobWrapper {
					return w.Failed("BackoffLimitExceeded", earlier)
				}),
			}},
			wantStatus: trainer.TrainJobStatus{
				JobsStatus: []trainer.JobStatus{pinned},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
		},
		"the active deadline runs: when it falls": {
			trainJob: created.Clone().Deadline(7200).Obj(),
			observed: observed{children: []child{childOfPlan(created.Obj(), twoWorkers, 0), childOfPlan(created.Obj(), twoWorkers, 1)}},
			wantStatus: trainer.TrainJobStatus{
				JobsStatus: []trainer.JobStatus{pinned},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
			wantDeadline: earlier.Add(2 * time.Hour),
		},
		"the active deadline passed: Failed": {
			trainJob:     created.Clone().Deadline(60).Obj(),
			observed:     observed{children: []child{childOfPlan(created.Obj(), twoWorkers, 0), childOfPlan(created.Obj(), twoWorkers, 1)}},
			wantFinished: true,
			wantStatus: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobFailed, "True", trainer.TrainJobDeadlineExceededReason,
						"The TrainJob was active longer than its activeDeadlineSeconds (60s since "+earlier.Format(time.RFC3339)+")", now),
				},
				JobsStatus: []trainer.JobStatus{pinned},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
			wantDeadline: earlier.Add(time.Minute),
		},
		"the active deadline passed before the next stage was created: Failed, nothing created": {
			// The manager was down when the deadline fell, and init
			// completed meanwhile: the workers are not started.
			trainJob: stagedTJ.Clone().Deadline(60).Obj(),
			observed: observed{plan: planOf(base.Obj(), staged), children: []child{with(childOfPlan(base.Obj(), staged, 0), func(j *utiltesting.JobWrapper) *utiltesting.JobWrapper {
				return j.Succeeded(earlier.Add(time.Second))
			})}},
			wantFinished: true,
			wantStatus: trainer.TrainJobStatus{
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobFailed, "True", trainer.TrainJobDeadlineExceededReason,
						"The TrainJob was active longer than its activeDeadlineSeconds (60s since "+earlier.Format(time.RFC3339)+")", now),
				},
				JobsStatus:    []trainer.JobStatus{{Name: "init", Replicas: 1, Succeeded: 1, SucceededReplicas: []int32{0}}, waitingPinned},
				SuccessPolicy: stagedAll,
				StartTime:     ptr.To(metav1.NewTime(earlier)),
			},
			wantDeadline: earlier.Add(time.Minute),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.trainJob.DeepCopy()
			d := decide(tc.trainJob, &tc.observed, metav1.NewTime(now))
			var toCreate []string
			if d.create != nil {
				for _, job := range d.create.jobs {
					toCreate = append(toCreate, job.Name)
				}
				if tc.createdAll {
					for _, job := range d.create.jobs {
						if c, ok := childOf(job); ok {
							d.create.created = append(d.create.created, c)
						}
					}
				}
			}
			if diff := cmp.Diff(tc.wantCreate, toCreate); diff != "" {
				t.Errorf("Jobs to create (-want +got):\n%s", diff)
			}
			snapshot := d.create != nil && slices.ContainsFunc(d.create.configMaps, func(cm *corev1.ConfigMap) bool {
				return cm.Name == snapshotKey(tc.trainJob).Name
			})
			if snapshot != tc.wantSnapshot {
				t.Errorf("runtime snapshot made: %t, want %t", snapshot, tc.wantSnapshot)
			}
			if err := d.settle(metav1.NewTime(now)); err != nil {
				t.Errorf("settle: %v", err)
			}
			if got := d.createdMessage(); got != tc.wantCreatedMessage {
				t.Errorf("message of the Created event = %q, want %q", got, tc.wantCreatedMessage)
			}
			if d.finished != tc.wantFinished {
				t.Errorf("finished = %t, want %t", d.finished, tc.wantFinished)
			}
			if diff := cmp.Diff(tc.wantStatus, d.next.Status, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if !d.deadline.Equal(tc.wantDeadline) {
				t.Errorf("deadline = %v, want %v", d.deadline, tc.wantDeadline)
			}
			if d.retryAfter != tc.wantRetryAfter {
				t.Errorf("retryAfter = %v, want %v", d.retryAfter, tc.wantRetryAfter)
			}
			if diff := cmp.Diff(before, tc.trainJob); diff != "" {
				t.Errorf("the observed TrainJob was changed (-before +after):\n%s", diff)
			}
		})
	}
}

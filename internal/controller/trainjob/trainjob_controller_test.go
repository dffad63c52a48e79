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
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

var (
	// pinnedNetwork is JobSet's default network, as a TrainJob's status
	// pins it when its first Jobs are created.
	pinnedNetwork = &trainer.Network{EnableDNSHostnames: ptr.To(true), PublishNotReadyAddresses: ptr.To(true)}
	now           = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	earlier       = now.Add(-time.Hour)
	testNS        = "ns"
)

type fixture struct {
	r         *Reconciler
	client    client.Client
	recorder  *events.FakeRecorder
	deadlines *metrics.DueTimes
	clock     *testingclock.FakeClock
}

func newFixture(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) *fixture {
	t.Helper()
	cl := utiltesting.NewClientBuilder(funcs, objs...).
		WithIndex(&batchv1.Job{}, childIndex, childIndexValue).
		WithIndex(&trainer.TrainJob{}, waitingIndex, waitingIndexValue).
		Build()
	rec := events.NewFakeRecorder(100)
	clk := testingclock.NewFakeClock(now)
	deadlines := metrics.NewDeadlineRemaining(clk)
	return &fixture{
		r:         NewReconciler(cl, cl, rec, WithClock(clk), WithDeadlines(deadlines)),
		client:    cl,
		recorder:  rec,
		deadlines: deadlines,
		clock:     clk,
	}
}

// reconcile reconciles the TrainJob as its queue would: again at once when
// the reconcile asks to come back at once (as one that finished the
// TrainJob does, to act on it).
func (f *fixture) reconcile(t *testing.T, name string) error {
	t.Helper()
	for range 3 {
		res, err := f.reconcileResult(t, name)
		if err != nil || res.RequeueAfter != time.Nanosecond {
			return err
		}
	}
	t.Fatalf("TrainJob %s asked to be reconciled again at once, three times", name)
	return nil
}

func (f *fixture) reconcileResult(t *testing.T, name string) (ctrl.Result, error) {
	t.Helper()
	return f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: testNS, Name: name}})
}

func (f *fixture) trainJob(t *testing.T, name string) *trainer.TrainJob {
	t.Helper()
	var tj trainer.TrainJob
	if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: name}, &tj); err != nil {
		t.Fatalf("getting TrainJob: %v", err)
	}
	return &tj
}

func (f *fixture) jobs(t *testing.T) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := f.client.List(context.Background(), &list, client.InNamespace(testNS)); err != nil {
		t.Fatalf("listing Jobs: %v", err)
	}
	return list.Items
}

func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// jobState is what the tests check of a child Job.
type jobState struct {
	Name       string
	Suspend    bool
	Finalizers []string
}

func jobStates(jobs []batchv1.Job) []jobState {
	var out []jobState
	for _, j := range jobs {
		out = append(out, jobState{Name: j.Name, Suspend: ptr.Deref(j.Spec.Suspend, false), Finalizers: j.Finalizers})
	}
	slices.SortFunc(out, func(a, b jobState) int { return cmpString(a.Name, b.Name) })
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var tracked = []string{trainer.JobTrackingFinalizer}

func cond(t, status, reason, message string, at time.Time) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(at)}
}

var (
	createdCond = func(n int, at time.Time) metav1.Condition {
		return cond(trainer.TrainJobCreated, "True", trainer.TrainJobJobsCreatedReason,
			"Created "+strconv.Itoa(n)+" Jobs from ClusterTrainingRuntime torch-distributed", at)
	}
	nodeStep       = trainer.JobStatus{Name: "node", Replicas: 1, Trainer: true}
	suspendingCond = func(at time.Time) metav1.Condition {
		return cond(trainer.TrainJobSuspended, "False", trainer.TrainJobSuspendingReason,
			"The TrainJob is being suspended: Pods of its Jobs are still running, or not every Job has been seen stopped yet", at)
	}
)

// wantRunning fails the test unless tj runs as Kubeflow's clients read it:
// no condition at all, and state Running.
func wantRunning(t *testing.T, tj *trainer.TrainJob) {
	t.Helper()
	if len(tj.Status.Conditions) > 0 || tj.Status.State != trainer.TrainJobStateRunning {
		t.Errorf("state %q, conditions %+v: want Running with no condition", tj.Status.State, tj.Status.Conditions)
	}
}

// childJob returns the child Job the controller creates for the TrainJob.
func childJob(t *testing.T, tj *trainer.TrainJob, spec *utiltesting.RuntimeSpecWrapper, index int) *batchv1.Job {
	t.Helper()
	plan, err := jobplan.Build(tj, jobplan.Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch-distributed", Spec: spec.Obj()})
	if err != nil {
		t.Fatalf("building children: %v", err)
	}
	return plan.Jobs[index]
}

func TestReconcile(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().Torch()
	twoWorkers := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj())
	base := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1")
	running := base.Clone().StartTime(earlier).JobsStatus(nodeStep)
	runningTJ := running.Obj()
	child := childJob(t, runningTJ, spec, 0)
	workers := base.Clone().RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed").StartTime(earlier).JobsStatus(trainer.JobStatus{Name: "worker", Replicas: 2})
	worker0 := childJob(t, workers.Obj(), twoWorkers, 0)
	worker1 := childJob(t, workers.Obj(), twoWorkers, 1)

	cases := map[string]struct {
		trainJob   *trainer.TrainJob
		runtime    *utiltesting.RuntimeSpecWrapper
		jobs       []*batchv1.Job
		wantStatus trainer.TrainJobStatus
		wantJobs   []jobState
		wantEvents []string
	}{
		"creates the Jobs and starts": {
			trainJob: base.Clone().Obj(),
			runtime:  spec,
			wantStatus: trainer.TrainJobStatus{
				State:         trainer.TrainJobStateRunning,
				JobsStatus:    []trainer.JobStatus{nodeStep},
				SuccessPolicy: &trainer.SuccessPolicy{Operator: trainer.OperatorAll},
				Network:       pinnedNetwork,
				StartTime:     ptr.To(metav1.NewTime(now)),
			},
			wantJobs:   []jobState{{Name: "tj-node-0", Finalizers: tracked}},
			wantEvents: []string{"Normal Created Created 1 Jobs from ClusterTrainingRuntime torch-distributed"},
		},
		"waits for a missing runtime": {
			trainJob: base.Clone().Obj(),
			wantStatus: trainer.TrainJobStatus{
				State: trainer.TrainJobStateCreated,
				Conditions: []metav1.Condition{cond(trainer.TrainJobCreated, "False", trainer.TrainJobRuntimeNotFoundReason,
					`ClusterTrainingRuntime "torch-distributed" not found (spec.runtimeRef); the TrainJob starts once it exists`, now)},
				// Not suspended, so active: its deadline runs.
				StartTime: ptr.To(metav1.NewTime(now)),
			},
			wantEvents: []string{`Warning RuntimeNotFound ClusterTrainingRuntime "torch-distributed" not found (spec.runtimeRef); the TrainJob starts once it exists`},
		},
		"reports a runtime it cannot run": {
			trainJob: base.Clone().Image("x").Obj(),
			runtime:  utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Obj()),
			wantStatus: trainer.TrainJobStatus{
				State: trainer.TrainJobStateCreated,
				Conditions: []metav1.Condition{cond(trainer.TrainJobCreated, "False", trainer.TrainJobInvalidRuntimeReason,
					`spec.trainer: Invalid value: "{...}": runtime ClusterTrainingRuntime/torch-distributed has no trainer step (a replicated Job labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer, or named "node") for the trainer overrides to apply to`, now)},
				StartTime: ptr.To(metav1.NewTime(now)),
			},
			wantEvents: []string{`Warning InvalidRuntime spec.trainer: Invalid value: "{...}": runtime ClusterTrainingRuntime/torch-distributed has no trainer step (a replicated Job labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer, or named "node") for the trainer overrides to apply to`},
		},
		"created suspended: suspended Jobs, no start time": {
			trainJob: base.Clone().Suspend(true).Obj(),
			runtime:  spec,
			// Jobs created suspended never have a Pod: Suspended at once, as
			// for a Job created suspended (KEP-2322).
			wantStatus: trainer.TrainJobStatus{
				State: trainer.TrainJobStateSuspended,
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason, "The TrainJob is suspended and no Pod of its Jobs is left", now),
				},
				JobsStatus:    []trainer.JobStatus{{Name: "node", Replicas: 1, Trainer: true, Suspended: 1}},
				SuccessPolicy: &trainer.SuccessPolicy{Operator: trainer.OperatorAll},
				Network:       pinnedNetwork,
			},
			wantJobs: []jobState{{Name: "tj-node-0", Suspend: true, Finalizers: tracked}},
			wantEvents: []string{
				"Normal Created Created 1 Jobs from ClusterTrainingRuntime torch-distributed",
				"Normal Suspended The TrainJob is suspended and no Pod of its Jobs is left",
			},
		},
		"suspended once no Pod is left": {
			trainJob: base.Clone().Suspend(true).JobsStatus(nodeStep).Obj(),
			jobs:     []*batchv1.Job{utiltesting.WrapJob(childJob(t, base.Clone().Suspend(true).Obj(), spec, 0)).SuspendedByController(earlier).Obj()},
			wantStatus: trainer.TrainJobStatus{
				State: trainer.TrainJobStateSuspended,
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason, "The TrainJob is suspended and no Pod of its Jobs is left", now),
				},
				JobsStatus: []trainer.JobStatus{{Name: "node", Replicas: 1, Trainer: true, Suspended: 1}},
			},
			wantJobs:   []jobState{{Name: "tj-node-0", Suspend: true, Finalizers: tracked}},
			wantEvents: []string{"Normal Suspended The TrainJob is suspended and no Pod of its Jobs is left"},
		},
		"suspend mid-run: Jobs suspended, not Suspended while Pods run": {
			trainJob: running.Clone().Suspend(true).Obj(),
			jobs:     []*batchv1.Job{utiltesting.WrapJob(child).Active(1).Obj()},
			wantStatus: trainer.TrainJobStatus{
				State:      trainer.TrainJobStateSuspending,
				Conditions: []metav1.Condition{suspendingCond(now)},
				JobsStatus: []trainer.JobStatus{{Name: "node", Replicas: 1, Trainer: true, Active: 1, Ready: 1, Suspended: 1}},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
			wantJobs: []jobState{{Name: "tj-node-0", Suspend: true, Finalizers: tracked}},
		},
		"resume: Jobs resumed, start time reset": {
			trainJob: running.Clone().Condition(cond(trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason, "suspended", earlier)).Obj(),
			jobs:     []*batchv1.Job{utiltesting.WrapJob(child).SuspendedByController(earlier).Obj()},
			wantStatus: trainer.TrainJobStatus{
				State: trainer.TrainJobStateRunning,
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobSuspended, "False", trainer.TrainJobResumedReason, "The TrainJob was resumed", now),
				},
				JobsStatus: []trainer.JobStatus{{Name: "node", Replicas: 1, Trainer: true}},
				StartTime:  ptr.To(metav1.NewTime(now)),
			},
			wantJobs:   []jobState{{Name: "tj-node-0", Finalizers: tracked}},
			wantEvents: []string{"Normal Resumed The TrainJob was resumed"},
		},
		"first resume of a TrainJob created suspended sets the start time": {
			trainJob: base.Clone().JobsStatus(nodeStep).
				Condition(cond(trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason, "suspended", earlier)).Obj(),
			jobs: []*batchv1.Job{utiltesting.WrapJob(child).SuspendedByController(earlier).Obj()},
			wantStatus: trainer.TrainJobStatus{
				State: trainer.TrainJobStateRunning,
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobSuspended, "False", trainer.TrainJobResumedReason, "The TrainJob was resumed", now),
				},
				JobsStatus: []trainer.JobStatus{{Name: "node", Replicas: 1, Trainer: true}},
				StartTime:  ptr.To(metav1.NewTime(now)),
			},
			wantJobs:   []jobState{{Name: "tj-node-0", Finalizers: tracked}},
			wantEvents: []string{"Normal Resumed The TrainJob was resumed"},
		},
		"all trainer Jobs succeeded: Complete, Jobs released": {
			trainJob: runningTJ,
			jobs:     []*batchv1.Job{utiltesting.WrapJob(child).Succeeded(now).Obj()},
			wantStatus: trainer.TrainJobStatus{
				State: trainer.TrainJobStateComplete,
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobComplete, "True", trainer.TrainJobJobsCompletedReason, "All 1 Job(s) of replicated Job node succeeded", now),
				},
				JobsStatus:     []trainer.JobStatus{{Name: "node", Replicas: 1, Trainer: true, Succeeded: 1, SucceededReplicas: []int32{0}}},
				StartTime:      ptr.To(metav1.NewTime(earlier)),
				CompletionTime: ptr.To(metav1.NewTime(now)),
			},
			wantJobs:   []jobState{{Name: "tj-node-0"}},
			wantEvents: []string{"Normal Completed All 1 Job(s) of replicated Job node succeeded"},
		},
		"a Job failed: Failed, the others stopped, all released": {
			trainJob: workers.Clone().Obj(),
			jobs: []*batchv1.Job{
				utiltesting.WrapJob(worker0).Failed("BackoffLimitExceeded", now).Obj(),
				utiltesting.WrapJob(worker1).Active(1).Obj(),
			},
			wantStatus: trainer.TrainJobStatus{
				State: trainer.TrainJobStateFailed,
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobFailed, "True", trainer.TrainJobJobFailedReason,
						"Job tj-worker-0 failed: BackoffLimitExceeded: Job has reached the specified backoff limit", now),
				},
				JobsStatus: []trainer.JobStatus{{Name: "worker", Replicas: 2, Failed: 1, FailedReplicas: []int32{0}, Active: 1, Ready: 1}},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
			wantJobs: []jobState{{Name: "tj-worker-0"}, {Name: "tj-worker-1", Suspend: true}},
			wantEvents: []string{
				"Warning FailedJobs Job tj-worker-0 failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
			},
		},
		"a Job deleted before it finished fails the TrainJob": {
			trainJob: workers.Clone().Obj(),
			jobs: []*batchv1.Job{
				deleting(utiltesting.WrapJob(worker0).Active(1).Obj()),
				utiltesting.WrapJob(worker1).Active(1).Obj(),
			},
			wantStatus: trainer.TrainJobStatus{
				State: trainer.TrainJobStateFailed,
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobFailed, "True", trainer.TrainJobJobDeletedReason,
						"Job tj-worker-0 was deleted before it finished; it is not run again", now),
				},
				JobsStatus: []trainer.JobStatus{{Name: "worker", Replicas: 2, Failed: 1, FailedReplicas: []int32{0}, Active: 1, Ready: 1}},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
			// tj-worker-0 is gone once its finalizer is removed.
			wantJobs:   []jobState{{Name: "tj-worker-1", Suspend: true}},
			wantEvents: []string{"Warning JobDeleted Job tj-worker-0 was deleted before it finished; it is not run again"},
		},
		"a succeeded Job is recorded and released, and never created again": {
			trainJob: workers.Clone().Obj(),
			jobs: []*batchv1.Job{
				utiltesting.WrapJob(worker0).Succeeded(now).Obj(),
				utiltesting.WrapJob(worker1).Active(1).Obj(),
			},
			runtime: twoWorkers,
			wantStatus: trainer.TrainJobStatus{
				State:      trainer.TrainJobStateRunning,
				JobsStatus: []trainer.JobStatus{{Name: "worker", Replicas: 2, Succeeded: 1, SucceededReplicas: []int32{0}, Active: 1, Ready: 1}},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
			wantJobs: []jobState{{Name: "tj-worker-0"}, {Name: "tj-worker-1", Finalizers: tracked}},
		},
		"a recorded Job that is gone is not re-created": {
			trainJob: workers.Clone().JobsStatus(trainer.JobStatus{Name: "worker", Replicas: 2, Succeeded: 1, SucceededReplicas: []int32{0}, Active: 1, Ready: 1}).Obj(),
			jobs:     []*batchv1.Job{utiltesting.WrapJob(worker1).Active(1).Obj()},
			runtime:  twoWorkers,
			wantStatus: trainer.TrainJobStatus{
				State:      trainer.TrainJobStateRunning,
				JobsStatus: []trainer.JobStatus{{Name: "worker", Replicas: 2, Succeeded: 1, SucceededReplicas: []int32{0}, Active: 1, Ready: 1}},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
			wantJobs: []jobState{{Name: "tj-worker-1", Finalizers: tracked}},
		},
		"a Job gone without its outcome recorded fails the TrainJob": {
			trainJob: workers.Clone().Obj(),
			jobs:     []*batchv1.Job{utiltesting.WrapJob(worker1).Active(1).Obj()},
			runtime:  twoWorkers,
			wantStatus: trainer.TrainJobStatus{
				State: trainer.TrainJobStateFailed,
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobFailed, "True", trainer.TrainJobJobDeletedReason,
						"Job tj-worker-0 disappeared before its outcome was recorded (its trainer.kubeflow.org/job-tracking finalizer was removed by someone else); it is not run again", now),
				},
				JobsStatus: []trainer.JobStatus{{Name: "worker", Replicas: 2, Failed: 1, FailedReplicas: []int32{0}, Active: 1, Ready: 1}},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
			wantJobs:   []jobState{{Name: "tj-worker-1", Suspend: true}},
			wantEvents: []string{"Warning JobDeleted Job tj-worker-0 disappeared before its outcome was recorded (its trainer.kubeflow.org/job-tracking finalizer was removed by someone else); it is not run again"},
		},
		"a finished TrainJob never goes back": {
			trainJob: running.Clone().Condition(cond(trainer.TrainJobComplete, "True", trainer.TrainJobJobsCompletedReason, "done", earlier)).
				JobsStatus(trainer.JobStatus{Name: "node", Replicas: 1, Trainer: true, Succeeded: 1, SucceededReplicas: []int32{0}}).Obj(),
			jobs: []*batchv1.Job{utiltesting.WrapJob(child).Failed("BackoffLimitExceeded", now).Obj()},
			wantStatus: trainer.TrainJobStatus{
				State: trainer.TrainJobStateComplete,
				Conditions: []metav1.Condition{
					cond(trainer.TrainJobComplete, "True", trainer.TrainJobJobsCompletedReason, "done", earlier),
				},
				JobsStatus: []trainer.JobStatus{{Name: "node", Replicas: 1, Trainer: true, Succeeded: 1, SucceededReplicas: []int32{0}}},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
			wantJobs: []jobState{{Name: "tj-node-0"}},
		},
		"Created=True of an earlier version is removed: a running TrainJob has no condition": {
			trainJob: running.Clone().Condition(createdCond(1, earlier)).Obj(),
			jobs:     []*batchv1.Job{utiltesting.WrapJob(child).Active(1).Obj()},
			wantStatus: trainer.TrainJobStatus{
				State:      trainer.TrainJobStateRunning,
				JobsStatus: []trainer.JobStatus{{Name: "node", Replicas: 1, Trainer: true, Active: 1, Ready: 1}},
				StartTime:  ptr.To(metav1.NewTime(earlier)),
			},
			wantJobs: []jobState{{Name: "tj-node-0", Finalizers: tracked}},
		},
		"a TrainJob managed by another controller is left alone": {
			trainJob:   base.Clone().ManagedBy("kueue.x-k8s.io/multikueue").Obj(),
			runtime:    spec,
			wantStatus: trainer.TrainJobStatus{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.trainJob.DeepCopy()}
			if tc.runtime != nil {
				objs = append(objs, tc.runtime.ClusterRuntime("torch-distributed"))
			}
			for _, j := range tc.jobs {
				objs = append(objs, j.DeepCopy())
			}
			f := newFixture(t, nil, objs...)
			if err := f.reconcile(t, tc.trainJob.Name); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			got := f.trainJob(t, tc.trainJob.Name)
			if diff := cmp.Diff(tc.wantStatus, got.Status, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantJobs, jobStates(f.jobs(t)), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Jobs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvents, f.events(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func deleting(job *batchv1.Job) *batchv1.Job {
	job.DeletionTimestamp = ptr.To(metav1.NewTime(now))
	return job
}

func TestRuntimeStartsOnlyWaitingTrainJobs(t *testing.T) {
	notFound := metav1.Condition{Type: trainer.TrainJobCreated, Status: metav1.ConditionFalse, Reason: trainer.TrainJobRuntimeNotFoundReason}
	created := metav1.Condition{Type: trainer.TrainJobCreated, Status: metav1.ConditionTrue, Reason: trainer.TrainJobJobsCreatedReason}
	f := newFixture(t, nil,
		utiltesting.MakeTrainJob("waiting", testNS).Condition(notFound).Obj(),
		utiltesting.MakeTrainJob("new", testNS).Obj(),
		utiltesting.MakeTrainJob("created", testNS).Condition(created).Obj(),
		utiltesting.MakeTrainJob("created-suspended", testNS).Condition(created).Suspend(true).
			JobsStatus(trainer.JobStatus{Name: "node", Replicas: 1, Suspended: 1}).Obj(),
		// Resumed, but its Job is still suspended: it waits for its runtime
		// to give the Job its patches' scheduling directives.
		utiltesting.MakeTrainJob("resuming", testNS).Condition(created).
			JobsStatus(trainer.JobStatus{Name: "node", Replicas: 1, Suspended: 1}).Obj(),
		utiltesting.MakeTrainJob("other-runtime", testNS).RuntimeRef(trainer.ClusterTrainingRuntimeKind, "jax").Condition(notFound).Obj(),
		utiltesting.MakeTrainJob("namespaced", testNS).RuntimeRef(trainer.TrainingRuntimeKind, "torch-distributed").Condition(notFound).Obj(),
	)
	rt := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch-distributed"}}
	var got []string
	for _, req := range f.r.waitingOn(trainer.ClusterTrainingRuntimeKind)(context.Background(), rt) {
		got = append(got, req.Name)
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"new", "resuming", "waiting"}, got); diff != "" {
		t.Errorf("TrainJobs started by the runtime (-want +got):\n%s", diff)
	}
}

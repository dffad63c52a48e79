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
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestActiveDeadline(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().Torch()
	running := func(startedAgo time.Duration) *utiltesting.TrainJobWrapper {
		return utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(now.Add(-startedAgo)).JobsStatus(nodeStep)
	}
	activeChild := func(tj *trainer.TrainJob) *batchv1.Job {
		return utiltesting.WrapJob(childJob(t, tj, spec, 0)).Active(2).Obj()
	}
	const exceeded = "The TrainJob was active longer than its activeDeadlineSeconds (60s since 2026-03-01T09:58:30Z)"
	cases := map[string]struct {
		trainJob      *trainer.TrainJob
		suspendedJob  bool
		wantRequeue   time.Duration
		wantFailed    string
		wantStopped   bool
		wantStartTime time.Time
		wantRemaining []float64
	}{
		"unset: nothing to wait for": {
			trainJob:      running(time.Hour).Obj(),
			wantStartTime: now.Add(-time.Hour),
		},
		"not reached: requeue exactly at the deadline": {
			trainJob:      running(30 * time.Second).Deadline(60).Obj(),
			wantRequeue:   30 * time.Second,
			wantStartTime: now.Add(-30 * time.Second),
			wantRemaining: []float64{30},
		},
		"reached: Failed, Pods terminated": {
			trainJob:      running(60 * time.Second).Deadline(60).Obj(),
			wantRequeue:   time.Nanosecond,
			wantFailed:    "The TrainJob was active longer than its activeDeadlineSeconds (60s since 2026-03-01T09:59:00Z)",
			wantStopped:   true,
			wantStartTime: now.Add(-60 * time.Second),
		},
		"extended while running: requeue at the new deadline": {
			trainJob:      running(90 * time.Second).Deadline(120).Obj(),
			wantRequeue:   30 * time.Second,
			wantStartTime: now.Add(-90 * time.Second),
			wantRemaining: []float64{30},
		},
		"shortened below the time already run: Failed now": {
			trainJob:      running(90 * time.Second).Deadline(60).Obj(),
			wantRequeue:   time.Nanosecond,
			wantFailed:    exceeded,
			wantStopped:   true,
			wantStartTime: now.Add(-90 * time.Second),
		},
		"suspended: not counted": {
			trainJob: running(time.Hour).Deadline(60).Suspend(true).
				Condition(cond(trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason, "suspended", now.Add(-time.Minute))).Obj(),
			suspendedJob:  true,
			wantStartTime: now.Add(-time.Hour),
		},
		"resumed: counted from the resume": {
			trainJob: running(time.Hour).Deadline(60).
				Condition(cond(trainer.TrainJobSuspended, "True", trainer.TrainJobSuspendedReason, "suspended", now.Add(-time.Minute))).Obj(),
			suspendedJob:  true,
			wantRequeue:   60 * time.Second,
			wantStartTime: now,
			wantRemaining: []float64{60},
		},
		"finished: not enforced": {
			trainJob: running(time.Hour).Deadline(60).
				Condition(cond(trainer.TrainJobComplete, "True", trainer.TrainJobJobsCompletedReason, "done", now.Add(-time.Minute))).Obj(),
			wantStartTime: now.Add(-time.Hour),
		},
		"beyond any clock: never, without overflow": {
			trainJob:      running(time.Hour).Deadline(9_000_000_000_000_000_000).Obj(),
			wantStartTime: now.Add(-time.Hour),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			child := activeChild(tc.trainJob)
			if tc.suspendedJob {
				child = utiltesting.WrapJob(child).SuspendedByController(now.Add(-time.Minute)).Obj()
			}
			f := newFixture(t, nil, tc.trainJob.DeepCopy(), child, spec.ClusterRuntime("torch-distributed"))
			before := testutil.ToFloat64(metrics.DeadlineExceeded)

			res, err := f.reconcileResult(t, "tj")
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if res.RequeueAfter != tc.wantRequeue {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tc.wantRequeue)
			}
			// Back at the deadline ahead of any backlog of events.
			if wantHigh := tc.wantRequeue > 0; (ptr.Deref(res.Priority, 0) > 0) != wantHigh {
				t.Errorf("Priority = %v, want one above the events' (0) only with a deadline to requeue at", ptr.Deref(res.Priority, 0))
			}
			if tc.wantFailed != "" {
				// The children are stopped by the reconcile that follows
				// at once, after the Failed of any other deadline of the
				// moment.
				if res, err := f.reconcileResult(t, "tj"); err != nil || res != (ctrl.Result{}) {
					t.Errorf("Reconcile after Failed = %+v, %v; want nothing more to requeue", res, err)
				}
			}
			got := f.trainJob(t, "tj")
			failed := meta.FindStatusCondition(got.Status.Conditions, trainer.TrainJobFailed)
			switch {
			case tc.wantFailed == "" && failed != nil:
				t.Errorf("TrainJob failed: %+v", failed)
			case tc.wantFailed != "":
				want := cond(trainer.TrainJobFailed, "True", trainer.TrainJobDeadlineExceededReason, tc.wantFailed, now)
				if diff := cmp.Diff(&want, failed); diff != "" {
					t.Errorf("Failed condition (-want +got):\n%s", diff)
				}
				if got := testutil.ToFloat64(metrics.DeadlineExceeded) - before; got != 1 {
					t.Errorf("trainjob_deadline_exceeded_total grew by %v, want 1", got)
				}
				if ev := f.events(); !cmp.Equal(ev, []string{"Warning DeadlineExceeded " + tc.wantFailed}) {
					t.Errorf("events = %q, want one DeadlineExceeded warning", ev)
				}
			}
			if got.Status.StartTime == nil || !got.Status.StartTime.Time.Equal(tc.wantStartTime) {
				t.Errorf("startTime = %v, want %v", got.Status.StartTime, tc.wantStartTime)
			}
			var job batchv1.Job
			if err := f.client.Get(t.Context(), client.ObjectKey{Namespace: testNS, Name: "tj-node-0"}, &job); err != nil {
				t.Fatal(err)
			}
			if tc.wantStopped && !ptr.Deref(job.Spec.Suspend, false) {
				t.Error("the running Job was not stopped")
			}
			remaining := collect(t, f.deadlines)
			if diff := cmp.Diff(tc.wantRemaining, remaining, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("trainjob_active_deadline_remaining_seconds (-want +got):\n%s", diff)
			}
		})
	}
}

// collect returns the values of a collector's series.
func collect(t *testing.T, d *metrics.DueTimes) []float64 {
	t.Helper()
	var out []float64
	ch := make(chan prometheus.Metric, 10)
	go func() { d.Collect(ch); close(ch) }()
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		out = append(out, pb.GetGauge().GetValue())
	}
	return out
}

// A reconcile that fails still requeues the TrainJob by its active
// deadline: controller-runtime drops a requeue time returned with an error
// and falls back to a backoff that reaches 1000 s.
func TestDeadlineKeptThroughErrors(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	running := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(now.Add(-30 * time.Second)).Deadline(60).JobsStatus(nodeStep).Obj()
	svcErr := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "tj", errors.New("exceeded quota: q, requested: services=1"))
	cases := map[string]struct {
		trainJob *trainer.TrainJob
		objs     []client.Object
	}{
		"the Service refused by a quota": {
			trainJob: running,
			objs:     []client.Object{utiltesting.WrapJob(childJob(t, running, spec, 0)).Active(1).Obj()},
		},
		"the Jobs refused": {
			trainJob: utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(now.Add(-30 * time.Second)).Deadline(60).Obj(),
			objs:     []client.Object{spec.ClusterRuntime("torch-distributed")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, &interceptor.Funcs{
				Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
					return svcErr
				},
			}, append(tc.objs, tc.trainJob)...)
			for i := range 20 { // past where an exponential backoff from 5 ms exceeds the deadline
				res, err := f.reconcileResult(t, "tj")
				if err != nil {
					t.Fatalf("reconcile %d: error %v returned: controller-runtime would drop the requeue at the deadline", i, err)
				}
				if res.RequeueAfter <= 0 || res.RequeueAfter > 30*time.Second {
					t.Fatalf("reconcile %d: RequeueAfter = %v, want within the 30s left to the deadline", i, res.RequeueAfter)
				}
			}
		})
	}
}

// A deadline already due whose Failed status cannot be written is retried
// on a growing backoff, not at once again and again.
func TestDueDeadlineBacksOffWhenTheWriteFails(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(now.Add(-2 * time.Minute)).Deadline(60).JobsStatus(nodeStep).Obj()
	writeErr := apierrors.NewServiceUnavailable("etcd timeout")
	f := newFixture(t, &interceptor.Funcs{
		SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
			return writeErr
		},
	}, tj, utiltesting.WrapJob(childJob(t, tj, utiltesting.MakeRuntimeSpec(), 0)).Active(1).Obj())
	var last time.Duration
	for i := range 5 {
		res, err := f.reconcileResult(t, "tj")
		if err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		if res.RequeueAfter < failureBaseDelay || res.RequeueAfter <= last {
			t.Fatalf("reconcile %d: RequeueAfter = %v after %v: want a growing backoff from %v", i, res.RequeueAfter, last, failureBaseDelay)
		}
		last = res.RequeueAfter
	}
}

// Jobs an earlier TrainJob of the name left, whose finalizer cannot be
// removed, hold back nothing of this TrainJob's: its deadline is kept.
func TestOrphanReleaseFailureKeepsTheDeadline(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-2").StartTime(now.Add(-30 * time.Second)).Deadline(60).JobsStatus(nodeStep).Obj()
	orphan := childJob(t, utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj(), spec, 0)
	orphan.Name = "tj-node-0-earlier"
	patchErr := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, orphan.Name, errors.New("denied by a webhook"))
	f := newFixture(t, &interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if obj.GetName() == orphan.Name {
				return patchErr
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}, tj, orphan, utiltesting.WrapJob(childJob(t, tj, spec, 0)).Active(1).Obj())
	res, err := f.reconcileResult(t, "tj")
	if err != nil || res.RequeueAfter <= 0 || res.RequeueAfter > 30*time.Second {
		t.Errorf("Reconcile = %+v, %v; want the error retried within the 30s left to the deadline", res, err)
	}
}

// A reconcile that finds the active deadline passed (the manager was down
// when it fell) fails the TrainJob before creating anything: no Job,
// Secret, claim or PodGroup of an overdue TrainJob is made, unsuspended.
func TestOverdueTrainJobCreatesNothing(t *testing.T) {
	// It waited for its runtime, which appeared while the manager was
	// down.
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(now.Add(-2 * time.Minute)).Deadline(60).
		Condition(cond(trainer.TrainJobCreated, "False", trainer.TrainJobRuntimeNotFoundReason, "not found", now.Add(-2*time.Minute))).Obj()
	f := newFixture(t, nil, tj, utiltesting.MakeRuntimeSpec().Torch().ClusterRuntime("torch-distributed"))
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if jobs := f.jobs(t); len(jobs) != 0 {
		t.Errorf("Jobs %v created for a TrainJob past its deadline", jobStates(jobs))
	}
	if c := f.trainJob(t, "tj").FinishedCondition(); c == nil || c.Reason != trainer.TrainJobDeadlineExceededReason {
		t.Errorf("finished %+v, want Failed (%s)", c, trainer.TrainJobDeadlineExceededReason)
	}
}

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
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// A Job belongs to a TrainJob only if its controller is that TrainJob. A
// child name held by any other Job is reported, never taken for the child,
// and the TrainJob starts by itself once the name is free.
func TestNameHeldByAJobNotOurs(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-2").TTL(0)
	earlierTJ := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	oldJob := childJob(t, earlierTJ, spec, 0)
	orphaned := oldJob.DeepCopy()
	orphaned.OwnerReferences = nil
	// Child names can collide across TrainJobs (TrainJob a-b with
	// replicated Job c and TrainJob a with replicated Job b-c both want
	// a-b-c-0): a Job of another TrainJob, labelled for that one.
	collision := oldJob.DeepCopy()
	collision.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(
		utiltesting.MakeTrainJob("other", testNS).UID("uid-9").Obj(), trainer.GroupVersion.WithKind(trainer.TrainJobKind))}
	collision.Labels = jobplan.ChildLabels("other", "x", 0)
	collision.Finalizers = nil // its TrainJob's to keep or release

	cases := map[string]struct {
		held        *batchv1.Job
		wantMessage string
		wantRetry   bool
	}{
		"an earlier TrainJob's Job, deleted with the default background cascade": {
			held:        deleting(oldJob.DeepCopy()),
			wantMessage: "Job ns/tj-node-0 is not this TrainJob's: it belongs to an earlier TrainJob tj (UID uid-1), being deleted. The TrainJob starts once the name is free",
			wantRetry:   true,
		},
		"an orphaned Job (the earlier TrainJob deleted with --cascade=orphan)": {
			held:        orphaned,
			wantMessage: "Job ns/tj-node-0 is not this TrainJob's: it belongs to no owner. The TrainJob starts once the name is free",
			wantRetry:   true,
		},
		"another TrainJob's Job whose name collides": {
			held:        collision,
			wantMessage: "Job ns/tj-node-0 is not this TrainJob's: it belongs to TrainJob other (UID uid-9). The TrainJob starts once the name is free",
			wantRetry:   true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil, tj.Clone().Obj(), tc.held.DeepCopy(), spec.ClusterRuntime("torch-distributed"))
			res, err := f.reconcileResult(t, "tj")
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			got := f.trainJob(t, "tj")
			want := []metav1.Condition{cond(trainer.TrainJobCreated, "False", trainer.TrainJobNameTakenReason, tc.wantMessage, now)}
			if diff := cmp.Diff(want, got.Status.Conditions); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"Warning NameTaken " + tc.wantMessage}, f.events()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if tc.wantRetry && (res.RequeueAfter <= 0 || res.RequeueAfter > waitRetry) {
				t.Errorf("RequeueAfter = %v, want a retry within %v", res.RequeueAfter, waitRetry)
			}
			var held batchv1.Job
			if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(tc.held), &held); err == nil && ctrlOwnerUID(&held) == got.UID {
				t.Errorf("the Job in the way was adopted: %v", held.OwnerReferences)
			}

			// The name is freed: the TrainJob starts by itself.
			if err := f.client.Delete(context.Background(), tc.held.DeepCopy()); client.IgnoreNotFound(err) != nil {
				t.Fatalf("deleting the Job in the way: %v", err)
			}
			if err := f.reconcile(t, "tj"); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			got = f.trainJob(t, "tj")
			wantRunning(t, got)
			jobs := f.jobs(t)
			if len(jobs) != 1 || ctrlOwnerUID(&jobs[0]) != got.UID {
				t.Errorf("Jobs %v, want tj-node-0 owned by the TrainJob", jobStates(jobs))
			}
		})
	}
}

// The name of a Job the cache does not show yet can be held by a Job that
// is not the TrainJob's: the create's AlreadyExists is not taken for
// success.
func TestAlreadyExistsIsCheckedForTheOwner(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-2").Obj()
	foreign := childJob(t, utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj(), spec, 0)
	foreign.Labels = nil // not in the manager's cache
	f := newFixture(t, &interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if jobs, ok := list.(*batchv1.JobList); ok {
				jobs.Items = nil // as a cache filtered by label shows it
			}
			return nil
		},
	}, tj, foreign, spec.ClusterRuntime("torch-distributed"))
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	c := meta.FindStatusCondition(f.trainJob(t, "tj").Status.Conditions, trainer.TrainJobCreated)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != trainer.TrainJobNameTakenReason {
		t.Errorf("Created = %+v, want False (%s)", c, trainer.TrainJobNameTakenReason)
	}
}

// A child gone and its name since taken by a Job that is not the
// TrainJob's is a child gone: the Job of the name is not counted as it.
func TestVanishedChildReplacedByAnotherJob(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-2").StartTime(earlier).JobsStatus(nodeStep).Obj()
	other := childJob(t, utiltesting.MakeTrainJob("tj", testNS).UID("uid-3").Obj(), spec, 0)
	other.Labels = nil
	f := newFixture(t, nil, tj, other)
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	c := f.trainJob(t, "tj").FinishedCondition()
	if c == nil || c.Type != trainer.TrainJobFailed || c.Reason != trainer.TrainJobJobDeletedReason {
		t.Errorf("finished condition %+v, want Failed (%s)", c, trainer.TrainJobJobDeletedReason)
	}
}

// Once all of a TrainJob's Jobs were created, a missing one is never
// created again: when the API server cannot say what became of it, the
// TrainJob waits.
func TestMissingChildNotRecreatedOnReadError(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(earlier).JobsStatus(nodeStep).Obj()
	readErr := apierrors.NewServiceUnavailable("etcd leader changed")
	created := 0
	f := newFixture(t, &interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*batchv1.Job); ok {
				return readErr
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*batchv1.Job); ok {
				created++
			}
			return c.Create(ctx, obj, opts...)
		},
	}, tj, spec.ClusterRuntime("torch-distributed"))
	if err := f.reconcile(t, "tj"); !errors.Is(err, readErr) {
		t.Errorf("Reconcile error = %v, want %v", err, readErr)
	}
	if created != 0 || len(f.jobs(t)) != 0 {
		t.Errorf("%d Job(s) created, %v exist: a child whose outcome is unknown was created again", created, jobStates(f.jobs(t)))
	}
	if c := f.trainJob(t, "tj").FinishedCondition(); c != nil {
		t.Errorf("finished %+v on a read error", c)
	}
}

// The Jobs a TrainJob started with are the Jobs it finishes with: a runtime
// edited between the creation of some of its Jobs and the others is
// reported, not half applied.
func TestRuntimeChangedBetweenCreations(t *testing.T) {
	twoSteps := utiltesting.MakeRuntimeSpec().ReplicatedJobs(
		utiltesting.MakeReplicatedJob("node").Trainer().Obj(),
		utiltesting.MakeReplicatedJob("ps").Replicas(2).Obj())
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(earlier).
		JobsStatus(nodeStep, trainer.JobStatus{Name: "ps", Replicas: 2, Waiting: true}).Obj()
	node := childJob(t, tj, twoSteps, 0)
	// The runtime lost its ps step after tj-node-0 was created.
	f := newFixture(t, nil, tj, node, utiltesting.MakeRuntimeSpec().ClusterRuntime("torch-distributed"))
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	got := f.trainJob(t, "tj")
	want := []metav1.Condition{cond(trainer.TrainJobCreated, "False", trainer.TrainJobRuntimeChangedReason,
		"ClusterTrainingRuntime torch-distributed changed after the first Jobs of the TrainJob were created: its replicated Jobs were node×1, ps×2 and are now node×1. The TrainJob keeps the replicated Jobs it started with: restore the runtime, or delete the TrainJob", now)}
	if diff := cmp.Diff(want, got.Status.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]jobState{{Name: "tj-node-0", Finalizers: tracked}}, jobStates(f.jobs(t))); diff != "" {
		t.Errorf("Jobs (-want +got):\n%s", diff)
	}
}

// A child Job whose labels were removed drops out of the manager's cache
// (it holds the Jobs labelled for a TrainJob): it is still found by name
// and owner, its labels are put back, and its finalizer is released when
// its TrainJob goes.
func TestChildFoundWhateverItsLabels(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(earlier).JobsStatus(nodeStep)
	unlabelled := childJob(t, tj.Obj(), spec, 0)
	unlabelled.Labels = map[string]string{"team": "a"}

	t.Run("running", func(t *testing.T) {
		f := newFixture(t, nil, tj.Clone().Obj(), utiltesting.WrapJob(unlabelled).Active(1).Obj())
		if err := f.reconcile(t, "tj"); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if c := f.trainJob(t, "tj").FinishedCondition(); c != nil {
			t.Errorf("finished %+v: the child was taken for gone", c)
		}
		var job batchv1.Job
		if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(unlabelled), &job); err != nil {
			t.Fatal(err)
		}
		want := jobplan.ChildLabels("tj", "node", 0)
		want["team"] = "a"
		if diff := cmp.Diff(want, job.Labels); diff != "" {
			t.Errorf("labels (-want +got):\n%s", diff)
		}
	})
	t.Run("TrainJob deleted in the foreground", func(t *testing.T) {
		deletingTJ := tj.Clone().Obj()
		deletingTJ.Finalizers = []string{metav1.FinalizerDeleteDependents}
		deletingTJ.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		f := newFixture(t, nil, deletingTJ, unlabelled.DeepCopy())
		if err := f.reconcile(t, "tj"); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if diff := cmp.Diff([]jobState{{Name: "tj-node-0"}}, jobStates(f.jobs(t)), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Jobs (-want +got):\n%s", diff)
		}
	})
}

// A Service of the TrainJob's name that is not the TrainJob's would leave
// its Pods without DNS names: it is reported like a Job in the way.
func TestNameHeldByAServiceNotOurs(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-2").Obj()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "tj", Namespace: testNS}}
	f := newFixture(t, nil, tj, svc, spec.ClusterRuntime("torch-distributed"))
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	c := meta.FindStatusCondition(f.trainJob(t, "tj").Status.Conditions, trainer.TrainJobCreated)
	want := "Service ns/tj is not this TrainJob's: it belongs to no owner. The TrainJob starts once the name is free"
	if c == nil || c.Status != metav1.ConditionFalse || c.Message != want {
		t.Errorf("Created = %+v, want False: %s", c, want)
	}
}

// A runtime changed before any of a TrainJob's Jobs was created is not a
// change to report: the TrainJob starts with the runtime as it is.
func TestRuntimeChangedBeforeAnyCreation(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(earlier).
		JobsStatus(nodeStep, trainer.JobStatus{Name: "ps", Replicas: 2}).
		Condition(cond(trainer.TrainJobCreated, "False", trainer.TrainJobJobRefusedReason, "quota", earlier)).Obj()
	f := newFixture(t, nil, tj, utiltesting.MakeRuntimeSpec().ClusterRuntime("torch-distributed"))
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	wantRunning(t, f.trainJob(t, "tj"))
	if diff := cmp.Diff([]jobState{{Name: "tj-node-0", Finalizers: tracked}}, jobStates(f.jobs(t))); diff != "" {
		t.Errorf("Jobs (-want +got):\n%s", diff)
	}
}

// A Service of the TrainJob's name that the cache does not hold (it is not
// labelled for a TrainJob) is found when the create says it exists.
func TestUnlabelledServiceNotOurs(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-2").Obj()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "tj", Namespace: testNS}}
	cacheGets := 0
	f := newFixture(t, &interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Service); ok && cacheGets == 0 {
				cacheGets++ // the cache, which holds labelled Services only
				return apierrors.NewNotFound(corev1.Resource("services"), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}, tj, svc, spec.ClusterRuntime("torch-distributed"))
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	c := meta.FindStatusCondition(f.trainJob(t, "tj").Status.Conditions, trainer.TrainJobCreated)
	if c == nil || c.Reason != trainer.TrainJobNameTakenReason {
		t.Errorf("Created = %+v, want False (%s)", c, trainer.TrainJobNameTakenReason)
	}
}

// A Job refused as invalid is tried again now and then: the refusal may
// come from an admission policy that changes.
func TestInvalidJobRetried(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	invalid := apierrors.NewInvalid(batchv1.SchemeGroupVersion.WithKind("Job").GroupKind(), "tj-node-0", nil)
	f := newFixture(t, &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*batchv1.Job); ok {
				return invalid
			}
			return c.Create(ctx, obj, opts...)
		},
	}, tj, utiltesting.MakeRuntimeSpec().ClusterRuntime("torch-distributed"))
	res, err := f.reconcileResult(t, "tj")
	if err != nil || res.RequeueAfter != invalidRetry {
		t.Errorf("Reconcile = %+v, %v; want a retry in %v", res, err, invalidRetry)
	}
}

// A Job the API server refuses is reported: Created=False with the API
// server's message and a Warning event. The TrainJob is active (its
// deadline runs), and the create is retried.
func TestRefusedJobIsReported(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	createErr := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "tj-node-0", errors.New("exceeded quota: q, requested: count/jobs.batch=1, used: count/jobs.batch=10, limited: count/jobs.batch=10"))
	f := newFixture(t, &interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*batchv1.Job); ok {
				return createErr
			}
			return c.Create(ctx, obj, opts...)
		},
	}, tj, utiltesting.MakeRuntimeSpec().ClusterRuntime("torch-distributed"))

	if err := f.reconcile(t, "tj"); !apierrors.IsForbidden(err) {
		t.Fatalf("Reconcile error = %v, want Forbidden", err)
	}
	got := f.trainJob(t, "tj")
	msg := `The API server refused Job tj-node-0: jobs.batch "tj-node-0" is forbidden: exceeded quota: q, requested: count/jobs.batch=1, used: count/jobs.batch=10, limited: count/jobs.batch=10`
	want := []metav1.Condition{cond(trainer.TrainJobCreated, "False", trainer.TrainJobJobRefusedReason, msg, now)}
	if diff := cmp.Diff(want, got.Status.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if got.Status.StartTime == nil {
		t.Error("no startTime: the deadline of a TrainJob that cannot start would never run")
	}
	if diff := cmp.Diff([]string{"Warning JobRefused " + msg}, f.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// A TrainJob that finishes deletes its headless Service, and only its own.
func TestServiceDeletedOnceFinished(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(earlier).JobsStatus(nodeStep).Obj()
	job := utiltesting.WrapJob(childJob(t, tj, spec, 0)).Succeeded(now).Obj()
	foreign := jobplan.Service(tj)
	foreign.OwnerReferences = nil
	for name, tc := range map[string]struct {
		svc      *corev1.Service
		wantGone bool
	}{
		"the TrainJob's Service":                                {svc: jobplan.Service(tj), wantGone: true},
		"a Service of the same name that is not the TrainJob's": {svc: foreign},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil, tj.DeepCopy(), job.DeepCopy(), tc.svc.DeepCopy())
			// The reconcile that stores Complete comes back at once; the
			// Service goes then.
			if err := f.reconcile(t, "tj"); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if got := f.trainJob(t, "tj"); !meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobComplete) {
				t.Fatalf("TrainJob not Complete: %v", got.Status.Conditions)
			}
			err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "tj"}, &corev1.Service{})
			if gone := apierrors.IsNotFound(err); gone != tc.wantGone {
				t.Errorf("Service gone = %v (Get: %v), want %v", gone, err, tc.wantGone)
			}
		})
	}
}

// Creating the Jobs twice (a stale cache) is harmless.
func TestCreateIsIdempotent(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	f := newFixture(t, nil, tj, utiltesting.MakeRuntimeSpec().ClusterRuntime("torch-distributed"))
	for i := range 3 {
		if err := f.reconcile(t, "tj"); err != nil {
			t.Fatalf("Reconcile %d: %v", i, err)
		}
	}
	if diff := cmp.Diff([]jobState{{Name: "tj-node-0", Finalizers: tracked}}, jobStates(f.jobs(t))); diff != "" {
		t.Errorf("Jobs (-want +got):\n%s", diff)
	}
	var svc corev1.Service
	if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "tj"}, &svc); err != nil {
		t.Errorf("headless Service: %v", err)
	}
	if ev := f.events(); len(ev) != 1 {
		t.Errorf("events = %v, want one Created event", ev)
	}
}

// The children of a failed TrainJob are stopped once Failed is stored, not
// before: a status write that fails leaves them running, and the retry stops
// them.
func TestChildrenStoppedAfterFailedIsStored(t *testing.T) {
	runtime := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj())
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed").
		StartTime(earlier).JobsStatus(trainer.JobStatus{Name: "worker", Replicas: 2}).Obj()
	failed := utiltesting.WrapJob(childJob(t, tj, runtime, 0)).Failed("BackoffLimitExceeded", now).Obj()
	running := utiltesting.WrapJob(childJob(t, tj, runtime, 1)).Active(1).Obj()
	writeErr := errors.New("etcd is unhappy")
	failWrites := true
	f := newFixture(t, &interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if failWrites {
				return writeErr
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}, tj, failed, running, runtime.ClusterRuntime("torch-distributed"))

	if err := f.reconcile(t, "tj"); !errors.Is(err, writeErr) {
		t.Fatalf("Reconcile error = %v, want %v", err, writeErr)
	}
	if diff := cmp.Diff([]jobState{{Name: "tj-worker-0", Finalizers: tracked}, {Name: "tj-worker-1", Finalizers: tracked}}, jobStates(f.jobs(t))); diff != "" {
		t.Errorf("Jobs after the failed write (-want +got):\n%s", diff)
	}

	failWrites = false
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if got := f.trainJob(t, "tj"); !meta.IsStatusConditionTrue(got.Status.Conditions, trainer.TrainJobFailed) {
		t.Errorf("TrainJob not Failed: %v", got.Status.Conditions)
	}
	if diff := cmp.Diff([]jobState{{Name: "tj-worker-0"}, {Name: "tj-worker-1", Suspend: true}}, jobStates(f.jobs(t))); diff != "" {
		t.Errorf("Jobs after the retry (-want +got):\n%s", diff)
	}
}

// TrainJobs finishing together each have their Complete or Failed written
// before any is acted on: the reconcile that finishes one returns at once,
// and the next stops its children, releases them and deletes its Service.
// It comes back ahead of the events when children still run, in its turn
// when only bookkeeping is left.
func TestFinishedTrainJobIsActedOnByTheNextReconcile(t *testing.T) {
	runtime := utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj())
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed").
		StartTime(earlier).JobsStatus(trainer.JobStatus{Name: "worker", Replicas: 2}).Obj()
	job := func(i int) *utiltesting.JobWrapper { return utiltesting.WrapJob(childJob(t, tj, runtime, i)) }
	for name, tc := range map[string]struct {
		jobs         []*batchv1.Job
		wantFinished string
		wantPriority bool
		wantJobs     []jobState
	}{
		"every Job succeeded: bookkeeping, in its turn": {
			jobs:         []*batchv1.Job{job(0).Succeeded(now).Obj(), job(1).Succeeded(now).Obj()},
			wantFinished: trainer.TrainJobComplete,
			wantJobs:     []jobState{{Name: "tj-worker-0"}, {Name: "tj-worker-1"}},
		},
		"a Job failed, the other runs: stopped ahead of the events": {
			jobs:         []*batchv1.Job{job(0).Failed("BackoffLimitExceeded", now).Obj(), job(1).Active(1).Obj()},
			wantFinished: trainer.TrainJobFailed,
			wantPriority: true,
			wantJobs:     []jobState{{Name: "tj-worker-0"}, {Name: "tj-worker-1", Suspend: true}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tj.DeepCopy(), jobplan.Service(tj), runtime.ClusterRuntime("torch-distributed")}
			for _, j := range tc.jobs {
				objs = append(objs, j.DeepCopy())
			}
			f := newFixture(t, nil, objs...)
			before := jobStates(f.jobs(t))

			res, err := f.reconcileResult(t, "tj")
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if got := f.trainJob(t, "tj"); !meta.IsStatusConditionTrue(got.Status.Conditions, tc.wantFinished) {
				t.Fatalf("TrainJob not %s: %v", tc.wantFinished, got.Status.Conditions)
			}
			if res.RequeueAfter != time.Nanosecond {
				t.Errorf("RequeueAfter = %v, want at once (1ns)", res.RequeueAfter)
			}
			if high := ptr.Deref(res.Priority, 0) > 0; high != tc.wantPriority {
				t.Errorf("Priority = %v, want one above the events' (0): %v", ptr.Deref(res.Priority, 0), tc.wantPriority)
			}
			if diff := cmp.Diff(before, jobStates(f.jobs(t))); diff != "" {
				t.Errorf("Jobs changed by the reconcile that finished the TrainJob (-before +after):\n%s", diff)
			}
			if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "tj"}, &corev1.Service{}); err != nil {
				t.Errorf("Service gone with the reconcile that finished the TrainJob: %v", err)
			}

			res, err = f.reconcileResult(t, "tj")
			if err != nil {
				t.Fatalf("second Reconcile: %v", err)
			}
			if res != (ctrl.Result{}) {
				t.Errorf("second Reconcile result = %+v, want none", res)
			}
			if diff := cmp.Diff(tc.wantJobs, jobStates(f.jobs(t))); diff != "" {
				t.Errorf("Jobs after the second reconcile (-want +got):\n%s", diff)
			}
			err = f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "tj"}, &corev1.Service{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("Service after the second reconcile: Get = %v, want NotFound", err)
			}
		})
	}
}

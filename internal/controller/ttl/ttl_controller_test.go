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

package ttl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

var now = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func complete(at time.Time) metav1.Condition {
	return metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: trainer.TrainJobJobsCompletedReason, LastTransitionTime: metav1.NewTime(at)}
}

func failed(at time.Time) metav1.Condition {
	return metav1.Condition{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: trainer.TrainJobJobFailedReason, LastTransitionTime: metav1.NewTime(at)}
}

func suspended(at time.Time) metav1.Condition {
	return metav1.Condition{Type: trainer.TrainJobSuspended, Status: metav1.ConditionTrue, Reason: trainer.TrainJobSuspendedReason, LastTransitionTime: metav1.NewTime(at)}
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

// splitClient reads from one fake client, the cache, and writes to another,
// the API server, so a test can give the cache an older TrainJob.
type splitClient struct {
	client.Client
	cache client.Reader
}

func (c splitClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.cache.Get(ctx, key, obj, opts...)
}

type fixture struct {
	r        *Reconciler
	api      client.Client
	recorder *events.FakeRecorder
	pending  *metrics.DueTimes
}

// newFixture serves cached from the cache and live from the API server;
// with cached nil, both hold live.
func newFixture(t *testing.T, live, cached *trainer.TrainJob, retention *configv1alpha1.TrainJobRetentionPolicy, funcs *interceptor.Funcs) *fixture {
	t.Helper()
	api := utiltesting.NewClientBuilder(funcs, live.DeepCopy()).Build()
	var cache client.Reader = api
	if cached != nil {
		cache = utiltesting.NewClientBuilder(nil, cached.DeepCopy()).Build()
	}
	clk := testingclock.NewFakeClock(now)
	rec := events.NewFakeRecorder(10)
	pending := metrics.NewPendingDeletions(clk)
	return &fixture{
		r: NewReconciler(splitClient{Client: api, cache: cache}, api, rec,
			WithClock(clk), WithRetention(retention), WithPendingDeletions(pending)),
		api: api, recorder: rec, pending: pending,
	}
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

func TestReconcile(t *testing.T) {
	base := utiltesting.MakeTrainJob("tj", "ns").UID("uid-1")
	done := base.Clone().Condition(complete(now.Add(-time.Minute)))
	ran := base.Clone().StartTime(now.Add(-3 * time.Hour))
	afterSuspended := &configv1alpha1.TrainJobRetentionPolicy{AfterSuspended: dur(time.Hour)}
	cases := map[string]struct {
		live        *trainer.TrainJob
		cached      *trainer.TrainJob
		retention   *configv1alpha1.TrainJobRetentionPolicy
		wantDeleted bool
		wantRequeue time.Duration
		wantPending int
		wantEvents  []string
		wantPolicy  string
	}{
		"TTL not set: kept": {
			live: done.Clone().Obj(),
		},
		"not finished: kept": {
			live: base.Clone().TTL(0).Obj(),
		},
		"TTL not expired: requeued at expiry": {
			live:        done.Clone().TTL(90).Obj(),
			wantRequeue: 30 * time.Second,
			wantPending: 1,
		},
		"TTL expired: deleted": {
			live:        done.Clone().TTL(60).Obj(),
			wantDeleted: true,
			wantPolicy:  lifecycle.PolicyTTL,
			wantEvents:  []string{"Normal Deleting Deleting the TrainJob: it finished (Complete, AllJobsCompleted) at 2026-03-01T09:59:00Z and its ttlSecondsAfterFinished of 60s expired"},
		},
		"TTL 0: deleted as soon as it finished": {
			live:        base.Clone().Condition(failed(now)).TTL(0).Obj(),
			wantDeleted: true,
			wantPolicy:  lifecycle.PolicyTTL,
			wantEvents:  []string{"Normal Deleting Deleting the TrainJob: it finished (Failed, FailedJobs) at 2026-03-01T10:00:00Z and its ttlSecondsAfterFinished of 0s expired"},
		},
		"TTL extended where the cache has not seen it yet: kept": {
			cached:      done.Clone().TTL(10).Obj(),
			live:        done.Clone().TTL(3600).Obj(),
			wantRequeue: 59 * time.Minute,
			wantPending: 1,
		},
		"TTL removed where the cache has not seen it yet: kept": {
			cached: done.Clone().TTL(10).Obj(),
			live:   done.Clone().Obj(),
		},
		"finish time in the future (clock skew): deferred": {
			live:        base.Clone().Condition(complete(now.Add(time.Hour))).TTL(0).Obj(),
			wantRequeue: time.Hour,
			wantPending: 1,
		},
		"being deleted: left alone": {
			live: func() *trainer.TrainJob {
				tj := done.Clone().TTL(0).Obj()
				tj.Finalizers = []string{"example.com/keep"}
				tj.DeletionTimestamp = ptr.To(metav1.NewTime(now))
				return tj
			}(),
		},
		"managed by another controller: left alone": {
			live: done.Clone().TTL(0).ManagedBy("example.com/other").Obj(),
		},
		"dispatched by MultiKueue, finished on its worker: deleted at its TTL": {
			live:        base.Clone().Condition(failed(now)).TTL(0).ManagedBy("kueue.x-k8s.io/multikueue").Obj(),
			wantDeleted: true,
			wantPolicy:  lifecycle.PolicyTTL,
			wantEvents:  []string{"Normal Deleting Deleting the TrainJob: it finished (Failed, FailedJobs) at 2026-03-01T10:00:00Z and its ttlSecondsAfterFinished of 0s expired"},
		},
		"retention afterFinished for a Complete TrainJob": {
			live:        done.Clone().Obj(),
			retention:   &configv1alpha1.TrainJobRetentionPolicy{AfterFinished: dur(time.Minute)},
			wantDeleted: true,
			wantPolicy:  lifecycle.PolicyAfterFinished,
			wantEvents:  []string{"Normal Deleting Deleting the TrainJob: it finished (Complete, AllJobsCompleted) at 2026-03-01T09:59:00Z and the cluster's retention policy afterFinished of 1m0s expired"},
		},
		"retention afterFinished applies to Failed without afterFailed": {
			live:        base.Clone().Condition(failed(now.Add(-time.Minute))).Obj(),
			retention:   &configv1alpha1.TrainJobRetentionPolicy{AfterFinished: dur(2 * time.Minute)},
			wantRequeue: time.Minute,
			wantPending: 1,
		},
		"retention afterFailed overrides afterFinished for Failed": {
			live:        base.Clone().Condition(failed(now.Add(-time.Minute))).Obj(),
			retention:   &configv1alpha1.TrainJobRetentionPolicy{AfterFinished: dur(time.Hour), AfterFailed: dur(0)},
			wantDeleted: true,
			wantPolicy:  lifecycle.PolicyAfterFailed,
			wantEvents:  []string{"Normal Deleting Deleting the TrainJob: it finished (Failed, FailedJobs) at 2026-03-01T09:59:00Z and the cluster's retention policy afterFailed of 0s expired"},
		},
		"retention afterFailed does not apply to Complete": {
			live:      done.Clone().Obj(),
			retention: &configv1alpha1.TrainJobRetentionPolicy{AfterFailed: dur(0)},
		},
		"the TrainJob's TTL wins over retention": {
			live:        done.Clone().TTL(3600).Obj(),
			retention:   &configv1alpha1.TrainJobRetentionPolicy{AfterFinished: dur(0)},
			wantRequeue: 59 * time.Minute,
			wantPending: 1,
		},
		"retention afterSuspended expired": {
			live:        ran.Clone().Suspend(true).Condition(suspended(now.Add(-2 * time.Hour))).Obj(),
			retention:   afterSuspended,
			wantDeleted: true,
			wantPolicy:  lifecycle.PolicyAfterSuspended,
			wantEvents:  []string{"Normal Deleting Deleting the TrainJob: it has been suspended since 2026-03-01T08:00:00Z and the cluster's retention policy afterSuspended of 1h0m0s expired"},
		},
		"retention afterSuspended not expired": {
			live:        ran.Clone().Suspend(true).Condition(suspended(now.Add(-10 * time.Minute))).Obj(),
			retention:   afterSuspended,
			wantRequeue: 50 * time.Minute,
			wantPending: 1,
		},
		"a resumed TrainJob is not retained as suspended": {
			live: ran.Clone().Condition(metav1.Condition{Type: trainer.TrainJobSuspended, Status: metav1.ConditionFalse,
				Reason: trainer.TrainJobResumedReason, LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Hour))}).Obj(),
			retention: afterSuspended,
		},
		// After an outage, the fresh read can show Suspended=True on a
		// TrainJob already resumed: its spec says so first.
		"resumed, Suspended=True not updated yet: kept": {
			live:      ran.Clone().Suspend(false).Condition(suspended(now.Add(-2 * time.Hour))).Obj(),
			retention: afterSuspended,
		},
		"resumed where the cache has not seen it yet: kept": {
			cached:    ran.Clone().Suspend(true).Condition(suspended(now.Add(-2 * time.Hour))).Obj(),
			live:      ran.Clone().Suspend(false).Condition(suspended(now.Add(-2 * time.Hour))).Obj(),
			retention: afterSuspended,
		},
		"created suspended and never started: waiting, kept": {
			live:      base.Clone().Suspend(true).Condition(suspended(now.Add(-2 * time.Hour))).Obj(),
			retention: afterSuspended,
		},
		"queued in Kueue (preempted after it ran): waiting for admission, kept": {
			live:      ran.Clone().Label(trainer.KueueQueueNameLabel, "team-a").Suspend(true).Condition(suspended(now.Add(-2 * time.Hour))).Obj(),
			retention: afterSuspended,
		},
		"suspended while Pods still run (Suspending): kept": {
			live: ran.Clone().Suspend(true).Condition(metav1.Condition{Type: trainer.TrainJobSuspended, Status: metav1.ConditionFalse,
				Reason: trainer.TrainJobSuspendingReason, LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Hour))}).Obj(),
			retention: afterSuspended,
		},
		"no retention policy: kept": {
			live:      done.Clone().Obj(),
			retention: &configv1alpha1.TrainJobRetentionPolicy{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, tc.live, tc.cached, tc.retention, nil)
			policy := tc.wantPolicy
			if policy == "" {
				policy = lifecycle.PolicyTTL
			}
			before := testutil.ToFloat64(metrics.TTLDeletions.WithLabelValues(policy))

			res, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc.live)})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if res.RequeueAfter != tc.wantRequeue {
				t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, tc.wantRequeue)
			}
			if wantHigh := tc.wantRequeue > 0; (ptr.Deref(res.Priority, 0) > 0) != wantHigh {
				t.Errorf("Priority = %v, want one above the events' (0) only with an expiry to requeue at", ptr.Deref(res.Priority, 0))
			}
			var got trainer.TrainJob
			err = f.api.Get(context.Background(), client.ObjectKeyFromObject(tc.live), &got)
			if deleted := apierrors.IsNotFound(err); deleted != tc.wantDeleted {
				t.Errorf("deleted = %v (err %v), want %v", deleted, err, tc.wantDeleted)
			}
			if diff := cmp.Diff(tc.wantEvents, f.events(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if got := f.pending.Len(); got != tc.wantPending {
				t.Errorf("pending deletions = %d, want %d", got, tc.wantPending)
			}
			wantCount := 0.0
			if tc.wantDeleted {
				wantCount = 1
			}
			if got := testutil.ToFloat64(metrics.TTLDeletions.WithLabelValues(policy)) - before; got != wantCount {
				t.Errorf("trainjob_ttl_deletions_total{policy=%q} grew by %v, want %v", policy, got, wantCount)
			}
		})
	}
}

// A TTL shortened after it was first looked at is honoured on the next
// reconcile, which the update triggers.
func TestTTLShortened(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", "ns").Condition(complete(now.Add(-time.Minute))).TTL(3600).Obj()
	f := newFixture(t, tj, nil, nil, nil)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}
	if res, err := f.r.Reconcile(context.Background(), req); err != nil || res.RequeueAfter != 59*time.Minute {
		t.Fatalf("first Reconcile = %+v, %v; want a requeue in 59m", res, err)
	}
	var cur trainer.TrainJob
	if err := f.api.Get(context.Background(), req.NamespacedName, &cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.TTLSecondsAfterFinished = ptr.To[int32](30)
	if err := f.api.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
	if _, err := f.r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := f.api.Get(context.Background(), req.NamespacedName, &cur); !apierrors.IsNotFound(err) {
		t.Errorf("TrainJob still there after its TTL was shortened to have expired (err %v)", err)
	}
	if f.pending.Len() != 0 {
		t.Errorf("pending deletions = %d after the delete, want 0", f.pending.Len())
	}
}

// The delete carries the resourceVersion that was checked: a TrainJob that
// changes between the fresh read and the delete is not deleted.
func TestDeleteIsConditionalOnTheCheckedVersion(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", "ns").Condition(complete(now.Add(-time.Minute))).TTL(0).Obj()
	f := newFixture(t, tj, nil, nil, &interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			// A user extends the TTL at this very moment.
			var cur trainer.TrainJob
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), &cur); err != nil {
				return err
			}
			cur.Spec.TTLSecondsAfterFinished = ptr.To[int32](3600)
			if err := c.Update(ctx, &cur); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	res, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if res.RequeueAfter != conflictRetry {
		t.Errorf("RequeueAfter = %v, want %v to decide again", res.RequeueAfter, conflictRetry)
	}
	var cur trainer.TrainJob
	if err := f.api.Get(context.Background(), client.ObjectKeyFromObject(tj), &cur); err != nil {
		t.Errorf("TrainJob deleted although it changed after the check: %v", err)
	}
	// Nothing was deleted: nothing is announced, so a delete decided
	// again does not repeat the event.
	if ev := f.events(); len(ev) != 0 {
		t.Errorf("events %v for a delete that did not happen", ev)
	}
}

// Finalizers on the TrainJob are honoured: the delete marks it, nothing more.
func TestFinalizersAreHonoured(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", "ns").Condition(complete(now.Add(-time.Minute))).TTL(0).Obj()
	tj.Finalizers = []string{"example.com/keep"}
	f := newFixture(t, tj, nil, nil, nil)
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); err != nil {
		t.Fatal(err)
	}
	var cur trainer.TrainJob
	if err := f.api.Get(context.Background(), client.ObjectKeyFromObject(tj), &cur); err != nil {
		t.Fatalf("TrainJob with a finalizer is gone: %v", err)
	}
	if cur.DeletionTimestamp == nil || len(cur.Finalizers) != 1 {
		t.Errorf("deletionTimestamp %v, finalizers %v: want marked for deletion with its finalizer kept", cur.DeletionTimestamp, cur.Finalizers)
	}
}

func TestDeleteErrorIsReturned(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", "ns").Condition(complete(now.Add(-time.Minute))).TTL(0).Obj()
	boom := errors.New("forbidden by a webhook")
	f := newFixture(t, tj, nil, nil, &interceptor.Funcs{
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error { return boom },
	})
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tj)}); !errors.Is(err, boom) {
		t.Errorf("Reconcile error = %v, want %v so the delete is retried", err, boom)
	}
}

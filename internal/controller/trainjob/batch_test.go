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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// delayRecorder records AddAfter, and Add as a delay of 0; any other way
// of adding panics on the nil interface it embeds, which fails the test.
type delayRecorder struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	after map[reconcile.Request][]time.Duration
}

func (q *delayRecorder) AddAfter(r reconcile.Request, d time.Duration) {
	q.after[r] = append(q.after[r], d)
}

func (q *delayRecorder) Add(r reconcile.Request) { q.AddAfter(r, 0) }

func TestChildJobEventDelays(t *testing.T) {
	owned := func(apiVersion, kind, name string, controller bool) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "child", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(name), Controller: ptr.To(controller),
		}}}}
	}
	tj := func(name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	withCondition := func(j *batchv1.Job, types ...batchv1.JobConditionType) *batchv1.Job {
		j = j.DeepCopy()
		for _, t := range types {
			j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"})
		}
		return j
	}
	update := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], old, updated *batchv1.Job) {
		enqueueOwnerBatched(time.Second).Update(ctx, event.TypedUpdateEvent[*batchv1.Job]{ObjectOld: old, ObjectNew: updated}, q)
	}
	cases := map[string]struct {
		send func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request])
		want map[reconcile.Request][]time.Duration
	}{
		"a TrainJob's Job changes": {
			send: func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				j := owned("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", true)
				enqueueOwnerBatched(time.Second).Update(ctx, event.TypedUpdateEvent[*batchv1.Job]{ObjectOld: j, ObjectNew: j}, q)
			},
			want: map[reconcile.Request][]time.Duration{tj("tj"): {time.Second, time.Second}},
		},
		"a TrainJob's Job is created, then deleted: its disappearance is read at once": {
			send: func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				j := owned("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", true)
				enqueueOwnerBatched(2*time.Second).Create(ctx, event.TypedCreateEvent[*batchv1.Job]{Object: j}, q)
				enqueueOwnerBatched(2*time.Second).Delete(ctx, event.TypedDeleteEvent[*batchv1.Job]{Object: j}, q)
			},
			want: map[reconcile.Request][]time.Duration{tj("tj"): {2 * time.Second, 0}},
		},
		"a TrainJob's Job gets the Job controller's verdict, FailureTarget: read at once": {
			send: func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				j := owned("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", true)
				update(ctx, q, j, withCondition(j, batchv1.JobFailureTarget))
			},
			want: map[reconcile.Request][]time.Duration{tj("tj"): {0, 0}},
		},
		"a TrainJob's Job turns Failed after its FailureTarget: batched": {
			send: func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				j := withCondition(owned("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", true), batchv1.JobFailureTarget)
				update(ctx, q, j, withCondition(j, batchv1.JobFailed))
			},
			want: map[reconcile.Request][]time.Duration{tj("tj"): {time.Second, time.Second}},
		},
		"a TrainJob's Job Complete: batched": {
			send: func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				j := owned("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", true)
				update(ctx, q, j, withCondition(j, batchv1.JobSuccessCriteriaMet, batchv1.JobComplete))
			},
			want: map[reconcile.Request][]time.Duration{tj("tj"): {time.Second, time.Second}},
		},
		"another controller's Job": {
			send: func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				j := owned("jobset.x-k8s.io/v1alpha2", "TrainJob", "js", true)
				enqueueOwnerBatched(time.Second).Update(ctx, event.TypedUpdateEvent[*batchv1.Job]{ObjectOld: j, ObjectNew: j}, q)
			},
			want: map[reconcile.Request][]time.Duration{},
		},
		"a Job a TrainJob owns without controlling it": {
			send: func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				j := owned("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", false)
				enqueueOwnerBatched(time.Second).Generic(ctx, event.TypedGenericEvent[*batchv1.Job]{Object: j}, q)
			},
			want: map[reconcile.Request][]time.Duration{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := &delayRecorder{after: map[reconcile.Request][]time.Duration{}}
			tc.send(t.Context(), q)
			if diff := cmp.Diff(tc.want, q.after); diff != "" {
				t.Errorf("requests added after a delay (-want +got):\n%s", diff)
			}
		})
	}
}

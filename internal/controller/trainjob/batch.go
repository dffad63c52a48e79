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
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/tracking"
)

// childBatchPeriod is how long a child Job's change waits before its
// TrainJob is reconciled. A Job changes several times in quick succession —
// its Pods created, then ready; its Pods done, then the Job Complete — and
// each change read at once costs a reconcile and a status write. Waiting a
// second makes them one, as kube-controller-manager's Job controller does
// with the Pod events of a Job (syncJobBatchPeriod, also one second).
// Changes that wait already do not push the reconcile further back.
//
// Two changes do not wait: a Job's failure verdict (FailureTarget or
// Failed appearing, or the failed Pod that decides it: see podfailure.go)
// and a Job gone. A restart waits on each of them in turn, with the whole
// allocation idle; each comes once in a Job's life.
const childBatchPeriod = time.Second

// enqueueOwnerBatched enqueues the TrainJob that controls a child object,
// and the TrainJob it is labelled for if that is another, period after the
// object's change, or at once for the changes a restart waits on. A Job
// labelled for a TrainJob it does not belong to (an earlier TrainJob's,
// orphaned) may be what holds that TrainJob's child name: its deletion
// frees the name. On a priority queue, the changes seen in the initial
// list and resyncs keep their low priority.
func enqueueOwnerBatched(period time.Duration) handler.TypedEventHandler[*batchv1.Job, reconcile.Request] {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], now bool, jobs ...*batchv1.Job) {
		for _, job := range jobs {
			if job == nil {
				continue
			}
			for _, req := range requestsFor(job) {
				if now {
					q.Add(req)
				} else {
					q.AddAfter(req, period)
				}
			}
		}
	}
	return handler.TypedFuncs[*batchv1.Job, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*batchv1.Job], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, false, e.Object)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*batchv1.Job], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, failedNow(e.ObjectOld, e.ObjectNew), e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*batchv1.Job], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, true, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[*batchv1.Job], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, false, e.Object)
		},
	}
}

// failedNow reports whether a Job's update brings its failure verdict.
func failedNow(old, updated *batchv1.Job) bool {
	if old == nil || updated == nil {
		return false
	}
	was, _ := jobOutcome(old)
	is, _ := jobOutcome(updated)
	return is == failed && was != failed
}

// requestsFor are the requests of the TrainJob that controls o, if one
// does, and of the TrainJob o is labelled for, if another.
func requestsFor(o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	owner, owned := ownerRequest(o)
	if owned {
		reqs = append(reqs, owner)
	}
	if name := o.GetLabels()[trainer.TrainJobNameLabel]; name != "" && (!owned || name != owner.Name) {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}})
	}
	return reqs
}

// ownerRequest is the request of the TrainJob that controls o, if one does.
func ownerRequest(o client.Object) (reconcile.Request, bool) {
	ref := metav1.GetControllerOfNoCopy(o)
	if !tracking.IsTrainJob(ref) {
		return reconcile.Request{}, false
	}
	return reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}}, true
}

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
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
)

// Filters of update events. The controller reconciles a TrainJob in one pass
// and waits for the event of its own status write only when a reconcile
// starts before it (statusWrites.observer passes that one), so updates that
// change nothing it reads are not worth a reconcile: under load they were
// most of its work.

// trainJobUpdates drops updates of a TrainJob that touch its status alone
// (the controller's own writes, mostly).
var trainJobUpdates = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	return !statusOnly(e.ObjectOld, e.ObjectNew)
}}

// statusOnly reports whether an update left everything but the status (and
// the bookkeeping fields that change with any write) as it was.
func statusOnly(old, cur client.Object) bool {
	return old.GetGeneration() == cur.GetGeneration() &&
		(old.GetDeletionTimestamp() == nil) == (cur.GetDeletionTimestamp() == nil) &&
		equality.Semantic.DeepEqual(old.GetLabels(), cur.GetLabels()) &&
		equality.Semantic.DeepEqual(old.GetAnnotations(), cur.GetAnnotations()) &&
		equality.Semantic.DeepEqual(old.GetFinalizers(), cur.GetFinalizers()) &&
		equality.Semantic.DeepEqual(old.GetOwnerReferences(), cur.GetOwnerReferences())
}

// childJobUpdates drops updates of a child Job that leave what the
// controller reads of it unchanged (the Job controller also writes
// uncountedTerminatedPods, completedIndexes and more).
var childJobUpdates = predicate.TypedFuncs[*batchv1.Job]{UpdateFunc: func(e event.TypedUpdateEvent[*batchv1.Job]) bool {
	return !equality.Semantic.DeepEqual(viewOf(e.ObjectOld), viewOf(e.ObjectNew))
}}

// readJobLabelKeys are the labels of a child Job the controller reads: the
// labels that find it (jobplan.ChildLabels) and its restart attempt.
var readJobLabelKeys = append(slices.Collect(maps.Keys(jobplan.ChildLabels("", "", 0))), trainer.JobSetRestartAttemptLabel)

// ReadJobLabels keeps of a child Job's labels those the controller reads
// (readJobLabelKeys). The rest, JobSet's labels and the runtime's and the
// TrainJob's, are there for the Job's users and its Pods, and need not be
// cached.
func ReadJobLabels(labels map[string]string) map[string]string {
	var read map[string]string
	for _, k := range readJobLabelKeys {
		if v, ok := labels[k]; ok {
			if read == nil {
				read = make(map[string]string, len(readJobLabelKeys))
			}
			read[k] = v
		}
	}
	return read
}

// jobView is what the TrainJob controller reads of a child Job.
type jobView struct {
	Active, Ready, Succeeded, Terminating, Parallelism int32
	Suspend, Deleting                                  bool
	Conditions                                         []batchv1.JobCondition
	Labels                                             map[string]string
	Finalizers                                         []string
	OwnerUID                                           string
}

func viewOf(j *batchv1.Job) jobView {
	v := jobView{
		Active:      j.Status.Active,
		Ready:       ptr.Deref(j.Status.Ready, 0),
		Succeeded:   j.Status.Succeeded,
		Terminating: ptr.Deref(j.Status.Terminating, 0),
		Parallelism: ptr.Deref(j.Spec.Parallelism, 1),
		Suspend:     ptr.Deref(j.Spec.Suspend, false),
		Deleting:    j.DeletionTimestamp != nil,
		Labels:      j.Labels,
		Finalizers:  j.Finalizers,
		OwnerUID:    string(ctrlOwnerUID(j)),
	}
	// Conditions without their probe and transition times.
	for _, c := range j.Status.Conditions {
		v.Conditions = append(v.Conditions, batchv1.JobCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	return v
}

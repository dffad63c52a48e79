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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestTrainJobUpdates(t *testing.T) {
	base := utiltesting.MakeTrainJob("tj", "ns").Obj()
	base.Generation = 1
	for name, tc := range map[string]struct {
		edit func(*trainer.TrainJob)
		want bool
	}{
		"status alone":      {func(tj *trainer.TrainJob) { tj.Status.StartTime = &metav1.Time{Time: time.Now()} }, false},
		"spec (generation)": {func(tj *trainer.TrainJob) { tj.Generation = 2 }, true},
		"deletion":          {func(tj *trainer.TrainJob) { tj.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, true},
		"labels":            {func(tj *trainer.TrainJob) { tj.Labels = map[string]string{"team": "a"} }, true},
		"annotations":       {func(tj *trainer.TrainJob) { tj.Annotations = map[string]string{"a": "b"} }, true},
		"finalizers":        {func(tj *trainer.TrainJob) { tj.Finalizers = []string{"example.com/keep"} }, true},
	} {
		t.Run(name, func(t *testing.T) {
			cur := base.DeepCopy()
			tc.edit(cur)
			if got := trainJobUpdates.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: cur}); got != tc.want {
				t.Errorf("reconcile = %t, want %t", got, tc.want)
			}
		})
	}
}

func TestChildJobUpdates(t *testing.T) {
	base := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "tj-node-0", Namespace: "ns", Finalizers: []string{trainer.JobTrackingFinalizer}},
		Spec:       batchv1.JobSpec{Parallelism: ptr.To[int32](2)},
		Status:     batchv1.JobStatus{Active: 2, Ready: ptr.To[int32](1)},
	}
	for name, tc := range map[string]struct {
		edit func(*batchv1.Job)
		want bool
	}{
		"uncounted Pods alone": {func(j *batchv1.Job) {
			j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"p"}}
		}, false},
		"completed indexes alone": {func(j *batchv1.Job) { j.Status.CompletedIndexes = "0" }, false},
		"condition times alone":   {func(j *batchv1.Job) { j.Status.Conditions = nil }, false},
		"ready":                   {func(j *batchv1.Job) { j.Status.Ready = ptr.To[int32](2) }, true},
		"succeeded":               {func(j *batchv1.Job) { j.Status.Succeeded = 1 }, true},
		"terminating":             {func(j *batchv1.Job) { j.Status.Terminating = ptr.To[int32](1) }, true},
		"suspended":               {func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }, true},
		"deleted":                 {func(j *batchv1.Job) { j.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, true},
		"finalizer gone":          {func(j *batchv1.Job) { j.Finalizers = nil }, true},
		"labels":                  {func(j *batchv1.Job) { j.Labels = map[string]string{"a": "b"} }, true},
		"condition added": {func(j *batchv1.Job) {
			j.Status.Conditions = append(j.Status.Conditions, jobCond(batchv1.JobComplete, ""))
		}, true},
		"condition reason changed": {func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{jobCond(batchv1.JobFailed, "DeadlineExceeded")}
		}, true},
		"condition probe time alone": {func(j *batchv1.Job) { j.Status.Conditions[0].LastProbeTime = metav1.Now() }, false},
	} {
		t.Run(name, func(t *testing.T) {
			old := base.DeepCopy()
			old.Status.Conditions = []batchv1.JobCondition{jobCond(batchv1.JobFailed, "BackoffLimitExceeded")}
			cur := old.DeepCopy()
			if name == "condition times alone" {
				cur.Status.Conditions[0].LastTransitionTime = metav1.Now()
			} else {
				tc.edit(cur)
			}
			if got := childJobUpdates.Update(event.TypedUpdateEvent[*batchv1.Job]{ObjectOld: old, ObjectNew: cur}); got != tc.want {
				t.Errorf("reconcile = %t, want %t", got, tc.want)
			}
		})
	}
}

func jobCond(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason}
}

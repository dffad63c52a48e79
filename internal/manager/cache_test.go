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

package manager

import (
	"maps"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestStripJobKeepsWhatTheControllersRead(t *testing.T) {
	read := batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: "tj-node-0", Namespace: "ns", UID: "job-uid", ResourceVersion: "7",
			Labels: map[string]string{
				"trainer.kubeflow.org/trainjob-name": "tj", "trainer.kubeflow.org/replicated-job-name": "node",
				"trainer.kubeflow.org/replica-index": "0", "jobset.sigs.k8s.io/restart-attempt": "1",
			},
			Finalizers:      []string{"trainer.kubeflow.org/job-tracking"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "TrainJob", Name: "tj", UID: "tj-uid", Controller: ptr.To(true)}},
		},
		Spec: batchv1.JobSpec{Parallelism: ptr.To[int32](2), Completions: ptr.To[int32](2), Suspend: ptr.To(false)},
		Status: batchv1.JobStatus{
			Active: 1, Succeeded: 1, Ready: ptr.To[int32](1), Terminating: ptr.To[int32](0),
			Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}},
		},
	}
	cached := read.DeepCopy()
	cached.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	jobSet := map[string]string{"jobset.sigs.k8s.io/jobset-name": "tj", "jobset.sigs.k8s.io/job-key": "9b1d", "jobset.sigs.k8s.io/restart-attempt": "1"}
	cached.Labels = map[string]string{"team": "vision"}
	maps.Copy(cached.Labels, jobSet)
	maps.Copy(cached.Labels, read.Labels)
	cached.Annotations = maps.Clone(jobSet)
	cached.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "job-uid"}}
	cached.Spec.Template = corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "node", Image: "pytorch/pytorch"}}}}
	cached.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"pod-uid"}}

	got, err := stripJob(cached)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&read, got); diff != "" {
		t.Errorf("cached Job (-want +got):\n%s", diff)
	}
}

func TestStripTrainJobDropsKubectlsCopy(t *testing.T) {
	applied := utiltesting.MakeTrainJob("tj", "ns").Annotation(corev1.LastAppliedConfigAnnotation, `{"apiVersion":"trainer.kubeflow.org/v1alpha1"}`).
		Annotation("team", "vision").Obj()
	applied.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	want := utiltesting.MakeTrainJob("tj", "ns").Annotation("team", "vision").Obj()

	got, err := stripTrainJob(applied)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cached TrainJob (-want +got):\n%s", diff)
	}
}

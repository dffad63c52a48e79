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

package jobplan

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestPodGroupPolicy(t *testing.T) {
	coscheduling := strings.Replace(torchtuneRuntime("torchtune-qwen2.5-1.5b"), "spec:\n  mlPolicy:", "spec:\n  podGroupPolicy:\n    coscheduling:\n      scheduleTimeoutSeconds: 120\n  mlPolicy:", 1)
	coscheduling = strings.Replace(coscheduling, "                      resources:\n                        limits:\n", "                      resources:\n                        requests:\n                          cpu: 500m\n                        limits:\n                          memory: 1Gi\n", 1)
	volcano := strings.Replace(deepSpeedRuntime, "spec:\n  mlPolicy:", "spec:\n  podGroupPolicy:\n    volcano:\n      networkTopology:\n        mode: soft\n        highestTierAllowed: 2\n  mlPolicy:", 1)
	volcano = strings.Replace(volcano, "  template:\n    spec:\n      network:", "  template:\n    metadata:\n      annotations:\n        scheduling.volcano.sh/queue-name: research\n    spec:\n      network:", 1)
	volcano = strings.Replace(volcano, "                spec:\n                  containers:\n                    - name: node\n                      image: ghcr.io/kubeflow/trainer/deepspeed-runtime\n                      command:",
		"                spec:\n                  priorityClassName: high\n                  containers:\n                    - name: node\n                      image: ghcr.io/kubeflow/trainer/deepspeed-runtime\n                      command:", 1)

	cases := map[string]struct {
		runtime  string
		trainJob *utiltesting.TrainJobWrapper
		want     string
		podLabel bool
	}{
		"coscheduling: the members and requests of the Pods that start together": {
			runtime:  coscheduling,
			trainJob: utiltesting.MakeTrainJob("tj", "ns").NumNodes(2),
			podLabel: true,
			// 2 trainer nodes of 500m CPU, 1Gi and 2 GPUs each.
			want: `{"apiVersion":"scheduling.x-k8s.io/v1alpha1","kind":"PodGroup","metadata":{"labels":{"trainer.kubeflow.org/trainjob-name":"tj"},"name":"tj","namespace":"ns","ownerReferences":[{"apiVersion":"trainer.kubeflow.org/v1alpha1","blockOwnerDeletion":true,"controller":true,"kind":"TrainJob","name":"tj","uid":""}]},"spec":{"minMember":2,"minResources":{"cpu":"1","memory":"2Gi","nvidia.com/gpu":"4"},"scheduleTimeoutSeconds":120}}`,
		},
		"volcano: the nodes, which the launcher joins once they are Ready; queue, priority class, topology": {
			runtime:  volcano,
			trainJob: utiltesting.MakeTrainJob("tj", "ns").NumNodes(4),
			want:     `{"apiVersion":"scheduling.volcano.sh/v1beta1","kind":"PodGroup","metadata":{"labels":{"trainer.kubeflow.org/trainjob-name":"tj"},"name":"tj","namespace":"ns","ownerReferences":[{"apiVersion":"trainer.kubeflow.org/v1alpha1","blockOwnerDeletion":true,"controller":true,"kind":"TrainJob","name":"tj","uid":""}]},"spec":{"minMember":3,"minResources":{},"networkTopology":{"highestTierAllowed":2,"mode":"soft"},"priorityClassName":"high","queue":"research"}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan, err := Build(tc.trainJob.Obj(), runtimeOf(t, tc.runtime))
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if plan.PodGroup == nil {
				t.Fatal("no PodGroup")
			}
			got, err := plan.PodGroup.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, strings.TrimSpace(string(got))); diff != "" {
				t.Errorf("PodGroup (-want +got):\n%s", diff)
			}
			for _, job := range plan.Jobs {
				pod := job.Spec.Template
				if tc.podLabel && pod.Labels["scheduling.x-k8s.io/pod-group"] != "tj" || !tc.podLabel && pod.Annotations["scheduling.k8s.io/group-name"] != "tj" {
					t.Errorf("Pods of %s do not name the group: labels %v annotations %v", job.Name, pod.Labels, pod.Annotations)
				}
			}
		})
	}
	t.Run("the TrainJob's queue before the runtime's", func(t *testing.T) {
		tj := utiltesting.MakeTrainJob("tj", "ns").NumNodes(4).Obj()
		tj.Spec.Annotations = map[string]string{"scheduling.volcano.sh/queue-name": "urgent"}
		plan, err := Build(tj, runtimeOf(t, volcano))
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		if q, _, _ := unstructured.NestedString(plan.PodGroup.Object, "spec", "queue"); q != "urgent" {
			t.Errorf("queue %q, want urgent", q)
		}
	})
	for name, tc := range map[string]struct {
		runtime     string
		annotations map[string]string
		want        string
	}{
		"an empty queue name of the TrainJob": {runtime: volcano, annotations: map[string]string{"scheduling.volcano.sh/queue-name": ""},
			want: `spec.annotations[scheduling.volcano.sh/queue-name]: Invalid value: "": the Volcano queue name must not be empty`},
		"an empty queue name of the runtime": {runtime: strings.Replace(volcano, "queue-name: research", `queue-name: ""`, 1),
			want: `spec.template.metadata.annotations[scheduling.volcano.sh/queue-name]: Invalid value: "": the Volcano queue name must not be empty`},
	} {
		t.Run(name, func(t *testing.T) {
			tj := utiltesting.MakeTrainJob("tj", "ns").NumNodes(4).Obj()
			tj.Spec.Annotations = tc.annotations
			_, err := Build(tj, runtimeOf(t, tc.runtime))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build: %v, want an error with %q", err, tc.want)
			}
		})
	}
	t.Run("no podGroupPolicy, no PodGroup", func(t *testing.T) {
		plan, err := Build(utiltesting.MakeTrainJob("tj", "ns").Obj(), runtimeOf(t, deepSpeedRuntime))
		if err != nil || plan.PodGroup != nil {
			t.Errorf("Build: %v, PodGroup %v", err, plan.PodGroup)
		}
	})
}

func TestPodRequests(t *testing.T) {
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{
			{Name: "big-init", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}}},
			{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
		},
		Containers: []corev1.Container{{Name: "node", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}},
		Overhead: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")},
	}
	got := quantities(podRequests(spec))
	// CPU: the larger of the init container's 4 (a limit standing for its
	// request) plus nothing, and 2 + the sidecar's 1; memory: the limit
	// standing for the request, and the overhead.
	want := map[string]any{"cpu": "4", "memory": "1124Mi"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestSamePodGroup(t *testing.T) {
	want := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"minMember": int64(3), "scheduleTimeoutSeconds": int64(60)}}}
	var live unstructured.Unstructured
	if err := runtime.DecodeInto(unstructured.UnstructuredJSONScheme, []byte(`{"apiVersion":"v1","kind":"X","spec":{"minMember":3,"scheduleTimeoutSeconds":60,"extra":true}}`), &live); err != nil {
		t.Fatal(err)
	}
	if !SamePodGroup(&live, want) {
		t.Error("a PodGroup read back with the same spec, and a field added, is not the same")
	}
	if err := unstructured.SetNestedField(live.Object, int64(4), "spec", "minMember"); err != nil {
		t.Fatal(err)
	}
	if SamePodGroup(&live, want) {
		t.Error("a PodGroup of another minMember is the same")
	}
}

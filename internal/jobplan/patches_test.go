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
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// podPatch is a runtime patch of the Pod template of replicated Job rjob.
func podPatch(manager, rjob string, meta *trainer.PatchMetadata, spec *trainer.PodSpecPatch) trainer.RuntimePatch {
	return trainer.RuntimePatch{
		Manager: manager,
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
			Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
				Name: rjob,
				Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
					Template: &trainer.PodTemplatePatch{Metadata: meta, Spec: spec},
				}},
			}}},
		}},
	}
}

func TestRuntimePatches(t *testing.T) {
	// The trainer step runs node and a sidecar; the runtime places it on
	// a pool and tolerates its taint.
	rjob := utiltesting.MakeReplicatedJob("node").Trainer().Containers(
		corev1.Container{Name: "node", Image: "trainer:1", Env: []corev1.EnvVar{{Name: "A", Value: "runtime"}}},
		corev1.Container{Name: "sidecar", Image: "sidecar:1", Env: []corev1.EnvVar{{Name: "LEVEL", Value: "info"}, {Name: "KEEP", Value: "1"}}},
	).Obj()
	rjob.Template.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "train"}
	rjob.Template.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "pool", Value: "train", Effect: corev1.TaintEffectNoSchedule}}
	spec := utiltesting.MakeRuntimeSpec().ReplicatedJobs(rjob).Torch()
	before := spec.Obj().DeepCopy()

	flavor := []corev1.Toleration{{Key: "flavor", Operator: corev1.TolerationOpExists}}
	kueue := podPatch(trainer.KueueManager, "node",
		&trainer.PatchMetadata{Labels: map[string]string{"kueue.x-k8s.io/podset": "node"}, Annotations: map[string]string{"note": "kueue"}},
		&trainer.PodSpecPatch{
			NodeSelector:    map[string]string{"cloud.example/flavor": "spot"},
			Tolerations:     flavor,
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}},
		})
	user := podPatch("example.com/user", "node",
		&trainer.PatchMetadata{Annotations: map[string]string{"note": "user"}},
		&trainer.PodSpecPatch{
			Containers: []trainer.ContainerPatch{{
				Name:         "sidecar",
				Env:          []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}},
			}},
			Volumes:          []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
		})
	jobLevel := trainer.RuntimePatch{Manager: "example.com/jobs", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
		Metadata: &trainer.PatchMetadata{Labels: map[string]string{"cost-center": "42"}},
	}}}
	tj := utiltesting.MakeTrainJob("tj", "ns").NumNodes(1).Obj()
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{kueue, user, jobLevel}

	plan, err := Build(tj, clusterRuntime(spec))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	job := plan.Jobs[0]
	pod := job.Spec.Template

	if got, want := pod.Spec.NodeSelector, map[string]string{"pool": "train", "cloud.example/flavor": "spot"}; !cmp.Equal(got, want) {
		t.Errorf("nodeSelector = %v, want the runtime's and the flavor's: %v", got, want)
	}
	if diff := cmp.Diff(flavor, pod.Spec.Tolerations); diff != "" {
		t.Errorf("tolerations replace the runtime's (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}}, pod.Spec.SchedulingGates); diff != "" {
		t.Errorf("scheduling gates (-want +got):\n%s", diff)
	}
	if pod.Labels["kueue.x-k8s.io/podset"] != "node" {
		t.Errorf("Pod labels %v lack the patch's", pod.Labels)
	}
	if pod.Annotations["note"] != "user" {
		t.Errorf("Pod annotation note = %q, want the later patch's, user", pod.Annotations["note"])
	}
	if job.Labels["cost-center"] != "42" {
		t.Errorf("Job labels %v lack the template metadata patch's", job.Labels)
	}
	var sidecar, node corev1.Container
	for _, c := range pod.Spec.Containers {
		switch c.Name {
		case "sidecar":
			sidecar = c
		case "node":
			node = c
		}
	}
	if diff := cmp.Diff([]corev1.EnvVar{{Name: "LEVEL", Value: "debug"}, {Name: "KEEP", Value: "1"}}, sidecar.Env); diff != "" {
		t.Errorf("sidecar env merges by name (-want +got):\n%s", diff)
	}
	if sidecar.Image != "sidecar:1" {
		t.Errorf("sidecar image = %q, want the runtime's", sidecar.Image)
	}
	if diff := cmp.Diff([]corev1.VolumeMount{{Name: "cache", MountPath: "/cache"}}, sidecar.VolumeMounts); diff != "" {
		t.Errorf("sidecar volume mounts (-want +got):\n%s", diff)
	}
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].Name != "cache" || len(pod.Spec.ImagePullSecrets) != 1 {
		t.Errorf("volumes %v and image pull secrets %v, want the patch's", pod.Spec.Volumes, pod.Spec.ImagePullSecrets)
	}
	if envValue(job, "A") != "runtime" || envValue(job, EnvNumNodes) == "" {
		t.Errorf("node env %v: want the runtime's and the torch policy's", node.Env)
	}
	if diff := cmp.Diff(before, spec.Obj()); diff != "" {
		t.Errorf("the runtime was changed (-before +after):\n%s", diff)
	}
}

func TestRuntimePatchErrors(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().Torch()
	cases := map[string]struct {
		patch trainer.RuntimePatch
		want  string
	}{
		"a replicated Job the runtime does not have": {
			patch: podPatch("example.com/m", "launcher", nil, &trainer.PodSpecPatch{NodeSelector: map[string]string{"a": "b"}}),
			want:  `spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].name: Not found: "launcher"`,
		},
		"a container the replicated Job does not have": {
			patch: podPatch("example.com/m", "node", nil, &trainer.PodSpecPatch{Containers: []trainer.ContainerPatch{{Name: "sidecar"}}}),
			want:  `spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].name: Invalid value: "sidecar": replicated Job "node" of the runtime has no containers of that name`,
		},
		"an init container the replicated Job does not have": {
			patch: podPatch("example.com/m", "node", nil, &trainer.PodSpecPatch{InitContainers: []trainer.ContainerPatch{{Name: "node"}}}),
			want:  `initContainers[0].name: Invalid value: "node": replicated Job "node" of the runtime has no initContainers of that name`,
		},
		"the trainer container's environment": {
			patch: podPatch("example.com/m", "node", nil, &trainer.PodSpecPatch{Containers: []trainer.ContainerPatch{{Name: "node", Env: []corev1.EnvVar{{Name: "X", Value: "1"}}}}}),
			want:  `containers[0].env: Forbidden: the environment of the node container is set through spec.trainer.env`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := utiltesting.MakeTrainJob("tj", "ns").Obj()
			tj.Spec.RuntimePatches = []trainer.RuntimePatch{tc.patch}
			_, err := Build(tj, clusterRuntime(spec))
			var perr *Error
			if !errors.As(err, &perr) {
				t.Fatalf("Build error = %v, want an *Error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build error = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// Kubeflow v2.0's podSpecOverrides and v2.1's podTemplateOverrides apply as
// runtime patches do, in that order and before runtimePatches.
func TestKubeflowOverrides(t *testing.T) {
	rjob := utiltesting.MakeReplicatedJob("node").Trainer().Containers(
		corev1.Container{Name: "node", Image: "trainer:1"},
		corev1.Container{Name: "sidecar", Image: "sidecar:1"},
	).Obj()
	spec := utiltesting.MakeRuntimeSpec().ReplicatedJobs(rjob)
	tj := utiltesting.MakeTrainJob("tj", "ns").Obj()
	targets := []trainer.PodTemplateOverrideTargetJob{{Name: "node"}}
	tj.Spec.PodSpecOverrides = []trainer.PodSpecOverride{{
		TargetJobs:   targets,
		NodeSelector: map[string]string{"pool": "v20", "zone": "a"},
		Tolerations:  []corev1.Toleration{{Key: "v20", Operator: corev1.TolerationOpExists}},
	}}
	tj.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{{
		TargetJobs: targets,
		Metadata:   &trainer.PatchMetadata{Labels: map[string]string{"team": "vision"}},
		Spec: &trainer.PodTemplateSpecOverride{
			NodeSelector: map[string]string{"pool": "v21"},
			Containers:   []trainer.ContainerOverride{{Name: "sidecar", Env: []corev1.EnvVar{{Name: "LEVEL", Value: "debug"}}}},
		},
	}}
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{podPatch("example.com/m", "node", nil, &trainer.PodSpecPatch{NodeSelector: map[string]string{"zone": "b"}})}

	plan, err := Build(tj, clusterRuntime(spec))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	pod := plan.Jobs[0].Spec.Template
	if want := map[string]string{"pool": "v21", "zone": "b"}; !cmp.Equal(pod.Spec.NodeSelector, want) {
		t.Errorf("nodeSelector = %v, want %v: each later change wins", pod.Spec.NodeSelector, want)
	}
	if len(pod.Spec.Tolerations) != 1 || pod.Spec.Tolerations[0].Key != "v20" {
		t.Errorf("tolerations = %v, want podSpecOverrides'", pod.Spec.Tolerations)
	}
	if pod.Labels["team"] != "vision" {
		t.Errorf("Pod labels %v lack podTemplateOverrides'", pod.Labels)
	}
	if c := pod.Spec.Containers[1]; c.Name != "sidecar" || len(c.Env) != 1 || c.Env[0].Value != "debug" {
		t.Errorf("sidecar = %+v, want podTemplateOverrides' env", c)
	}

	tj.Spec.PodTemplateOverrides[0].TargetJobs = []trainer.PodTemplateOverrideTargetJob{{Name: "node"}, {Name: "launcher"}}
	tj.Spec.PodTemplateOverrides[0].Spec.Containers[0].Name = "logger"
	_, err = Build(tj, clusterRuntime(spec))
	for _, want := range []string{
		`spec.podTemplateOverrides[0].targetJobs[1].name: Not found: "launcher"`,
		`spec.podTemplateOverrides[0].spec.containers[0].name: Invalid value: "logger"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Build error = %v, want it to contain %s", err, want)
		}
	}
}

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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// containerEnv is the environment of the container or init container name
// of the first Job of plan.
func containerEnv(t *testing.T, plan *Plan, name string) map[string]string {
	t.Helper()
	for _, job := range plan.Jobs[:1] {
		pod := job.Spec.Template.Spec
		for _, c := range append(pod.Containers, pod.InitContainers...) {
			if c.Name != name {
				continue
			}
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
				if e.ValueFrom != nil {
					env[e.Name] = "valueFrom"
				}
			}
			return env
		}
	}
	t.Fatalf("no container %q in %s", name, plan.Jobs[0].Name)
	return nil
}

func TestTorchEnvironment(t *testing.T) {
	petEnv := map[string]string{
		EnvNumNodes: "2", EnvNumProcPerNode: "1", EnvNodeRank: "valueFrom",
		EnvMasterAddr: "tj-node-0-0.tj", EnvMasterPort: "29500",
	}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range petEnv {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	node := utiltesting.MakeReplicatedJob("node").Trainer().Containers(
		corev1.Container{Name: "node", Env: []corev1.EnvVar{{Name: EnvMasterPort, Value: "1234"}, {Name: "A", Value: "a"}}},
		corev1.Container{Name: "monitor"},
	).Obj()
	node.Template.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "preflight"}}
	mlPolicy := func(inj *trainer.EnvInjection) *trainer.MLPolicy {
		return &trainer.MLPolicy{NumNodes: ptr.To[int32](2), Torch: &trainer.TorchMLPolicySource{EnvInjection: inj}}
	}
	runtimeOf := func(inj *trainer.EnvInjection) Runtime {
		spec := utiltesting.MakeRuntimeSpec().ReplicatedJobs(node).Obj()
		spec.MLPolicy = mlPolicy(inj)
		return Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch-distributed", Spec: spec}
	}
	withTrainer := utiltesting.MakeTrainJob("tj", "ns").Image("trainer:1").Obj()

	t.Run("the trainer container's PET_* replace the runtime's", func(t *testing.T) {
		plan, err := Build(withTrainer, runtimeOf(nil))
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		if diff := cmp.Diff(with(map[string]string{"A": "a"}), containerEnv(t, plan, "node")); diff != "" {
			t.Errorf("node env (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{}, containerEnv(t, plan, "monitor")); diff != "" {
			t.Errorf("a container envInjection does not name gets nothing (-want +got):\n%s", diff)
		}
	})
	t.Run("without spec.trainer, as in Kubeflow, the trainer container gets none", func(t *testing.T) {
		plan, err := Build(utiltesting.MakeTrainJob("tj", "ns").Obj(), runtimeOf(nil))
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		if diff := cmp.Diff(map[string]string{EnvMasterPort: "1234", "A": "a"}, containerEnv(t, plan, "node")); diff != "" {
			t.Errorf("node env (-want +got):\n%s", diff)
		}
		if ports := plan.Jobs[0].Spec.Template.Spec.Containers[0].Ports; len(ports) != 0 {
			t.Errorf("node ports = %v, want none", ports)
		}
	})
	inj := &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{{JobName: "node", ContainerNames: []string{"monitor", "preflight"}}}}
	for _, tj := range []*trainer.TrainJob{withTrainer, utiltesting.MakeTrainJob("tj", "ns").Obj()} {
		t.Run("envInjection, spec.trainer set: "+boolString(tj.Spec.Trainer != nil), func(t *testing.T) {
			plan, err := Build(tj, runtimeOf(inj))
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			for _, c := range []string{"monitor", "preflight"} {
				if diff := cmp.Diff(petEnv, containerEnv(t, plan, c)); diff != "" {
					t.Errorf("%s env (-want +got):\n%s", c, diff)
				}
			}
		})
	}
	t.Run("envInjection naming a container the replicated Job lacks", func(t *testing.T) {
		missing := &trainer.EnvInjection{Targets: []trainer.EnvInjectionTarget{{JobName: "node", ContainerNames: []string{"monitor", "logger"}}}}
		_, err := Build(withTrainer, runtimeOf(missing))
		want := `runtime[ClusterTrainingRuntime/torch-distributed].spec.mlPolicy.torch.envInjection.targets[0].containerNames[1]: Not found: "container \"logger\" of replicated Job \"node\""`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Build error = %v, want it to contain %s", err, want)
		}
	})
}

func boolString(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func TestNumProcPerNode(t *testing.T) {
	res := func(requests, limits corev1.ResourceList) *corev1.ResourceRequirements {
		return &corev1.ResourceRequirements{Requests: requests, Limits: limits}
	}
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	gpus := res(nil, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4"), corev1.ResourceCPU: resource.MustParse("16")})
	cases := map[string]struct {
		runtime          *intstr.IntOrString // v2.0 and v2.1 runtimes only
		runtimeResources *corev1.ResourceRequirements
		trainJob         *int32
		resources        *corev1.ResourceRequirements
		want             string
	}{
		"auto without resources is 1":                        {want: "1"},
		"auto with GPUs is left to torchrun":                 {resources: gpus, want: "auto"},
		"auto with GPUs requested but not limited":           {resources: res(corev1.ResourceList{"amd.com/gpu": resource.MustParse("2")}, nil), want: "auto"},
		"auto with a CPU request is its CPUs, rounded up":    {resources: res(cpu("3500m"), nil), want: "4"},
		"auto with a CPU limit only is the limit":            {resources: res(nil, cpu("2500m")), want: "3"},
		"auto with less than one CPU is 1":                   {resources: res(nil, cpu("500m")), want: "1"},
		"the CPU request wins over the limit":                {resources: res(cpu("2"), cpu("8")), want: "2"},
		"the runtime container's resources when none is set": {runtimeResources: res(cpu("6"), nil), want: "6"},
		"the TrainJob's resources alone when it sets some":   {runtimeResources: res(cpu("6"), nil), resources: res(nil, cpu("2")), want: "2"},
		"the TrainJob's integer":                             {trainJob: ptr.To[int32](2), resources: gpus, want: "2"},
		"a v2.1 runtime's integer":                           {runtime: ptr.To(intstr.FromInt32(8)), resources: gpus, want: "8"},
		"the TrainJob wins over a v2.1 runtime":              {runtime: ptr.To(intstr.FromInt32(8)), trainJob: ptr.To[int32](2), want: "2"},
		"a v2.1 runtime's cpu ignores GPUs":                  {runtime: ptr.To(intstr.FromString("cpu")), resources: gpus, want: "16"},
		"a v2.1 runtime's gpu is passed on":                  {runtime: ptr.To(intstr.FromString("gpu")), resources: res(cpu("3"), nil), want: "gpu"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rjob := utiltesting.MakeReplicatedJob("node").Trainer().Obj()
			if tc.runtimeResources != nil {
				rjob.Template.Spec.Template.Spec.Containers[0].Resources = *tc.runtimeResources
			}
			spec := utiltesting.MakeRuntimeSpec().ReplicatedJobs(rjob).Torch()
			if tc.runtime != nil {
				spec.NumProcPerNode(*tc.runtime)
			}
			w := utiltesting.MakeTrainJob("a", "ns").NumNodes(1)
			if tc.resources != nil {
				w.Resources(*tc.resources)
			}
			if tc.trainJob != nil {
				w.NumProcPerNode(*tc.trainJob)
			}
			plan, err := Build(w.Obj(), clusterRuntime(spec))
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if got := envValue(plan.Jobs[0], EnvNumProcPerNode); got != tc.want {
				t.Errorf("PET_NPROC_PER_NODE = %q, want %q", got, tc.want)
			}
		})
	}
}

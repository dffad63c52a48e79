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

package integration

import (
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// frameworkLabel is the label by which the Kubeflow SDK lists and reads
// runtimes: it skips, with a warning, a runtime without it, and fails to
// read a TrainJob on such a runtime.
const frameworkLabel = "trainer.kubeflow.org/framework"

// sdkFrameworks are the values of frameworkLabel the shipped runtimes
// carry, each with the ML policy a runtime of that framework has. The SDK
// takes torchtune for its BuiltinTrainer (tune run) and any other value
// for a CustomTrainer, whose entrypoint it then chooses by the policy:
// torchrun for torch, mpirun for mpi, python with none. plainml, after
// Kubeflow Trainer's PlainML policy, is the runtime without one.
var sdkFrameworks = map[string]string{
	"torch":     "torch",
	"torchtune": "torch",
	"deepspeed": "mpi",
	"mlx":       "mpi",
	"jax":       "jax",
	"xgboost":   "xgboost",
	"plainml":   "",
}

// policyOf is the name of the ML policy a runtime sets, "" for none.
func policyOf(p *trainer.MLPolicy) string {
	if p == nil {
		return ""
	}
	for name, set := range map[string]bool{"torch": p.Torch != nil, "mpi": p.MPI != nil, "jax": p.JAX != nil, "xgboost": p.XGBoost != nil, "flux": p.Flux != nil} {
		if set {
			return name
		}
	}
	return ""
}

// Every runtime of config/runtimes is one the Kubeflow SDK lists and
// reads as what it is: it has the framework label, of a framework whose
// ML policy is the runtime's, an mlPolicy, and the container node of a
// replicated Job labelled trainer.kubeflow.org/trainjob-ancestor-step,
// whose image the SDK shows as the runtime's.
func TestRuntimesAreReadableByTheKubeflowSDK(t *testing.T) {
	out, err := cluster.Kubectl("kustomize", filepath.Join(repoRoot, "config", "runtimes"))
	if err != nil {
		t.Fatalf("kubectl kustomize config/runtimes: %v\n%s", err, out)
	}
	objs := decodeObjects(t, out)
	if len(objs) == 0 {
		t.Fatal("config/runtimes has no runtime")
	}
	for _, u := range objs {
		t.Run(u.GetName(), func(t *testing.T) {
			var rt trainer.ClusterTrainingRuntime
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &rt); err != nil {
				t.Fatal(err)
			}
			framework, ok := rt.Labels[frameworkLabel]
			if !ok {
				t.Fatalf("no label %s: the SDK does not list it", frameworkLabel)
			}
			policy, known := sdkFrameworks[framework]
			switch {
			case !known:
				t.Errorf("%s=%q: not a framework of sdkFrameworks (add it, with its ML policy, if the SDK reads it as it should)", frameworkLabel, framework)
			case policy != policyOf(rt.Spec.MLPolicy):
				t.Errorf("%s=%q, whose ML policy is %q, on a runtime with the policy %q: the SDK would give it another trainer or entrypoint",
					frameworkLabel, framework, policy, policyOf(rt.Spec.MLPolicy))
			}
			if rt.Spec.MLPolicy == nil {
				t.Error("no mlPolicy: the SDK refuses a runtime without one")
			}
			if !slices.ContainsFunc(rt.Spec.Template.Spec.ReplicatedJobs, func(r trainer.ReplicatedJob) bool {
				if _, ok := r.Template.Labels[trainer.AncestorStepLabel]; !ok {
					return false
				}
				return slices.ContainsFunc(r.Template.Spec.Template.Spec.Containers, func(c corev1.Container) bool {
					return c.Name == "node" && c.Image != ""
				})
			}) {
				t.Errorf("no container node with an image in a replicated Job labelled %s: the SDK finds no trainer", trainer.AncestorStepLabel)
			}
		})
	}
}

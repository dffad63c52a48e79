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
	"testing"

	"github.com/google/go-cmp/cmp"

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// frameworkRuntime has the shape of Kubeflow v2.3's jax-distributed,
// xgboost-distributed and flux-distributed runtimes: one trainer step,
// node, with policy.
func frameworkRuntime(name, policy string) string {
	return `
metadata:
  name: ` + name + `
spec:
  mlPolicy:
    numNodes: 1
    ` + policy + `: {}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: nvcr.io/nvidia/jax:25.10-py3
`
}

func TestJAXEnvironment(t *testing.T) {
	rt := runtimeOf(t, frameworkRuntime("jax-distributed", "jax"))
	cases := map[string]struct {
		trainJob *utiltesting.TrainJobWrapper
		want     map[string]string
		port     bool
	}{
		"one process per node, node 0 the coordinator": {
			trainJob: utiltesting.MakeTrainJob("j", "ns").NumNodes(4),
			want:     map[string]string{"JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "valueFrom", "JAX_COORDINATOR_ADDRESS": "j-node-0-0.j:29500"},
			port:     true,
		},
		"a variable the TrainJob sets wins, as under Kubeflow": {
			trainJob: utiltesting.MakeTrainJob("j", "ns").Env("JAX_COORDINATOR_ADDRESS", "elsewhere:1"),
			want:     map[string]string{"JAX_NUM_PROCESSES": "1", "JAX_PROCESS_ID": "valueFrom", "JAX_COORDINATOR_ADDRESS": "elsewhere:1"},
			port:     true,
		},
		"without spec.trainer, nothing, as under Kubeflow": {
			trainJob: utiltesting.MakeTrainJob("j", "ns"),
			want:     map[string]string{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan, err := Build(tc.trainJob.Obj(), rt)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			c := trainerContainer(plan.Jobs[0])
			if diff := cmp.Diff(tc.want, envOf(c)); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if got := len(c.Ports) == 1 && c.Ports[0].ContainerPort == 29500; got != tc.port {
				t.Errorf("ports %v, want the trainer port: %v", c.Ports, tc.port)
			}
			for _, e := range c.Env {
				if e.Name == "JAX_PROCESS_ID" && e.ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
					t.Errorf("JAX_PROCESS_ID from %v, want the completion index", e.ValueFrom)
				}
			}
		})
	}
}

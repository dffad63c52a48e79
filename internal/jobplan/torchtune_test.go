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

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// torchtuneRuntime has the shape of the trainer step of Kubeflow v2.3's
// torchtune runtimes: the model's paths on the trainer's command line, and
// 2 GPUs per node.
func torchtuneRuntime(name string) string {
	return `
metadata:
  name: ` + name + `
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
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
                      image: ghcr.io/kubeflow/trainer/torchtune-trainer
                      command:
                        - tune
                        - run
                        - --rdzv_endpoint=localhost:29500
                        - full_finetune_distributed
                        - --config
                        - qwen2_5/1.5B_full
                        - dataset=torchtune.datasets.instruct_dataset
                        - output_dir=/workspace/output
                        - tokenizer.path=/workspace/model/vocab.json
                        - tokenizer.merges_file=/workspace/model/merges.txt
                        - checkpointer.checkpoint_dir=/workspace/model
                      resources:
                        limits:
                          nvidia.com/gpu: 2
`
}

func TestTorchtune(t *testing.T) {
	paths := []string{"output_dir=/workspace/output", "tokenizer.path=/workspace/model/vocab.json", "tokenizer.merges_file=/workspace/model/merges.txt", "checkpointer.checkpoint_dir=/workspace/model"}
	oneGPU := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}
	tune := func(runtime string) *utiltesting.TrainJobWrapper {
		return utiltesting.MakeTrainJob("tune", "ns").RuntimeRef("ClusterTrainingRuntime", runtime).Command("tune", "run")
	}
	cases := map[string]struct {
		runtime  string
		trainJob *utiltesting.TrainJobWrapper
		command  []string
		err      string
	}{
		"2 GPUs: the distributed recipe, with node 0 as the rendezvous": {
			runtime:  "torchtune-qwen2.5-1.5b",
			trainJob: tune("torchtune-qwen2.5-1.5b"),
			command:  append([]string{"tune", "run", "--rdzv_endpoint=tune-node-0-0.tune:29500", "full_finetune_distributed", "--config", "qwen2_5/1.5B_full"}, paths...),
		},
		"1 GPU and LoRA: the single-device LoRA recipe, no rendezvous": {
			runtime:  "torchtune-llama3.2-1b",
			trainJob: tune("torchtune-llama3.2-1b").Resources(oneGPU).Args("model.lora_attn_modules=[q_proj,v_proj]"),
			command:  append([]string{"tune", "run", "lora_finetune_single_device", "--config", "llama3_2/1B_lora_single_device"}, paths...),
		},
		"2 GPUs and QLoRA: the distributed QLoRA config of the 70B model": {
			runtime:  "torchtune-llama3.3-70b",
			trainJob: tune("torchtune-llama3.3-70b").Args("model.quantize_base=True"),
			command:  append([]string{"tune", "run", "--rdzv_endpoint=tune-node-0-0.tune:29500", "lora_finetune_distributed", "--config", "llama3_3/70B_qlora"}, paths...),
		},
		"several nodes of the 70B model: the multi-node config": {
			runtime:  "torchtune-llama3.3-70b",
			trainJob: tune("torchtune-llama3.3-70b").NumNodes(2),
			command:  append([]string{"tune", "run", "--rdzv_endpoint=tune-node-0-0.tune:29500", "full_finetune_distributed", "--config", "llama3_3/70B_full_multinode"}, paths...),
		},
		"QLoRA with DoRA is LoRA": {
			runtime:  "torchtune-llama3.2-3b",
			trainJob: tune("torchtune-llama3.2-3b").Resources(oneGPU).Args("model.quantize_base=True", "model.use_dora=true", "model.lora_attn_modules=[q_proj]"),
			command:  append([]string{"tune", "run", "lora_finetune_single_device", "--config", "llama3_2/3B_lora_single_device"}, paths...),
		},
		"a model Kubeflow has no runtime for": {
			runtime:  "torchtune-gemma-2b",
			trainJob: tune("torchtune-gemma-2b"),
			err:      `spec.runtimeRef.name: Invalid value: "torchtune-gemma-2b": a torchtune trainer (command: [tune, run]) needs a runtime named torchtune-<model>-<size> for one of the models llama3_2/1B, llama3_2/3B, llama3_3/70B, qwen2_5/1.5B; this name gives "gemma/2B"`,
		},
		"several nodes of a small model": {
			runtime:  "torchtune-llama3.2-1b",
			trainJob: tune("torchtune-llama3.2-1b").NumNodes(2),
			err:      "spec.trainer.numNodes: Invalid value: 2: torchtune fine-tunes llama3_2/1B on one node only; only llama3_3/70B runs on several",
		},
		"LoRA on several nodes": {
			runtime:  "torchtune-llama3.3-70b",
			trainJob: tune("torchtune-llama3.3-70b").NumNodes(2).Args("model.lora_attn_modules=[q_proj]"),
			err:      "spec.trainer.numNodes: Invalid value: 2: torchtune has no LoRA or QLoRA recipe for several nodes",
		},
		"QLoRA of a small model on 2 GPUs": {
			runtime:  "torchtune-llama3.2-1b",
			trainJob: tune("torchtune-llama3.2-1b").Args("model.quantize_base=true"),
			err:      "torchtune has QLoRA configs for llama3_2/1B on a single device only",
		},
		"QLoRA of Qwen": {
			runtime:  "torchtune-qwen2.5-1.5b",
			trainJob: tune("torchtune-qwen2.5-1.5b").Resources(oneGPU).Args("model.quantize_base=true"),
			err:      "torchtune has no QLoRA config for qwen2_5/1.5B",
		},
		"args setting what the runtime sets": {
			runtime:  "torchtune-qwen2.5-1.5b",
			trainJob: tune("torchtune-qwen2.5-1.5b").Args("epochs=1", "output_dir=/tmp/out"),
			err:      "spec.trainer.args[1]: Forbidden: output_dir is set by runtime ClusterTrainingRuntime/torchtune-qwen2.5-1.5b (its trainer's command line); it cannot be set by the TrainJob",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan, err := Build(tc.trainJob.Obj(), runtimeOf(t, torchtuneRuntime(tc.runtime)))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Build error = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			c := trainerContainer(plan.Jobs[0])
			if diff := cmp.Diff(tc.command, c.Command); diff != "" {
				t.Errorf("command (-want +got):\n%s", diff)
			}
			env := envOf(c)
			if _, ok := env[EnvMasterAddr]; ok {
				t.Errorf("env %v: a torchtune trainer finds node 0 by its rendezvous argument, not PET_MASTER_ADDR", env)
			}
			if env[EnvNodeRank] != "valueFrom" || env[EnvNumNodes] == "" {
				t.Errorf("env %v, want PET_NNODES and PET_NODE_RANK", env)
			}
		})
	}
	t.Run("another command on a torchtune runtime is plain torch", func(t *testing.T) {
		plan, err := Build(utiltesting.MakeTrainJob("tune", "ns").Command("torchrun", "train.py").Obj(), runtimeOf(t, torchtuneRuntime("torchtune-qwen2.5-1.5b")))
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		c := trainerContainer(plan.Jobs[0])
		if !cmp.Equal(c.Command, []string{"torchrun", "train.py"}) || envOf(c)[EnvMasterAddr] != "tune-node-0-0.tune" {
			t.Errorf("command %v env %v, want the TrainJob's command and node 0's address", c.Command, envOf(c))
		}
	})
}

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
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// torchtune, as Kubeflow Trainer v2.3's torch plugin runs it: a TrainJob
// whose trainer command is exactly `tune run` names no recipe and no config;
// they are chosen from the model the runtime's name gives
// (torchtune-<model>-<size>, as torchtune-llama3.2-1b is llama3_2/1B), the
// number of nodes and of processes, and whether the args ask for LoRA or
// QLoRA. The runtime's paths of the model's output, tokenizer and checkpoint
// are kept on the command line, and the TrainJob may not set them.

// torchtuneEntrypoint is the trainer command that selects torchtune.
var torchtuneEntrypoint = []string{"tune", "run"}

// The models of Kubeflow's torchtune runtimes.
const (
	torchtuneLlama3_2_1B  = "llama3_2/1B"
	torchtuneLlama3_2_3B  = "llama3_2/3B"
	torchtuneLlama3_3_70B = "llama3_3/70B"
	torchtuneQwen2_5_1_5B = "qwen2_5/1.5B"
)

var torchtuneModels = []string{torchtuneLlama3_2_1B, torchtuneLlama3_2_3B, torchtuneLlama3_3_70B, torchtuneQwen2_5_1_5B}

// torchtuneRuntimeSettings are the config items the runtime sets on its
// trainer's command line, kept there whatever the TrainJob's command.
var torchtuneRuntimeSettings = []string{"output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file"}

func isTorchtune(command []string) bool {
	return slices.Equal(command, torchtuneEntrypoint)
}

// torchtuneModel is the model a runtime's name gives, "" if it gives none.
func torchtuneModel(runtime string) string {
	fields := strings.Split(runtime, "-")
	if len(fields) != 3 {
		return ""
	}
	return strings.ReplaceAll(fields[1], ".", "_") + "/" + strings.ToUpper(fields[2])
}

// torchtuneRecipe is the recipe and config of a torchtune TrainJob on
// nodes nodes of nproc processes and gpus GPUs each.
func torchtuneRecipe(model string, nodes int32, nproc string, gpus int64, args []string) (recipe, config string) {
	n, isInt := atoi(nproc)
	lora, qlora := torchtuneLoRA(args), torchtuneQLoRA(args)
	recipe, suffix := "full_finetune_distributed", "_full"
	switch {
	case nodes == 1 && (isInt && n == 1 || gpus == 1):
		switch {
		case qlora:
			recipe, suffix = "lora_finetune_single_device", "_qlora_single_device"
		case lora:
			recipe, suffix = "lora_finetune_single_device", "_lora_single_device"
		default:
			recipe, suffix = "full_finetune_single_device", "_full_single_device"
		}
	case nodes == 1 && qlora:
		recipe, suffix = "lora_finetune_distributed", "_qlora"
	case nodes == 1 && lora:
		recipe, suffix = "lora_finetune_distributed", "_lora"
	case nodes > 1:
		suffix = "_full_multinode"
	}
	return recipe, model + suffix
}

func atoi(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// torchtuneLoRA reports whether args configure LoRA.
func torchtuneLoRA(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "model.lora_attn_modules") })
}

// torchtuneQLoRA reports whether args quantize the base model without DoRA.
func torchtuneQLoRA(args []string) bool {
	return !boolArg(args, "model.use_dora") && boolArg(args, "model.quantize_base")
}

// boolArg reports whether args set an item whose name contains item to
// true, in Python's spelling or any other case.
func boolArg(args []string, item string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		name, value, ok := strings.Cut(a, "=")
		return ok && strings.Contains(name, item) && strings.EqualFold(strings.TrimSpace(value), "true")
	})
}

// checkTorchtune refuses a torchtune TrainJob its runtime cannot run: a
// model Kubeflow's runtimes do not have, several nodes for any model but
// the 70B one, LoRA on several nodes, QLoRA where torchtune has no config
// for it, and args that set what the runtime sets.
func checkTorchtune(in *Input) field.ErrorList {
	t, rt := in.TrainJob.Spec.Trainer, in.Runtime
	trainerPath := field.NewPath("spec", "trainer")
	refPath := field.NewPath("spec", "runtimeRef", "name")
	var errs field.ErrorList
	model := torchtuneModel(in.TrainJob.Spec.RuntimeRef.Name)
	if !slices.Contains(torchtuneModels, model) {
		errs = append(errs, field.Invalid(refPath, in.TrainJob.Spec.RuntimeRef.Name, fmt.Sprintf(
			"a torchtune trainer (command: [tune, run]) needs a runtime named torchtune-<model>-<size> for one of the models %s; this name gives %q",
			strings.Join(torchtuneModels, ", "), model)))
		return errs
	}
	if in.NumNodes() > 1 && model != torchtuneLlama3_3_70B {
		errs = append(errs, field.Invalid(trainerPath.Child("numNodes"), in.NumNodes(), fmt.Sprintf(
			"torchtune fine-tunes %s on one node only; only %s runs on several", model, torchtuneLlama3_3_70B)))
	}
	if in.NumNodes() > 1 && (torchtuneLoRA(t.Args) || torchtuneQLoRA(t.Args)) {
		errs = append(errs, field.Invalid(trainerPath.Child("numNodes"), in.NumNodes(), "torchtune has no LoRA or QLoRA recipe for several nodes"))
	}
	nproc := numProcPerNode(in.TrainJob, rt.Spec, in.Container)
	_, config := torchtuneRecipe(model, in.NumNodes(), nproc, gpusPerNode(resourcesPerNode(in.TrainJob, in.Container)), t.Args)
	if strings.Contains(config, "_qlora") {
		switch {
		case model == torchtuneQwen2_5_1_5B:
			errs = append(errs, field.Invalid(refPath, in.TrainJob.Spec.RuntimeRef.Name, fmt.Sprintf("torchtune has no QLoRA config for %s", model)))
		case !strings.HasSuffix(config, "_qlora_single_device") && (model == torchtuneLlama3_2_1B || model == torchtuneLlama3_2_3B):
			errs = append(errs, field.Invalid(trainerPath.Child("numProcPerNode"), nproc, fmt.Sprintf(
				"torchtune has QLoRA configs for %s on a single device only: set numProcPerNode to 1, or resourcesPerNode to 1 GPU", model)))
		}
	}
	for i, arg := range t.Args {
		if key, _, _ := strings.Cut(arg, "="); slices.Contains(torchtuneRuntimeSettings, key) {
			errs = append(errs, field.Forbidden(trainerPath.Child("args").Index(i), fmt.Sprintf(
				"%s is set by runtime %s/%s (its trainer's command line); it cannot be set by the TrainJob", key, rt.Kind, rt.Name)))
		}
	}
	return errs
}

// torchtuneCommand is the trainer command of a torchtune TrainJob: tune run,
// the rendezvous endpoint (node 0) when it runs more than one process, the
// recipe and config, and the runtime's own settings of the paths.
func torchtuneCommand(in *Input, nproc string) []string {
	t := in.TrainJob.Spec.Trainer
	gpus := gpusPerNode(resourcesPerNode(in.TrainJob, in.Container))
	cmd := slices.Clone(t.Command)
	if n, isInt := atoi(nproc); in.NumNodes() > 1 || isInt && n > 1 || !isInt && gpus > 1 {
		cmd = append(cmd, fmt.Sprintf("--rdzv_endpoint=%s:%d", node0(in), TrainerPort))
	}
	recipe, config := torchtuneRecipe(torchtuneModel(in.TrainJob.Spec.RuntimeRef.Name), in.NumNodes(), nproc, gpus, t.Args)
	cmd = append(cmd, recipe, "--config", config)
	if in.TrainerStep() >= 0 {
		pod := &in.Runtime.Spec.Template.Spec.ReplicatedJobs[in.TrainerStep()].Template.Spec.Template.Spec
		if i := slices.IndexFunc(pod.Containers, func(c corev1.Container) bool { return c.Name == trainer.TrainerContainerName }); i >= 0 {
			for _, arg := range pod.Containers[i].Command {
				if key, _, _ := strings.Cut(arg, "="); slices.Contains(torchtuneRuntimeSettings, key) {
					cmd = append(cmd, arg)
				}
			}
		}
	}
	return cmd
}

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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The environment the torch policy gives the trainer container, read by
// torchrun.
const (
	EnvNumNodes       = "PET_NNODES"
	EnvNumProcPerNode = "PET_NPROC_PER_NODE"
	EnvNodeRank       = "PET_NODE_RANK"
	EnvMasterAddr     = "PET_MASTER_ADDR"
	EnvMasterPort     = "PET_MASTER_PORT"

	// TorchMasterPort is the rendezvous port of node 0, as in Kubeflow.
	TorchMasterPort int32 = 29400

	// completionIndexAnnotation holds a Pod's index in its Indexed Job.
	completionIndexAnnotation = "batch.kubernetes.io/job-completion-index"
)

var torchEnvNames = []string{EnvNumNodes, EnvNumProcPerNode, EnvNodeRank, EnvMasterAddr, EnvMasterPort}

// torchPolicy is PyTorch distributed training (mlPolicy.torch): the trainer
// container gets the PET_* environment torchrun reads — the number of
// nodes and of processes per node, the node's rank (its completion index)
// and the address and port of node 0 — and the rendezvous port. Neither
// the runtime nor the TrainJob may set those variables themselves.
type torchPolicy struct{}

func (torchPolicy) Name() string { return "torch" }

func (torchPolicy) Selected(spec *trainer.TrainingRuntimeSpec) bool {
	return spec.MLPolicy != nil && spec.MLPolicy.Torch != nil
}

func (torchPolicy) SetsUpTrainer() bool { return true }

func (torchPolicy) Apply(in *PolicyInput, _ *Plan) field.ErrorList {
	t, c, rt := in.TrainJob.Spec.Trainer, in.Container, in.Runtime
	var errs field.ErrorList
	if t != nil {
		for i, e := range t.Env {
			if slices.Contains(torchEnvNames, e.Name) {
				errs = append(errs, field.Forbidden(field.NewPath("spec", "trainer", "env").Index(i).Child("name"),
					fmt.Sprintf("%s is set by the torch runtime %s/%s; it cannot be set by the TrainJob", e.Name, rt.Kind, rt.Name)))
			}
		}
	}
	ci := slices.IndexFunc(in.Trainer.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == trainer.TrainerContainerName })
	for i, e := range in.RuntimeEnv {
		if slices.Contains(torchEnvNames, e.Name) && !setByTrainJob(t, e.Name) {
			errs = append(errs, field.Forbidden(in.Path.Child("template", "spec", "template", "spec", "containers").Index(ci).Child("env").Index(i).Child("name"),
				fmt.Sprintf("%s is set by the torch policy; runtime %s/%s must not set it", e.Name, rt.Kind, rt.Name)))
		}
	}
	if len(errs) > 0 {
		return errs
	}

	master := fmt.Sprintf("%s-0.%s", in.Trainer.Name, in.TrainJob.Name)
	c.Env = append(c.Env,
		corev1.EnvVar{Name: EnvNumNodes, Value: strconv.Itoa(int(in.NumNodes))},
		corev1.EnvVar{Name: EnvNumProcPerNode, Value: numProcPerNode(in.TrainJob, rt.Spec, &c.Resources)},
		corev1.EnvVar{Name: EnvNodeRank, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
			FieldPath: fmt.Sprintf("metadata.annotations['%s']", completionIndexAnnotation),
		}}},
		corev1.EnvVar{Name: EnvMasterAddr, Value: master},
		corev1.EnvVar{Name: EnvMasterPort, Value: strconv.Itoa(int(TorchMasterPort))},
	)
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == TorchMasterPort }) {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: TorchMasterPort, Protocol: corev1.ProtocolTCP})
	}
	return nil
}

func setByTrainJob(t *trainer.Trainer, name string) bool {
	return t != nil && slices.ContainsFunc(t.Env, func(e corev1.EnvVar) bool { return e.Name == name })
}

// numProcPerNode is the PET_NPROC_PER_NODE value: the TrainJob's
// numProcPerNode, else the runtime's, else auto. auto and gpu become the
// number of GPUs of the trainer container when it asks for any; auto and cpu
// become its whole CPUs (at least 1) when it sets a CPU limit or request.
// Otherwise the word is passed on for torchrun to resolve.
func numProcPerNode(trainJob *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec, res *corev1.ResourceRequirements) string {
	v := intstr.FromString("auto")
	if spec.MLPolicy != nil && spec.MLPolicy.Torch != nil && spec.MLPolicy.Torch.NumProcPerNode != nil {
		v = *spec.MLPolicy.Torch.NumProcPerNode
	}
	if t := trainJob.Spec.Trainer; t != nil && t.NumProcPerNode != nil {
		v = *t.NumProcPerNode
	}
	if v.Type == intstr.Int {
		return strconv.Itoa(v.IntValue())
	}
	word := v.StrVal
	if n, err := strconv.Atoi(word); err == nil {
		return strconv.Itoa(n)
	}
	if word == "auto" || word == "gpu" {
		if gpus := gpuCount(res); gpus > 0 {
			return strconv.FormatInt(gpus, 10)
		}
	}
	if word == "auto" || word == "cpu" {
		if cpu, ok := quantity(res, corev1.ResourceCPU); ok {
			return strconv.FormatInt(max(1, cpu.MilliValue()/1000), 10)
		}
	}
	return word
}

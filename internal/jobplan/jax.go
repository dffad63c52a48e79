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
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The environment the jax policy gives the trainer container, read by
// jax.distributed.initialize.
const (
	EnvJAXNumProcesses       = "JAX_NUM_PROCESSES"
	EnvJAXProcessID          = "JAX_PROCESS_ID"
	EnvJAXCoordinatorAddress = "JAX_COORDINATOR_ADDRESS"
)

// jaxPlugin is JAX distributed training (mlPolicy.jax), as Kubeflow Trainer
// v2.3 runs it: one JAX process per node. When the TrainJob sets
// spec.trainer, the trainer container gets the number of processes, its
// own (the Pod's completion index) and the coordinator's address, node 0
// on the trainer port, and that port. As under Kubeflow, a variable of
// the same name the TrainJob sets wins.
type jaxPlugin struct{}

func (jaxPlugin) Name() string { return "jax" }

func (jaxPlugin) selected(spec *trainer.TrainingRuntimeSpec) bool {
	return spec.MLPolicy != nil && spec.MLPolicy.JAX != nil
}

func (p jaxPlugin) Validate(in *Input) field.ErrorList {
	if !p.selected(in.Runtime.Spec) {
		return nil
	}
	return checkFramework(in, p.Name())
}

func (p jaxPlugin) Contribute(in *Input, _ *Plan) field.ErrorList {
	if !p.selected(in.Runtime.Spec) || in.Container == nil {
		return nil
	}
	t, c := in.TrainJob.Spec.Trainer, in.Container
	if t == nil {
		return nil
	}
	c.Env = mergeEnv(mergeEnv(c.Env, []corev1.EnvVar{
		{Name: EnvJAXNumProcesses, Value: strconv.Itoa(int(in.NumNodes()))},
		completionIndexEnv(EnvJAXProcessID),
		{Name: EnvJAXCoordinatorAddress, Value: fmt.Sprintf("%s:%d", node0(in), TrainerPort)},
	}), t.Env)
	addPort(c, TrainerPort)
	return nil
}

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
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// MLPolicy is a plugin for one ML framework of a runtime's mlPolicy: it adds
// to a TrainJob's plan what the framework's processes need to find each
// other and run, the environment, ports, volumes and init containers of the
// trainer step, and children of their own (Secrets, ConfigMaps) when they
// need some. Each lives in a file of its own (torch.go, mpi.go, jax.go,
// xgboost.go, flux.go, plain.go); Build runs the one the runtime selects, after the
// TrainJob's trainer overrides.
type MLPolicy interface {
	// Name is the policy's field in mlPolicy.
	Name() string
	// Selected reports whether a runtime asks for the policy.
	Selected(spec *trainer.TrainingRuntimeSpec) bool
	// SetsUpTrainer reports whether the policy configures the trainer
	// step's container: the runtime then needs a trainer step with a
	// container named node, and Apply is given it.
	SetsUpTrainer() bool
	// Apply adds to plan what the framework needs. It is called once the
	// Jobs are built, only if they could be.
	Apply(in *PolicyInput, plan *Plan) field.ErrorList
}

// PolicyInput is what an MLPolicy builds on.
type PolicyInput struct {
	TrainJob *trainer.TrainJob
	Runtime  Runtime
	// NumNodes is the number of trainer nodes: Pods of the trainer Job.
	NumNodes int32
	// Trainer is the trainer step's Job (the trainer step has exactly one),
	// nil if the runtime has no trainer step.
	Trainer *batchv1.Job
	// Container is the trainer container of Trainer, with the TrainJob's
	// trainer overrides applied; nil if it has none.
	Container *corev1.Container
	// TrainerStep is the index of the trainer step among the runtime's
	// replicated Jobs; -1 if it has none.
	TrainerStep int
	// Path is the trainer step's replicated Job in the runtime (the list of
	// replicated Jobs if there is no trainer step), for errors.
	Path *field.Path
	// Subdomain is the Pods' subdomain: a Pod's DNS name is
	// <its hostname>.<Subdomain>.
	Subdomain string
}

// podCounter is an MLPolicy that decides how many Pods the Jobs of some
// replicated Jobs have. Without one, the trainer step's Job has numNodes
// Pods and the others as many as their templates say.
type podCounter interface {
	podCounts(spec *trainer.TrainingRuntimeSpec, trainerStep int, numNodes int32) map[string]int32
}

// podCounts are the Pods of each replicated Job's Jobs that policy decides,
// by name.
func podCounts(policy MLPolicy, spec *trainer.TrainingRuntimeSpec, trainerStep int, numNodes int32) map[string]int32 {
	if pc, ok := policy.(podCounter); ok {
		return pc.podCounts(spec, trainerStep, numNodes)
	}
	if trainerStep < 0 {
		return nil
	}
	return map[string]int32{spec.Template.Spec.ReplicatedJobs[trainerStep].Name: numNodes}
}

// policies are the ML policies, asked in order; plain, which asks for
// nothing, comes last and is selected when no other is.
var policies = []MLPolicy{torchPolicy{}, mpiPolicy{}, jaxPolicy{}, xgboostPolicy{}, fluxPolicy{}, plainPolicy{}}

// policyOf is the ML policy a runtime selects.
func policyOf(spec *trainer.TrainingRuntimeSpec) MLPolicy {
	for _, p := range policies {
		if p.Selected(spec) {
			return p
		}
	}
	return plainPolicy{}
}

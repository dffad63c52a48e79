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

// A Plugin is one concern of a TrainJob's plan: the runtime patches, the
// Jobs, the network, an ML framework, gang scheduling, initializers, volume
// claims. Each lives in a file of its own and is registered in plugins.
type Plugin interface {
	// Name names the plugin, for tests and logs.
	Name() string
	// Validate reports what the plugin cannot turn into a plan, before
	// anything is built, and records in the Input what it decides for
	// the plugins that build (PodCounts). Only the patches plugin, first,
	// changes the Input's runtime: the others validate the patched one.
	Validate(in *Input) field.ErrorList
	// Contribute adds the plugin's part to plan. It runs only when every
	// plugin validated without error, after the plugins before it in the
	// list contributed theirs; what it cannot build it reports as errors.
	Contribute(in *Input, plan *Plan) field.ErrorList
}

// plugins are the plan's plugins, in the order they validate and
// contribute: a new concern is a file and a line here.
var plugins = []Plugin{
	patchesPlugin{},     // patches.go: the TrainJob's changes to its runtime
	jobsPlugin{},        // jobs.go: the steps and their Jobs
	networkPlugin{},     // network.go: the headless Service, the Pods' subdomain
	completionPlugin{},  // completion.go: success and failure policies, the Jobs' TTL
	trainerPlugin{},     // trainer.go: spec.trainer on the trainer container
	torchPlugin{},       // torch.go (and torchtune.go)
	mpiPlugin{},         // mpi.go
	jaxPlugin{},         // jax.go
	xgboostPlugin{},     // xgboost.go
	fluxPlugin{},        // flux.go
	podGroupPlugin{},    // gang.go: the PodGroup of podGroupPolicy
	initializerPlugin{}, // initializer.go: spec.initializer on its steps
	claimsPlugin{},      // claims.go: the claims of volumeClaimPolicies
	progressPlugin{},    // progress.go: what trainer containers report progress with
}

// Input is what the plugins build a TrainJob's plan from.
type Input struct {
	// TrainJob is the TrainJob as its plan reads it (see Planned).
	TrainJob *trainer.TrainJob
	// Runtime is its runtime, with the TrainJob's patches applied once the
	// patches plugin validated.
	Runtime Runtime
	// PodCounts are the Pods of the Jobs of replicated Jobs, by name, that
	// a plugin decided when it validated. A replicated Job not named has
	// numNodes Pods if it is the trainer step, else as many as its
	// template says.
	PodCounts map[string]int32
	// Trainer is the trainer step's Job (it has exactly one) once the
	// trainer plugin contributed, with the TrainJob's trainer settings;
	// Container is its container named node. Both are nil if the runtime
	// has no trainer step, or its Job could not be built.
	Trainer   *batchv1.Job
	Container *corev1.Container
	// StatusServer is where trainer Pods report their progress; nil, they
	// are not told (see WithStatusServer).
	StatusServer *StatusServer
}

// NumNodes is the number of trainer nodes: the TrainJob's numNodes, or the
// runtime's, or DefaultNumNodes.
func (in *Input) NumNodes() int32 {
	if t := in.TrainJob.Spec.Trainer; t != nil && t.NumNodes != nil {
		return *t.NumNodes
	}
	if p := in.Runtime.Spec.MLPolicy; p != nil && p.NumNodes != nil {
		return *p.NumNodes
	}
	return DefaultNumNodes
}

// TrainerStep is the index of the trainer step among the runtime's
// replicated Jobs; -1 if it has none, or more than one (which the trainer
// plugin refuses).
func (in *Input) TrainerStep() int {
	i, _ := trainerStep(in.Runtime.Spec.Template.Spec.ReplicatedJobs, in.replicatedJobsPath())
	return i
}

// TrainerPath is the trainer step's replicated Job in the runtime, or the
// list of replicated Jobs if it has no trainer step, for errors.
func (in *Input) TrainerPath() *field.Path {
	if i := in.TrainerStep(); i >= 0 {
		return in.replicatedJobsPath().Index(i)
	}
	return in.replicatedJobsPath()
}

// Network is the runtime's network, with JobSet's defaults.
func (in *Input) Network() trainer.Network { return networkOf(in.Runtime.Spec) }

// Subdomain is the Pods' subdomain: a Pod's DNS name is <its
// hostname>.<Subdomain>.
func (in *Input) Subdomain() string {
	network := in.Network()
	return Subdomain(in.TrainJob, &network)
}

// templatePath is the runtime's template spec, for errors.
func (in *Input) templatePath() *field.Path {
	return in.Runtime.path().Child("template", "spec")
}

// replicatedJobsPath is the runtime's list of replicated Jobs, for errors.
func (in *Input) replicatedJobsPath() *field.Path {
	return in.templatePath().Child("replicatedJobs")
}

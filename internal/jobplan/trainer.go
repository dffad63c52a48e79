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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// trainerContainer returns the trainer container of job (named node), nil
// if it has none.
func trainerContainer(job *batchv1.Job) *corev1.Container {
	containers := job.Spec.Template.Spec.Containers
	ci := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == trainer.TrainerContainerName })
	if ci < 0 {
		return nil
	}
	return &containers[ci]
}

// trainerPlugin is the trainer step and the TrainJob's spec.trainer: it
// finds the step (the replicated Job labelled as the trainer, or named
// node), refuses a runtime with two, a trainer step of several Jobs, and
// trainer settings with nowhere to go, and applies the settings (image,
// command, args, env, resources) to the trainer container. The ML
// framework plugins after it build on that container.
type trainerPlugin struct{}

func (trainerPlugin) Name() string { return "trainer" }

func (trainerPlugin) Validate(in *Input) field.ErrorList {
	rjobs := in.Runtime.Spec.Template.Spec.ReplicatedJobs
	rjobsPath := in.replicatedJobsPath()
	var errs field.ErrorList
	i, err := trainerStep(rjobs, rjobsPath)
	if err != nil {
		errs = append(errs, err)
	}
	t, rt := in.TrainJob.Spec.Trainer, in.Runtime
	switch {
	case i < 0 && t != nil:
		errs = append(errs, field.Invalid(field.NewPath("spec", "trainer"), "{...}", fmt.Sprintf(
			"runtime %s/%s has no trainer step (a replicated Job labelled %s=%s, or named %q) for the trainer overrides to apply to",
			rt.Kind, rt.Name, trainer.AncestorStepLabel, trainer.TrainerStep, trainer.TrainerContainerName)))
	case i < 0:
	case replicasOf(rjobs[i]) != 1:
		errs = append(errs, field.Invalid(rjobsPath.Index(i).Child("replicas"), rjobs[i].Replicas,
			"the trainer step must have exactly 1 replica: its nodes are the Pods of that Job (set numNodes instead)"))
	case t != nil && !hasTrainerContainer(in):
		errs = append(errs, missingTrainerContainer(in))
	}
	return errs
}

func (trainerPlugin) Contribute(in *Input, plan *Plan) field.ErrorList {
	i := in.TrainerStep()
	if i < 0 {
		return nil
	}
	name := in.Runtime.Spec.Template.Spec.ReplicatedJobs[i].Name
	for _, job := range plan.Jobs {
		if job.Labels[trainer.ReplicatedJobNameLabel] == name {
			in.Trainer = job
			break
		}
	}
	if in.Trainer == nil {
		return nil // its name is too long, as the jobs plugin reported
	}
	in.Container = trainerContainer(in.Trainer)
	t, c := in.TrainJob.Spec.Trainer, in.Container
	if t == nil || c == nil {
		return nil
	}
	if t.Image != nil {
		c.Image = *t.Image
	}
	if t.Command != nil {
		c.Command = slices.Clone(t.Command)
	}
	if t.Args != nil {
		c.Args = slices.Clone(t.Args)
	}
	if t.ResourcesPerNode != nil {
		c.Resources = mergeResources(c.Resources, *t.ResourcesPerNode)
	}
	c.Env = mergeEnv(c.Env, t.Env)
	return nil
}

// trainerStep returns the index of the trainer step: the replicated Job
// labelled as the trainer, or else the one named "node"; -1 if there is none.
func trainerStep(rjobs []trainer.ReplicatedJob, path *field.Path) (int, *field.Error) {
	found := -1
	for i := range rjobs {
		if rjobs[i].Template.Labels[trainer.AncestorStepLabel] != trainer.TrainerStep {
			continue
		}
		if found >= 0 {
			return -1, field.Invalid(path.Index(i).Child("template", "metadata", "labels"), trainer.TrainerStep,
				fmt.Sprintf("only one replicated Job may be the trainer step; %q is one already", rjobs[found].Name))
		}
		found = i
	}
	if found >= 0 {
		return found, nil
	}
	for i := range rjobs {
		if rjobs[i].Name == trainer.TrainerContainerName {
			return i, nil
		}
	}
	return -1, nil
}

// hasTrainerContainer reports whether the runtime's trainer step has a
// container named node.
func hasTrainerContainer(in *Input) bool {
	i := in.TrainerStep()
	if i < 0 {
		return false
	}
	containers := in.Runtime.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.Containers
	return slices.ContainsFunc(containers, func(c corev1.Container) bool { return c.Name == trainer.TrainerContainerName })
}

// missingTrainerContainer refuses a trainer step without a container named
// node, which the trainer settings and every ML framework need.
func missingTrainerContainer(in *Input) *field.Error {
	return field.Required(in.TrainerPath().Child("template", "spec", "template", "spec", "containers"), fmt.Sprintf(
		"the trainer step of runtime %s/%s needs a container named %q to receive the trainer settings", in.Runtime.Kind, in.Runtime.Name, trainer.TrainerContainerName))
}

// reservedEnv refuses the variables of env that an ML policy sets itself,
// names.
func reservedEnv(env []corev1.EnvVar, names []string, policy string, rt Runtime) field.ErrorList {
	var errs field.ErrorList
	for i, e := range env {
		if slices.Contains(names, e.Name) {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "trainer", "env").Index(i).Child("name"),
				fmt.Sprintf("%s is set by the %s runtime %s/%s; it cannot be set by the TrainJob", e.Name, policy, rt.Kind, rt.Name)))
		}
	}
	return errs
}

// mergeEnv returns base with overrides applied: a variable of the same name
// is replaced in place, new ones are appended in order.
func mergeEnv(base, overrides []corev1.EnvVar) []corev1.EnvVar {
	out := slices.Clone(base)
	for _, o := range overrides {
		if i := slices.IndexFunc(out, func(e corev1.EnvVar) bool { return e.Name == o.Name }); i >= 0 {
			out[i] = *o.DeepCopy()
		} else {
			out = append(out, *o.DeepCopy())
		}
	}
	return out
}

// mergeResources returns base with the TrainJob's resourcesPerNode merged
// in, as Kubeflow Trainer v2.3 merges them: each limit and request the
// TrainJob sets replaces the runtime's of the same resource, the others
// stay; claims merge by name.
func mergeResources(base, over corev1.ResourceRequirements) corev1.ResourceRequirements {
	out := *base.DeepCopy()
	for _, m := range []struct {
		dst *corev1.ResourceList
		src corev1.ResourceList
	}{{&out.Limits, over.Limits}, {&out.Requests, over.Requests}} {
		for name, q := range m.src {
			if *m.dst == nil {
				*m.dst = corev1.ResourceList{}
			}
			(*m.dst)[name] = q.DeepCopy()
		}
	}
	for _, claim := range over.Claims {
		if i := slices.IndexFunc(out.Claims, func(c corev1.ResourceClaim) bool { return c.Name == claim.Name }); i >= 0 {
			out.Claims[i] = claim
		} else {
			out.Claims = append(out.Claims, claim)
		}
	}
	return out
}

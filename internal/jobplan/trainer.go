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

// applyOverrides applies the TrainJob's trainer overrides (image, command,
// args, env, resources) to the trainer container. The container must exist
// when there are overrides, or when the policy sets it up.
func applyOverrides(in *PolicyInput, policy MLPolicy) field.ErrorList {
	t := in.TrainJob.Spec.Trainer
	c := in.Container
	if c == nil {
		if t == nil && !policy.SetsUpTrainer() {
			return nil
		}
		return field.ErrorList{field.Required(in.Path.Child("template", "spec", "template", "spec", "containers"), fmt.Sprintf(
			"the trainer step of runtime %s/%s needs a container named %q to receive the trainer settings", in.Runtime.Kind, in.Runtime.Name, trainer.TrainerContainerName))}
	}
	if t == nil {
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

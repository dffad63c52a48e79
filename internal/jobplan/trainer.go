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
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// trainerContainer returns the trainer container of job (named node), and
// its environment as the runtime set it; nil if it has none.
func trainerContainer(job *batchv1.Job) (*corev1.Container, []corev1.EnvVar) {
	containers := job.Spec.Template.Spec.Containers
	ci := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == trainer.TrainerContainerName })
	if ci < 0 {
		return nil, nil
	}
	return &containers[ci], slices.Clone(containers[ci].Env)
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
		c.Resources = *t.ResourcesPerNode.DeepCopy()
	}
	c.Env = mergeEnv(c.Env, t.Env)
	return nil
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

// gpuCount is the number of GPUs (any extended resource named <vendor>/gpu)
// of a container, from its limits, else its requests.
func gpuCount(res *corev1.ResourceRequirements) int64 {
	for _, list := range []corev1.ResourceList{res.Limits, res.Requests} {
		var n int64
		for name, q := range list {
			if strings.HasSuffix(string(name), "/gpu") {
				n += q.Value()
			}
		}
		if n > 0 {
			return n
		}
	}
	return 0
}

// quantity is a container's limit of a resource, else its request.
func quantity(res *corev1.ResourceRequirements, name corev1.ResourceName) (resource.Quantity, bool) {
	if q, ok := res.Limits[name]; ok {
		return q, true
	}
	q, ok := res.Requests[name]
	return q, ok
}

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
	"encoding/json"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// patchedSpec returns spec with the TrainJob's runtimePatches applied, in
// list order, as Kubeflow Trainer applies them: the template metadata's
// labels and annotations are added to the runtime template's, and each
// replicated Job patch is a strategic merge patch of that replicated Job's
// Job template (containers, init containers, volumes, scheduling gates and
// image pull secrets merge by name; tolerations replace the runtime's). spec
// itself is not changed.
func patchedSpec(spec *trainer.TrainingRuntimeSpec, patches []trainer.RuntimePatch) (*trainer.TrainingRuntimeSpec, field.ErrorList) {
	if len(patches) == 0 {
		return spec, nil
	}
	out := spec.DeepCopy()
	var errs field.ErrorList
	for i, p := range patches {
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil {
			continue
		}
		path := field.NewPath("spec", "runtimePatches").Index(i).Child("trainingRuntimeSpec", "template")
		tmpl := p.TrainingRuntimeSpec.Template
		if m := tmpl.Metadata; m != nil {
			out.Template.Metadata.Labels = merge(out.Template.Metadata.Labels, m.Labels)
			out.Template.Metadata.Annotations = merge(out.Template.Metadata.Annotations, m.Annotations)
		}
		if tmpl.Spec == nil {
			continue
		}
		for j, rp := range tmpl.Spec.ReplicatedJobs {
			rpPath := path.Child("spec", "replicatedJobs").Index(j)
			k := slices.IndexFunc(out.Template.Spec.ReplicatedJobs, func(r trainer.ReplicatedJob) bool { return r.Name == rp.Name })
			if k < 0 {
				errs = append(errs, field.NotFound(rpPath.Child("name"), rp.Name))
				continue
			}
			rjob := &out.Template.Spec.ReplicatedJobs[k]
			if e := checkPatch(rpPath, &rp, &rjob.Template.Spec.Template.Spec); len(e) > 0 {
				errs = append(errs, e...)
				continue
			}
			patched, err := patchJobTemplate(&rjob.Template, rp.Template)
			if err != nil {
				errs = append(errs, field.Invalid(rpPath.Child("template"), "{...}", err.Error()))
				continue
			}
			rjob.Template = *patched
		}
	}
	return out, errs
}

// checkPatch refuses a replicated Job patch that names a container the
// replicated Job does not have, or that sets the environment of the trainer
// container, which comes from spec.trainer alone.
func checkPatch(path *field.Path, rp *trainer.ReplicatedJobPatch, pod *corev1.PodSpec) field.ErrorList {
	if rp.Template == nil || rp.Template.Spec == nil || rp.Template.Spec.Template == nil || rp.Template.Spec.Template.Spec == nil {
		return nil
	}
	spec := rp.Template.Spec.Template.Spec
	podPath := path.Child("template", "spec", "template", "spec")
	var errs field.ErrorList
	check := func(kind string, patches []trainer.ContainerPatch, have []corev1.Container) {
		for i, c := range patches {
			cPath := podPath.Child(kind).Index(i)
			if !slices.ContainsFunc(have, func(h corev1.Container) bool { return h.Name == c.Name }) {
				errs = append(errs, field.Invalid(cPath.Child("name"), c.Name,
					fmt.Sprintf("replicated Job %q of the runtime has no %s of that name", rp.Name, kind)))
			}
			if c.Name == trainer.TrainerContainerName && len(c.Env) > 0 {
				errs = append(errs, field.Forbidden(cPath.Child("env"),
					fmt.Sprintf("the environment of the %s container is set through spec.trainer.env", trainer.TrainerContainerName)))
			}
		}
	}
	check("containers", spec.Containers, pod.Containers)
	check("initContainers", spec.InitContainers, pod.InitContainers)
	return errs
}

// patchJobTemplate returns tmpl with patch applied as a strategic merge
// patch.
func patchJobTemplate(tmpl *batchv1.JobTemplateSpec, patch *trainer.JobTemplatePatch) (*batchv1.JobTemplateSpec, error) {
	if patch == nil {
		return tmpl, nil
	}
	orig, err := json.Marshal(tmpl)
	if err != nil {
		return nil, err
	}
	p, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	merged, err := strategicpatch.StrategicMergePatch(orig, p, batchv1.JobTemplateSpec{})
	if err != nil {
		return nil, err
	}
	var out batchv1.JobTemplateSpec
	if err := json.Unmarshal(merged, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

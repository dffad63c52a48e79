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

// patchesPlugin applies the TrainJob's changes to its runtime (patchedSpec)
// before any other plugin reads it, and refuses those the runtime cannot
// take.
type patchesPlugin struct{}

func (patchesPlugin) Name() string { return "patches" }

func (patchesPlugin) Validate(in *Input) field.ErrorList {
	spec, errs := patchedSpec(in.Runtime.Spec, &in.TrainJob.Spec)
	in.Runtime.Spec = spec
	return errs
}

func (patchesPlugin) Contribute(*Input, *Plan) field.ErrorList { return nil }

// patchSource is one change to a TrainJob's runtime: a runtime patch, or a
// Kubeflow v2.0 or v2.1 override written as one, with the paths of the
// fields it comes from, for errors.
type patchSource struct {
	patch trainer.RuntimePatch
	// rjob is the path of the j-th replicated Job the patch names, pod
	// that of the Pod spec it sets for it.
	rjob, pod func(j int) *field.Path
}

// patchSources are the TrainJob's changes to its runtime, in the order they
// apply: v2.0's podSpecOverrides, v2.1's podTemplateOverrides, then
// runtimePatches.
func patchSources(spec *trainer.TrainJobSpec) []patchSource {
	var out []patchSource
	override := func(path *field.Path, targets []trainer.PodTemplateOverrideTargetJob, meta *trainer.PatchMetadata, pod *trainer.PodSpecPatch) {
		var rjobs []trainer.ReplicatedJobPatch
		for _, t := range targets {
			rjobs = append(rjobs, trainer.ReplicatedJobPatch{Name: t.Name, Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
				Template: &trainer.PodTemplatePatch{Metadata: meta, Spec: pod},
			}}})
		}
		out = append(out, patchSource{
			patch: trainer.RuntimePatch{TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{
				Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: rjobs},
			}}},
			rjob: func(j int) *field.Path { return path.Child("targetJobs").Index(j) },
			pod:  func(int) *field.Path { return path.Child("spec") },
		})
	}
	containers := func(cs []trainer.ContainerOverride) []trainer.ContainerPatch {
		var out []trainer.ContainerPatch
		for _, c := range cs {
			out = append(out, trainer.ContainerPatch{Name: c.Name, Env: c.Env, VolumeMounts: c.VolumeMounts})
		}
		return out
	}
	for i, o := range spec.PodSpecOverrides {
		override(field.NewPath("spec", "podSpecOverrides").Index(i), o.TargetJobs, nil, &trainer.PodSpecPatch{
			ServiceAccountName: o.ServiceAccountName, NodeSelector: o.NodeSelector, Tolerations: o.Tolerations,
			Volumes: o.Volumes, InitContainers: containers(o.InitContainers), Containers: containers(o.Containers),
			SchedulingGates: o.SchedulingGates,
		})
	}
	for i, o := range spec.PodTemplateOverrides {
		var pod *trainer.PodSpecPatch
		if s := o.Spec; s != nil {
			pod = &trainer.PodSpecPatch{
				ServiceAccountName: s.ServiceAccountName, NodeSelector: s.NodeSelector, Affinity: s.Affinity, Tolerations: s.Tolerations,
				Volumes: s.Volumes, InitContainers: containers(s.InitContainers), Containers: containers(s.Containers),
				SchedulingGates: s.SchedulingGates, ImagePullSecrets: s.ImagePullSecrets,
			}
		}
		override(field.NewPath("spec", "podTemplateOverrides").Index(i), o.TargetJobs, o.Metadata, pod)
	}
	for i, p := range spec.RuntimePatches {
		rjobs := field.NewPath("spec", "runtimePatches").Index(i).Child("trainingRuntimeSpec", "template", "spec", "replicatedJobs")
		out = append(out, patchSource{
			patch: p,
			rjob:  func(j int) *field.Path { return rjobs.Index(j) },
			pod:   func(j int) *field.Path { return rjobs.Index(j).Child("template", "spec", "template", "spec") },
		})
	}
	return out
}

// patchedSpec returns spec with the TrainJob's changes to its runtime
// applied, in order (patchSources), as Kubeflow Trainer applies them: the
// template metadata's labels and annotations are added to the runtime
// template's, and each replicated Job patch is a strategic merge patch of
// that replicated Job's Job template (containers, init containers,
// volumes, scheduling gates and image pull secrets merge by name;
// tolerations replace the runtime's). spec itself is not changed.
func patchedSpec(spec *trainer.TrainingRuntimeSpec, tj *trainer.TrainJobSpec) (*trainer.TrainingRuntimeSpec, field.ErrorList) {
	sources := patchSources(tj)
	if len(sources) == 0 {
		return spec, nil
	}
	out := spec.DeepCopy()
	var errs field.ErrorList
	for _, src := range sources {
		p := src.patch
		if p.TrainingRuntimeSpec == nil || p.TrainingRuntimeSpec.Template == nil {
			continue
		}
		tmpl := p.TrainingRuntimeSpec.Template
		if m := tmpl.Metadata; m != nil {
			out.Template.Metadata.Labels = merge(out.Template.Metadata.Labels, m.Labels)
			out.Template.Metadata.Annotations = merge(out.Template.Metadata.Annotations, m.Annotations)
		}
		if tmpl.Spec == nil {
			continue
		}
		for j, rp := range tmpl.Spec.ReplicatedJobs {
			k := slices.IndexFunc(out.Template.Spec.ReplicatedJobs, func(r trainer.ReplicatedJob) bool { return r.Name == rp.Name })
			if k < 0 {
				errs = append(errs, field.NotFound(src.rjob(j).Child("name"), rp.Name))
				continue
			}
			rjob := &out.Template.Spec.ReplicatedJobs[k]
			if e := checkPatch(src.pod(j), &rp, &rjob.Template.Spec.Template.Spec); len(e) > 0 {
				errs = append(errs, e...)
				continue
			}
			patched, err := patchJobTemplate(&rjob.Template, rp.Template)
			if err != nil {
				errs = append(errs, field.Invalid(src.rjob(j), "{...}", err.Error()))
				continue
			}
			rjob.Template = *patched
		}
	}
	return out, errs
}

// checkPatch refuses a replicated Job patch that names a container the
// replicated Job does not have, or that sets the environment of the trainer
// or an initializer container, which come from spec.trainer and
// spec.initializer alone, as in Kubeflow Trainer. podPath is the path of
// the Pod spec the patch sets.
func checkPatch(podPath *field.Path, rp *trainer.ReplicatedJobPatch, pod *corev1.PodSpec) field.ErrorList {
	if rp.Template == nil || rp.Template.Spec == nil || rp.Template.Spec.Template == nil || rp.Template.Spec.Template.Spec == nil {
		return nil
	}
	spec := rp.Template.Spec.Template.Spec
	var errs field.ErrorList
	check := func(kind string, patches []trainer.ContainerPatch, have []corev1.Container) {
		for i, c := range patches {
			cPath := podPath.Child(kind).Index(i)
			if !slices.ContainsFunc(have, func(h corev1.Container) bool { return h.Name == c.Name }) {
				errs = append(errs, field.Invalid(cPath.Child("name"), c.Name,
					fmt.Sprintf("replicated Job %q of the runtime has no %s of that name", rp.Name, kind)))
			}
			if len(c.Env) == 0 {
				continue
			}
			switch c.Name {
			case trainer.TrainerContainerName:
				errs = append(errs, field.Forbidden(cPath.Child("env"),
					fmt.Sprintf("the environment of the %s container is set through spec.trainer.env", trainer.TrainerContainerName)))
			case trainer.DatasetInitializerStep, trainer.ModelInitializerStep:
				errs = append(errs, field.Forbidden(cPath.Child("env"),
					fmt.Sprintf("the environment of the %s container is set through spec.initializer", c.Name)))
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

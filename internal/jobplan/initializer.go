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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// initializerPlugin is the TrainJob's spec.initializer, on the runtime's
// initializer steps (applyInitializers), which must be one Job each, as in
// Kubeflow Trainer.
type initializerPlugin struct{}

func (initializerPlugin) Name() string { return "initializer" }

func (initializerPlugin) Validate(in *Input) field.ErrorList {
	var errs field.ErrorList
	rjobs := in.Runtime.Spec.Template.Spec.ReplicatedJobs
	for i := range rjobs {
		if step := rjobs[i].Template.Labels[trainer.AncestorStepLabel]; (step == trainer.DatasetInitializerStep || step == trainer.ModelInitializerStep) && replicasOf(rjobs[i]) != 1 {
			errs = append(errs, field.Invalid(in.replicatedJobsPath().Index(i).Child("replicas"), rjobs[i].Replicas,
				fmt.Sprintf("the %s step must have exactly 1 replica, as in Kubeflow Trainer", step)))
		}
	}
	return errs
}

func (initializerPlugin) Contribute(in *Input, plan *Plan) field.ErrorList {
	errs, warnings := applyInitializers(in.TrainJob, in.Runtime, plan)
	plan.Warnings = append(plan.Warnings, warnings...)
	return errs
}

// initializerStep is one of the initializer steps spec.initializer
// configures: the replicated Job labelled (or, without such a label, named)
// as the step, and its container of the same name.
type initializerStep struct {
	name       string // the AncestorStepLabel value and container name
	path       *field.Path
	storageURI *string
	env        []corev1.EnvVar
	secretRef  *corev1.LocalObjectReference
}

// initializerSteps are the steps the TrainJob's spec.initializer configures.
func initializerSteps(tj *trainer.TrainJob) []initializerStep {
	init := tj.Spec.Initializer
	if init == nil {
		return nil
	}
	path := field.NewPath("spec", "initializer")
	var steps []initializerStep
	if d := init.Dataset; d != nil {
		steps = append(steps, initializerStep{trainer.DatasetInitializerStep, path.Child("dataset"), d.StorageUri, d.Env, d.SecretRef})
	}
	if m := init.Model; m != nil {
		steps = append(steps, initializerStep{trainer.ModelInitializerStep, path.Child("model"), m.StorageUri, m.Env, m.SecretRef})
	}
	return steps
}

// stepOf returns the index of the replicated Job labelled as step (or, if
// none is, named step); -1 if there is none.
func stepOf(rjobs []trainer.ReplicatedJob, step string) int {
	if i := slices.IndexFunc(rjobs, func(r trainer.ReplicatedJob) bool { return r.Template.Labels[trainer.AncestorStepLabel] == step }); i >= 0 {
		return i
	}
	return slices.IndexFunc(rjobs, func(r trainer.ReplicatedJob) bool { return r.Name == step })
}

// applyInitializers configures the initializer steps' containers from
// spec.initializer, as Kubeflow Trainer v2.3 does: STORAGE_URI from
// storageUri, then env merged in (the TrainJob's variables replace the
// runtime's of the same name), then the Secret of secretRef as envFrom. It
// refuses a configuration the runtime has no step or container for, and
// warns when the step shares no volume named initializer (what it downloads
// then reaches no other step; Kubeflow refuses such a TrainJob).
func applyInitializers(tj *trainer.TrainJob, rt Runtime, plan *Plan) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	rjobs := rt.Spec.Template.Spec.ReplicatedJobs
	for _, s := range initializerSteps(tj) {
		i := stepOf(rjobs, s.name)
		if i < 0 {
			errs = append(errs, field.Invalid(s.path, "{...}", fmt.Sprintf(
				"runtime %s/%s has no %s step (a replicated Job labelled %s=%s) to configure", rt.Kind, rt.Name, s.name, trainer.AncestorStepLabel, s.name)))
			continue
		}
		configured, mounted := false, false
		for _, job := range plan.Jobs {
			if job.Labels[trainer.ReplicatedJobNameLabel] != rjobs[i].Name {
				continue
			}
			containers := job.Spec.Template.Spec.Containers
			ci := slices.IndexFunc(containers, func(c corev1.Container) bool { return c.Name == s.name })
			if ci < 0 {
				continue
			}
			c := &containers[ci]
			if s.storageURI != nil {
				c.Env = mergeEnv(c.Env, []corev1.EnvVar{{Name: trainer.StorageURIEnv, Value: *s.storageURI}})
			}
			c.Env = mergeEnv(c.Env, s.env)
			if s.secretRef != nil {
				c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: *s.secretRef}})
			}
			configured = true
			mounted = slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == trainer.InitializerVolume })
		}
		switch {
		case !configured:
			errs = append(errs, field.Invalid(s.path, "{...}", fmt.Sprintf(
				"the %s step of runtime %s/%s has no container named %q to configure", rjobs[i].Name, rt.Kind, rt.Name, s.name)))
		case !mounted:
			warnings = append(warnings, fmt.Sprintf(
				"%s: the %s container of runtime %s/%s mounts no volume named %q, so what it downloads reaches no other step (Kubeflow Trainer v2.3 refuses this TrainJob)",
				s.path, s.name, rt.Kind, rt.Name, trainer.InitializerVolume))
		}
	}
	return errs, warnings
}

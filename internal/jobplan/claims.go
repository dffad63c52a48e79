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
	"maps"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// ClaimName is the name of the claim of volume claim template name for
// TrainJob trainJob, as JobSet names it.
func ClaimName(name, trainJob string) string {
	return name + "-" + trainJob
}

// claimsPlugin is the runtime's volumeClaimPolicies (claims).
type claimsPlugin struct{}

func (claimsPlugin) Name() string { return "claims" }

func (claimsPlugin) Validate(*Input) field.ErrorList { return nil }

func (claimsPlugin) Contribute(in *Input, plan *Plan) field.ErrorList {
	var errs field.ErrorList
	plan.Claims, errs = claims(in.TrainJob, in.Runtime.Spec, plan.Jobs, in.templatePath().Child("volumeClaimPolicies"))
	return errs
}

// claims builds the PersistentVolumeClaims of the runtime's
// volumeClaimPolicies for the TrainJob, and gives each Job that mounts a
// volume of a template's name the claim as that volume. A claim retained
// when the TrainJob is deleted has no owner; the others are the TrainJob's.
func claims(trainJob *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec, jobs []*batchv1.Job, path *field.Path) ([]*corev1.PersistentVolumeClaim, field.ErrorList) {
	var out []*corev1.PersistentVolumeClaim
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, policy := range spec.Template.Spec.VolumeClaimPolicies {
		retain := policy.RetentionPolicy != nil && policy.RetentionPolicy.WhenDeleted != nil && *policy.RetentionPolicy.WhenDeleted == trainer.RetentionPolicyRetain
		for k := range policy.Templates {
			tmpl := &policy.Templates[k]
			tPath := path.Index(i).Child("templates").Index(k).Child("metadata", "name")
			name := tmpl.Name
			if seen[name] {
				errs = append(errs, field.Duplicate(tPath, name))
				continue
			}
			seen[name] = true
			claimName := ClaimName(name, trainJob.Name)
			if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
				errs = append(errs, field.Invalid(tPath, name, strings.Join(msgs, "; ")))
				continue
			}
			if len(claimName) > maxDNSLabel {
				errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), trainJob.Name, fmt.Sprintf(
					"too long for the volume claim template %q: the claim %s would be %d characters, over %d", name, claimName, len(claimName), maxDNSLabel)))
				continue
			}
			mounted := false
			for _, job := range jobs {
				pod := &job.Spec.Template.Spec
				if slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == name }) {
					errs = append(errs, field.Invalid(tPath, name, fmt.Sprintf(
						"replicated Job %q declares a volume of the same name: a volume claim template's volume is added to the Pods that mount it", job.Labels[trainer.ReplicatedJobNameLabel])))
					continue
				}
				if !mounts(pod, name) {
					continue
				}
				mounted = true
				pod.Volumes = append(pod.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName},
				}})
			}
			if !mounted {
				errs = append(errs, field.Invalid(tPath, name, "no container of the runtime mounts a volume of this name (volumeMounts[].name)"))
				continue
			}
			claim := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{
					Name:        claimName,
					Namespace:   trainJob.Namespace,
					Labels:      merge(tmpl.Labels, map[string]string{trainer.JobSetNameLabel: trainJob.Name, trainer.TrainJobNameLabel: trainJob.Name}),
					Annotations: maps.Clone(tmpl.Annotations),
				},
				Spec: *tmpl.Spec.DeepCopy(),
			}
			if !retain {
				claim.OwnerReferences = []metav1.OwnerReference{ownerRef(trainJob)}
			}
			out = append(out, claim)
		}
	}
	return out, errs
}

// mounts reports whether a container or init container of pod mounts the
// volume name.
func mounts(pod *corev1.PodSpec, name string) bool {
	for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
		for _, c := range cs {
			if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == name }) {
				return true
			}
		}
	}
	return false
}

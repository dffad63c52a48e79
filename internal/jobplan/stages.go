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

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The order in which a TrainJob's steps start, and the Pod that coordinates
// them, as JobSet v0.12 decides them for a JobSet.

// dependsOn returns what step i of spec waits for: its dependsOn, or with
// startupPolicy InOrder the step before it, Ready (JobSet starts each
// replicated Job in order once every Job of the one before has started,
// which is what Ready waits for).
func dependsOn(spec *trainer.TrainingRuntimeSpec, i int) []trainer.DependsOn {
	rjobs := spec.Template.Spec.ReplicatedJobs
	if p := spec.Template.Spec.StartupPolicy; p != nil && p.StartupPolicyOrder == trainer.InOrder && i > 0 {
		return []trainer.DependsOn{{Name: rjobs[i-1].Name, Status: trainer.DependsOnReady}}
	}
	return slices.Clone(rjobs[i].DependsOn)
}

// coordinatorOf returns the DNS name of the Pod the runtime's coordinator
// names, "" when it names none: <trainjob>-<replicated Job>-<job
// index>-<pod index>.<subdomain>, as JobSet writes it.
func coordinatorOf(in *Input) (string, *field.Error) {
	spec, path := in.Runtime.Spec, in.templatePath().Child("coordinator")
	c := spec.Template.Spec.Coordinator
	if c == nil {
		return "", nil
	}
	rjobs := spec.Template.Spec.ReplicatedJobs
	i := slices.IndexFunc(rjobs, func(r trainer.ReplicatedJob) bool { return r.Name == c.ReplicatedJob })
	if i < 0 {
		return "", field.NotFound(path.Child("replicatedJob"), c.ReplicatedJob)
	}
	if c.JobIndex >= int(replicasOf(rjobs[i])) {
		return "", field.Invalid(path.Child("jobIndex"), c.JobIndex, fmt.Sprintf("replicated Job %q has %d Job(s)", c.ReplicatedJob, replicasOf(rjobs[i])))
	}
	completions := ptr.Deref(rjobs[i].Template.Spec.Completions, 1)
	if i == in.TrainerStep() {
		completions = in.NumNodes()
	}
	if c.PodIndex >= int(completions) {
		return "", field.Invalid(path.Child("podIndex"), c.PodIndex, fmt.Sprintf("the Jobs of replicated Job %q have %d Pod(s)", c.ReplicatedJob, completions))
	}
	name := fmt.Sprintf("%s-%s-%d-%d.%s", in.TrainJob.Name, c.ReplicatedJob, c.JobIndex, c.PodIndex, in.Subdomain())
	if errs := validation.IsValidLabelValue(name); len(errs) > 0 {
		return "", field.Invalid(path, name, fmt.Sprintf("the coordinator's DNS name is not a valid label value (the TrainJob's name may be too long): %s", strings.Join(errs, "; ")))
	}
	return name, nil
}

// checkDependsOn refuses a dependsOn that names a replicated Job not listed
// before the one that depends on it: JobSet's rule, which leaves no cycle
// possible.
func checkDependsOn(rjobs []trainer.ReplicatedJob, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range rjobs {
		for k, d := range rjobs[i].DependsOn {
			if j := slices.IndexFunc(rjobs, func(r trainer.ReplicatedJob) bool { return r.Name == d.Name }); j < 0 || j >= i {
				errs = append(errs, field.Invalid(path.Index(i).Child("dependsOn").Index(k).Child("name"), d.Name,
					fmt.Sprintf("replicated Job %q may only depend on replicated Jobs listed before it", rjobs[i].Name)))
			}
		}
	}
	return errs
}

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
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The order in which a TrainJob's steps start, and when it is Complete,
// as JobSet v0.12 decides them for a JobSet.

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

// successPolicy is the runtime's successPolicy, or JobSet's default: All,
// of every step.
func successPolicy(spec *trainer.TrainingRuntimeSpec) trainer.SuccessPolicy {
	if p := spec.Template.Spec.SuccessPolicy; p != nil {
		return *p.DeepCopy()
	}
	return trainer.SuccessPolicy{Operator: trainer.OperatorAll}
}

// coordinatorOf returns the DNS name of the Pod the runtime's coordinator
// names, "" when it names none: <trainjob>-<replicated Job>-<job
// index>-<pod index>.<subdomain>, as JobSet writes it.
func coordinatorOf(trainJob *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec, numNodes int32, trainerIdx int, path *field.Path) (string, *field.Error) {
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
	if i == trainerIdx {
		completions = numNodes
	}
	if c.PodIndex >= int(completions) {
		return "", field.Invalid(path.Child("podIndex"), c.PodIndex, fmt.Sprintf("the Jobs of replicated Job %q have %d Pod(s)", c.ReplicatedJob, completions))
	}
	network := networkOf(spec)
	name := fmt.Sprintf("%s-%s-%d-%d.%s", trainJob.Name, c.ReplicatedJob, c.JobIndex, c.PodIndex, Subdomain(trainJob, &network))
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

// failurePolicy returns the runtime's failurePolicy with every rule named
// (failurePolicyRule<index> when it has no name, as JobSet names them), nil
// if it has none. A message pattern that is not a valid regular expression
// is refused: JobSet would skip it at every failure.
func failurePolicy(spec *trainer.TrainingRuntimeSpec, path *field.Path) (*trainer.FailurePolicy, field.ErrorList) {
	p := spec.Template.Spec.FailurePolicy
	if p == nil {
		return nil, nil
	}
	out := p.DeepCopy()
	if out.RestartStrategy == "" {
		out.RestartStrategy = trainer.Recreate
	}
	var errs field.ErrorList
	for i := range out.Rules {
		r := &out.Rules[i]
		if r.Name == "" {
			r.Name = fmt.Sprintf("failurePolicyRule%d", i)
		}
		for k, pattern := range r.OnJobFailureMessagePatterns {
			if _, err := regexp.Compile(pattern); err != nil {
				errs = append(errs, field.Invalid(path.Child("rules").Index(i).Child("onJobFailureMessagePatterns").Index(k), pattern, err.Error()))
			}
		}
	}
	return out, errs
}

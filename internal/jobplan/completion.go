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

	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// completionPlugin gives the plan what decides how the TrainJob ends, as
// JobSet v0.12 decides it for a JobSet: the success policy, the failure
// policy with its rules named, and how long the Jobs outlive the end.
type completionPlugin struct{}

func (completionPlugin) Name() string { return "completion" }

func (completionPlugin) Validate(in *Input) field.ErrorList {
	_, errs := failurePolicy(in.Runtime.Spec, in.templatePath().Child("failurePolicy"))
	return errs
}

func (completionPlugin) Contribute(in *Input, plan *Plan) field.ErrorList {
	plan.Success = successPolicy(in.Runtime.Spec)
	plan.Failure, _ = failurePolicy(in.Runtime.Spec, in.templatePath().Child("failurePolicy"))
	plan.JobsTTL = in.Runtime.Spec.Template.Spec.TTLSecondsAfterFinished
	return nil
}

// successPolicy is the runtime's successPolicy, or JobSet's default: All,
// of every step.
func successPolicy(spec *trainer.TrainingRuntimeSpec) trainer.SuccessPolicy {
	if p := spec.Template.Spec.SuccessPolicy; p != nil {
		return *p.DeepCopy()
	}
	return trainer.SuccessPolicy{Operator: trainer.OperatorAll}
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

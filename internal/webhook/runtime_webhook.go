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

package webhook

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
)

const (
	// SupportLabel on a runtime says how it is supported.
	SupportLabel = "trainer.kubeflow.org/support"
	// SupportDeprecated is the SupportLabel value of a runtime Kubeflow
	// Trainer will remove.
	SupportDeprecated = "deprecated"

	// RuntimeDeprecationPolicyURL is Kubeflow Trainer's runtime deprecation
	// policy, which a deprecated runtime's warning points to.
	RuntimeDeprecationPolicyURL = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"

	// WebhookValidationLabel with the value "disabled" keeps a runtime away
	// from the runtime webhooks (their objectSelector), as in Kubeflow
	// Trainer: the runtimes shipped with the product, validated ahead of
	// time, carry it, so that they apply before the manager serves.
	WebhookValidationLabel = "trainer.kubeflow.org/webhook-validation"
)

// The runtime webhooks check creations and changes of spec only, as the
// TrainJob webhook does: an update of metadata alone (a label, a finalizer
// removed) or of a runtime being deleted is not sent to them, and so
// neither waits for the manager nor is refused for a runtime stored broken.
// (A client that writes a whole runtime back from Go types adds empty
// objects to its spec, which the API server's comparison sees as a change:
// ValidateUpdate lets through an update whose spec decodes the same.) A
// runtime labelled trainer.kubeflow.org/webhook-validation=disabled is not
// sent to them at all, as under Kubeflow Trainer v2.3.
//
// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-trainingruntime,mutating=false,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=trainingruntimes,verbs=create;update,versions=v1alpha1,name=vtrainingruntime.trainer.kubeflow.org,admissionReviewVersions=v1,patch=`{"matchConditions":[{"name":"creation-or-spec-change","expression":"request.operation == 'CREATE' || (!has(object.metadata.deletionTimestamp) && (has(object.spec) != has(oldObject.spec) || (has(object.spec) && object.spec != oldObject.spec)))"}],"objectSelector":{"matchExpressions":[{"key":"trainer.kubeflow.org/webhook-validation","operator":"NotIn","values":["disabled"]}]}}`
// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime,mutating=false,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=clustertrainingruntimes,verbs=create;update,versions=v1alpha1,name=vclustertrainingruntime.trainer.kubeflow.org,admissionReviewVersions=v1,patch=`{"matchConditions":[{"name":"creation-or-spec-change","expression":"request.operation == 'CREATE' || (!has(object.metadata.deletionTimestamp) && (has(object.spec) != has(oldObject.spec) || (has(object.spec) && object.spec != oldObject.spec)))"}],"objectSelector":{"matchExpressions":[{"key":"trainer.kubeflow.org/webhook-validation","operator":"NotIn","values":["disabled"]}]}}`

// TrainingRuntimeValidator validates TrainingRuntimes on create and update.
type TrainingRuntimeValidator struct{}

var _ admission.Validator[*trainer.TrainingRuntime] = TrainingRuntimeValidator{}

// ValidateCreate refuses a runtime no TrainJob can run on.
func (TrainingRuntimeValidator) ValidateCreate(_ context.Context, rt *trainer.TrainingRuntime) (admission.Warnings, error) {
	return nil, validateRuntime(trainer.TrainingRuntimeKind, rt.Name, rt.Namespace, &rt.Spec)
}

// ValidateUpdate refuses a change that leaves no TrainJob able to run on
// the runtime.
func (TrainingRuntimeValidator) ValidateUpdate(_ context.Context, old, rt *trainer.TrainingRuntime) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, rt.Spec) {
		return nil, nil
	}
	return nil, validateRuntime(trainer.TrainingRuntimeKind, rt.Name, rt.Namespace, &rt.Spec)
}

// ValidateDelete allows every deletion.
func (TrainingRuntimeValidator) ValidateDelete(context.Context, *trainer.TrainingRuntime) (admission.Warnings, error) {
	return nil, nil
}

// ClusterTrainingRuntimeValidator validates ClusterTrainingRuntimes on
// create and update.
type ClusterTrainingRuntimeValidator struct{}

var _ admission.Validator[*trainer.ClusterTrainingRuntime] = ClusterTrainingRuntimeValidator{}

// ValidateCreate refuses a runtime no TrainJob can run on, and warns when
// it is deprecated, as Kubeflow Trainer v2.3 does.
func (ClusterTrainingRuntimeValidator) ValidateCreate(_ context.Context, rt *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	return deprecationWarnings(trainer.ClusterTrainingRuntimeKind, rt.Name, rt.Labels),
		validateRuntime(trainer.ClusterTrainingRuntimeKind, rt.Name, "", &rt.Spec)
}

// ValidateUpdate refuses a change that leaves no TrainJob able to run on
// the runtime.
func (ClusterTrainingRuntimeValidator) ValidateUpdate(_ context.Context, old, rt *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, rt.Spec) {
		return nil, nil
	}
	return nil, validateRuntime(trainer.ClusterTrainingRuntimeKind, rt.Name, "", &rt.Spec)
}

// ValidateDelete allows every deletion.
func (ClusterTrainingRuntimeValidator) ValidateDelete(context.Context, *trainer.ClusterTrainingRuntime) (admission.Warnings, error) {
	return nil, nil
}

// SetupRuntimeWebhooksWithManager registers the webhooks of both kinds of
// runtime with mgr's webhook server.
func SetupRuntimeWebhooksWithManager(mgr ctrl.Manager) error {
	if err := ctrl.NewWebhookManagedBy(mgr, &trainer.TrainingRuntime{}).WithValidator(TrainingRuntimeValidator{}).Complete(); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &trainer.ClusterTrainingRuntime{}).WithValidator(ClusterTrainingRuntimeValidator{}).Complete()
}

// deprecationWarnings warns that a runtime labelled deprecated may be
// removed.
func deprecationWarnings(kind, name string, labels map[string]string) admission.Warnings {
	if labels[SupportLabel] != SupportDeprecated {
		return nil
	}
	return admission.Warnings{fmt.Sprintf(
		"%s %q is deprecated (%s=%s): a future release of Kubeflow Trainer will remove it; see the runtime deprecation policy: %s",
		kind, name, SupportLabel, SupportDeprecated, RuntimeDeprecationPolicyURL)}
}

// validateRuntime refuses a runtime no TrainJob can run on: what Kubeflow
// Trainer v2.3's runtime webhook refuses, and what the plan of a TrainJob
// taking all of the runtime's defaults cannot be built from, which every
// TrainJob on it would otherwise be refused for later, at its creation or
// at its Jobs'.
func validateRuntime(kind, name, namespace string, spec *trainer.TrainingRuntimeSpec) error {
	specPath := field.NewPath("spec")
	errs := ancestorErrors(spec.Template.Spec.ReplicatedJobs, specPath.Child("template", "spec", "replicatedJobs"))
	if len(spec.Template.Spec.ReplicatedJobs) == 0 {
		// The schema requires them, but not spec itself.
		errs = append(errs, field.Required(specPath.Child("template", "spec", "replicatedJobs"), "a runtime needs at least one replicated Job"))
	}
	reported := map[string]bool{}
	for _, e := range errs {
		reported[e.Field] = true
	}
	for _, e := range jobplan.CheckRuntime(jobplan.Runtime{Kind: kind, Name: name, Spec: spec, SpecPath: specPath}, namespace) {
		if !reported[e.Field] {
			errs = append(errs, e)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: kind}, name, errs)
}

// ancestorContainers are the steps a replicated Job may be labelled as (the
// value of trainer.kubeflow.org/trainjob-ancestor-step), each with the
// container Kubeflow Trainer requires it to have.
var ancestorContainers = map[string]string{
	trainer.TrainerStep:            trainer.TrainerContainerName,
	trainer.DatasetInitializerStep: trainer.DatasetInitializerStep,
	trainer.ModelInitializerStep:   trainer.ModelInitializerStep,
}

// ancestorErrors refuses, as Kubeflow Trainer v2.3 does, a replicated Job
// labelled as the trainer or an initializer step that has more than one
// replica or lacks the container of the step.
func ancestorErrors(rjobs []trainer.ReplicatedJob, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range rjobs {
		rjob := &rjobs[i]
		step, ok := rjob.Template.Labels[trainer.AncestorStepLabel]
		container, known := ancestorContainers[step]
		if !ok || !known {
			continue
		}
		if rjob.Replicas > 1 {
			errs = append(errs, field.Invalid(path.Index(i).Child("replicas"), rjob.Replicas, fmt.Sprintf(
				"a replicated Job labelled %s=%s must have exactly 1 replica: its Pods are the step's (set mlPolicy.numNodes for more trainer nodes)",
				trainer.AncestorStepLabel, step)))
		}
		if !hasContainer(rjob, container) {
			errs = append(errs, field.Required(path.Index(i).Child("template", "spec", "template", "spec", "containers"), fmt.Sprintf(
				"a replicated Job labelled %s=%s needs a container named %q", trainer.AncestorStepLabel, step, container)))
		}
	}
	return errs
}

// hasContainer reports whether the Pods of rjob have a container named name.
func hasContainer(rjob *trainer.ReplicatedJob, name string) bool {
	for _, c := range rjob.Template.Spec.Template.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

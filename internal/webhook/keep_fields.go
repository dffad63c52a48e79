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
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// Fields of ours survive clients built on Kubeflow Trainer's Go types.
//
// Kueue admits and stops a TrainJob with a full update built on Kubeflow's
// types, which have none of the fields this project adds to the TrainJob
// (spec.ttlSecondsAfterFinished) or keeps from Kubeflow v2.0 and v2.1
// (spec.labels, spec.annotations, spec.podTemplateOverrides,
// spec.podSpecOverrides): the
// update leaves them out, and the API server would drop them. An update
// that leaves out such a field the TrainJob has, from a client that names
// no field manager (controllers writing whole objects; Kueue names none),
// keeps the field as it was. A user removes one on purpose with kubectl,
// which always names its field manager (kubectl-edit, kubectl-patch,
// kubectl-client-side-apply, kubectl for server-side apply,
// kubectl-replace), or with any client that names one.
//
// The match condition calls the webhook only for an update that leaves out
// one of these fields the TrainJob has, so every other write goes on
// without it.
//
// +kubebuilder:webhook:path=/mutate-trainer-kubeflow-org-v1alpha1-trainjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=trainjobs,verbs=update,versions=v1alpha1,name=mtrainjob.trainer.kubeflow.org,admissionReviewVersions=v1,patch=`{"matchConditions":[{"name":"leaves-out-a-field-of-ours","expression":"has(object.spec) && has(oldObject.spec) && ((has(oldObject.spec.ttlSecondsAfterFinished) && !has(object.spec.ttlSecondsAfterFinished)) || (has(oldObject.spec.labels) && !has(object.spec.labels)) || (has(oldObject.spec.annotations) && !has(object.spec.annotations)) || (has(oldObject.spec.podTemplateOverrides) && !has(object.spec.podTemplateOverrides)) || (has(oldObject.spec.podSpecOverrides) && !has(object.spec.podSpecOverrides)))"}]}`

// FieldKeeper keeps the fields of ours that an update from a client built
// on Kubeflow's types leaves out.
type FieldKeeper struct{}

var _ admission.Defaulter[*trainer.TrainJob] = FieldKeeper{}

// SetupWithManager registers the webhook with mgr's webhook server.
func (k FieldKeeper) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &trainer.TrainJob{}).WithDefaulter(k).Complete()
}

// Default puts back in tj the fields of ours the update leaves out, unless
// the client named a field manager.
func (FieldKeeper) Default(ctx context.Context, tj *trainer.TrainJob) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || req.Operation != admissionv1.Update || req.OldObject.Raw == nil {
		return nil
	}
	var opts metav1.UpdateOptions
	if len(req.Options.Raw) > 0 {
		if err := json.Unmarshal(req.Options.Raw, &opts); err != nil {
			return fmt.Errorf("reading the update's options: %w", err)
		}
	}
	if opts.FieldManager != "" {
		return nil
	}
	var old trainer.TrainJob
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return fmt.Errorf("reading the TrainJob before the update: %w", err)
	}
	if kept := keepFields(&old, tj); len(kept) > 0 {
		ctrl.LoggerFrom(ctx).Info("Kept fields an update from a client without a field manager left out",
			"trainJob", req.Namespace+"/"+req.Name, "fields", kept, "user", req.UserInfo.Username)
	}
	return nil
}

// keepFields copies into tj the fields of ours that old has and tj lacks,
// and returns their paths.
func keepFields(old, tj *trainer.TrainJob) []string {
	var kept []string
	if old.Spec.TTLSecondsAfterFinished != nil && tj.Spec.TTLSecondsAfterFinished == nil {
		tj.Spec.TTLSecondsAfterFinished = old.Spec.TTLSecondsAfterFinished
		kept = append(kept, "spec.ttlSecondsAfterFinished")
	}
	if old.Spec.Labels != nil && tj.Spec.Labels == nil {
		tj.Spec.Labels = old.Spec.Labels
		kept = append(kept, "spec.labels")
	}
	if old.Spec.Annotations != nil && tj.Spec.Annotations == nil {
		tj.Spec.Annotations = old.Spec.Annotations
		kept = append(kept, "spec.annotations")
	}
	if old.Spec.PodTemplateOverrides != nil && tj.Spec.PodTemplateOverrides == nil {
		tj.Spec.PodTemplateOverrides = old.Spec.PodTemplateOverrides
		kept = append(kept, "spec.podTemplateOverrides")
	}
	if old.Spec.PodSpecOverrides != nil && tj.Spec.PodSpecOverrides == nil {
		tj.Spec.PodSpecOverrides = old.Spec.PodSpecOverrides
		kept = append(kept, "spec.podSpecOverrides")
	}
	return kept
}

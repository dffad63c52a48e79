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
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The TrainJob defaulter has two duties.
//
// Fields of ours survive clients built on Kubeflow Trainer's Go types.
// Kueue admits and stops a TrainJob with a full update built on Kubeflow's
// types, which have none of the fields this project adds to the TrainJob
// (spec.ttlSecondsAfterFinished) or keeps from Kubeflow v2.0 and v2.1
// (spec.labels, spec.annotations, spec.podTemplateOverrides,
// spec.podSpecOverrides): the update leaves them out, and the API server
// would drop them. An update that leaves out such a field the TrainJob has,
// from a client that names no field manager (controllers writing whole
// objects; Kueue names none), keeps the field as it was. A user removes one
// on purpose with kubectl, which always names its field manager
// (kubectl-edit, kubectl-patch, kubectl-client-side-apply, kubectl for
// server-side apply, kubectl-replace), or with any client that names one.
//
// Runtime patches record when they were written, as Kubeflow v2.3's
// webhook records it: spec.runtimePatches[].time is set to now for a patch
// created without one, and for a patch whose content changes; a patch left
// as it was keeps its time.
//
// The match condition calls the webhook only for a creation with a patch
// without a time, and for an update that changes the runtime patches or
// leaves out one of the fields of ours the TrainJob has, so every other
// write goes on without it.
//
// +kubebuilder:webhook:path=/mutate-trainer-kubeflow-org-v1alpha1-trainjob,mutating=true,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=trainjobs,verbs=create;update,versions=v1alpha1,name=mtrainjob.trainer.kubeflow.org,admissionReviewVersions=v1,reinvocationPolicy=IfNeeded,patch=`{"matchConditions":[{"name":"patch-time-or-a-field-of-ours","expression":"has(object.spec) && (request.operation == 'CREATE' ? (has(object.spec.runtimePatches) && object.spec.runtimePatches.exists(p, !has(p.time))) : (has(oldObject.spec) && ((has(object.spec.runtimePatches) && (!has(oldObject.spec.runtimePatches) || object.spec.runtimePatches != oldObject.spec.runtimePatches)) || (has(oldObject.spec.ttlSecondsAfterFinished) && !has(object.spec.ttlSecondsAfterFinished)) || (has(oldObject.spec.labels) && !has(object.spec.labels)) || (has(oldObject.spec.annotations) && !has(object.spec.annotations)) || (has(oldObject.spec.podTemplateOverrides) && !has(object.spec.podTemplateOverrides)) || (has(oldObject.spec.podSpecOverrides) && !has(object.spec.podSpecOverrides)))))"}]}`

// TrainJobDefaulter keeps the fields of ours that an update from a client
// built on Kubeflow's types leaves out, and stamps runtime patches with the
// time they were written.
type TrainJobDefaulter struct {
	clock clock.PassiveClock
}

var _ admission.Defaulter[*trainer.TrainJob] = (*TrainJobDefaulter)(nil)

// NewTrainJobDefaulter returns a defaulter that reads the time from clock.
func NewTrainJobDefaulter(clock clock.PassiveClock) *TrainJobDefaulter {
	return &TrainJobDefaulter{clock: clock}
}

// SetupWithManager registers the webhook with mgr's webhook server.
func (d *TrainJobDefaulter) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &trainer.TrainJob{}).WithDefaulter(d).Complete()
}

// Default stamps tj's runtime patches and, on an update from a client that
// named no field manager, puts back the fields of ours the update leaves
// out.
func (d *TrainJobDefaulter) Default(ctx context.Context, tj *trainer.TrainJob) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return err
	}
	now := metav1.NewTime(d.clock.Now())
	if req.Operation != admissionv1.Update || req.OldObject.Raw == nil {
		stampPatches(nil, tj, now)
		return nil
	}
	var old trainer.TrainJob
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return fmt.Errorf("reading the TrainJob before the update: %w", err)
	}
	stampPatches(&old, tj, now)
	var opts metav1.UpdateOptions
	if len(req.Options.Raw) > 0 {
		if err := json.Unmarshal(req.Options.Raw, &opts); err != nil {
			return fmt.Errorf("reading the update's options: %w", err)
		}
	}
	if opts.FieldManager != "" {
		return nil
	}
	if kept := keepFields(&old, tj); len(kept) > 0 {
		ctrl.LoggerFrom(ctx).Info("Kept fields an update from a client without a field manager left out",
			"trainJob", req.Namespace+"/"+req.Name, "fields", kept, "user", req.UserInfo.Username)
	}
	return nil
}

// stampPatches sets the time of each runtime patch of tj written now: one
// without a time that old (nil for a creation) lacks, or whose content
// differs from old's patch of the same manager. The others keep old's time.
func stampPatches(old, tj *trainer.TrainJob, now metav1.Time) {
	before := map[string]trainer.RuntimePatch{}
	if old != nil {
		for _, p := range old.Spec.RuntimePatches {
			before[p.Manager] = p
		}
	}
	for i := range tj.Spec.RuntimePatches {
		p := &tj.Spec.RuntimePatches[i]
		prev, ok := before[p.Manager]
		if !ok {
			if p.Time == nil {
				p.Time = now.DeepCopy()
			}
			continue
		}
		if equality.Semantic.DeepEqual(prev.TrainingRuntimeSpec, p.TrainingRuntimeSpec) {
			p.Time = prev.Time
		} else {
			p.Time = now.DeepCopy()
		}
	}
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

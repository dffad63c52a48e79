// Package webhook holds the validating admission webhook of TrainJobs: the
// checks the CRD schema cannot express because they look at other objects
// or at the TrainJob's status.
package webhook

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/runtime"
)

// MinRecommendedTTL is the TTL under which the webhook warns that a finished
// TrainJob may be gone before anyone looks at it.
const MinRecommendedTTL = 60

// The webhook checks creations and changes of spec only. An update that
// leaves spec alone (finalizers, labels; the garbage collector finishing a
// foreground deletion) has nothing to check, and must not wait on the
// manager being up: the match condition keeps such requests away from it.
//
// +kubebuilder:webhook:path=/validate-trainer-kubeflow-org-v1alpha1-trainjob,mutating=false,failurePolicy=fail,sideEffects=None,groups=trainer.kubeflow.org,resources=trainjobs,verbs=create;update,versions=v1alpha1,name=vtrainjob.trainer.kubeflow.org,admissionReviewVersions=v1,patch=`{"matchConditions":[{"name":"creation-or-spec-change","expression":"request.operation == 'CREATE' || (!has(object.metadata.deletionTimestamp) && object.spec != oldObject.spec)"}]}`

// TrainJobValidator validates TrainJobs on create and update.
type TrainJobValidator struct {
	// reader reads the runtimes a TrainJob references.
	reader client.Reader
}

var _ admission.Validator[*trainer.TrainJob] = (*TrainJobValidator)(nil)

// NewTrainJobValidator returns a validator reading runtimes through reader.
func NewTrainJobValidator(reader client.Reader) *TrainJobValidator {
	return &TrainJobValidator{reader: reader}
}

// SetupWithManager registers the webhook with mgr's webhook server.
func (v *TrainJobValidator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &trainer.TrainJob{}).WithValidator(v).Complete()
}

// ValidateCreate checks a new TrainJob against its runtime.
func (v *TrainJobValidator) ValidateCreate(ctx context.Context, tj *trainer.TrainJob) (admission.Warnings, error) {
	warnings := ttlWarnings(nil, tj)
	runtimeWarnings, errs := v.validateRuntime(ctx, tj)
	return append(warnings, runtimeWarnings...), invalid(tj, errs)
}

// ValidateUpdate checks a changed TrainJob.
func (v *TrainJobValidator) ValidateUpdate(_ context.Context, oldTJ, newTJ *trainer.TrainJob) (admission.Warnings, error) {
	var errs field.ErrorList
	if !ptr.Deref(oldTJ.Spec.Suspend, false) && ptr.Deref(newTJ.Spec.Suspend, false) {
		if c := oldTJ.FinishedCondition(); c != nil {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "suspend"),
				fmt.Sprintf("the TrainJob finished (%s, %s); a finished TrainJob cannot be suspended", c.Type, c.Reason)))
		}
	}
	return ttlWarnings(oldTJ, newTJ), invalid(newTJ, errs)
}

// ValidateDelete allows every deletion.
func (v *TrainJobValidator) ValidateDelete(context.Context, *trainer.TrainJob) (admission.Warnings, error) {
	return nil, nil
}

// ttlWarnings warns about a TTL too short to look at the finished TrainJob,
// when it is set or changed.
func ttlWarnings(oldTJ, newTJ *trainer.TrainJob) admission.Warnings {
	ttl := newTJ.Spec.TTLSecondsAfterFinished
	if ttl == nil || *ttl >= MinRecommendedTTL {
		return nil
	}
	if oldTJ != nil && ptr.Equal(oldTJ.Spec.TTLSecondsAfterFinished, ttl) {
		return nil
	}
	return admission.Warnings{fmt.Sprintf(
		"spec.ttlSecondsAfterFinished: %d: the TrainJob, its Jobs and its Pods' logs are deleted %ds after it finishes; there may be no time to look at them (%ds or more is recommended)",
		*ttl, *ttl, MinRecommendedTTL)}
}

// validateRuntime checks that the TrainJob can run on its runtime, with the
// same function the controller builds its Jobs with. A runtime that does not
// exist yet is a warning: the TrainJob waits for it.
func (v *TrainJobValidator) validateRuntime(ctx context.Context, tj *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	if ptr.Deref(tj.Spec.ManagedBy, trainer.DefaultManagedBy) != trainer.DefaultManagedBy {
		return nil, nil // another controller runs it, maybe on another cluster
	}
	rt, err := runtime.Resolve(ctx, v.reader, tj)
	switch {
	case apierrors.IsNotFound(err):
		return admission.Warnings{fmt.Sprintf("spec.runtimeRef: %s %q does not exist%s; the TrainJob will wait until it does", rt.Kind, rt.Name, rt.Where(tj))}, nil
	case err != nil:
		// Not knowing the runtime is no reason to refuse the TrainJob: the
		// controller checks again before it creates anything.
		return admission.Warnings{fmt.Sprintf("spec.runtimeRef: could not read %s %q: %v", rt.Kind, rt.Name, err)}, nil
	}
	if _, err := runtime.Build(tj, rt); err != nil {
		var buildErr *runtime.Error
		if errors.As(err, &buildErr) {
			return nil, buildErr.Errs
		}
		return nil, field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	return nil, nil
}

func invalid(tj *trainer.TrainJob, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(trainer.GroupVersion.WithKind(trainer.TrainJobKind).GroupKind(), tj.Name, errs)
}

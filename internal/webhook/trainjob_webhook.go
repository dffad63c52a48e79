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

// Package webhook holds the admission webhooks of TrainJobs and runtimes:
// the checks the CRD schema cannot express because they look at other
// objects (the runtime, the API server's validation of the Jobs a TrainJob
// would create) or build a TrainJob's plan, and warnings.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

const (
	// MinRecommendedTTL is the TTL under which the webhook warns that a
	// finished TrainJob may be gone before anyone looks at it.
	MinRecommendedTTL = 60

	// dryRunTimeout bounds the dry-run creations of a TrainJob's Jobs, well
	// within the API server's 10 s timeout for calling the webhook.
	dryRunTimeout = 5 * time.Second
)

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
	// apiReader reads from the API server a runtime reader did not find:
	// reader is the manager's cache, which may not have seen a runtime
	// applied a moment before (with its TrainJobs, in one file).
	apiReader client.Reader
	// jobs asks the API server, with dry-run creations, whether it would
	// accept the Jobs of a new TrainJob.
	jobs client.Writer
	// classes are those whose Jobs the API server accepted lately: a
	// TrainJob of one of them is not dry-run again, while admission finds
	// that nothing but Kubernetes' validation of Jobs could answer.
	classes *acceptedClasses
	// admission tells what else could answer a dry run of Jobs.
	admission *jobAdmission
}

var _ admission.Validator[*trainer.TrainJob] = (*TrainJobValidator)(nil)

// NewTrainJobValidator returns a validator reading runtimes through reader
// and dry-running the creation of child Jobs through jobs.
func NewTrainJobValidator(reader client.Reader, jobs client.Writer) *TrainJobValidator {
	return &TrainJobValidator{reader: reader, jobs: jobs, classes: newAcceptedClasses(clock.RealClock{}), admission: newJobAdmission(reader)}
}

// SetupWithManager registers the webhook with mgr's webhook server, and the
// index of TrainJobs and the informers on admission it reads through mgr's
// cache (see JobAdmissionCaches).
func (v *TrainJobValidator) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &trainer.TrainJob{}, dashPrefixIndex, dashPrefixesOf); err != nil {
		return fmt.Errorf("indexing TrainJobs by %s: %w", dashPrefixIndex, err)
	}
	v.apiReader = mgr.GetAPIReader()
	admission, err := watchJobAdmission(ctx, mgr.GetCache(), mgr.GetRESTMapper())
	if err != nil {
		return err
	}
	v.admission = admission
	return ctrl.NewWebhookManagedBy(mgr, &trainer.TrainJob{}).WithValidator(v).Complete()
}

// ValidateCreate checks a new TrainJob against its jobplan.
func (v *TrainJobValidator) ValidateCreate(ctx context.Context, tj *trainer.TrainJob) (admission.Warnings, error) {
	warnings := append(managedByWarnings(tj), ttlWarnings(nil, tj)...)
	warnings = append(warnings, v.multiKueueWarnings(ctx, tj)...)
	runtimeWarnings, errs := v.validateRuntime(ctx, tj)
	return append(warnings, runtimeWarnings...), invalid(tj, errs)
}

// multiKueueWarnings warns about a TrainJob MultiKueue is to dispatch
// (Kueue's webhook set its spec.managedBy before this one sees it) whose
// Pods request no resources at all: Kueue v0.19 gives such a Workload no
// flavor, and so none of its ClusterQueue's admission checks; it admits it
// on this cluster, where nothing runs it, and never dispatches it. The
// runtime is read as the controller would; when it cannot be, or the
// TrainJob cannot be built on it, nothing is said.
func (v *TrainJobValidator) multiKueueWarnings(ctx context.Context, tj *trainer.TrainJob) admission.Warnings {
	if !lifecycle.DispatchedByMultiKueue(tj) {
		return nil
	}
	rt, err := jobplan.Resolve(ctx, v.reader, tj)
	if err != nil {
		return nil
	}
	plan, err := jobplan.Build(tj, rt)
	if err != nil || slices.ContainsFunc(plan.Jobs, requestsResources) {
		return nil
	}
	return admission.Warnings{
		"spec.trainer.resourcesPerNode: the TrainJob's Pods request no resources; Kueue v0.19 admits such a TrainJob without its ClusterQueue's admission checks, so MultiKueue never dispatches it and it runs nowhere: set resourcesPerNode to resources the ClusterQueue covers (see docs/multicluster.md)",
	}
}

// requestsResources reports whether a container of the Job's Pods requests
// a resource, or sets a limit (which requests as much by default).
func requestsResources(job *batchv1.Job) bool {
	spec := &job.Spec.Template.Spec
	return slices.ContainsFunc(slices.Concat(spec.InitContainers, spec.Containers), func(c corev1.Container) bool {
		return len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0
	})
}

// ValidateUpdate checks a changed TrainJob. What can be said of the change
// alone (immutable fields, no suspending a finished TrainJob) is in the CRD
// schema, so that it holds without the webhook; changed runtime patches are
// checked against the runtime, as at creation.
func (v *TrainJobValidator) ValidateUpdate(ctx context.Context, oldTJ, newTJ *trainer.TrainJob) (admission.Warnings, error) {
	warnings := ttlWarnings(oldTJ, newTJ)
	if oldTJ.Spec.Trainer != nil && newTJ.Spec.Trainer != nil &&
		!equality.Semantic.DeepEqual(oldTJ.Spec.Trainer.ResourcesPerNode, newTJ.Spec.Trainer.ResourcesPerNode) {
		return warnings, invalid(newTJ, field.ErrorList{field.Invalid(field.NewPath("spec", "trainer", "resourcesPerNode"), "{...}", "trainer is immutable")})
	}
	if !patchesChanged(oldTJ, newTJ) {
		return warnings, nil
	}
	patchWarnings, errs := v.validatePatches(ctx, oldTJ, newTJ)
	return append(warnings, patchWarnings...), invalid(newTJ, errs)
}

// patchesChanged reports whether an update changes the TrainJob's changes to
// its runtime: runtimePatches, or Kubeflow v2.0 and v2.1's overrides.
func patchesChanged(oldTJ, newTJ *trainer.TrainJob) bool {
	return !equality.Semantic.DeepEqual(oldTJ.Spec.RuntimePatches, newTJ.Spec.RuntimePatches) ||
		!equality.Semantic.DeepEqual(oldTJ.Spec.PodTemplateOverrides, newTJ.Spec.PodTemplateOverrides) ||
		!equality.Semantic.DeepEqual(oldTJ.Spec.PodSpecOverrides, newTJ.Spec.PodSpecOverrides)
}

// validatePatches refuses changed runtime patches that the TrainJob's
// runtime cannot take (a replicated Job or container it lacks, env on the
// trainer container), as at creation: they would otherwise only be found
// when the TrainJob resumes. Once the TrainJob has Jobs (their steps are
// pinned in its status), it refuses a change to more than their Pods'
// scheduling directives too: Kubernetes lets nothing else of an existing
// Job's Pods change, so the change would never reach them.
func (v *TrainJobValidator) validatePatches(ctx context.Context, oldTJ, newTJ *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	rt, next, warnings, errs := v.plan(ctx, newTJ)
	if next == nil || len(errs) > 0 || len(oldTJ.Status.JobsStatus) == 0 {
		return warnings, errs
	}
	// The TrainJob before the update, on the runtime just read.
	prev, err := jobplan.Build(oldTJ, rt)
	if err != nil {
		return warnings, nil
	}
	if changed := jobplan.ChangedBeyondSchedulingDirectives(prev, next); len(changed) > 0 {
		errs = append(errs, field.Forbidden(changedPatchesPath(oldTJ, newTJ), fmt.Sprintf(
			"changes the Pods of Job(s) %s beyond their scheduling directives; once a TrainJob's Jobs exist, a change to its runtime patches may only set the Pod template's labels and annotations and the Pods' nodeSelector, node affinity, tolerations and schedulingGates, which Kubernetes lets change in a suspended Job",
			strings.Join(changed, ", "))))
	}
	return warnings, errs
}

// changedPatchesPath is the path of the field an update changes among
// runtimePatches and Kubeflow v2.0 and v2.1's overrides.
func changedPatchesPath(oldTJ, newTJ *trainer.TrainJob) *field.Path {
	spec := field.NewPath("spec")
	switch {
	case !equality.Semantic.DeepEqual(oldTJ.Spec.PodTemplateOverrides, newTJ.Spec.PodTemplateOverrides):
		return spec.Child("podTemplateOverrides")
	case !equality.Semantic.DeepEqual(oldTJ.Spec.PodSpecOverrides, newTJ.Spec.PodSpecOverrides):
		return spec.Child("podSpecOverrides")
	}
	return spec.Child("runtimePatches")
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

// managedByWarnings warns about a spec.managedBy that names neither this
// controller nor MultiKueue: most likely a typo, which would leave the
// TrainJob to no controller at all, for good (the field is immutable).
func managedByWarnings(tj *trainer.TrainJob) admission.Warnings {
	m := ptr.Deref(tj.Spec.ManagedBy, trainer.DefaultManagedBy)
	if lifecycle.KnownManager(m) {
		return nil
	}
	return admission.Warnings{fmt.Sprintf(
		"spec.managedBy: %q is neither %s (trainjob-operator) nor %s (Kueue's MultiKueue): trainjob-operator will not run this TrainJob, and unless a controller of that name exists nothing will; managedBy cannot be changed later",
		m, trainer.DefaultManagedBy, lifecycle.MultiKueue)}
}

// validateRuntime checks that the TrainJob can run on its runtime, with the
// same function the controller builds its Jobs with, then asks the API
// server whether it would accept those Jobs. A runtime that does not exist
// yet is a warning: the TrainJob waits for it.
func (v *TrainJobValidator) validateRuntime(ctx context.Context, tj *trainer.TrainJob) (admission.Warnings, field.ErrorList) {
	rt, plan, warnings, errs := v.plan(ctx, tj)
	if plan == nil || len(errs) > 0 {
		return warnings, errs
	}
	collisionWarnings, errs := v.nameCollisions(ctx, tj, plan)
	if warnings = append(warnings, collisionWarnings...); len(errs) > 0 {
		return warnings, errs
	}
	dryWarnings, errs := v.dryRunJobs(ctx, tj, rt, plan)
	return append(warnings, dryWarnings...), errs
}

// plan builds the TrainJob's children on its runtime. It returns no plan,
// and a warning, when the runtime cannot be read, and none for a TrainJob
// another controller runs (maybe on another cluster).
func (v *TrainJobValidator) plan(ctx context.Context, tj *trainer.TrainJob) (jobplan.Runtime, *jobplan.Plan, admission.Warnings, field.ErrorList) {
	if lifecycle.ManagedElsewhere(tj) {
		return jobplan.Runtime{}, nil, nil, nil
	}
	rt, err := jobplan.Resolve(ctx, v.reader, tj)
	if apierrors.IsNotFound(err) && v.apiReader != nil {
		rt, err = jobplan.Resolve(ctx, v.apiReader, tj)
	}
	switch {
	case apierrors.IsNotFound(err):
		return rt, nil, admission.Warnings{fmt.Sprintf("spec.runtimeRef: %s %q does not exist%s; the TrainJob will wait until it does", rt.Kind, rt.Name, rt.Where(tj))}, nil
	case err != nil:
		// Not knowing the runtime is no reason to refuse the TrainJob: the
		// controller checks again before it creates anything.
		return rt, nil, admission.Warnings{fmt.Sprintf("spec.runtimeRef: could not read %s %q: %v", rt.Kind, rt.Name, err)}, nil
	}
	plan, err := jobplan.Build(tj, rt)
	if err != nil {
		var buildErr *jobplan.Error
		if errors.As(err, &buildErr) {
			return rt, nil, nil, buildErr.Errs
		}
		return rt, nil, nil, field.ErrorList{field.InternalError(field.NewPath("spec"), err)}
	}
	return rt, plan, plan.Warnings, nil
}

// nameCollisions refuses a TrainJob whose Jobs would have the names of
// another TrainJob's Jobs: child names are <trainjob>-<replicated
// job>-<index>, so TrainJob a-b with replicated Job c and TrainJob a with
// replicated Job b-c both want a-b-c-0, and the second would wait for
// the name for as long as the first keeps it. Only TrainJobs whose names
// are one a dash-prefix of the other can collide: those are read, by name
// and through dashPrefixIndex, not every TrainJob of the namespace.
// Another TrainJob's Jobs are those pinned in its status, or, before it
// has any, those its runtime gives it (read from the cache).
func (v *TrainJobValidator) nameCollisions(ctx context.Context, tj *trainer.TrainJob, plan *jobplan.Plan) (admission.Warnings, field.ErrorList) {
	others, err := v.dashRelatives(ctx, tj)
	if err != nil {
		return admission.Warnings{fmt.Sprintf("could not check the names of this TrainJob's Jobs against other TrainJobs': %v", err)}, nil
	}
	mine := map[string]bool{}
	for _, job := range plan.Jobs {
		mine[job.Name] = true
	}
	for i := range others {
		other := &others[i]
		for _, name := range v.jobNames(ctx, other) {
			if mine[name] {
				return nil, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), tj.Name, fmt.Sprintf(
					"Job %s of this TrainJob would have the name of a Job of TrainJob %s: child Jobs are named <trainjob>-<replicated job>-<index>; choose a TrainJob name that is not %s plus a dash and more, nor the start of it",
					name, other.Name, other.Name))}
			}
		}
	}
	return nil, nil
}

// dashRelatives returns the TrainJobs of tj's namespace whose names are
// tj's name plus a dash and more, or the start of tj's name before a dash.
func (v *TrainJobValidator) dashRelatives(ctx context.Context, tj *trainer.TrainJob) ([]trainer.TrainJob, error) {
	var longer trainer.TrainJobList
	if err := v.reader.List(ctx, &longer, client.InNamespace(tj.Namespace), client.MatchingFields{dashPrefixIndex: tj.Name}); err != nil {
		return nil, err
	}
	others := longer.Items
	for _, prefix := range dashPrefixes(tj.Name) {
		var shorter trainer.TrainJob
		switch err := v.reader.Get(ctx, client.ObjectKey{Namespace: tj.Namespace, Name: prefix}, &shorter); {
		case err == nil:
			others = append(others, shorter)
		case !apierrors.IsNotFound(err):
			return nil, err
		}
	}
	return others, nil
}

// dashPrefixIndex indexes TrainJobs by the start of their names before each
// dash (a-b-c under a and a-b): the TrainJobs whose Jobs' names could be
// those of a TrainJob of that name.
const dashPrefixIndex = "trainer.kubeflow.org/name-dash-prefixes"

// dashPrefixesOf is dashPrefixIndex's value of a TrainJob.
func dashPrefixesOf(obj client.Object) []string {
	return dashPrefixes(obj.GetName())
}

// dashPrefixes returns the start of name before each of its dashes.
func dashPrefixes(name string) []string {
	var prefixes []string
	for i := 1; i < len(name); i++ {
		if name[i] == '-' {
			prefixes = append(prefixes, name[:i])
		}
	}
	return prefixes
}

// jobNames are the names of a TrainJob's Jobs.
func (v *TrainJobValidator) jobNames(ctx context.Context, tj *trainer.TrainJob) []string {
	var names []string
	for _, js := range tj.Status.JobsStatus {
		for i := range js.Replicas {
			names = append(names, jobplan.JobName(tj.Name, js.Name, i))
		}
	}
	if names != nil {
		return names
	}
	rt, err := jobplan.Resolve(ctx, v.reader, tj)
	if err != nil {
		return nil
	}
	return jobplan.JobNames(tj.Name, rt.Spec)
}

// dryRunJobs asks the API server to validate the first Job of each
// replicated Job with a dry-run creation, so that its own Job validation
// answers for what no rule here foresaw (the replicas of a replicated Job
// differ only in their names and indexes). A refusal as Invalid refuses the
// TrainJob with the API server's message: the controller could never create
// that Job. Any other error (a quota, a timeout, a name already taken) is a
// warning: it may pass, and the controller reports it if it does not.
//
// The API server's warnings on the Jobs (Pod Security admission's on their
// Pod template, for one) are given with the TrainJob's.
//
// A TrainJob of a class whose Jobs the API server accepted lately (a burst
// of TrainJobs alike but for their names) is accepted without asking again
// (see jobsClass), and so without the warnings only its own names could
// meet (a leftover Job of the same name: the controller reports it,
// NameTaken). That stands in only for Kubernetes' validation of Jobs, which
// depends on the class alone: while anything else could answer (an
// admission webhook or policy on Jobs, a quota on their number in the
// namespace), every TrainJob is dry-run, and nothing is remembered. An
// acceptance with warnings is not remembered either: the next TrainJob of
// the class is dry-run again, and gets them too.
func (v *TrainJobValidator) dryRunJobs(ctx context.Context, tj *trainer.TrainJob, rt jobplan.Runtime, plan *jobplan.Plan) (admission.Warnings, field.ErrorList) {
	var c jobsClass
	known := false
	if other := v.admission.otherAnswer(ctx, tj.Namespace); other == "" {
		c, known = classOf(tj, rt)
	} else {
		ctrl.LoggerFrom(ctx).V(5).Info("Dry-running the TrainJob's Jobs whatever their class", "trainJob", klog.KObj(tj), "admission", other)
	}
	if known && v.classes.accepted(c) {
		return nil, nil
	}
	warnings, errs := v.dryRunFirstJobs(ctx, rt, plan)
	if known && len(warnings) == 0 && len(errs) == 0 {
		v.classes.accept(c)
	}
	return warnings, errs
}

// dryRunFirstJobs dry-runs the creation of the Jobs of plan that stand for
// the others (see dryRunJobsOf).
func (v *TrainJobValidator) dryRunFirstJobs(ctx context.Context, rt jobplan.Runtime, plan *jobplan.Plan) (admission.Warnings, field.ErrorList) {
	ctx, cancel := context.WithTimeout(ctx, dryRunTimeout)
	defer cancel()
	rjobsPath := field.NewPath("runtime").Key(rt.Kind+"/"+rt.Name).Child("spec", "template", "spec", "replicatedJobs")
	var warnings admission.Warnings
	var errs field.ErrorList
	for i, job := range dryRunJobsOf(plan) {
		jobCtx, answered := collectWarnings(ctx)
		err := v.jobs.Create(jobCtx, job, client.DryRunAll)
		for _, w := range answered.all() {
			warnings = append(warnings, fmt.Sprintf("the API server warns of Job %s of replicated Job %q (dry run): %s", job.Name, plan.Steps[i].Name, w))
		}
		switch {
		case err == nil:
		case apierrors.IsInvalid(err):
			errs = append(errs, field.Invalid(rjobsPath.Index(i), plan.Steps[i].Name, fmt.Sprintf(
				"the API server refuses the Jobs of replicated Job %q of %s %q: %v",
				plan.Steps[i].Name, rt.Kind, rt.Name, err)))
		default:
			warnings = append(warnings, fmt.Sprintf(
				"could not check that the API server accepts Job %s of replicated Job %q (dry run): %v",
				job.Name, plan.Steps[i].Name, err))
			if ctx.Err() != nil {
				return warnings, errs // out of time: the next ones would say the same
			}
		}
	}
	return warnings, errs
}

// dryRunJobsOf returns the Jobs of plan whose creation the webhook
// dry-runs: the Job of replica 0 of each step, in the order of plan.Steps
// (the replicas of a replicated Job differ only in their names and
// indexes), as the controller creates it but without its owner reference.
//
// The owner is the TrainJob being admitted, which does not exist yet.
// Admission that looks up a Job's owner would refuse the Job for that
// alone, where it accepts the Job the controller creates once the TrainJob
// exists: Kueue's Job webhook does ("TrainJob ... not found"), and every
// TrainJob created with Kueue installed got a warning for it. Without an
// owner, such admission sees a Job that nothing owns (Kueue accepts it),
// and rules that check an owner's presence see none (see
// docs/lifecycle.md).
func dryRunJobsOf(plan *jobplan.Plan) []*batchv1.Job {
	jobs := make([]*batchv1.Job, 0, len(plan.Steps))
	next := 0
	for _, step := range plan.Steps {
		job := plan.Jobs[next].DeepCopy()
		job.OwnerReferences = nil
		jobs = append(jobs, job)
		next += int(step.Replicas)
	}
	return jobs
}

func invalid(tj *trainer.TrainJob, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(trainer.GroupVersion.WithKind(trainer.TrainJobKind).GroupKind(), tj.Name, errs)
}

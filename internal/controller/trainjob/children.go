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

package trainjob

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
)

// shapePinned reports whether status holds the TrainJob's replicated Jobs.
func shapePinned(status *trainer.TrainJobStatus) bool {
	if len(status.JobsStatus) == 0 {
		return false
	}
	for _, js := range status.JobsStatus {
		if js.Replicas < 1 {
			return false
		}
	}
	return true
}

// pinShape records the replicated Jobs of plan in status, keeping any
// outcome already recorded, and the runtime's policies: anew while no Job
// was created (repin), as the snapshot made with the first Jobs is;
// otherwise those pinned first are kept.
func pinShape(status *trainer.TrainJobStatus, plan *jobplan.Plan, repin bool) {
	byName := map[string]trainer.JobStatus{}
	for _, js := range status.JobsStatus {
		byName[js.Name] = js
	}
	status.JobsStatus = status.JobsStatus[:0]
	for _, s := range plan.Steps {
		js, pinned := byName[s.Name]
		js.Name, js.Replicas, js.Trainer = s.Name, s.Replicas, s.Trainer
		js.Waiting = js.Waiting || !pinned
		status.JobsStatus = append(status.JobsStatus, js)
	}
	if repin || status.SuccessPolicy == nil {
		status.SuccessPolicy = plan.Success.DeepCopy()
	}
	if repin || status.FailurePolicy == nil {
		status.FailurePolicy = plan.Failure.DeepCopy()
	}
	if repin || status.Network == nil {
		status.Network = plan.Network.DeepCopy()
	}
	if repin || status.JobsTTLSecondsAfterFinished == nil {
		status.JobsTTLSecondsAfterFinished = plan.JobsTTL
	}
}

// missingChild is a child of the pinned shape that is not observed.
type missingChild struct {
	job     string
	step    string
	replica int32
}

// missingChildren returns the children of the pinned shape that are neither
// among children nor recorded.
func missingChildren(status *trainer.TrainJobStatus, trainJob string, children []child) []missingChild {
	have := map[string]bool{}
	for _, c := range children {
		have[c.job.Name] = true
	}
	var missing []missingChild
	for _, js := range status.JobsStatus {
		for replica := range js.Replicas {
			name := jobplan.JobName(trainJob, js.Name, replica)
			if !have[name] && recordedOutcome(&js, replica) == running {
				missing = append(missing, missingChild{job: name, step: js.Name, replica: replica})
			}
		}
	}
	return missing
}

// labelsChanged reports whether the labels by which the cache and the index
// find a child Job were changed.
func labelsChanged(tj *trainer.TrainJob, c child) bool {
	for k, v := range jobplan.ChildLabels(tj.Name, c.step, c.replica) {
		if c.job.Labels[k] != v {
			return true
		}
	}
	return false
}

// restoreLabels puts back the labels by which the cache and the index find
// each of the children.
func (r *Reconciler) restoreLabels(ctx context.Context, tj *trainer.TrainJob, children []child) error {
	var errs []error
	for _, c := range children {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": jobplan.ChildLabels(tj.Name, c.step, c.replica)}})
		if err != nil {
			return err
		}
		if err := r.client.Patch(ctx, c.job, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("restoring the labels of child Job %s: %w", klog.KObj(c.job), err))
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Restored the labels of a child Job", "job", klog.KObj(c.job))
	}
	return errors.Join(errs...)
}

// creation is what the create phase is to create, decided by planCreation,
// and what it did. Children are created until all were created once; from
// then on a missing child is never created again (lookUpMissing finds out
// what became of it). The Service is created whenever it is missing while
// the TrainJob runs.
type creation struct {
	// allCreated is set once every child was created: only the Service
	// may be left to create.
	allCreated bool
	// waiting is set when no Job can be created in this reconcile, and
	// blocked, if not nil, is the Created=False condition that says why:
	// the runtime is missing or invalid, or changed since the first Jobs
	// were created.
	waiting bool
	blocked *metav1.Condition
	// jobs are the children to create, and claims, configMaps and
	// secrets the children their Pods mount, to make sure of first (when
	// there are jobs to create).
	jobs       []*batchv1.Job
	claims     []*corev1.PersistentVolumeClaim
	configMaps []*corev1.ConfigMap
	secrets    []jobplan.GeneratedSecret
	podGroup   *unstructured.Unstructured
	// first is set for the TrainJob's first Jobs: what their Pods mount
	// is not there yet, but for a TrainJob of the same name not deleted
	// yet.
	first bool
	// startable are the replicated Jobs whose dependencies are reached: the
	// waiting ones stop waiting once their Jobs are all created. waitingFor
	// says, for the others, what they wait for. blockedSteps are those one
	// of whose Jobs could not be created.
	startable    map[string]bool
	waitingFor   map[string]string
	blockedSteps map[string]bool
	// service is set when the TrainJob's Service is to be created, and
	// serviceOf the TrainJob whose pinned network it is made by.
	service   bool
	serviceOf *trainer.TrainJob

	// taken is the Created=False condition of a child that cannot be
	// made: its name is held by an object this TrainJob does not own,
	// found before or on creating it, or its kind (a PodGroup's) is not
	// installed.
	taken *metav1.Condition
	// foreignService is the Service of the TrainJob's name when it is not
	// the TrainJob's.
	foreignService *corev1.Service
	// created are the Jobs the create phase created.
	created []child
	// refused is the Created=False condition of the first Job the API
	// server refused; errs are the creations that failed.
	refused *metav1.Condition
	errs    []error
	// serviceErr is the failure to create the Service.
	serviceErr error
}

// planCreation decides what to create for a running TrainJob, and pins its
// shape into its status the first time: the runtime's replicated Jobs as
// they are when nothing was created yet.
func planCreation(tj *trainer.TrainJob, obs *observed, restarting bool) *creation {
	c := &creation{}
	defer func() {
		// The Service, by the network pinned now: none without DNS
		// hostnames.
		switch {
		case !jobplan.HasService(tj):
		case obs.noService:
			c.service, c.serviceOf = true, tj
		case obs.service != nil && !metav1.IsControlledBy(obs.service, tj):
			c.foreignService = obs.service
		}
	}()
	if allCreated(tj) {
		c.allCreated = true
		return c
	}
	if obs.plan == nil {
		c.waiting, c.blocked = true, obs.blocked
		return c
	}
	if restarting {
		// The new attempt's Jobs are created once the old ones are gone.
		c.waiting = true
		return c
	}
	if !shapePinned(&tj.Status) || len(obs.children) == 0 {
		pinShape(&tj.Status, obs.plan, !createdAny(tj, obs))
	} else if msg := shapeChange(&tj.Status, obs.plan); msg != "" {
		c.waiting = true
		c.blocked = &metav1.Condition{
			Type: trainer.TrainJobCreated, Status: metav1.ConditionFalse, Reason: trainer.TrainJobRuntimeChangedReason,
			Message: fmt.Sprintf("%s %s changed after the first Jobs of the TrainJob were created: %s. The TrainJob keeps the replicated Jobs it started with: restore the runtime, or delete the TrainJob",
				jobplan.KindOf(tj), tj.Spec.RuntimeRef.Name, msg),
		}
		return c
	}
	// The dependencies are counted on the children as observed.
	updateJobsStatus(&tj.Status, obs.children)
	c.startable, c.waitingFor, c.blockedSteps = map[string]bool{}, map[string]string{}, map[string]bool{}
	for _, step := range obs.plan.Steps {
		ok, waitingFor := reached(&tj.Status, step.DependsOn)
		if c.startable[step.Name] = ok; !ok {
			c.waitingFor[step.Name] = waitingFor
		}
	}
	missing := map[string]bool{}
	for _, m := range missingChildren(&tj.Status, tj.Name, obs.children) {
		missing[m.job] = true
	}
	blocking := len(obs.previous) > 0 && tj.Status.FailurePolicy != nil && tj.Status.FailurePolicy.RestartStrategy == trainer.BlockingRecreate
	for _, job := range obs.plan.Jobs {
		step := job.Labels[trainer.ReplicatedJobNameLabel]
		if !missing[job.Name] || !c.startable[step] {
			continue
		}
		if blocking || slices.ContainsFunc(obs.previous, func(p *batchv1.Job) bool { return p.Name == job.Name }) {
			// The Job of this name of the attempt before is still going
			// (BlockingRecreate: one of them is).
			c.blockedSteps[step] = true
			c.waitingFor[step] = "the Jobs of the restart attempt before to be gone"
			continue
		}
		if i := slices.IndexFunc(obs.others, func(o *batchv1.Job) bool { return o.Name == job.Name }); i >= 0 {
			c.taken = cmp.Or(c.taken, nameTaken(tj, "Job", obs.others[i]))
			c.blockedSteps[step] = true
			continue
		}
		c.jobs = append(c.jobs, job)
	}
	if len(c.jobs) > 0 {
		c.claims, c.configMaps, c.secrets, c.podGroup = obs.plan.Claims, obs.plan.ConfigMaps, obs.plan.Secrets, obs.plan.PodGroup
		c.first = !createdAny(tj, obs)
		if c.first && needsSnapshot(tj, obs.plan, c.startable) {
			// Made before the first Jobs, with the runtime they are made
			// from, like the ConfigMaps their Pods mount.
			snap, err := makeSnapshot(tj, obs.runtime)
			if err != nil {
				for _, job := range c.jobs {
					c.blockedSteps[job.Labels[trainer.ReplicatedJobNameLabel]] = true
				}
				c.errs, c.jobs = append(c.errs, err), nil
				return c
			}
			c.configMaps = append(slices.Clip(c.configMaps), snap)
		}
	}
	return c
}

// create creates what planCreation decided, and records in c how it went.
// The Service is created beside the rest (a Pod needs its DNS name only
// once it runs), and the Jobs all at once, once what their Pods need
// exists.
func (r *Reconciler) create(ctx context.Context, tj *trainer.TrainJob, c *creation) {
	if c == nil {
		return
	}
	if c.service {
		var service sync.WaitGroup
		var foreign *corev1.Service
		service.Go(func() { foreign, c.serviceErr = r.createService(ctx, c.serviceOf) })
		defer func() {
			service.Wait()
			if foreign != nil {
				c.foreignService = foreign
			}
		}()
	}
	podGroupMade := true
	if c.podGroup != nil {
		blocked, err := r.ensurePodGroup(ctx, tj, c.podGroup)
		if err != nil {
			c.errs = append(c.errs, err)
		}
		c.taken = cmp.Or(c.taken, blocked)
		podGroupMade = err == nil && blocked == nil
	}
	if !podGroupMade || !r.createClaims(ctx, tj, c) || !r.createMounted(ctx, tj, c) {
		// Without their PodGroup, claims, ConfigMaps and Secrets, the
		// Jobs' Pods would not start.
		for _, job := range c.jobs {
			c.blockedSteps[job.Labels[trainer.ReplicatedJobNameLabel]] = true
		}
		return
	}
	outcomes := make([]jobCreation, len(c.jobs))
	inParallel(len(c.jobs), func(i int) { outcomes[i] = r.createJob(ctx, tj, c.jobs[i]) })
	for i, o := range outcomes {
		job := c.jobs[i]
		if o.created {
			if ch, ok := childOf(job); ok {
				c.created = append(c.created, ch)
			}
			continue
		}
		c.blockedSteps[job.Labels[trainer.ReplicatedJobNameLabel]] = true
		c.taken = cmp.Or(c.taken, o.taken)
		if o.refused != nil {
			c.failed("Job", job, o.refused)
		}
		if o.err != nil {
			c.errs = append(c.errs, o.err)
		}
	}
	if len(c.created) > 0 {
		ctrl.LoggerFrom(ctx).V(2).Info("Created child Jobs", "count", len(c.created))
	}
}

// jobCreation is how the creation of one Job went: created, or not, and
// then why, if anything is worth telling.
type jobCreation struct {
	created bool
	// taken is the Created=False condition of a name held by a Job that
	// is not the TrainJob's.
	taken *metav1.Condition
	// refused is the API server's answer to the creation; err any other
	// reason to try again.
	refused, err error
}

// createJob creates one child Job. A Job of the name that exists already is
// the TrainJob's (created by an earlier reconcile the cache has not caught
// up with), one of its attempt before, still going, or someone else's.
func (r *Reconciler) createJob(ctx context.Context, tj *trainer.TrainJob, job *batchv1.Job) jobCreation {
	err := r.client.Create(ctx, job)
	if apierrors.IsAlreadyExists(err) {
		var live batchv1.Job
		if err = r.apiReader.Get(ctx, client.ObjectKeyFromObject(job), &live); err == nil && ctrlOwnerUID(&live) != tj.UID {
			return jobCreation{taken: nameTaken(tj, "Job", &live)}
		}
		if err == nil && ofEarlierAttempt(tj, &live) {
			// Created once it is gone.
			return jobCreation{}
		}
	}
	switch {
	case err == nil:
		return jobCreation{created: true}
	case apierrors.IsNotFound(err):
		// Read back after AlreadyExists, it was gone: try again.
		return jobCreation{err: fmt.Errorf("creating Job %s: it was just deleted", klog.KObj(job))}
	default:
		return jobCreation{refused: err}
	}
}

// failed records that the creation of obj, a child of the given kind,
// failed with err, and the first refusal worth telling the user about.
func (c *creation) failed(kind string, obj client.Object, err error) {
	c.errs = append(c.errs, fmt.Errorf("creating %s %s: %w", kind, klog.KObj(obj), err))
	if c.refused == nil && isRefusal(err) {
		c.refused = &metav1.Condition{
			Type: trainer.TrainJobCreated, Status: metav1.ConditionFalse, Reason: trainer.TrainJobJobRefusedReason,
			Message: fmt.Sprintf("The API server refused %s %s: %v", kind, obj.GetName(), err),
		}
	}
}

// settleCreated keeps the Created condition from what the create phase did:
// False with the reason while a child cannot be created (the runtime is
// missing or invalid, or changed since the first Jobs were created; a name
// is held by a Job or Service this TrainJob does not own; the API server
// refused a Job), and no Created condition otherwise: a TrainJob that runs
// normally has none. It returns when to look at the TrainJob again if no
// event will bring it back, and the errors worth retrying.
func settleCreated(tj *trainer.TrainJob, c *creation, now metav1.Time) (time.Duration, error) {
	if c.allCreated || c.waiting {
		switch {
		case c.blocked != nil:
			setCondition(tj, *c.blocked, now)
		case c.allCreated:
			// Set True by versions before.
			meta.RemoveStatusCondition(&tj.Status.Conditions, trainer.TrainJobCreated)
		}
		return 0, c.serviceErr
	}
	taken := c.taken
	if c.foreignService != nil {
		// Without its own Service, the Pods' DNS names do not resolve.
		taken = cmp.Or(taken, nameTaken(tj, "Service", c.foreignService))
	}
	var retryAfter time.Duration
	switch {
	case taken != nil:
		setCondition(tj, *taken, now)
		retryAfter = waitRetry
	case c.refused != nil:
		setCondition(tj, *c.refused, now)
		if !slices.ContainsFunc(c.errs, func(err error) bool { return !apierrors.IsInvalid(err) }) {
			// Validation refuses the same Job until something changes:
			// the runtime (its watch brings the TrainJob back), or an
			// admission policy, looked at again now and then. The
			// deadline still runs.
			return invalidRetry, c.serviceErr
		}
	}
	// A waiting replicated Job whose dependencies are reached, and whose
	// Jobs were all created, waits no more.
	for i := range tj.Status.JobsStatus {
		js := &tj.Status.JobsStatus[i]
		if js.Waiting && c.startable[js.Name] && !c.blockedSteps[js.Name] {
			js.Waiting = false
		}
	}
	if taken == nil && c.refused == nil && len(c.errs) == 0 {
		meta.RemoveStatusCondition(&tj.Status.Conditions, trainer.TrainJobCreated)
	}
	return retryAfter, errors.Join(append(c.errs, c.serviceErr)...)
}

// createdMessage says how many of the TrainJob's Jobs are created, and
// what the replicated Jobs still waiting wait for (waitingFor).
func createdMessage(tj *trainer.TrainJob, waitingFor map[string]string) string {
	total, made := int32(0), int32(0)
	var waits []string
	for _, js := range tj.Status.JobsStatus {
		total += js.Replicas
		if !js.Waiting {
			made += js.Replicas
			continue
		}
		waits = append(waits, fmt.Sprintf("replicated Job %s waits for %s", js.Name, cmp.Or(waitingFor[js.Name], "its dependencies")))
	}
	if len(waits) == 0 {
		return fmt.Sprintf("Created %d Jobs from %s %s", total, jobplan.KindOf(tj), tj.Spec.RuntimeRef.Name)
	}
	return fmt.Sprintf("Created %d of %d Jobs from %s %s; %s", made, total, jobplan.KindOf(tj), tj.Spec.RuntimeRef.Name, strings.Join(waits, "; "))
}

// isRefusal reports whether the API server answered a create with a
// refusal worth telling the user about, rather than a transient failure.
func isRefusal(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsRequestEntityTooLargeError(err)
}

// nameTaken is the Created=False condition of a TrainJob one of whose
// children's names is held by obj, which it does not own.
func nameTaken(tj *trainer.TrainJob, kind string, obj metav1.Object) *metav1.Condition {
	holder := "no owner"
	if ref := metav1.GetControllerOf(obj); ref != nil {
		holder = fmt.Sprintf("%s %s (UID %s)", ref.Kind, ref.Name, ref.UID)
		if ref.Kind == trainer.TrainJobKind && ref.Name == tj.Name {
			holder = fmt.Sprintf("an earlier TrainJob %s (UID %s)", ref.Name, ref.UID)
		}
	}
	state := ""
	if obj.GetDeletionTimestamp() != nil {
		state = ", being deleted"
	}
	return &metav1.Condition{
		Type: trainer.TrainJobCreated, Status: metav1.ConditionFalse, Reason: trainer.TrainJobNameTakenReason,
		Message: fmt.Sprintf("%s %s/%s is not this TrainJob's: it belongs to %s%s. The TrainJob starts once the name is free",
			kind, obj.GetNamespace(), obj.GetName(), holder, state),
	}
}

// shapeChange says how plan's replicated Jobs differ from those pinned in
// status, or returns "" if they do not.
func shapeChange(status *trainer.TrainJobStatus, plan *jobplan.Plan) string {
	describe := func(steps []jobplan.Step) string {
		var parts []string
		for _, s := range steps {
			parts = append(parts, fmt.Sprintf("%s×%d", s.Name, s.Replicas))
		}
		return strings.Join(parts, ", ")
	}
	var pinned []jobplan.Step
	for _, js := range status.JobsStatus {
		pinned = append(pinned, jobplan.Step{Name: js.Name, Replicas: js.Replicas, Trainer: js.Trainer})
	}
	var changes []string
	if !slices.EqualFunc(pinned, plan.Steps, func(a, b jobplan.Step) bool {
		return a.Name == b.Name && a.Replicas == b.Replicas && a.Trainer == b.Trainer
	}) {
		changes = append(changes, fmt.Sprintf("its replicated Jobs were %s and are now %s", describe(pinned), describe(plan.Steps)))
	}
	// The Service and the Pods' subdomain, which the Jobs created reach
	// each other by.
	if status.Network != nil && !equality.Semantic.DeepEqual(*status.Network, plan.Network) {
		changes = append(changes, fmt.Sprintf("its network was %s and is now %s", describeNetwork(status.Network), describeNetwork(&plan.Network)))
	}
	if status.SuccessPolicy != nil && !equality.Semantic.DeepEqual(*status.SuccessPolicy, plan.Success) {
		changes = append(changes, "its successPolicy changed")
	}
	return strings.Join(changes, "; ")
}

// describeNetwork says what a runtime's network gives the TrainJob.
func describeNetwork(n *trainer.Network) string {
	return fmt.Sprintf("(subdomain %q, enableDNSHostnames %t, publishNotReadyAddresses %t)",
		n.Subdomain, ptr.Deref(n.EnableDNSHostnames, true), ptr.Deref(n.PublishNotReadyAddresses, true))
}

// createClaims makes sure the volume claims of the runtime's
// volumeClaimPolicies exist before the Jobs that mount them are created, and
// reports whether they all do. A claim of the name that exists already is
// the TrainJob's if it controls it, or, for a claim retained after the
// TrainJob is deleted (it has no owner), if it has no controller: a later
// TrainJob of the same name uses it again, as under JobSet. Any other is
// not the TrainJob's, and the TrainJob waits for the name.
func (r *Reconciler) createClaims(ctx context.Context, tj *trainer.TrainJob, c *creation) bool {
	ok := true
	for _, claim := range c.claims {
		err := r.client.Create(ctx, claim.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			var live corev1.PersistentVolumeClaim
			if err = r.apiReader.Get(ctx, client.ObjectKeyFromObject(claim), &live); err == nil {
				owner := metav1.GetControllerOf(&live)
				if (owner == nil && len(claim.OwnerReferences) == 0) || (owner != nil && owner.UID == tj.UID) {
					continue
				}
				c.taken = cmp.Or(c.taken, nameTaken(tj, "PersistentVolumeClaim", &live))
				ok = false
				continue
			}
		}
		if err != nil {
			c.failed("PersistentVolumeClaim", claim, err)
			ok = false
		}
	}
	return ok
}

// createMounted makes sure the ML policy's ConfigMaps and Secrets exist
// before the Jobs whose Pods mount them are created, and reports whether
// they all do. A ConfigMap of the TrainJob's whose data differs is brought
// up to date; a Secret of the TrainJob's is kept as it is (its key is made
// once). Either of the name held by anything else is not the TrainJob's,
// and the TrainJob waits for the name. They are read by name, not watched.
func (r *Reconciler) createMounted(ctx context.Context, tj *trainer.TrainJob, c *creation) bool {
	ok := true
	for _, want := range c.configMaps {
		// Created at once for the first Jobs, which wait for it, and read
		// only if the name is taken; read first otherwise: a TrainJob of
		// several stages comes here once a stage, and a read costs the API
		// server less than a refused creation.
		if c.first {
			err := r.client.Create(ctx, want.DeepCopy())
			if !apierrors.IsAlreadyExists(err) {
				if err != nil {
					c.failed("ConfigMap", want, err)
					ok = false
				}
				continue
			}
		}
		var live corev1.ConfigMap
		err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), &live)
		switch {
		case apierrors.IsNotFound(err):
			err = r.client.Create(ctx, want.DeepCopy())
		case err != nil:
		case !metav1.IsControlledBy(&live, tj):
			c.taken = cmp.Or(c.taken, nameTaken(tj, "ConfigMap", &live))
			ok = false
			continue
		case !maps.Equal(live.Data, want.Data):
			live.Data = want.Data
			err = r.client.Update(ctx, &live)
		}
		if err != nil {
			c.failed("ConfigMap", want, err)
			ok = false
		}
	}
	for _, want := range c.secrets {
		var live corev1.Secret
		err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want.Secret), &live)
		switch {
		case err == nil && !metav1.IsControlledBy(&live, tj):
			c.taken = cmp.Or(c.taken, nameTaken(tj, "Secret", &live))
			ok = false
			continue
		case apierrors.IsNotFound(err):
			secret := want.Secret.DeepCopy()
			if secret.Data, err = want.Generate(); err == nil {
				err = r.client.Create(ctx, secret)
			}
			if apierrors.IsAlreadyExists(err) {
				// Made since it was read; looked at again next time.
				err = fmt.Errorf("it was created by someone else meanwhile")
			}
		}
		if err != nil {
			c.failed("Secret", want.Secret, err)
			ok = false
		}
	}
	return ok
}

// ensurePodGroup makes sure the PodGroup of the runtime's podGroupPolicy
// exists, is the TrainJob's and has the spec want gives it: created, or
// brought up to date (while the TrainJob is suspended, what Kueue or the
// TrainJob changed). It is read by name, not watched. It returns the
// Created=False condition of a PodGroup that cannot be made: its CRD is not
// installed, or its name is someone else's.
func (r *Reconciler) ensurePodGroup(ctx context.Context, tj *trainer.TrainJob, want *unstructured.Unstructured) (*metav1.Condition, error) {
	gvk := want.GroupVersionKind()
	if _, err := r.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		if !meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("looking up the PodGroup kind %s: %w", gvk, err)
		}
		return &metav1.Condition{
			Type: trainer.TrainJobCreated, Status: metav1.ConditionFalse, Reason: trainer.TrainJobPodGroupUnavailableReason,
			Message: fmt.Sprintf("The podGroupPolicy of %s %s asks for gang scheduling, but the API server has no %s of %s: install the gang scheduler and its CRDs, or use a runtime without podGroupPolicy. The TrainJob starts once it is installed",
				jobplan.KindOf(tj), tj.Spec.RuntimeRef.Name, gvk.Kind, gvk.GroupVersion()),
		}, nil
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvk)
	err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), live)
	switch {
	case apierrors.IsNotFound(err):
		err = r.client.Create(ctx, want.DeepCopy())
	case err != nil:
	case !metav1.IsControlledBy(live, tj):
		return nameTaken(tj, "PodGroup", live), nil
	case !jobplan.SamePodGroup(live, want):
		spec, _, _ := unstructured.NestedMap(live.Object, "spec")
		if spec == nil {
			spec = map[string]any{}
		}
		maps.Copy(spec, want.Object["spec"].(map[string]any))
		live.Object["spec"] = spec
		err = r.client.Update(ctx, live)
	}
	if err != nil {
		return nil, fmt.Errorf("making PodGroup %s: %w", klog.KObj(want), err)
	}
	return nil, nil
}

// createService creates the headless Service that gives the Pods their DNS
// names. It returns the Service of that name if one exists that is not the
// TrainJob's.
func (r *Reconciler) createService(ctx context.Context, tj *trainer.TrainJob) (*corev1.Service, error) {
	want := jobplan.Service(tj)
	if want == nil {
		return nil, nil
	}
	err := r.client.Create(ctx, want)
	if apierrors.IsAlreadyExists(err) {
		// Not in the cache, which holds the Services labelled for a
		// TrainJob: someone else's, unless ours is on its way.
		var svc corev1.Service
		if err = r.apiReader.Get(ctx, client.ObjectKeyFromObject(want), &svc); err == nil && !metav1.IsControlledBy(&svc, tj) {
			return &svc, nil
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("creating Service %s: %w", klog.KObj(want), err)
	}
	return nil, nil
}

// deleteService deletes the TrainJob's headless Service, svc as observed,
// once it finished. Kept, a finished TrainJob's Service would cost the
// cluster for as long as the TrainJob stays: kube-controller-manager's
// endpoint controllers match every Pod change in the namespace against
// every Service there.
func (r *Reconciler) deleteService(ctx context.Context, tj *trainer.TrainJob, svc *corev1.Service) error {
	if svc == nil || !metav1.IsControlledBy(svc, tj) || svc.DeletionTimestamp != nil {
		return nil
	}
	err := r.client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Service %s: %w", klog.KObj(svc), err)
	}
	return nil
}

// stopChildren suspends every child that is still running, so that the Job
// controller deletes its Pods. It is called on every reconcile of a finished
// TrainJob, so a failed attempt is retried until no child runs.
func (r *Reconciler) stopChildren(ctx context.Context, children []child) error {
	var running []*batchv1.Job
	for _, c := range children {
		if toStop(c) {
			running = append(running, c.job)
		}
	}
	return eachInParallel(running, func(job *batchv1.Job) error { return r.setJobSuspend(ctx, job, true) })
}

// toStop reports whether a child Job of a finished TrainJob is to be
// stopped: it runs, and is neither suspended nor being deleted.
func toStop(c child) bool {
	o, _ := jobOutcome(c.job)
	return o == running && c.job.DeletionTimestamp == nil && !ptr.Deref(c.job.Spec.Suspend, false)
}

// deleteJobs deletes the TrainJob's Jobs whose outcomes no longer matter
// (of an earlier restart attempt, or past the runtime's
// ttlSecondsAfterFinished), which why says: each is released from the
// tracking finalizer, then deleted with foreground propagation, so that
// its name comes free only once its Pods are gone.
func (r *Reconciler) deleteJobs(ctx context.Context, jobs []*batchv1.Job, why string) error {
	return eachInParallel(jobs, func(job *batchv1.Job) error {
		if err := r.releaseFinalizer(ctx, job); err != nil || job.DeletionTimestamp != nil {
			return err
		}
		err := r.client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground), client.Preconditions{UID: &job.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting Job %s %s: %w", klog.KObj(job), why, err)
		}
		ctrl.LoggerFrom(ctx).V(2).Info("Deleted a Job "+why, "job", klog.KObj(job), "attempt", attemptOf(job))
		return nil
	})
}

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

// Package trainjob holds the TrainJob controller: it runs a TrainJob as
// Indexed batch/v1 Jobs, tracks their outcomes, follows spec.suspend and
// keeps the TrainJob's status.
package trainjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
)

// ControllerName names the controller, its workqueue and its events.
const ControllerName = "trainjob-controller"

// conflictRetry is when a TrainJob whose status write conflicted is looked
// at again, should no watch event bring it back sooner.
const conflictRetry = time.Second

// deadlinePriority is the queue priority of a TrainJob coming back at its
// active deadline, or to stop the children still running when it finished.
// Events that bring TrainJobs in have priority 0 or below, so a deadline is
// not served after a backlog of them (a burst of new TrainJobs).
const deadlinePriority = 100

// waitRetry is how often a TrainJob that waits on something no watch event
// reports is looked at again: a child's name held by another TrainJob's
// Job, or a refused Job that may be accepted later (a quota).
const waitRetry = 5 * time.Second

// invalidRetry is how often the creation of a Job refused as invalid is
// tried again: most such refusals last until the runtime changes, which
// brings the TrainJob back by itself, but an admission policy may change
// too.
const invalidRetry = time.Minute

// Bounds of the backoff of a failing reconcile whose TrainJob has an
// active deadline, as controller-runtime's own backoff.
const (
	failureBaseDelay = 5 * time.Millisecond
	failureMaxDelay  = 1000 * time.Second
)

// waitingIndex indexes the TrainJobs that wait for the runtime they
// reference, as "<kind>/<namespace>/<name>" (namespace empty for
// ClusterTrainingRuntimes): those whose Jobs are not created yet, and those
// resumed while Jobs of theirs are still suspended (a Job resumes with the
// scheduling directives its runtime and patches give it, so a TrainJob with
// patches waits for a runtime it cannot read). A TrainJob leaves it once
// created and running: the index serves only to start waiting TrainJobs
// when their runtime appears or is fixed, and holding every TrainJob in it
// would cost memory and, on each edit of a popular runtime, a copy of
// every TrainJob that uses it.
const waitingIndex = "spec.runtimeRef.waiting"

// waitingIndexValue is the value of waitingIndex for a TrainJob.
func waitingIndexValue(o client.Object) []string {
	tj := o.(*trainer.TrainJob)
	resuming := !ptr.Deref(tj.Spec.Suspend, false) && slices.ContainsFunc(tj.Status.JobsStatus, func(js trainer.JobStatus) bool { return js.Suspended > 0 })
	if allCreated(tj) && !resuming {
		return nil
	}
	return []string{runtimeKey(jobplan.KindOf(tj), tj.Namespace, tj.Spec.RuntimeRef.Name)}
}

// childIndex indexes Jobs by the TrainJob they are labelled for, so a
// reconcile lists its TrainJob's children without scanning every Job of the
// namespace (a label selector on the cache does).
const childIndex = "metadata.labels.trainjob"

// childIndexValue is the value of childIndex for a Job.
func childIndexValue(o client.Object) []string {
	if name, ok := o.GetLabels()[trainer.TrainJobNameLabel]; ok {
		return []string{name}
	}
	return nil
}

// Reconciler reconciles TrainJobs.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	clock     clock.PassiveClock
	deadlines *metrics.DueTimes
	timings   *timings
	workers   int
	// planOptions are the manager's settings every plan is built with.
	planOptions []jobplan.Option
	// released and writes are the finalizer removals and the status
	// writes the cache may not show yet.
	released *releasedJobs
	writes   *statusWrites
	// snapshots are runtime snapshots read, by TrainJob UID.
	snapshots *cache.LRUExpireCache
	// failures is the backoff of failing reconciles that must keep their
	// requeue at the active deadline.
	failures workqueue.TypedRateLimiter[types.NamespacedName]
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithClock sets the clock the Reconciler reads the time from.
func WithClock(c clock.PassiveClock) Option {
	return func(r *Reconciler) { r.clock = c }
}

// WithDeadlines sets where the active deadlines of running TrainJobs are
// published.
func WithDeadlines(d *metrics.DueTimes) Option {
	return func(r *Reconciler) { r.deadlines = d }
}

// WithHistograms sets where the times to running and the delays of
// active deadlines are observed.
func WithHistograms(toRunning, deadlineDelay prometheus.Observer) Option {
	return func(r *Reconciler) { r.timings = newTimings(toRunning, deadlineDelay) }
}

// WithWorkers sets how many TrainJobs are reconciled at once.
func WithWorkers(n int) Option {
	return func(r *Reconciler) { r.workers = n }
}

// WithPlanOptions sets the manager's settings every plan is built with
// (the status server trainer Pods report to).
func WithPlanOptions(opts ...jobplan.Option) Option {
	return func(r *Reconciler) { r.planOptions = opts }
}

// NewReconciler returns a Reconciler. c reads from the cache and writes to
// the API server; apiReader reads from the API server and is used before
// decisions a stale cache could get wrong.
func NewReconciler(c client.Client, apiReader client.Reader, recorder events.EventRecorder, opts ...Option) *Reconciler {
	r := &Reconciler{
		client: c, apiReader: apiReader, recorder: recorder,
		clock: clock.RealClock{}, deadlines: metrics.DeadlineRemaining, workers: 5,
		timings:   newTimings(metrics.TimeToRunning, metrics.DeadlineDelay),
		failures:  workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](failureBaseDelay, failureMaxDelay),
		snapshots: cache.NewLRUExpireCache(snapshotsCached),
	}
	for _, o := range opts {
		o(r)
	}
	r.released, r.writes = newReleasedJobs(r.clock), newStatusWrites(r.clock)
	return r
}

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/status,verbs=get;update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainingruntimes;clustertrainingruntimes,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;create
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create
// +kubebuilder:rbac:groups=scheduling.x-k8s.io;scheduling.volcano.sh,resources=podgroups,verbs=get;create;update
// +kubebuilder:rbac:groups=batch,resources=jobs/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update

// Reconcile brings one TrainJob's children and status in line with its spec,
// in phases:
//
//  1. observe the TrainJob's children and, until they are all created, its
//     runtime (observe.go);
//  2. decide, reading and writing nothing, which outcomes to record,
//     whether the TrainJob finished and what to create (decide.go);
//  3. act on the children whose state the status reports: create those
//     never created (children.go), make the running ones follow
//     spec.suspend (suspend.go);
//  4. settle the decision with what that did: the Created and Suspended
//     conditions, the active deadline, the counts (decide.go);
//  5. write the status once (status.go);
//  6. act on what is stored: stop the children of a finished TrainJob and
//     delete its Service, release the finalizers of the children whose
//     outcome is recorded (tracking.go). A TrainJob this reconcile
//     finished is acted on by the next one, requeued at once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := req.NamespacedName
	tj, wait, err := r.getTrainJob(ctx, key)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case wait:
		return r.waitForWrite(ctx, tj), nil
	case tj == nil:
		// The TrainJob is gone: let its children go too.
		r.writes.forget(key)
		r.timings.forget(key)
		return r.result(ctx, key, time.Time{}, 0, r.releaseLeftovers(ctx, key))
	case lifecycle.ManagedElsewhere(tj):
		ctrl.LoggerFrom(ctx).V(3).Info("Skipping TrainJob managed by another controller", "managedBy", *tj.Spec.ManagedBy)
		return r.result(ctx, key, time.Time{}, 0, nil)
	}
	now := metav1.NewTime(r.clock.Now())

	obs, err := r.observe(ctx, tj)
	if err != nil {
		due, _ := lifecycle.ActiveDeadline(tj)
		return r.result(ctx, key, due, 0, err)
	}
	errs := obs.errs

	d := decide(tj, obs, now)

	if d.running() {
		r.create(ctx, tj, d.create)
		errs = append(errs, r.followSuspend(ctx, tj, d.children, obs.resumePlan(tj)))
	}

	errs = append(errs, d.settle(now))

	// A conflict means this reconcile decided on a stale TrainJob, so it
	// acts on nothing more.
	stored, err := r.writeStatus(ctx, tj, d.next, d.createdMessage(), now.Time)
	switch {
	case apierrors.IsConflict(err):
		// The cache was behind: the newer TrainJob is on its way through
		// the watch. Decide again on it, quietly.
		ctrl.LoggerFrom(ctx).V(2).Info("TrainJob changed while it was reconciled; retrying", "error", err.Error(), "otherErrors", errors.Join(errs...))
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case err != nil:
		errs = append(errs, fmt.Errorf("updating status of TrainJob %s: %w", klog.KObj(tj), err))
		return r.result(ctx, key, d.deadline, d.retryAfter, errors.Join(errs...))
	}

	if d.restart != nil {
		r.emitRestart(stored, d.restart)
	}
	deadline := d.deadline
	if stored.FinishedCondition() != nil {
		deadline = time.Time{}
	}
	if finishedBy(tj, stored) != nil {
		// TrainJobs finishing together each have their Complete or Failed
		// written before any is acted on: the rest comes back at once,
		// ahead of the events if children still run (a deadline, a failure:
		// their Pods hold nodes), in its turn behind them if only
		// bookkeeping is left (finalizers, the Service).
		res, err := r.result(ctx, key, deadline, d.retryAfter, errors.Join(errs...))
		if err == nil {
			res = ctrl.Result{RequeueAfter: time.Nanosecond}
			if slices.ContainsFunc(d.children, toStop) {
				res.Priority = ptr.To(deadlinePriority)
			}
		}
		return res, err
	}
	errs = append(errs, r.act(ctx, stored, obs, d, now.Time))
	retryAfter := d.retryAfter
	if due, ok := lifecycle.JobsExpiry(stored); ok && len(d.children) > 0 {
		// Back when the runtime's ttlSecondsAfterFinished has its Jobs go
		// (act deleted them if it fell by now).
		if wait := due.Sub(now.Time); wait > 0 && (retryAfter == 0 || wait < retryAfter) {
			retryAfter = wait
		}
	}
	return r.result(ctx, key, deadline, retryAfter, errors.Join(errs...))
}

// waitForWrite is the result of a reconcile that waits for the cache to
// show the TrainJob's last status write, tj being the cache's older copy.
// The write's event brings the TrainJob back (statusWrites.observer); the
// requeue, with the priority of this request, is there should the event
// not come before the wait ends or an active deadline falls. A deadline
// already due was enforced by the write awaited, or is by the reconcile
// its event brings.
func (r *Reconciler) waitForWrite(ctx context.Context, tj *trainer.TrainJob) ctrl.Result {
	ctrl.LoggerFrom(ctx).V(3).Info("Waiting for the cache to show the TrainJob's last status write", "cachedResourceVersion", tj.ResourceVersion)
	after := rememberFor
	if due, ok := lifecycle.ActiveDeadline(tj); ok {
		if until := due.Sub(r.clock.Now()); until > 0 {
			after = min(after, until)
		}
	}
	return ctrl.Result{RequeueAfter: after}
}

// act does what follows from the stored TrainJob: the children of a
// finished TrainJob are stopped, and its Service deleted, retried on every
// reconcile until done; the finalizers of the children whose outcome is
// stored are removed, all of them once the TrainJob finished or while it is
// being deleted. Jobs of an earlier TrainJob of the same name are released,
// and the labels of children found without them put back.
func (r *Reconciler) act(ctx context.Context, stored *trainer.TrainJob, obs *observed, d *decision, now time.Time) error {
	// Failing to release an earlier TrainJob's Jobs holds back nothing of
	// this one's.
	errs := []error{r.releaseOrphans(ctx, obs.others, stored.Namespace, stored.Name), r.restoreLabels(ctx, stored, obs.relabel)}
	previous := append(slices.Clip(obs.previous), d.previous...)
	if d.deleting {
		return errors.Join(append(errs, r.releaseRecorded(ctx, &stored.Status, d.children, true), r.releaseFinalizers(ctx, previous))...)
	}
	// The Jobs of earlier attempts go, the TrainJob running or not: their
	// outcomes no longer count.
	errs = append(errs, r.deleteJobs(ctx, previous, "of an earlier restart attempt"))
	finished := stored.FinishedCondition() != nil
	if finished {
		// No Pod of the TrainJob needs its Service's DNS names any more.
		errs = append(errs, r.stopChildren(ctx, d.children), r.deleteService(ctx, stored, obs.service))
	}
	errs = append(errs, r.releaseRecorded(ctx, &stored.Status, d.children, finished))
	if due, ok := lifecycle.JobsExpiry(stored); ok && !now.Before(due) {
		// As a JobSet's ttlSecondsAfterFinished: the TrainJob and its
		// status stay.
		errs = append(errs, r.deleteJobs(ctx, jobsOf(d.children), "past the runtime's ttlSecondsAfterFinished"))
	}
	return errors.Join(errs...)
}

// result is what a reconcile returns: a requeue exactly at the active
// deadline, if one runs, and sooner to retry an error or a wait that no
// event ends. controller-runtime drops a requeue time returned with an
// error, so while a deadline runs an error is retried on the reconciler's
// own backoff, never past the deadline: the deadline is enforced on time
// whatever else fails.
func (r *Reconciler) result(ctx context.Context, key types.NamespacedName, deadline time.Time, retryAfter time.Duration, err error) (ctrl.Result, error) {
	if deadline.IsZero() {
		r.deadlines.Delete(key)
	} else {
		r.deadlines.Set(key, deadline)
	}
	var res ctrl.Result
	untilDeadline := deadline.Sub(r.clock.Now())
	if !deadline.IsZero() {
		res = ctrl.Result{RequeueAfter: max(untilDeadline, time.Nanosecond), Priority: ptr.To(deadlinePriority)}
	}
	if retryAfter > 0 && (res.RequeueAfter == 0 || res.RequeueAfter > retryAfter) {
		res = ctrl.Result{RequeueAfter: retryAfter}
	}
	if err == nil {
		r.failures.Forget(key)
		return res, nil
	}
	if res.RequeueAfter == 0 {
		return res, err // controller-runtime's backoff
	}
	backoff := r.failures.When(key)
	ctrl.LoggerFrom(ctx).Error(err, "Reconciler error; retrying", "after", backoff)
	// A deadline already due whose enforcement failed waits like any error.
	if backoff < res.RequeueAfter || (!deadline.IsZero() && untilDeadline <= 0) {
		res = ctrl.Result{RequeueAfter: backoff}
	}
	return res, nil
}

// releaseLeftovers releases the children of a TrainJob that no longer exists.
func (r *Reconciler) releaseLeftovers(ctx context.Context, key types.NamespacedName) error {
	var jobs batchv1.JobList
	if err := r.client.List(ctx, &jobs, client.InNamespace(key.Namespace), client.MatchingFields{childIndex: key.Name}); err != nil {
		return fmt.Errorf("listing Jobs of TrainJob %s: %w", key, err)
	}
	var held []*batchv1.Job
	for i := range jobs.Items {
		held = append(held, &jobs.Items[i])
	}
	return r.releaseOrphans(ctx, held, key.Namespace, key.Name)
}

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &trainer.TrainJob{}, waitingIndex, waitingIndexValue); err != nil {
		return fmt.Errorf("indexing TrainJobs by runtime: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &batchv1.Job{}, childIndex, childIndexValue); err != nil {
		return fmt.Errorf("indexing Jobs by TrainJob: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&trainer.TrainJob{}, builder.WithPredicates(predicate.Or(r.writes.observer(), trainJobUpdates))).
		WatchesRawSource(source.Kind(mgr.GetCache(), &batchv1.Job{}, enqueueOwnerBatched(childBatchPeriod), childJobUpdates)).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Pod{}, enqueueFailingPodOwner())).
		Owns(&corev1.Service{}).
		Watches(&trainer.ClusterTrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.waitingOn(trainer.ClusterTrainingRuntimeKind))).
		Watches(&trainer.TrainingRuntime{}, handler.EnqueueRequestsFromMapFunc(r.waitingOn(trainer.TrainingRuntimeKind))).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.workers}).
		Complete(r)
}

func runtimeKey(kind, namespace, name string) string {
	if kind == trainer.ClusterTrainingRuntimeKind {
		namespace = ""
	}
	return kind + "/" + namespace + "/" + name
}

// waitingOn maps a runtime to the TrainJobs that wait for it (see
// waitingIndex), so they start as soon as their runtime appears or is
// fixed.
func (r *Reconciler) waitingOn(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list trainer.TrainJobList
		if err := r.client.List(ctx, &list, client.MatchingFields{waitingIndex: runtimeKey(kind, o.GetNamespace(), o.GetName())}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing TrainJobs of runtime", "kind", kind, "runtime", klog.KObj(o))
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
}

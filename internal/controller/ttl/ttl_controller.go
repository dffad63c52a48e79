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

// Package ttl holds the TTL-after-finished controller: it deletes TrainJobs
// whose spec.ttlSecondsAfterFinished, or whose cluster retention policy, has
// expired. As KEP-592 argues for Jobs, it is a controller of its own, with
// its own workqueue, apart from the controller that runs TrainJobs.
package ttl

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
)

// ControllerName names the controller, its workqueue and its events.
const ControllerName = "trainjob-ttl-after-finished"

// conflictRetry is when a TrainJob whose delete precondition failed is
// looked at again, should no watch event bring it back sooner.
const conflictRetry = time.Second

// expiryPriority is the queue priority of a TrainJob coming back when it
// expires. Events that bring TrainJobs in have priority 0 or below, so an
// expiry is not served after them: in a TTL storm, the updates of
// TrainJobs finishing and of those being deleted fill the queue when the
// first expiries come due.
const expiryPriority = 100

// Reconciler deletes TrainJobs whose TTL or retention period expired.
type Reconciler struct {
	client    client.Client
	apiReader client.Reader
	recorder  events.EventRecorder
	clock     clock.PassiveClock
	retention *configv1alpha1.TrainJobRetentionPolicy
	pending   *metrics.DueTimes
	workers   int
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// Option configures a Reconciler.
type Option func(*Reconciler)

// WithClock sets the clock the Reconciler reads the time from.
func WithClock(c clock.PassiveClock) Option {
	return func(r *Reconciler) { r.clock = c }
}

// WithRetention sets the cluster's retention policy for TrainJobs.
func WithRetention(p *configv1alpha1.TrainJobRetentionPolicy) Option {
	return func(r *Reconciler) { r.retention = p }
}

// WithPendingDeletions sets where the TrainJobs waiting for deletion are
// counted.
func WithPendingDeletions(d *metrics.DueTimes) Option {
	return func(r *Reconciler) { r.pending = d }
}

// WithWorkers sets how many TrainJobs are handled at once.
func WithWorkers(n int) Option {
	return func(r *Reconciler) { r.workers = n }
}

// NewReconciler returns a Reconciler. c reads from the cache; apiReader
// reads from the API server, and is what every deletion is decided on.
func NewReconciler(c client.Client, apiReader client.Reader, recorder events.EventRecorder, opts ...Option) *Reconciler {
	r := &Reconciler{
		client: c, apiReader: apiReader, recorder: recorder,
		clock: clock.RealClock{}, pending: metrics.PendingDeletions, workers: 5,
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch;update

// Reconcile deletes the TrainJob if its TTL or retention period expired, and
// otherwise asks to be called again when it will. The deletions it waits
// for are published in the pending-deletions metric.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	exp, res, err := r.reconcile(ctx, req.NamespacedName)
	if exp == nil {
		r.pending.Delete(req.NamespacedName)
	} else {
		r.pending.Set(req.NamespacedName, exp.At)
	}
	return res, err
}

// reconcile does what Reconcile does, and returns the expiry of the
// TrainJob as long as it waits for its deletion: nil once it is deleted,
// or if it is not to be.
func (r *Reconciler) reconcile(ctx context.Context, key types.NamespacedName) (*lifecycle.Expiry, ctrl.Result, error) {
	var tj trainer.TrainJob
	if err := r.client.Get(ctx, key, &tj); err != nil {
		return nil, ctrl.Result{}, client.IgnoreNotFound(err)
	}
	exp := r.expiry(&tj)
	if exp == nil {
		return nil, ctrl.Result{}, nil
	}
	if wait := r.wait(ctx, exp); wait > 0 {
		return exp, ctrl.Result{RequeueAfter: wait, Priority: ptr.To(expiryPriority)}, nil
	}
	// The cache says it expired. The cache may be behind a change that gave
	// it more time, so decide again on the TrainJob as it is now.
	return r.deleteIfExpired(ctx, key, exp)
}

// expiry is when tj is to be deleted, or nil for a TrainJob this controller
// leaves alone.
func (r *Reconciler) expiry(tj *trainer.TrainJob) *lifecycle.Expiry {
	return lifecycle.ExpiryOf(tj, r.retention)
}

// wait is how long until exp, or 0 if it has passed.
func (r *Reconciler) wait(ctx context.Context, exp *lifecycle.Expiry) time.Duration {
	now := r.clock.Now()
	if exp.Since.After(now) {
		ctrl.LoggerFrom(ctx).Info("Deletion deferred: the TrainJob finished or was suspended in the future as this manager's clock reads; check clock sync",
			"since", exp.Since, "now", now, "deleteAt", exp.At)
	}
	if wait := exp.At.Sub(now); wait > 0 {
		return wait
	}
	return 0
}

// deleteIfExpired reads the TrainJob from the API server, and deletes it if
// it still has expired, with preconditions on its UID and resourceVersion:
// if anything changed since that read, nothing is deleted and the decision
// is taken again. cached is its expiry as the cache showed it.
func (r *Reconciler) deleteIfExpired(ctx context.Context, key types.NamespacedName, cached *lifecycle.Expiry) (*lifecycle.Expiry, ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	var tj trainer.TrainJob
	if err := r.apiReader.Get(ctx, key, &tj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ctrl.Result{}, nil
		}
		return cached, ctrl.Result{}, err
	}
	exp := r.expiry(&tj)
	if exp == nil {
		return nil, ctrl.Result{}, nil
	}
	if wait := r.wait(ctx, exp); wait > 0 {
		log.V(2).Info("TrainJob has more time than the cache showed", "deleteAt", exp.At)
		return exp, ctrl.Result{RequeueAfter: wait, Priority: ptr.To(expiryPriority)}, nil
	}

	err := r.client.Delete(ctx, &tj,
		client.Preconditions{UID: &tj.UID, ResourceVersion: &tj.ResourceVersion},
		client.PropagationPolicy(metav1.DeletePropagationForeground))
	switch {
	case apierrors.IsNotFound(err):
		return nil, ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		log.V(2).Info("TrainJob changed just before its deletion; deciding again")
		return exp, ctrl.Result{RequeueAfter: conflictRetry}, nil
	case err != nil:
		return exp, ctrl.Result{}, err
	}
	// The event follows the accepted delete request, so a delete that
	// conflicts and is decided again does not announce it twice.
	r.recorder.Eventf(&tj, nil, corev1.EventTypeNormal, "Deleting", "Delete", "Deleting the TrainJob: %s", exp.Reason)
	latency := r.clock.Since(exp.At)
	log.Info("Deleted TrainJob", "policy", exp.Policy, "reason", exp.Reason, "latency", latency)
	metrics.TTLDeletions.WithLabelValues(exp.Policy).Inc()
	metrics.TTLDeletionLatency.Observe(latency.Seconds())
	return nil, ctrl.Result{}, nil
}

// SetupWithManager registers the controller with mgr. Its watch of
// TrainJobs is typed, so its predicate reads TrainJobs with no type
// assertion; the builder takes a typed watch through WatchesRawSource
// rather than For, so the controller's logger is given the keys For would
// have added (logConstructor).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		WatchesRawSource(source.Kind(mgr.GetCache(), &trainer.TrainJob{},
			&handler.TypedEnqueueRequestForObject[*trainer.TrainJob]{}, r.eventFilter())).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.workers,
			LogConstructor:          logConstructor(mgr.GetLogger()),
		}).
		Complete(r)
}

// logConstructor returns the loggers of the controller's reconciles with
// the keys controller-runtime's builder gives the controller of a For
// type: the controller, the TrainJob kind and group, and the TrainJob
// reconciled (a reference, and its namespace and name).
func logConstructor(log logr.Logger) func(*reconcile.Request) logr.Logger {
	log = log.WithValues("controller", ControllerName,
		"controllerGroup", trainer.GroupVersion.Group, "controllerKind", "TrainJob")
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return log
		}
		return log.WithValues("TrainJob", klog.KRef(req.Namespace, req.Name),
			"namespace", req.Namespace, "name", req.Name)
	}
}

// eventFilter lets every TrainJob event through but the updates mayExpire
// turns away.
func (r *Reconciler) eventFilter() predicate.TypedPredicate[*trainer.TrainJob] {
	return predicate.TypedFuncs[*trainer.TrainJob]{UpdateFunc: r.mayExpire}
}

// mayExpire lets through the updates of TrainJobs that have, or had, an
// expiry: the others have nothing for this controller to do.
func (r *Reconciler) mayExpire(e event.TypedUpdateEvent[*trainer.TrainJob]) bool {
	return r.expiry(e.ObjectOld) != nil || r.expiry(e.ObjectNew) != nil
}

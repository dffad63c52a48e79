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

// Package manager assembles the trainjob-operator manager: scheme, caches,
// controllers, probes and metrics. cmd/manager and the integration tests
// build the same manager through New.
package manager

import (
	"context"
	"fmt"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/certs"
	tjconfig "github.com/trainjob-operator/trainjob-operator/internal/config"
	"github.com/trainjob-operator/trainjob-operator/internal/controller/trainjob"
	"github.com/trainjob-operator/trainjob-operator/internal/controller/ttl"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
	"github.com/trainjob-operator/trainjob-operator/internal/statusserver"
	trainjobwebhook "github.com/trainjob-operator/trainjob-operator/internal/webhook"
)

// Options are settings of New that are not part of the Configuration file.
type Options struct {
	// Clock the controllers read the time from. Defaults to the real clock.
	Clock clock.PassiveClock
	// LeaderElectionNamespace is where the Lease lives when the
	// configuration does not say; required with leader election outside a
	// cluster.
	LeaderElectionNamespace string
	// SkipNameValidation allows more than one manager in a process, one
	// after the other (tests that restart the manager).
	SkipNameValidation bool
}

// New returns a manager with every controller of the product set up.
func New(restConfig *rest.Config, cfg *configv1alpha1.Configuration, opts Options) (ctrl.Manager, error) {
	restConfig = rest.CopyConfig(restConfig)
	restConfig.QPS = *cfg.ClientConnection.QPS
	restConfig.Burst = int(*cfg.ClientConnection.Burst)
	restConfig.Wrap(metrics.CountRequests)
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}

	metricsOpts := metricsserver.Options{
		BindAddress:   cfg.Metrics.BindAddress,
		SecureServing: *cfg.Metrics.SecureServing,
	}
	if metricsOpts.SecureServing {
		// Only callers the API server authenticates, and authorizes for
		// GET /metrics, may read the metrics.
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	le := cfg.LeaderElection
	leNamespace := le.ResourceNamespace
	if leNamespace == "" {
		leNamespace = opts.LeaderElectionNamespace
	}

	var webhookServer webhook.Server
	if *cfg.Webhook.Enable {
		webhookServer = webhook.NewServer(webhook.Options{
			Host:    cfg.Webhook.Host,
			Port:    int(*cfg.Webhook.Port),
			CertDir: cfg.Webhook.CertDir,
		})
	}

	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		WebhookServer:                 webhookServer,
		Scheme:                        scheme.Scheme,
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        cfg.Health.HealthProbeBindAddress,
		PprofBindAddress:              cfg.PprofBindAddress,
		LeaderElection:                *le.LeaderElect,
		LeaderElectionID:              le.ResourceName,
		LeaderElectionNamespace:       leNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr.To(le.LeaseDuration.Duration),
		RenewDeadline:                 ptr.To(le.RenewDeadline.Duration),
		RetryPeriod:                   ptr.To(le.RetryPeriod.Duration),
		Cache:                         cache.Options{ByObject: caches(cfg), DefaultTransform: cache.TransformStripManagedFields()},
		Controller:                    config.Controller{SkipNameValidation: ptr.To(opts.SkipNameValidation)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	if webhookServer != nil {
		if err := mgr.AddReadyzCheck("webhook", webhookServer.StartedChecker()); err != nil {
			return nil, err
		}
		if err := setupWebhook(mgr, cfg.Webhook, opts.Clock); err != nil {
			return nil, err
		}
	}

	metrics.Register()
	if err := setupMetrics(mgr); err != nil {
		return nil, err
	}
	var planOptions []jobplan.Option
	if statusServerOn(cfg) {
		if err := setupStatusServer(mgr, restConfig, cfg); err != nil {
			return nil, err
		}
		planOptions = append(planOptions, jobplan.WithStatusServer(jobplan.StatusServer{
			URL: tjconfig.StatusServerURL(cfg), CAConfigMap: statusserver.CAConfigMap, CAKey: statusserver.CAKey,
		}))
	}
	r := trainjob.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder(trainjob.ControllerName),
		trainjob.WithClock(opts.Clock), trainjob.WithWorkers(int(*cfg.Controller.TrainJobWorkers)),
		trainjob.WithPlanOptions(planOptions...))
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up %s: %w", trainjob.ControllerName, err)
	}
	var retention *configv1alpha1.TrainJobRetentionPolicy
	if cfg.ObjectRetentionPolicies != nil {
		retention = cfg.ObjectRetentionPolicies.TrainJobs
	}
	t := ttl.NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder(ttl.ControllerName),
		ttl.WithClock(opts.Clock), ttl.WithRetention(retention), ttl.WithWorkers(int(*cfg.Controller.TTLWorkers)))
	if err := t.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up %s: %w", ttl.ControllerName, err)
	}
	return mgr, nil
}

// statusServerOn reports whether the manager serves progress reports: the
// status server serves with the webhook's certificate, so it runs with
// the webhook only.
func statusServerOn(cfg *configv1alpha1.Configuration) bool {
	return *cfg.StatusServer.Enable && *cfg.Webhook.Enable
}

// setupStatusServer adds the status server, which every replica runs, and
// the CA publisher. The server has a client of its own, with its own
// request budget, so that progress reports never slow the controllers.
func setupStatusServer(mgr ctrl.Manager, restConfig *rest.Config, cfg *configv1alpha1.Configuration) error {
	ss := cfg.StatusServer
	sc := rest.CopyConfig(restConfig)
	sc.QPS, sc.Burst = *ss.QPS, int(*ss.Burst)
	c, err := client.New(sc, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return fmt.Errorf("creating the status server's client: %w", err)
	}
	clk := clock.RealClock{}
	server := statusserver.NewServer(fmt.Sprintf(":%d", *ss.Port), cfg.Webhook.CertDir,
		statusserver.NewAuthenticator(c, mgr.GetCache(), clk),
		statusserver.NewWriter(c, clk, ss.WriteInterval.Duration), clk, ctrl.Log.WithName("status-server"))
	if err := mgr.Add(server); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("status-server", server.Serving); err != nil {
		return err
	}
	return statusserver.SetupCAPublisher(mgr, cfg.Webhook.CertDir)
}

// setupWebhook registers the TrainJob and runtime webhooks. With certificate management
// on, it does so only once the serving certificate is in place: the webhook
// server cannot start without one.
func setupWebhook(mgr ctrl.Manager, cfg *configv1alpha1.Webhook, clk clock.PassiveClock) error {
	register := func() error {
		// The webhook dry-runs the creation of a new TrainJob's Jobs with a
		// client of its own, without the client-side rate limit: admission
		// must not queue behind the controllers' writes, nor slow them down,
		// and it runs only as fast as the API server admits TrainJobs (its
		// priority and fairness limits them, and so these dry runs).
		webhookConfig := rest.CopyConfig(mgr.GetConfig())
		webhookConfig.QPS = -1
		// The API server's warnings on the Jobs go to the TrainJob's
		// creator with the webhook's answer, not to the manager's log.
		webhookConfig.WarningHandler = nil
		webhookConfig.WarningHandlerWithContext = trainjobwebhook.DryRunWarnings{}
		jobs, err := client.New(webhookConfig, client.Options{
			Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		})
		if err != nil {
			return fmt.Errorf("creating the TrainJob webhook's client: %w", err)
		}
		if err := trainjobwebhook.NewTrainJobValidator(mgr.GetClient(), jobs).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the TrainJob webhook: %w", err)
		}
		if err := trainjobwebhook.NewTrainJobDefaulter(clk).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the TrainJob defaulting webhook: %w", err)
		}
		if err := trainjobwebhook.SetupRuntimeWebhooksWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the runtime webhooks: %w", err)
		}
		return nil
	}
	if !*cfg.CertManagement.Enable {
		return register()
	}
	certsReady, err := certs.Setup(mgr, cfg.CertManagement, cfg.CertDir)
	if err != nil {
		return err
	}
	return mgr.Add(afterCerts{ready: certsReady, start: register})
}

// afterCerts runs start once ready closes, on every replica.
type afterCerts struct {
	ready <-chan struct{}
	start func() error
}

func (a afterCerts) Start(ctx context.Context) error {
	select {
	case <-a.ready:
		return a.start()
	case <-ctx.Done():
		return nil
	}
}

func (afterCerts) NeedLeaderElection() bool { return false }

// stripJob drops what the controllers never read of a child Job before it
// is cached: its managed fields and Pod template, most of its size, its
// selector and its uncounted Pods, its annotations and the labels other
// than those that find it and its restart attempt (JobSet's twelve keys
// are both labels and annotations: most of what is left). The controllers
// change Jobs with patches only, never by writing back a cached Job, which
// would lose them.
func stripJob(o any) (any, error) {
	if job, ok := o.(*batchv1.Job); ok {
		job.ManagedFields = nil
		job.Labels = trainjob.ReadJobLabels(job.Labels)
		job.Annotations = nil
		job.Spec.Template = corev1.PodTemplateSpec{}
		job.Spec.Selector = nil
		job.Status.UncountedTerminatedPods = nil
	}
	return o, nil
}

// stripTrainJob drops what the controllers never read of a TrainJob before
// it is cached: its managed fields and the copy of the whole object that
// kubectl apply keeps in an annotation, which doubles its size. The
// controllers write TrainJobs through the status subresource only, which
// keeps the stored metadata as it is.
func stripTrainJob(o any) (any, error) {
	if tj, ok := o.(*trainer.TrainJob); ok {
		tj.ManagedFields = nil
		delete(tj.Annotations, corev1.LastAppliedConfigAnnotation)
	}
	return o, nil
}

// caches limits what the manager's caches hold: the Jobs and Services
// TrainJobs own rather than every Job and Service of the cluster, of their
// Pods the failed ones alone, what the TrainJob webhook reads of quotas,
// and the webhook certificate's Secret alone.
func caches(cfg *configv1alpha1.Configuration) map[client.Object]cache.ByObject {
	owned, err := labels.NewRequirement(trainer.TrainJobNameLabel, selection.Exists, nil)
	utilruntime.Must(err)
	selector := labels.NewSelector().Add(*owned)
	byObject := map[client.Object]cache.ByObject{
		&batchv1.Job{}:      {Label: selector, Transform: stripJob},
		&corev1.Service{}:   {Label: selector},
		&corev1.Pod{}:       trainjob.FailedPodCache(selector),
		&trainer.TrainJob{}: {Transform: stripTrainJob},
	}
	if *cfg.Webhook.Enable {
		maps.Copy(byObject, trainjobwebhook.JobAdmissionCaches())
	}
	if cm := cfg.Webhook.CertManagement; *cfg.Webhook.Enable && *cm.Enable {
		byObject[&corev1.Secret{}] = certs.SecretCache(cm)
	}
	if statusServerOn(cfg) {
		byObject[&corev1.ConfigMap{}] = statusserver.CACache()
	}
	return byObject
}

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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true

// Configuration is the manager's configuration file. Every field is optional;
// SetDefaults fills in what is left out.
type Configuration struct {
	metav1.TypeMeta `json:",inline"`

	// leaderElection configures leader election among manager replicas.
	// +optional
	LeaderElection *LeaderElection `json:"leaderElection,omitempty"`

	// metrics configures the metrics endpoint.
	// +optional
	Metrics *Metrics `json:"metrics,omitempty"`

	// health configures the health and readiness probes.
	// +optional
	Health *Health `json:"health,omitempty"`

	// pprofBindAddress is where the Go runtime's profiles (net/http/pprof)
	// are served, over plain HTTP and without authentication: bind it to
	// localhost, or reach it through kubectl port-forward. Empty, the
	// default, serves none.
	// +optional
	PprofBindAddress string `json:"pprofBindAddress,omitempty"`

	// clientConnection configures the manager's client of the API server.
	// +optional
	ClientConnection *ClientConnection `json:"clientConnection,omitempty"`

	// controller configures the controllers.
	// +optional
	Controller *Controller `json:"controller,omitempty"`

	// webhook configures the validating admission webhook server.
	// +optional
	Webhook *Webhook `json:"webhook,omitempty"`

	// objectRetentionPolicies deletes TrainJobs automatically, cluster-wide,
	// after they finished or stayed suspended for a while. A TrainJob's own
	// spec.ttlSecondsAfterFinished always wins over these policies. Unset
	// deletes nothing.
	// +optional
	ObjectRetentionPolicies *ObjectRetentionPolicies `json:"objectRetentionPolicies,omitempty"`

	// statusServer is the HTTPS server the trainer Pods of every TrainJob
	// report their progress to, written into status.trainerStatus. On by
	// default.
	// +optional
	StatusServer *StatusServer `json:"statusServer,omitempty"`
}

// ObjectRetentionPolicies holds the retention policies per kind of object.
type ObjectRetentionPolicies struct {
	// trainJobs configures the retention of TrainJobs.
	// +optional
	TrainJobs *TrainJobRetentionPolicy `json:"trainJobs,omitempty"`
}

// TrainJobRetentionPolicy says when TrainJobs are deleted. Each duration is
// unset (never delete), 0 (delete at once) or positive.
type TrainJobRetentionPolicy struct {
	// afterFinished is how long a TrainJob is kept after it finished
	// (Complete or Failed), when it sets no spec.ttlSecondsAfterFinished.
	// +optional
	AfterFinished *metav1.Duration `json:"afterFinished,omitempty"`

	// afterFailed, when set, replaces afterFinished for Failed TrainJobs.
	// +optional
	AfterFailed *metav1.Duration `json:"afterFailed,omitempty"`

	// afterSuspended is how long a TrainJob may stay suspended (Suspended
	// condition True, without interruption) before it is deleted.
	// +optional
	AfterSuspended *metav1.Duration `json:"afterSuspended,omitempty"`
}

// LeaderElection configures leader election.
type LeaderElection struct {
	// leaderElect turns leader election on. Defaults to true.
	// +optional
	LeaderElect *bool `json:"leaderElect,omitempty"`
	// resourceName is the name of the Lease. Defaults to trainjob-operator.
	// +optional
	ResourceName string `json:"resourceName,omitempty"`
	// resourceNamespace is the namespace of the Lease. Defaults to the
	// manager's namespace.
	// +optional
	ResourceNamespace string `json:"resourceNamespace,omitempty"`
	// leaseDuration is how long a leader holds the Lease without renewing
	// it. Defaults to 15s.
	// +optional
	LeaseDuration *metav1.Duration `json:"leaseDuration,omitempty"`
	// renewDeadline is how long the leader tries to renew before giving up.
	// Defaults to 10s.
	// +optional
	RenewDeadline *metav1.Duration `json:"renewDeadline,omitempty"`
	// retryPeriod is how often candidates try to acquire the Lease.
	// Defaults to 2s.
	// +optional
	RetryPeriod *metav1.Duration `json:"retryPeriod,omitempty"`
}

// Metrics configures the metrics endpoint.
type Metrics struct {
	// bindAddress is where metrics are served; "0" turns them off.
	// Defaults to :8443.
	// +optional
	BindAddress string `json:"bindAddress,omitempty"`
	// secureServing serves metrics over HTTPS, with authentication and
	// authorization through the API server. Defaults to true.
	// +optional
	SecureServing *bool `json:"secureServing,omitempty"`
}

// Health configures the probes.
type Health struct {
	// healthProbeBindAddress is where /healthz and /readyz are served.
	// Defaults to :8081.
	// +optional
	HealthProbeBindAddress string `json:"healthProbeBindAddress,omitempty"`
}

// ClientConnection configures the client of the API server.
type ClientConnection struct {
	// qps is the sustained rate of requests to the API server. Defaults to 50.
	// +optional
	QPS *float32 `json:"qps,omitempty"`
	// burst is the number of requests allowed above qps for a short time.
	// Defaults to 100.
	// +optional
	Burst *int32 `json:"burst,omitempty"`
}

// Controller configures the controllers.
type Controller struct {
	// trainJobWorkers is how many TrainJobs are reconciled at once.
	// Defaults to 5.
	// +optional
	TrainJobWorkers *int32 `json:"trainJobWorkers,omitempty"`

	// ttlWorkers is how many TrainJobs the TTL-after-finished controller
	// handles at once. Defaults to 5.
	// +optional
	TTLWorkers *int32 `json:"ttlWorkers,omitempty"`
}

// Webhook configures the admission webhook server.
type Webhook struct {
	// enable serves the validating webhook. Defaults to true. Without it the
	// CRD schema still holds every rule it can express.
	// +optional
	Enable *bool `json:"enable,omitempty"`
	// host the webhook server binds to. Defaults to all addresses.
	// +optional
	Host string `json:"host,omitempty"`
	// port the webhook server listens on. Defaults to 9443.
	// +optional
	Port *int32 `json:"port,omitempty"`
	// certDir holds the serving certificate, tls.crt and tls.key. Defaults
	// to /tmp/k8s-webhook-server/serving-certs.
	// +optional
	CertDir string `json:"certDir,omitempty"`
	// certManagement has the manager make the webhook's serving certificate,
	// rotate it before it expires, write it to certDir and keep the webhook
	// configuration's caBundle current, with no manual step. Turn it off to
	// bring a certificate of your own into certDir, from cert-manager for
	// instance.
	// +optional
	CertManagement *WebhookCertManagement `json:"certManagement,omitempty"`
}

// WebhookCertManagement says where the manager keeps the webhook's
// certificate. The RBAC shipped in config/rbac grants access to the default
// names only; change both together.
type WebhookCertManagement struct {
	// enable turns certificate management on. Defaults to true.
	// +optional
	Enable *bool `json:"enable,omitempty"`
	// secretName is the Secret that holds the CA and the serving
	// certificate, shared by every replica. It must exist: config/webhook
	// ships it empty and the manager fills it. Defaults to
	// trainjob-operator-webhook-certs.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// secretNamespace is the Secret's namespace. Defaults to trainjob-system.
	// +optional
	SecretNamespace string `json:"secretNamespace,omitempty"`
	// dnsName is the name the API server calls the webhook by, which the
	// serving certificate is made for. Defaults to
	// trainjob-operator-webhook.<secretNamespace>.svc.
	// +optional
	DNSName string `json:"dnsName,omitempty"`
	// extraDNSNames are more names the serving certificate is made for,
	// for callers that reach the manager by another name than dnsName.
	// +optional
	ExtraDNSNames []string `json:"extraDNSNames,omitempty"`
	// webhookConfigurationName is the ValidatingWebhookConfiguration whose
	// caBundle the manager keeps. Defaults to trainjob-operator.
	// +optional
	WebhookConfigurationName string `json:"webhookConfigurationName,omitempty"`
}

// StatusServer configures the server trainer Pods report their progress to
// (Kubeflow Trainer's TrainJob status protocol): the manager gives the
// trainer containers of every TrainJob its URL, its CA certificate and a
// token for that TrainJob alone, and writes what they post into the
// TrainJob's status.trainerStatus. It serves with the webhook's certificate
// (webhook.certDir, with the CA in ca.crt).
type StatusServer struct {
	// enable serves progress reports and gives trainer containers what
	// they need to send them. Defaults to true; the server runs only with
	// the webhook (webhook.enable), whose certificate it serves with.
	// +optional
	Enable *bool `json:"enable,omitempty"`
	// port the status server listens on. Defaults to 10443.
	// +optional
	Port *int32 `json:"port,omitempty"`
	// url is where trainer Pods reach the status server, without a path.
	// Empty, https://<webhook.certManagement.dnsName>:<port>: the
	// manager's Service, which the serving certificate is made for.
	// +optional
	URL string `json:"url,omitempty"`
	// writeInterval is the least time between two writes of a TrainJob's
	// trainerStatus: reports that arrive sooner are coalesced, the newest
	// written at the end of the interval. Defaults to 5s.
	// +optional
	WriteInterval *metav1.Duration `json:"writeInterval,omitempty"`
	// qps and burst bound the requests the status server makes to the API
	// server (token reviews and status writes), apart from the
	// controllers'. Default 20 and 40.
	// +optional
	QPS *float32 `json:"qps,omitempty"`
	// +optional
	Burst *int32 `json:"burst,omitempty"`
}

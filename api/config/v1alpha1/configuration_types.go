package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of the Configuration.
var GroupVersion = schema.GroupVersion{Group: "config.trainer.kubeflow.org", Version: "v1alpha1"}

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

	// clientConnection configures the manager's client of the API server.
	// +optional
	ClientConnection *ClientConnection `json:"clientConnection,omitempty"`

	// controller configures the controllers.
	// +optional
	Controller *Controller `json:"controller,omitempty"`
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
}

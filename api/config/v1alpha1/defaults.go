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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Defaults of the Configuration.
const (
	DefaultLeaderElectionID       = "trainjob-operator"
	DefaultMetricsBindAddress     = ":8443"
	DefaultHealthProbeBindAddress = ":8081"
	DefaultQPS                    = 50
	DefaultBurst                  = 100
	DefaultTrainJobWorkers        = 5
	DefaultTTLWorkers             = 5
	DefaultWebhookPort            = 9443
	DefaultWebhookCertDir         = "/tmp/k8s-webhook-server/serving-certs"
	// DefaultNamespace is where config/default installs the manager.
	DefaultNamespace                = "trainjob-system"
	DefaultWebhookSecretName        = "trainjob-operator-webhook-certs"
	DefaultWebhookServiceName       = "trainjob-operator-webhook"
	DefaultWebhookConfigurationName = "trainjob-operator"
	DefaultStatusServerPort         = 10443
	DefaultStatusServerQPS          = 20
	DefaultStatusServerBurst        = 40
	DefaultStatusWriteInterval      = 5 * time.Second
)

// RegisterDefaults makes SetDefaults the scheme's defaulting function for
// the Configuration, which decoders of the scheme's codecs apply.
func RegisterDefaults(s *runtime.Scheme) error {
	s.AddTypeDefaultingFunc(&Configuration{}, func(obj any) { SetDefaults(obj.(*Configuration)) })
	return nil
}

// SetDefaults fills in every field left out of c.
func SetDefaults(c *Configuration) {
	c.APIVersion, c.Kind = GroupVersion.String(), Kind
	if c.LeaderElection == nil {
		c.LeaderElection = &LeaderElection{}
	}
	le := c.LeaderElection
	if le.LeaderElect == nil {
		le.LeaderElect = ptr.To(true)
	}
	if le.ResourceName == "" {
		le.ResourceName = DefaultLeaderElectionID
	}
	if le.LeaseDuration == nil {
		le.LeaseDuration = &metav1.Duration{Duration: 15 * time.Second}
	}
	if le.RenewDeadline == nil {
		le.RenewDeadline = &metav1.Duration{Duration: 10 * time.Second}
	}
	if le.RetryPeriod == nil {
		le.RetryPeriod = &metav1.Duration{Duration: 2 * time.Second}
	}
	if c.Metrics == nil {
		c.Metrics = &Metrics{}
	}
	if c.Metrics.BindAddress == "" {
		c.Metrics.BindAddress = DefaultMetricsBindAddress
	}
	if c.Metrics.SecureServing == nil {
		c.Metrics.SecureServing = ptr.To(true)
	}
	if c.Health == nil {
		c.Health = &Health{}
	}
	if c.Health.HealthProbeBindAddress == "" {
		c.Health.HealthProbeBindAddress = DefaultHealthProbeBindAddress
	}
	if c.ClientConnection == nil {
		c.ClientConnection = &ClientConnection{}
	}
	if c.ClientConnection.QPS == nil {
		c.ClientConnection.QPS = ptr.To[float32](DefaultQPS)
	}
	if c.ClientConnection.Burst == nil {
		c.ClientConnection.Burst = ptr.To[int32](DefaultBurst)
	}
	if c.Controller == nil {
		c.Controller = &Controller{}
	}
	if c.Controller.TrainJobWorkers == nil {
		c.Controller.TrainJobWorkers = ptr.To[int32](DefaultTrainJobWorkers)
	}
	if c.Controller.TTLWorkers == nil {
		c.Controller.TTLWorkers = ptr.To[int32](DefaultTTLWorkers)
	}
	if c.Webhook == nil {
		c.Webhook = &Webhook{}
	}
	if c.Webhook.Enable == nil {
		c.Webhook.Enable = ptr.To(true)
	}
	if c.Webhook.Port == nil {
		c.Webhook.Port = ptr.To[int32](DefaultWebhookPort)
	}
	if c.Webhook.CertDir == "" {
		c.Webhook.CertDir = DefaultWebhookCertDir
	}
	if c.Webhook.CertManagement == nil {
		c.Webhook.CertManagement = &WebhookCertManagement{}
	}
	cm := c.Webhook.CertManagement
	if cm.Enable == nil {
		cm.Enable = ptr.To(true)
	}
	if cm.SecretName == "" {
		cm.SecretName = DefaultWebhookSecretName
	}
	if cm.SecretNamespace == "" {
		cm.SecretNamespace = DefaultNamespace
	}
	if cm.DNSName == "" {
		cm.DNSName = DefaultWebhookServiceName + "." + cm.SecretNamespace + ".svc"
	}
	if cm.WebhookConfigurationName == "" {
		cm.WebhookConfigurationName = DefaultWebhookConfigurationName
	}
	if c.StatusServer == nil {
		c.StatusServer = &StatusServer{}
	}
	ss := c.StatusServer
	if ss.Enable == nil {
		ss.Enable = ptr.To(true)
	}
	if ss.Port == nil {
		ss.Port = ptr.To[int32](DefaultStatusServerPort)
	}
	if ss.WriteInterval == nil {
		ss.WriteInterval = &metav1.Duration{Duration: DefaultStatusWriteInterval}
	}
	if ss.QPS == nil {
		ss.QPS = ptr.To[float32](DefaultStatusServerQPS)
	}
	if ss.Burst == nil {
		ss.Burst = ptr.To[int32](DefaultStatusServerBurst)
	}
}

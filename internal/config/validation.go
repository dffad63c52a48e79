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

package config

import (
	"fmt"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
)

// Validate checks a defaulted Configuration.
func Validate(cfg *configv1alpha1.Configuration) field.ErrorList {
	var errs field.ErrorList
	le := field.NewPath("leaderElection")
	for _, d := range []struct {
		path  *field.Path
		value *metav1.Duration
	}{
		{le.Child("leaseDuration"), cfg.LeaderElection.LeaseDuration},
		{le.Child("renewDeadline"), cfg.LeaderElection.RenewDeadline},
		{le.Child("retryPeriod"), cfg.LeaderElection.RetryPeriod},
	} {
		if d.value.Duration <= 0 {
			errs = append(errs, field.Invalid(d.path, d.value.Duration.String(), "must be greater than 0"))
		}
	}
	if cfg.LeaderElection.RenewDeadline.Duration >= cfg.LeaderElection.LeaseDuration.Duration {
		errs = append(errs, field.Invalid(le.Child("renewDeadline"), cfg.LeaderElection.RenewDeadline.Duration.String(), "must be less than leaseDuration "+cfg.LeaderElection.LeaseDuration.Duration.String()))
	}
	cc := field.NewPath("clientConnection")
	if *cfg.ClientConnection.QPS <= 0 {
		errs = append(errs, field.Invalid(cc.Child("qps"), *cfg.ClientConnection.QPS, "must be greater than 0"))
	}
	if *cfg.ClientConnection.Burst < 1 {
		errs = append(errs, field.Invalid(cc.Child("burst"), *cfg.ClientConnection.Burst, "must be at least 1"))
	}
	if *cfg.Controller.TrainJobWorkers < 1 {
		errs = append(errs, field.Invalid(field.NewPath("controller", "trainJobWorkers"), *cfg.Controller.TrainJobWorkers, "must be at least 1"))
	}
	if p := *cfg.Webhook.Port; *cfg.Webhook.Enable && (p < 1 || p > 65535) {
		errs = append(errs, field.Invalid(field.NewPath("webhook", "port"), p, "must be a port number, 1 to 65535"))
	}
	if cm := cfg.Webhook.CertManagement; *cfg.Webhook.Enable && *cm.Enable {
		path := field.NewPath("webhook", "certManagement")
		for _, n := range []struct {
			name, value string
			valid       func(string) []string
		}{
			{"secretName", cm.SecretName, validation.IsDNS1123Subdomain},
			{"secretNamespace", cm.SecretNamespace, validation.IsDNS1123Label},
			{"dnsName", cm.DNSName, validation.IsDNS1123Subdomain},
			{"webhookConfigurationName", cm.WebhookConfigurationName, validation.IsDNS1123Subdomain},
		} {
			for _, msg := range n.valid(n.value) {
				errs = append(errs, field.Invalid(path.Child(n.name), n.value, msg))
			}
		}
		for i, name := range cm.ExtraDNSNames {
			for _, msg := range validation.IsDNS1123Subdomain(name) {
				errs = append(errs, field.Invalid(path.Child("extraDNSNames").Index(i), name, msg))
			}
		}
	}
	if *cfg.Controller.TTLWorkers < 1 {
		errs = append(errs, field.Invalid(field.NewPath("controller", "ttlWorkers"), *cfg.Controller.TTLWorkers, "must be at least 1"))
	}
	if ss := cfg.StatusServer; *ss.Enable {
		path := field.NewPath("statusServer")
		if p := *ss.Port; p < 1 || p > 65535 {
			errs = append(errs, field.Invalid(path.Child("port"), p, "must be a port number, 1 to 65535"))
		}
		if u, err := url.Parse(ss.URL); ss.URL != "" && (err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/")) {
			errs = append(errs, field.Invalid(path.Child("url"), ss.URL, "must be https://host[:port], without a path"))
		}
		if ss.WriteInterval.Duration < 0 {
			errs = append(errs, field.Invalid(path.Child("writeInterval"), ss.WriteInterval.Duration.String(), "must be 0 (write every report) or more"))
		}
		if *ss.QPS <= 0 {
			errs = append(errs, field.Invalid(path.Child("qps"), *ss.QPS, "must be greater than 0"))
		}
		if *ss.Burst < 1 {
			errs = append(errs, field.Invalid(path.Child("burst"), *ss.Burst, "must be at least 1"))
		}
	}
	if p := cfg.ObjectRetentionPolicies; p != nil && p.TrainJobs != nil {
		path := field.NewPath("objectRetentionPolicies", "trainJobs")
		for _, d := range []struct {
			name  string
			value *metav1.Duration
		}{
			{"afterFinished", p.TrainJobs.AfterFinished},
			{"afterFailed", p.TrainJobs.AfterFailed},
			{"afterSuspended", p.TrainJobs.AfterSuspended},
		} {
			if d.value != nil && d.value.Duration < 0 {
				errs = append(errs, field.Invalid(path.Child(d.name), d.value.Duration.String(),
					"must be 0 (delete at once) or more; leave it unset to never delete"))
			}
		}
	}
	return errs
}

// StatusServerURL is where trainer Pods reach the status server: its url,
// or the manager's Service, which the webhook's certificate names.
func StatusServerURL(cfg *configv1alpha1.Configuration) string {
	if u := strings.TrimSuffix(cfg.StatusServer.URL, "/"); u != "" {
		return u
	}
	return fmt.Sprintf("https://%s:%d", cfg.Webhook.CertManagement.DNSName, *cfg.StatusServer.Port)
}

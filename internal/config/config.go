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

// Package config loads and validates the manager's Configuration file.
package config

import (
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
)

// ConfigMapName is the ConfigMap, in the manager's namespace, that holds its
// Configuration under the key ConfigMapKey when it is deployed
// (config/manager); trainctl reads the retention policies from it.
const (
	ConfigMapName = "trainjob-operator-config"
	ConfigMapKey  = "config.yaml"
	// Namespace is the namespace config/default deploys the manager in.
	Namespace = "trainjob-system"
)

// Load reads the Configuration at path, or the defaults when path is empty.
// Unknown fields, a wrong apiVersion or kind, and invalid values are errors
// that name the field.
func Load(path string) (*configv1alpha1.Configuration, error) {
	cfg := &configv1alpha1.Configuration{}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading configuration: %w", err)
		}
		if cfg, err = Decode(data); err != nil {
			return nil, fmt.Errorf("configuration %s: %w", path, err)
		}
	}
	if errs := Validate(withDefaults(cfg)); len(errs) > 0 {
		return nil, fmt.Errorf("configuration %s is invalid: %w", path, errs.ToAggregate())
	}
	return cfg, nil
}

func withDefaults(cfg *configv1alpha1.Configuration) *configv1alpha1.Configuration {
	configv1alpha1.SetDefaults(cfg)
	return cfg
}

// Decode parses a Configuration strictly: unknown or duplicate fields are
// errors.
func Decode(data []byte) (*configv1alpha1.Configuration, error) {
	if errs := checkDurations(data); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	cfg := &configv1alpha1.Configuration{}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, err
	}
	wantAPIVersion := configv1alpha1.GroupVersion.String()
	var errs field.ErrorList
	if cfg.APIVersion != wantAPIVersion {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), cfg.APIVersion, "must be "+wantAPIVersion))
	}
	if cfg.Kind != "Configuration" {
		errs = append(errs, field.Invalid(field.NewPath("kind"), cfg.Kind, "must be Configuration"))
	}
	return cfg, errs.ToAggregate()
}

// durationFields are the paths of the Configuration's durations.
var durationFields = [][]string{
	{"leaderElection", "leaseDuration"},
	{"leaderElection", "renewDeadline"},
	{"leaderElection", "retryPeriod"},
	{"objectRetentionPolicies", "trainJobs", "afterFinished"},
	{"objectRetentionPolicies", "trainJobs", "afterFailed"},
	{"objectRetentionPolicies", "trainJobs", "afterSuspended"},
}

// checkDurations reports every duration that does not parse, by its field:
// the decoder's own error would not say which field it is.
func checkDurations(data []byte) field.ErrorList {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil // the strict decode reports it
	}
	var errs field.ErrorList
	for _, path := range durationFields {
		v, ok := lookup(raw, path)
		if !ok || v == nil {
			continue
		}
		if s, isString := v.(string); isString {
			if _, err := time.ParseDuration(s); err == nil {
				continue
			}
		}
		errs = append(errs, field.Invalid(field.NewPath(path[0], path[1:]...), v, "must be a duration such as 90s, 30m or 24h"))
	}
	return errs
}

func lookup(m map[string]any, path []string) (any, bool) {
	var v any = m
	for _, p := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

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
	}
	if *cfg.Controller.TTLWorkers < 1 {
		errs = append(errs, field.Invalid(field.NewPath("controller", "ttlWorkers"), *cfg.Controller.TTLWorkers, "must be at least 1"))
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

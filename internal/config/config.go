// Package config loads and validates the manager's Configuration file.
package config

import (
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
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
	configv1alpha1.SetDefaults(cfg)
	if errs := Validate(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("configuration %s is invalid: %w", path, errs.ToAggregate())
	}
	return cfg, nil
}

// Decode parses a Configuration strictly: unknown or duplicate fields are
// errors.
func Decode(data []byte) (*configv1alpha1.Configuration, error) {
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
	return errs
}

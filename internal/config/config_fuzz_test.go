package config

import "testing"

// Any bytes: Decode either returns an error or a Configuration that
// defaults and validates without a panic.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\nobjectRetentionPolicies:\n  trainJobs:\n    afterFinished: 24h\n"))
	f.Add([]byte("apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\nleaderElection:\n  leaseDuration: 9223372036854775807ns\n"))
	f.Add([]byte("{\"apiVersion\": 1, \"kind\": [], \"clientConnection\": {\"qps\": -1e400}}"))
	f.Add([]byte("objectRetentionPolicies: {trainJobs: {afterFailed: [1, 2]}}"))
	f.Fuzz(func(_ *testing.T, data []byte) {
		cfg, err := Decode(data)
		if err != nil {
			return
		}
		Validate(withDefaults(cfg))
	})
}

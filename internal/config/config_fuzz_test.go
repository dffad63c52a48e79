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

import "testing"

// Any bytes: Decode either returns an error or a defaulted Configuration
// that validates without a panic.
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
		Validate(cfg)
	})
}

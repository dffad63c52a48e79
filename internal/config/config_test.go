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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
)

func TestLoad(t *testing.T) {
	defaults := func() *configv1alpha1.Configuration {
		c := &configv1alpha1.Configuration{}
		configv1alpha1.SetDefaults(c)
		return c
	}
	cases := map[string]struct {
		file     string
		want     func() *configv1alpha1.Configuration
		wantErrs []string
	}{
		"no file: defaults": {
			want: defaults,
		},
		"values given are kept, the rest defaulted": {
			file: `apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
clientConnection:
  qps: 200
leaderElection:
  leaderElect: false
  leaseDuration: 30s
controller:
  trainJobWorkers: 20
`,
			want: func() *configv1alpha1.Configuration {
				c := defaults()
				c.ClientConnection.QPS = ptr.To[float32](200)
				c.LeaderElection.LeaderElect = ptr.To(false)
				c.LeaderElection.LeaseDuration = &metav1.Duration{Duration: 30 * time.Second}
				c.Controller.TrainJobWorkers = ptr.To[int32](20)
				return c
			},
		},
		"unknown field": {
			file:     "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\nclientConnexion:\n  qps: 1\n",
			wantErrs: []string{`unknown field "clientConnexion"`},
		},
		"unknown nested field names its path": {
			file:     "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\nobjectRetentionPolicies:\n  trainJobs:\n    afterFinishd: 1h\n",
			wantErrs: []string{`unknown field "objectRetentionPolicies.trainJobs.afterFinishd"`},
		},
		"duplicate field": {
			file:     "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\nleaderElection:\n  leaseDuration: 30s\n  leaseDuration: 60s\n",
			wantErrs: []string{`key "leaseDuration" already set`},
		},
		"no apiVersion or kind": {
			file:     "controller:\n  trainJobWorkers: 2\n",
			wantErrs: []string{`apiVersion: Invalid value: ""`, `kind: Invalid value: ""`},
		},
		"wrong kind and version": {
			file:     "apiVersion: v1\nkind: ConfigMap\n",
			wantErrs: []string{"apiVersion: Invalid value", "kind: Invalid value"},
		},
		"unparsable duration": {
			file:     "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\nleaderElection:\n  leaseDuration: soon\n",
			wantErrs: []string{`leaderElection.leaseDuration: Invalid value: "soon": must be a duration`},
		},
		"retention policies": {
			file: `apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
objectRetentionPolicies:
  trainJobs:
    afterFinished: 24h
    afterFailed: 0s
`,
			want: func() *configv1alpha1.Configuration {
				c := defaults()
				c.ObjectRetentionPolicies = &configv1alpha1.ObjectRetentionPolicies{TrainJobs: &configv1alpha1.TrainJobRetentionPolicy{
					AfterFinished: &metav1.Duration{Duration: 24 * time.Hour},
					AfterFailed:   &metav1.Duration{},
				}}
				return c
			},
		},
		"negative retention": {
			file:     "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\nobjectRetentionPolicies:\n  trainJobs:\n    afterSuspended: -1h\n",
			wantErrs: []string{`objectRetentionPolicies.trainJobs.afterSuspended: Invalid value: "-1h0m0s": must be 0 (delete at once) or more`},
		},
		"unparsable retention names the field": {
			file:     "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\nobjectRetentionPolicies:\n  trainJobs:\n    afterFinished: 1 day\n    afterFailed: 3\n",
			wantErrs: []string{`objectRetentionPolicies.trainJobs.afterFinished: Invalid value: "1 day": must be a duration`, "objectRetentionPolicies.trainJobs.afterFailed: Invalid value: 3: must be a duration"},
		},
		"certificate management follows the Secret's namespace": {
			file: `apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
webhook:
  certManagement:
    secretNamespace: ml-platform
`,
			want: func() *configv1alpha1.Configuration {
				c := defaults()
				c.Webhook.CertManagement.SecretNamespace = "ml-platform"
				c.Webhook.CertManagement.DNSName = "trainjob-operator-webhook.ml-platform.svc"
				return c
			},
		},
		"invalid certificate management names": {
			file:     "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\nwebhook:\n  certManagement:\n    secretName: Webhook_Certs\n    dnsName: \"-bad\"\n",
			wantErrs: []string{`webhook.certManagement.secretName: Invalid value: "Webhook_Certs"`, `webhook.certManagement.dnsName: Invalid value: "-bad"`},
		},
		"invalid values name their field": {
			file: `apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
clientConnection:
  qps: 0
  burst: 0
leaderElection:
  leaseDuration: 5s
  renewDeadline: 10s
  retryPeriod: -1s
controller:
  trainJobWorkers: 0
`,
			wantErrs: []string{
				"clientConnection.qps", "clientConnection.burst", "leaderElection.renewDeadline: Invalid value: \"10s\": must be less than leaseDuration",
				"leaderElection.retryPeriod: Invalid value: \"-1s\"", "controller.trainJobWorkers",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = filepath.Join(t.TempDir(), "config.yaml")
				if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Load(path)
			if len(tc.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("Load succeeded, want errors %q", tc.wantErrs)
				}
				for _, w := range tc.wantErrs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if diff := cmp.Diff(tc.want(), got); diff != "" {
				t.Errorf("configuration (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "absent.yaml")); err == nil || !strings.Contains(err.Error(), "absent.yaml") {
		t.Errorf("Load of a missing file: err = %v, want one naming the file", err)
	}
}

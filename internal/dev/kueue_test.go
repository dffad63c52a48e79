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

package dev

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"sigs.k8s.io/yaml"
)

// The certificates trainjob-dev hands Kueue pass the checks Kueue's
// cert-controller (the version the manager uses too) makes before it keeps
// them rather than making its own, a year from now: the CA's, and the
// serving certificate's for the Service name. The API server, calling
// https://127.0.0.1, accepts the serving certificate.
func TestKueueCertsAreKeptByCertController(t *testing.T) {
	now := time.Now()
	files, err := newServingCerts(now, kueueCAName, "kueue", kueueServiceDNSName)
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(365 * 24 * time.Hour) // past cert-controller's 90-day lookahead
	if ok, err := rotator.ValidCert(files["ca.crt"], files["ca.crt"], files["ca.key"], kueueCAName, nil, at); !ok {
		t.Errorf("CA refused: %v", err)
	}
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if ok, err := rotator.ValidCert(files["ca.crt"], files["tls.crt"], files["tls.key"], kueueServiceDNSName, &usages, at); !ok {
		t.Errorf("serving certificate refused: %v", err)
	}

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(files["ca.crt"]) {
		t.Fatal("CA not PEM")
	}
	block, _ := pem.Decode(files["tls.crt"])
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: roots}); err != nil {
		t.Errorf("serving certificate not valid for 127.0.0.1: %v", err)
	}
}

// Kueue runs with its TrainJob integration, and with KueueJobs its batch/job
// one too.
func TestKueueConfigurationIntegrations(t *testing.T) {
	for _, jobs := range []bool{false, true} {
		o := Options{Kueue: true, KueueJobs: jobs, KueuePodsReadyTimeout: 15 * time.Second}
		var config struct {
			Integrations struct {
				Frameworks []string `json:"frameworks"`
			} `json:"integrations"`
			WaitForPodsReady struct {
				Timeout string `json:"timeout"`
			} `json:"waitForPodsReady"`
		}
		if err := yaml.Unmarshal(renderKueueConfiguration(o, &state{KueueWebhookPort: 9443, KueueHealthPort: 8081}, "/certs"), &config); err != nil {
			t.Fatal(err)
		}
		want := []string{"trainer.kubeflow.org/trainjob"}
		if jobs {
			want = append(want, "batch/job")
		}
		if diff := cmp.Diff(want, config.Integrations.Frameworks); diff != "" {
			t.Errorf("KueueJobs %v: frameworks (-want +got):\n%s", jobs, diff)
		}
		if config.WaitForPodsReady.Timeout != "15s" {
			t.Errorf("KueueJobs %v: waitForPodsReady.timeout %q, want 15s", jobs, config.WaitForPodsReady.Timeout)
		}
	}
}

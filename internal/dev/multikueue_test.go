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
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// A worker's kubeconfig as kwokctl writes it names its CA, certificate and
// key by path; the one MultiKueue gets carries them inline, as Kueue
// requires, and nothing by path.
func TestInlinedKubeconfigNamesNoFile(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{"ca.crt": []byte("the CA"), "admin.crt": []byte("the certificate"), "admin.key": []byte("the key")}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	written := strings.NewReplacer("DIR", dir).Replace(`apiVersion: v1
kind: Config
clusters:
- name: worker
  cluster: {server: "https://127.0.0.1:32764", certificate-authority: DIR/ca.crt}
users:
- name: worker
  user: {client-certificate: DIR/admin.crt, client-key: DIR/admin.key}
contexts:
- name: worker
  context: {cluster: worker, user: worker}
current-context: worker
`)
	if err := os.WriteFile(kubeconfig, []byte(written), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := inlinedKubeconfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte(dir)) {
		t.Errorf("the inlined kubeconfig still names a file:\n%s", out)
	}
	cfg, err := clientcmd.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	cluster, user := cfg.Clusters["worker"], cfg.AuthInfos["worker"]
	if cluster == nil || user == nil {
		t.Fatalf("no cluster or user worker:\n%s", out)
	}
	if cluster.Server != "https://127.0.0.1:32764" || string(cluster.CertificateAuthorityData) != "the CA" ||
		string(user.ClientCertificateData) != "the certificate" || string(user.ClientKeyData) != "the key" {
		t.Errorf("inlined kubeconfig:\n%s", out)
	}
}

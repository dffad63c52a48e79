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

package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// testKubeconfig has two contexts: "one" (the current, namespace ns) and
// "two" (namespace team), on two clusters with a user each.
const testKubeconfig = `apiVersion: v1
kind: Config
current-context: one
clusters:
- name: cluster-one
  cluster: {server: "https://one.example:6443"}
- name: cluster-two
  cluster: {server: "https://two.example:6443"}
users:
- name: user-one
  user: {token: token-one}
- name: user-two
  user: {token: token-two}
contexts:
- name: one
  context: {cluster: cluster-one, user: user-one, namespace: ns}
- name: two
  context: {cluster: cluster-two, user: user-two, namespace: team}
`

// useKubeconfig points $KUBECONFIG at testKubeconfig.
func useKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	return path
}

// session is one trainctl command line run against a fake cluster.
type session struct {
	out, errOut bytes.Buffer
	// config is the configuration the command built its client from.
	config *rest.Config
}

// trainctl runs trainctl with args against cl (through $KUBECONFIG from
// useKubeconfig) until it returns or ctx ends.
func trainctl(ctx context.Context, t *testing.T, cl client.WithWatch, args ...string) (*session, error) {
	t.Helper()
	if os.Getenv("KUBECONFIG") == "" {
		useKubeconfig(t)
	}
	s := &session{}
	g := newGlobals(&s.out, &s.errOut)
	g.now = func() time.Time { return now }
	g.newClient = func(cfg *rest.Config) (client.WithWatch, error) {
		s.config = cfg
		return cl, nil
	}
	cmd := newRootCommand(g)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return s, err
}

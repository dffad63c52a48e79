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
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
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
	out, errOut printed
	// config is the configuration the command built its client from.
	config *rest.Config
}

// printed is what a command prints, read while it runs.
type printed struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{}
}

func (o *printed) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case o.written <- struct{}{}:
	default:
	}
	return o.buf.Write(p)
}

func (o *printed) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

func (o *printed) Bytes() []byte { return []byte(o.String()) }

// waitFor waits until the output holds want.
func (o *printed) waitFor(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for !strings.Contains(o.String(), want) {
		select {
		case <-o.written:
		case <-timeout:
			t.Fatalf("the output lacks %q:\n%s", want, o.String())
		}
	}
}

// trainctl runs trainctl with args against cl (through $KUBECONFIG from
// useKubeconfig) until it returns or ctx ends.
func trainctl(ctx context.Context, t *testing.T, cl client.WithWatch, args ...string) (*session, error) {
	t.Helper()
	s, done := start(ctx, t, cl, args...)
	return s, <-done
}

// start runs trainctl as trainctl does, in the background: done receives
// its error once it returns.
func start(ctx context.Context, t *testing.T, cl client.WithWatch, args ...string) (s *session, done <-chan error) {
	t.Helper()
	if os.Getenv("KUBECONFIG") == "" {
		useKubeconfig(t)
	}
	s = &session{out: printed{written: make(chan struct{}, 1)}, errOut: printed{written: make(chan struct{}, 1)}}
	g := newGlobals(&s.out, &s.errOut)
	g.now = func() time.Time { return now }
	g.newClient = func(cfg *rest.Config) (client.WithWatch, error) {
		s.config = cfg
		return cl, nil
	}
	cmd := newRootCommand(g)
	cmd.SetArgs(args)
	errc := make(chan error, 1)
	go func() { errc <- cmd.ExecuteContext(ctx) }()
	return s, errc
}

// watched is an interceptor that closes opened once a watch is open.
func watched(opened chan<- struct{}) *interceptor.Funcs {
	var once sync.Once
	return &interceptor.Funcs{Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
		w, err := c.Watch(ctx, list, opts...)
		once.Do(func() { close(opened) })
		return w, err
	}}
}

// errorSays fails t unless err says want (no error for ""), and says
// whether the test goes on: only when no error was wanted.
func errorSays(t *testing.T, err error, want string) bool {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatal(err)
		}
		return true
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one saying %q", err, want)
	}
	return false
}

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

// Package e2eprometheus checks the Helm chart's alerts and dashboard
// against the real Prometheus, the version pinned in hack/tools/prometheus,
// on the local cluster `make dev PROMETHEUS=1` uses: the manager serves
// its metrics as in a cluster and Prometheus scrapes it as the chart's
// ServiceMonitor does, and kube-apiserver, with the chart's rule file
// loaded. It brings up a cluster of its own and always tears it down. make
// test-e2e-prometheus builds Prometheus first.
package e2eprometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

const (
	// timeout bounds a wait for something the cluster does in seconds.
	timeout = 60 * time.Second
	// interval is how often a wait polls.
	interval = 500 * time.Millisecond
)

var (
	k8s      client.Client
	devOpts  dev.Options
	repoRoot string
	// started is when the cluster was up: the queries look at what
	// Prometheus scraped since.
	started time.Time
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if repoRoot, err = filepath.Abs(filepath.Join("..", "..")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	devOpts = dev.Options{
		Root:       repoRoot,
		WorkDir:    filepath.Join(repoRoot, ".dev-e2e-prometheus"),
		Name:       "trainjob-e2e-prometheus",
		Nodes:      2,
		Out:        os.Stderr,
		Prometheus: true,
	}
	return dev.RunTests(m, devOpts, func(cl client.WithWatch) { k8s = cl; started = time.Now() })
}

// newNamespace creates a namespace for one test; on failure it prints what
// was in it; afterwards it deletes it.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-prometheus-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, ns.Name)
		}
		_ = k8s.Delete(context.Background(), ns)
	})
	return ns.Name
}

// dump logs the TrainJobs, Jobs and events of a namespace, Prometheus'
// targets, and the end of the manager's and Prometheus' logs.
func dump(t *testing.T, ns string) {
	t.Helper()
	for _, args := range [][]string{
		{"get", "trainjobs,jobs,pods", "-n", ns, "-o", "wide"},
		{"get", "events", "-n", ns, "--sort-by=.lastTimestamp"},
	} {
		out, _ := exec.Command(filepath.Join(repoRoot, "bin", "kubectl"), append([]string{"--kubeconfig", devOpts.Kubeconfig()}, args...)...).CombinedOutput()
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
	var targets any
	if err := prometheusAPI("targets", nil, &targets); err == nil {
		out, _ := json.MarshalIndent(targets, "", "  ")
		t.Logf("Prometheus' targets:\n%s", out)
	}
	for name, path := range map[string]string{"manager": devOpts.ManagerLog(), "Prometheus": devOpts.PrometheusLog()} {
		if data, err := os.ReadFile(path); err == nil {
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			t.Logf("%s log (last lines):\n%s", name, strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	}
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	utiltesting.Eventually(t, timeout, interval, what, check)
}

func eventuallyWithin(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	utiltesting.Eventually(t, d, interval, what, check)
}

// prometheusAPI calls Prometheus' HTTP API at /api/v1/<path> with the
// given parameters and decodes the data of its answer into out.
func prometheusAPI(path string, params url.Values, out any) error {
	base, err := dev.PrometheusURL(devOpts)
	if err != nil {
		return err
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(base + "/api/v1/" + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var answer struct {
		Status, Error string
		Data          json.RawMessage
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if answer.Status != "success" {
		return fmt.Errorf("%s: %s", path, answer.Error)
	}
	return json.Unmarshal(answer.Data, out)
}

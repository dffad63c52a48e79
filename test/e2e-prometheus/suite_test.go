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
// ServiceMonitor does, and kube-apiserver, with the chart's rules loaded
// (their `for` shortened, see shortRules). It brings up a cluster of its
// own and always tears it down. make test-e2e-prometheus builds
// Prometheus first.
package e2eprometheus

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	"github.com/trainjob-operator/trainjob-operator/test/framework"
)

// Timeouts of the suite, in one place.
const (
	// timeout bounds a wait for something the cluster does in seconds.
	timeout = 60 * time.Second
	// interval is how often a wait polls.
	interval = 500 * time.Millisecond
	// ruleFor is every rule's `for` in the rules the test's Prometheus
	// evaluates: three evaluations, so that an alert is seen pending
	// before it fires.
	ruleFor = 3 * dev.PrometheusInterval
)

var (
	// cluster is the suite's cluster.
	cluster *framework.Cluster
	// devOpts brought it up: the faults stop and restart the manager
	// through them.
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
	rulesDir, err := os.MkdirTemp("", "e2e-prometheus-rules-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(rulesDir) }()
	rules := filepath.Join(rulesDir, "alerts.yaml")
	if err := shortRules(filepath.Join(repoRoot, dev.PrometheusRulesFile), rules, ruleFor); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	devOpts = dev.Options{
		Root:            repoRoot,
		WorkDir:         filepath.Join(repoRoot, ".dev-e2e-prometheus"),
		Name:            "trainjob-e2e-prometheus",
		Nodes:           2,
		Out:             os.Stderr,
		Prometheus:      true,
		PrometheusRules: rules,
	}
	return dev.RunTests(m, devOpts, func(cl client.WithWatch) {
		cluster = framework.DevCluster(devOpts, cl)
		cluster.NamespacePrefix = "e2e-prometheus-"
		cluster.Timeout, cluster.Interval = timeout, interval
		cluster.Dump.Logs = append(cluster.Dump.Logs, framework.Log{Name: "Prometheus", Path: devOpts.PrometheusLog()})
		started = time.Now()
	})
}

// shortRules writes to out the chart's rule file at in with every rule's
// `for` set to d; the rest of each rule, its expression first, is the
// shipped one. The shipped `for`s (2 to 15 minutes) are what a production
// Prometheus should wait; a test that waited them would take longer than
// every other suite together, and what the test shows, that an expression
// holds on the fault and that the alert fires and resolves, does not
// depend on how long it is held.
func shortRules(in, out string, d time.Duration) error {
	data, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var file map[string]any
	if err := yaml.Unmarshal(data, &file); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	groups, _ := file["groups"].([]any)
	n := 0
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			if rule, _ := r.(map[string]any); rule["for"] != nil {
				rule["for"] = d.String()
				n++
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: no rule with a for: is the file read right?", in)
	}
	if data, err = yaml.Marshal(file); err != nil {
		return err
	}
	return os.WriteFile(out, data, 0o644)
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

// logTargets logs Prometheus' targets, if the test failed: whether and
// how its scrapes failed.
func logTargets(t *testing.T) {
	t.Helper()
	if !t.Failed() {
		return
	}
	var targets any
	if err := prometheusAPI("targets", nil, &targets); err == nil {
		out, _ := json.MarshalIndent(targets, "", "  ")
		t.Logf("Prometheus' targets:\n%s", out)
	}
}

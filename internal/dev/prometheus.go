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
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Prometheus, with Options.Prometheus: the Prometheus server built into
// bin/prometheus by `hack/build-tools.sh prometheus` from the release
// hack/tools/prometheus pins, running as a local process with its data
// under WorkDir/prometheus. It scrapes the manager as the chart's
// ServiceMonitor does (HTTPS, /metrics, a ServiceAccount's token that may
// GET /metrics, the target's labels kept) and kube-apiserver's /metrics as
// the usual job "apiserver", and evaluates the chart's alerting rules.
const (
	// PrometheusManagerJob is the job of the manager's target: the name of
	// the Service the chart's ServiceMonitor selects, which Prometheus
	// Operator gives as the job.
	PrometheusManagerJob = "trainjob-operator-metrics"
	// PrometheusAPIServerJob is the job of kube-apiserver's target, as
	// kube-prometheus names it.
	PrometheusAPIServerJob = "apiserver"
	// PrometheusRulesFile is the chart's alerting rules, in the repository.
	PrometheusRulesFile = "charts/trainjob-operator/monitoring/alerts.yaml"
	// PrometheusInterval is how often it scrapes and evaluates the rules:
	// often, so that a short run has points to show.
	PrometheusInterval = 5 * time.Second

	// PrometheusScraper is the ServiceAccount Prometheus scrapes as, in
	// systemNamespace, and PrometheusScraperToken the Secret of its token:
	// those the chart's ServiceMonitor makes and reads its credentials
	// from, bound as the chart binds them to the ClusterRole that may GET
	// /metrics.
	PrometheusScraper      = "trainjob-operator-metrics-scraper"
	PrometheusScraperToken = "trainjob-operator-metrics-scraper-token"
	metricsReaderRole      = "trainjob-operator-metrics-reader"

	// tokenWait bounds the wait for Kubernetes' token controller to fill
	// the scraper's token Secret: moments.
	tokenWait = time.Minute
)

// prometheusConfiguration is Prometheus' configuration file; its arguments
// are the interval, the rules file, the token file, the manager's metrics
// port, kube-apiserver's scheme, host and CA file.
const prometheusConfiguration = `global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
rule_files:
  - %[2]q
scrape_configs:
  - job_name: ` + PrometheusManagerJob + `
    scheme: https
    metrics_path: /metrics
    # The manager's metrics are labelled with the namespace of a TrainJob,
    # not of the target: as the chart's ServiceMonitor (honorLabels), keep
    # them.
    honor_labels: true
    authorization:
      credentials_file: %[3]q
    tls_config:
      # The manager serves its metrics with a certificate it makes itself.
      insecure_skip_verify: true
    static_configs:
      - targets: ["127.0.0.1:%[4]d"]
        labels:
          namespace: ` + systemNamespace + `
          service: ` + PrometheusManagerJob + `
  - job_name: ` + PrometheusAPIServerJob + `
    scheme: %[5]s
    authorization:
      credentials_file: %[3]q
    tls_config:
      ca_file: %[7]q
    static_configs:
      - targets: [%[6]q]
`

// prometheusState is what EnsurePrometheus keeps in
// WorkDir/prometheus/state.json.
type prometheusState struct {
	Port int `json:"port"`
}

// PrometheusLog is the file Prometheus logs to.
func (o Options) PrometheusLog() string {
	o.defaults()
	return filepath.Join(o.WorkDir, "prometheus.log")
}

func (o Options) prometheusDir() string { return filepath.Join(o.WorkDir, "prometheus") }

func (o Options) prometheusConfig() string {
	return filepath.Join(o.prometheusDir(), "prometheus.yml")
}

func (o Options) prometheusBinary() string { return filepath.Join(o.BinDir, "prometheus") }

// needPrometheus fails, saying how to build it, if bin/prometheus is
// missing.
func (o Options) needPrometheus() error {
	if _, err := os.Stat(o.prometheusBinary()); err != nil {
		return fmt.Errorf("prometheus is missing from %s: run 'make prometheus' first (make dev PROMETHEUS=1 does)", o.BinDir)
	}
	return nil
}

// managerArgs are the manager's extra arguments: with Prometheus, its
// metrics are served as in a cluster, over HTTPS to callers the API server
// authorizes, rather than over plain HTTP.
func (o Options) managerArgs() []string {
	if o.Prometheus {
		return append(slices.Clone(o.ManagerArgs), "--metrics-insecure=false")
	}
	return o.ManagerArgs
}

// PrometheusURL is where Prometheus serves its API and UI.
func PrometheusURL(o Options) (string, error) {
	o.defaults()
	var st prometheusState
	data, err := os.ReadFile(filepath.Join(o.prometheusDir(), "state.json"))
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil || st.Port == 0 || len(prometheusesOf(o)) == 0 {
		return "", fmt.Errorf("no Prometheus is running for %s; run 'make dev-up PROMETHEUS=1'", o.WorkDir)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", st.Port), nil
}

// EnsurePrometheus starts Prometheus unless it runs, with a configuration
// that names the manager's metrics port as it is now (reloading it if it
// changed), and waits until it is ready. Running it twice is safe; Down
// stops it.
func EnsurePrometheus(ctx context.Context, o Options) error {
	o.defaults()
	if err := o.needPrometheus(); err != nil {
		return err
	}
	cl, err := o.client()
	if err != nil {
		return err
	}
	st, err := loadState(o)
	if err != nil {
		return err
	}
	if err := managerServesSecureMetrics(st.MetricsPort); err != nil {
		// A manager brought up without Prometheus serves plain HTTP.
		step(o, "restarting the manager to serve its metrics over HTTPS (%v)", err)
		if ours(o, "manager", st.ManagerPID) {
			if err := stopProcess(st.ManagerPID); err != nil {
				return err
			}
		}
		if err := RestartManager(ctx, o); err != nil {
			return err
		}
		if st, err = loadState(o); err != nil {
			return err
		}
	}
	dir := o.prometheusDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return err
	}
	tokenFile := filepath.Join(dir, "token")
	if err := writeScraperToken(ctx, cl, tokenFile); err != nil {
		return err
	}
	apiServer, caFile, err := o.apiServerTarget(dir)
	if err != nil {
		return err
	}
	config := prometheusConfigFile(o, tokenFile, st.MetricsPort, apiServer, caFile)
	old, _ := os.ReadFile(o.prometheusConfig())
	if err := os.WriteFile(o.prometheusConfig(), config, 0o644); err != nil {
		return err
	}

	var pst prometheusState
	if data, err := os.ReadFile(filepath.Join(dir, "state.json")); err == nil {
		_ = json.Unmarshal(data, &pst)
	}
	if pids := prometheusesOf(o); len(pids) == 1 && pst.Port != 0 && prometheusReady(pst.Port) == nil {
		if !bytes.Equal(old, config) {
			step(o, "reloading Prometheus' configuration (pid %d)", pids[0])
			if err := syscall.Kill(pids[0], syscall.SIGHUP); err != nil {
				return err
			}
		} else {
			step(o, "Prometheus is running (pid %d) at http://127.0.0.1:%d", pids[0], pst.Port)
		}
		return nil
	}
	if err := stopPrometheus(o); err != nil {
		return err
	}
	if pst.Port == 0 || !portFree(pst.Port) {
		if pst.Port, err = FreePort(); err != nil {
			return err
		}
	}
	data, err := json.Marshal(pst)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), data, 0o644); err != nil {
		return err
	}
	pid, exited, err := startDetached("Prometheus", o.prometheusBinary(), []string{
		"--config.file", o.prometheusConfig(),
		"--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", fmt.Sprintf("127.0.0.1:%d", pst.Port),
	}, o.PrometheusLog())
	if err != nil {
		return err
	}
	step(o, "started Prometheus (pid %d) at http://127.0.0.1:%d, scraping the manager and kube-apiserver every %s, with the chart's alerts; logging to %s",
		pid, pst.Port, PrometheusInterval, o.PrometheusLog())
	return waitReady(ctx, "Prometheus", func() error { return prometheusReady(pst.Port) }, o.PrometheusLog(), exited)
}

// prometheusConfigFile is Prometheus' configuration for o's cluster.
func prometheusConfigFile(o Options, tokenFile string, metricsPort int, apiServer *url.URL, caFile string) []byte {
	rules := o.PrometheusRules
	if rules == "" {
		rules = filepath.Join(o.Root, PrometheusRulesFile)
	}
	return fmt.Appendf(nil, prometheusConfiguration, model.Duration(PrometheusInterval).String(), rules,
		tokenFile, metricsPort, apiServer.Scheme, apiServer.Host, caFile)
}

// writeScraperToken makes the ServiceAccount Prometheus scrapes as, a
// Secret of its token and a binding of it to the ClusterRole that may GET
// /metrics (the manager's, and kube-apiserver's too), as the chart's
// ServiceMonitor has them, and writes the token to path, as the Prometheus
// Operator puts the Secret's token in the scrape configuration.
func writeScraperToken(ctx context.Context, cl client.Client, path string) error {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: PrometheusScraper, Namespace: systemNamespace}}
	if err := cl.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating ServiceAccount %s: %w", PrometheusScraper, err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: PrometheusScraperToken, Namespace: systemNamespace,
			Annotations: map[string]string{corev1.ServiceAccountNameKey: PrometheusScraper},
		},
		Type: corev1.SecretTypeServiceAccountToken,
	}
	if err := cl.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Secret %s: %w", PrometheusScraperToken, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: PrometheusScraper},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: PrometheusScraper, Namespace: systemNamespace}},
	}
	if err := cl.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding %s to %s: %w", PrometheusScraper, metricsReaderRole, err)
	}
	// kube-controller-manager's token controller fills the Secret.
	var token []byte
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, tokenWait, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(secret), secret); err != nil {
			return false, err
		}
		token = secret.Data[corev1.ServiceAccountTokenKey]
		return len(token) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the token of Secret %s: %w", PrometheusScraperToken, err)
	}
	return os.WriteFile(path, token, 0o600)
}

// apiServerTarget returns kube-apiserver's URL, and a file with the CA
// that signed its certificate (written to dir if the kubeconfig holds it
// inline).
func (o Options) apiServerTarget(dir string) (*url.URL, string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig())
	if err != nil {
		return nil, "", err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, "", err
	}
	caFile := cfg.CAFile
	if caFile == "" {
		caFile = filepath.Join(dir, "apiserver-ca.crt")
		if err := os.WriteFile(caFile, cfg.CAData, 0o644); err != nil {
			return nil, "", err
		}
	}
	return u, caFile, nil
}

// managerServesSecureMetrics checks that the manager's metrics port speaks
// HTTPS (any answer will do: without a token it is 401).
func managerServesSecureMetrics(port int) error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, a scheme check only
	}}
	resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", port))
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// prometheusReady asks Prometheus' /-/ready.
func prometheusReady(port int) error {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/-/ready", port))
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

// prometheusesOf lists the live processes of bin/prometheus with o's
// configuration.
func prometheusesOf(o Options) []int {
	exe, config := o.prometheusBinary(), o.prometheusConfig()
	return processesMatching(func(args []string) bool { return args[0] == exe && slices.Contains(args, config) })
}

// stopPrometheus stops every Prometheus of o's; Down then removes its data
// with WorkDir.
func stopPrometheus(o Options) error {
	var errs []error
	for _, pid := range prometheusesOf(o) {
		step(o, "stopping Prometheus (pid %d)", pid)
		errs = append(errs, stopProcess(pid))
	}
	return errors.Join(errs...)
}

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

// Package integration tests the manager against a real kube-apiserver and
// etcd (envtest, binaries from bin/), with the validating webhook served
// through the API server and kube-controller-manager's garbage collector
// running, so that deletions cascade as in a cluster. There is no Job
// controller: the tests write the child Jobs' status themselves, as the Job
// controller would.
package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	"github.com/trainjob-operator/trainjob-operator/internal/manager"
	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
	"github.com/trainjob-operator/trainjob-operator/test/framework"
)

// Timeouts of the suite, in one place.
const (
	// timeout bounds every wait for the controller to act.
	timeout = 30 * time.Second
	// interval is how often a wait polls.
	interval = 100 * time.Millisecond
	// consistently is how long a wait for nothing to happen watches.
	consistently = 2 * time.Second
)

var (
	// cluster is the test API server; its client is not the manager's
	// cache.
	cluster  *framework.Cluster
	repoRoot string
	binDir   string
	webhooks *envtest.WebhookInstallOptions

	// running is the manager under test.
	running *runningManager
	// statusServerPort is where its status server listens, on 127.0.0.1
	// with envtest's serving certificate.
	statusServerPort int
	// serviceAccountSigningKey is the file of the key the test API server
	// signs ServiceAccount tokens with.
	serviceAccountSigningKey string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapLevel())))
	var err error
	repoRoot, err = filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	binDir = os.Getenv("KUBEBUILDER_ASSETS")
	if binDir == "" {
		binDir = filepath.Join(repoRoot, "bin")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: binDir,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(repoRoot, "config", "webhook")},
		},
	}
	restConfig, err := env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting envtest with binaries from %s (run 'make tools'): %v\n", binDir, err)
		// Start may fail after the control plane is up (installing CRDs).
		_ = env.Stop()
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	webhooks = &env.WebhookInstallOptions
	// Where envtest's API server keeps it (its service-account-signing-key-file).
	serviceAccountSigningKey = filepath.Join(env.ControlPlane.APIServer.CertDir, "sa-signer.key")
	// envtest writes the serving certificate alone; the CA goes beside it,
	// as cert-manager's Secrets hold it, for the status server's clients.
	if err := os.WriteFile(filepath.Join(webhooks.LocalServingCertDir, "ca.crt"), webhooks.LocalServingCAData, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	if cluster, err = newCluster(env, restConfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(filepath.Dir(cluster.Kubeconfig)) }()

	stopGC, err := startGarbageCollector()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopGC()

	if statusServerPort, err = dev.FreePort(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if running, err = startManager(nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { running.stop() }()
	return m.Run()
}

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return -2
	}
	return zapcore.ErrorLevel // a passing run stays quiet
}

// runningManager is a manager started by the suite.
type runningManager struct {
	cancel context.CancelFunc
	done   chan error
}

// startManager starts the product's manager against the test API server,
// with the suite's settings changed by configure.
func startManager(configure func(*configv1alpha1.Configuration)) (*runningManager, error) {
	cfg := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(cfg)
	cfg.LeaderElection.LeaderElect = ptr.To(false)
	cfg.Metrics.BindAddress = "0"
	cfg.Health.HealthProbeBindAddress = "0"
	cfg.Webhook.Host = webhooks.LocalServingHost
	cfg.Webhook.Port = ptr.To(int32(webhooks.LocalServingPort))
	cfg.Webhook.CertDir = webhooks.LocalServingCertDir
	// envtest makes the certificate and fills in the caBundle itself.
	cfg.Webhook.CertManagement.Enable = ptr.To(false)
	cfg.StatusServer.Port = ptr.To(int32(statusServerPort))
	if configure != nil {
		configure(cfg)
	}
	mgrConfig := rest.CopyConfig(cluster.Config)
	mgrConfig.Wrap(dryRuns.count)
	mgr, err := manager.New(mgrConfig, cfg, manager.Options{SkipNameValidation: true})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &runningManager{cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	// Wait until the webhook serves, or the API server would refuse
	// TrainJobs, and the caches it reads have synced.
	deadline := time.Now().Add(timeout)
	for {
		if err := mgr.GetWebhookServer().StartedChecker()(nil); err == nil {
			syncCtx, cancelSync := context.WithDeadline(ctx, deadline)
			synced := mgr.GetCache().WaitForCacheSync(syncCtx)
			cancelSync()
			if !synced {
				m.stop()
				return nil, fmt.Errorf("the manager's caches did not sync within %v", timeout)
			}
			return m, nil
		}
		if time.Now().After(deadline) {
			m.stop()
			return nil, fmt.Errorf("the webhook server did not start within %v", timeout)
		}
		time.Sleep(interval)
	}
}

// stop stops the manager and waits for it to return.
func (m *runningManager) stop() {
	m.cancel()
	if err := <-m.done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
}

// restartManager replaces the running manager by one configured by
// configure, for the rest of the test; the default one comes back after it.
func restartManager(t *testing.T, configure func(*configv1alpha1.Configuration)) {
	t.Helper()
	stopSuiteManager(t)
	m, err := startManager(configure)
	if err != nil {
		t.Fatalf("restarting the manager: %v", err)
	}
	running = m
	t.Cleanup(m.stop) // before the default one comes back
}

// stopSuiteManager stops the suite's manager until the test ends: one
// manager in this process at a time.
func stopSuiteManager(t *testing.T) {
	t.Helper()
	running.stop()
	t.Cleanup(func() {
		var err error
		if running, err = startManager(nil); err != nil {
			t.Fatalf("restoring the default manager: %v", err)
		}
	})
}

// dryRuns counts the dry-run creations of Jobs the manager asks for (the
// TrainJob webhook's), by namespace.
var dryRuns = &jobDryRuns{byNamespace: map[string]int{}}

type jobDryRuns struct {
	mu          sync.Mutex
	byNamespace map[string]int
}

// count wraps the manager's transport to the API server.
func (d *jobDryRuns) count(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		// POST /apis/batch/v1/namespaces/<namespace>/jobs?dryRun=All
		parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
		if req.Method == http.MethodPost && req.URL.Query().Get("dryRun") == "All" && len(parts) == 6 &&
			strings.Join(parts[:3], "/") == "apis/batch/v1" && parts[3] == "namespaces" && parts[5] == "jobs" {
			d.mu.Lock()
			d.byNamespace[parts[4]]++
			d.mu.Unlock()
		}
		return next.RoundTrip(req)
	})
}

// in returns how many Jobs of namespace were dry-run.
func (d *jobDryRuns) in(namespace string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byNamespace[namespace]
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// startManagerAt runs the product's manager, without its webhook, against
// another API server than the suite's (cfg) until the test ends. The
// suite's manager stops meanwhile: one manager in this process at a time.
func startManagerAt(t *testing.T, cfg *rest.Config) {
	t.Helper()
	mcfg := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(mcfg)
	mcfg.LeaderElection.LeaderElect = ptr.To(false)
	mcfg.Metrics.BindAddress = "0"
	mcfg.Health.HealthProbeBindAddress = "0"
	mcfg.Webhook.Enable = ptr.To(false)
	stopSuiteManager(t)
	mgr, err := manager.New(cfg, mcfg, manager.Options{SkipNameValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// startGarbageCollector runs kube-controller-manager's garbage collector
// against the test API server: envtest has none, and cascading deletion is
// part of what the product relies on.
func startGarbageCollector() (func(), error) {
	cmd := exec.Command(filepath.Join(binDir, "kube-controller-manager"),
		"--kubeconfig", cluster.Kubeconfig,
		"--controllers", "garbage-collector-controller",
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	)
	logFile, err := os.CreateTemp("", "kube-controller-manager-*.log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-controller-manager (run 'make tools'): %w", err)
	}
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		_ = os.Remove(logFile.Name())
	}, nil
}

// newCluster is the Cluster of an API server envtest started with cfg:
// a client, a kubeconfig for kubectl and kube-controller-manager, the
// suite's waits.
func newCluster(env *envtest.Environment, cfg *rest.Config) (*framework.Cluster, error) {
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	kubeconfig, err := writeKubeconfig(env)
	if err != nil {
		return nil, err
	}
	return &framework.Cluster{
		Config:          cfg,
		Client:          cl,
		Kubeconfig:      kubeconfig,
		KubectlBinary:   filepath.Join(repoRoot, "bin", "kubectl"),
		NamespacePrefix: "it-",
		Timeout:         timeout,
		Interval:        interval,
	}, nil
}

// startOtherAPIServer starts an API server (and etcd) beside the suite's,
// with the CRDs of crdPaths, until the test ends.
func startOtherAPIServer(t *testing.T, crdPaths ...string) *framework.Cluster {
	t.Helper()
	env := &envtest.Environment{CRDDirectoryPaths: crdPaths, ErrorIfCRDPathMissing: true, BinaryAssetsDirectory: binDir}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // Start may fail after the control plane is up
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := newCluster(env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(c.Kubeconfig)) })
	return c
}

// writeKubeconfig writes a kubeconfig of the test API server for kubectl and
// kube-controller-manager.
func writeKubeconfig(env *envtest.Environment) (string, error) {
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "trainjob-integration-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

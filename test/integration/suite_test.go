// Package integration tests the manager against a real kube-apiserver and
// etcd (envtest, binaries from bin/). There is no Job controller: the tests
// write the child Jobs' status themselves, as the Job controller would.
package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/manager"
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
	// k8s is a client of the API server, not of the manager's cache.
	k8s        client.Client
	restConfig *rest.Config
	kubeconfig string
	repoRoot   string
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
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(repoRoot, "bin")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	restConfig, err = env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting envtest with binaries from %s (run 'make tools'): %v\n", assets, err)
		// Start may fail after the control plane is up (installing CRDs).
		_ = env.Stop()
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()

	k8s, err = client.New(restConfig, client.Options{Scheme: manager.Scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeconfig, err = writeKubeconfig(env)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(filepath.Dir(kubeconfig)) }()

	cfg := &configv1alpha1.Configuration{}
	configv1alpha1.SetDefaults(cfg)
	cfg.LeaderElection.LeaderElect = ptr.To(false)
	cfg.Metrics.BindAddress = "0"
	cfg.Health.HealthProbeBindAddress = "0"
	mgr, err := manager.New(restConfig, cfg, manager.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return m.Run()
}

func zapLevel() zapcore.Level {
	if os.Getenv("TEST_VERBOSE") != "" {
		return -2
	}
	return zapcore.ErrorLevel // a passing run stays quiet
}

// writeKubeconfig writes a kubeconfig of the test API server for kubectl.
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

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

// eventually polls check until it returns nil, and fails the test with the
// last error after timeout.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: %v", timeout, what, err)
		}
		time.Sleep(interval)
	}
}

// never checks for consistently that check keeps returning nil.
func never(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(consistently)
	for time.Now().Before(deadline) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(interval)
	}
}

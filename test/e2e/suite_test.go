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

// Package e2e runs the product on the local cluster `make dev` uses: the
// real Job controller, garbage collector and scheduler of
// kube-controller-manager and kube-scheduler, kwok nodes running the Pods,
// and the manager as a process behind its webhook. It brings up a cluster
// of its own and always tears it down.
package e2e

import (
	"context"
	"fmt"
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

// Timeouts of the suite, in one place.
const (
	// timeout bounds a wait for something the cluster does in seconds.
	timeout = 60 * time.Second
	// interval is how often a wait polls.
	interval = 200 * time.Millisecond
)

var (
	k8s      client.Client
	devOpts  dev.Options
	repoRoot string
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
		Root:    repoRoot,
		WorkDir: filepath.Join(repoRoot, ".dev-e2e"),
		Name:    "trainjob-e2e",
		Nodes:   4,
		Out:     os.Stderr,
	}
	return dev.RunTests(m, devOpts, func(cl client.WithWatch) { k8s = cl })
}

// newNamespace creates a namespace for one test; on failure it prints what
// was in it; afterwards it deletes it.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
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

// dump logs the TrainJobs, Jobs, Pods and events of a namespace, and the end
// of the manager's log, for a failed test.
func dump(t *testing.T, ns string) {
	t.Helper()
	for _, args := range [][]string{
		{"get", "trainjobs,jobs,pods,services", "-n", ns, "-o", "wide"},
		{"get", "trainjobs", "-n", ns, "-o", "yaml"},
		{"get", "events", "-n", ns, "--sort-by=.lastTimestamp"},
	} {
		out, _ := kubectl(args...)
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
	if data, err := os.ReadFile(devOpts.ManagerLog()); err == nil {
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		t.Logf("manager log (last lines):\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// kubectlCmd is the command kubectl args, on the suite's cluster.
func kubectlCmd(args ...string) *exec.Cmd {
	return exec.Command(filepath.Join(repoRoot, "bin", "kubectl"), append([]string{"--kubeconfig", devOpts.Kubeconfig()}, args...)...)
}

func kubectl(args ...string) (string, error) {
	out, err := kubectlCmd(args...).CombinedOutput()
	return string(out), err
}

// eventually polls check until it returns nil, and fails the test with
// what it waited for and the last error after timeout.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	utiltesting.Eventually(t, timeout, interval, what, check)
}

func eventuallyWithin(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	utiltesting.Eventually(t, d, interval, what, check)
}

// consistently checks for d that check keeps returning nil.
func consistently(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	utiltesting.Consistently(t, d, interval, what, check)
}

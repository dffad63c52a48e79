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
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	"github.com/trainjob-operator/trainjob-operator/test/framework"
)

// Timeouts of the suite, in one place.
const (
	// timeout bounds a wait for something the cluster does in seconds.
	timeout = 60 * time.Second
	// interval is how often a wait polls.
	interval = 200 * time.Millisecond
)

var (
	// cluster is the suite's cluster.
	cluster *framework.Cluster
	// devOpts brought it up: what restarts or reconfigures its processes
	// needs them.
	devOpts dev.Options
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	repoRoot, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
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
	return dev.RunTests(m, devOpts, func(cl client.WithWatch) {
		cluster = framework.DevCluster(devOpts, cl)
		cluster.NamespacePrefix = "e2e-"
		cluster.Timeout, cluster.Interval = timeout, interval
	})
}

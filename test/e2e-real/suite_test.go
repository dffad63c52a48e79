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

// Package e2ereal runs TrainJobs whose Pods are real processes, on the
// real node of the local cluster `make dev REAL=1` uses: a kubelet,
// containerd and runc, CNI and CoreDNS on this machine (as root), beside
// the simulated nodes, and Kueue. The training programs (programs/) run in
// the training image, which the suite builds first (hack/train-image.sh,
// cached) and loads into the real node. It brings up a cluster of its own,
// always tears it down, and then checks that nothing of the real node is
// left. make test-e2e-real builds the real node's tools and Kueue first.
package e2ereal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	"github.com/trainjob-operator/trainjob-operator/test/framework"
)

const (
	// timeout bounds a wait for something the cluster does in seconds;
	// real containers start in seconds.
	timeout = 90 * time.Second
	// interval is how often a wait polls.
	interval = 500 * time.Millisecond
	// rendezvousImage is the image of ./rendezvous the suite loads into
	// the real node's containerd. Not :latest, so that the Pods' pull
	// policy defaults to IfNotPresent: nothing is ever pulled.
	rendezvousImage = "localhost/trainjob-operator/rendezvous:e2e"
)

var (
	// cluster is the suite's cluster.
	cluster *framework.Cluster
	// devOpts brought it up.
	devOpts dev.Options
	// loadErr is why the test images could not be loaded, if they could
	// not: every test fails with it.
	loadErr error
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
		WorkDir: filepath.Join(repoRoot, ".dev-e2e-real"),
		Name:    "trainjob-e2e-real",
		Nodes:   1,
		Out:     os.Stderr,
		Real:    true,
		Kueue:   true,
	}
	// The training image: built once, then taken from the cache.
	start := time.Now()
	trainArchive, err := dev.BuildTrainImage(context.Background(), devOpts, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "training image %s in %s\n", trainArchive, time.Since(start).Round(time.Millisecond))
	code := dev.RunTests(m, devOpts, func(cl client.WithWatch) {
		cluster = framework.DevCluster(devOpts, cl)
		cluster.NamespacePrefix = "e2e-real-"
		cluster.Timeout, cluster.Interval = timeout, interval
		cluster.Dump = framework.TrainJobDump(
			framework.Log{Name: "manager", Path: devOpts.ManagerLog()},
			framework.Log{Name: "kubelet", Path: devOpts.KubeletLog()},
			framework.Log{Name: "containerd", Path: devOpts.ContainerdLog()},
			framework.Log{Name: "CoreDNS", Path: devOpts.CoreDNSLog()},
			framework.Log{Name: "Kueue", Path: devOpts.KueueLog()},
		)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		loadErr = dev.LoadProgramImage(ctx, devOpts, "./test/e2e-real/rendezvous", rendezvousImage)
		fmt.Fprintf(os.Stderr, "loaded %s into the real node in %s\n", rendezvousImage, time.Since(start).Round(time.Millisecond))
		if loadErr != nil {
			return
		}
		start = time.Now()
		loadErr = dev.LoadImageArchive(ctx, devOpts, trainArchive, dev.TrainImage)
		fmt.Fprintf(os.Stderr, "loaded %s into the real node in %s\n", dev.TrainImage, time.Since(start).Round(time.Millisecond))
	})
	// Down has run: the real node must have left nothing behind.
	if left := dev.RealNodeLeftovers(devOpts); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "the real node left behind after tearing down:\n  %s\n", strings.Join(left, "\n  "))
		code = 1
	}
	return code
}

// newNamespace creates the test's namespace, once the suite's images are
// in the real node.
func newNamespace(t *testing.T) string {
	t.Helper()
	if loadErr != nil {
		t.Fatalf("loading the images: %v", loadErr)
	}
	return cluster.NewNamespace(t)
}

// progress logs a step of a test as it happens (go test -v).
func progress(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

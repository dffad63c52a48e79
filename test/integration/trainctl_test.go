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

package integration

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/cli"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// lockedBuffer is what a command prints, read while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// trainctl runs trainctl on the suite's API server, in namespace ns, until
// it returns or ctx ends.
func trainctl(ctx context.Context, ns string, out *lockedBuffer, args ...string) error {
	cmd := cli.NewCommand(out, out)
	cmd.SetArgs(append([]string{"--kubeconfig", cluster.Kubeconfig, "-n", ns}, args...))
	return cmd.ExecuteContext(ctx)
}

// trainctl against a real API server and manager: get -o, get --watch,
// wait --for=running and --for=condition=Complete, describe -o and the
// completion of names see the TrainJob as the API server serves it.
func TestTrainctl(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("mnist", ns).Label("team", "nlp").Obj())
	ctx := context.Background()

	var out lockedBuffer
	if err := trainctl(ctx, ns, &out, "wait", "mnist", "--for=running", "--timeout", timeout.String()); err != nil {
		t.Fatalf("wait --for=running: %v\n%s", err, out.String())
	}
	if got, want := out.String(), "trainjob.trainer.kubeflow.org/mnist condition met\n"; got != want {
		t.Errorf("wait --for=running printed %q, want %q", got, want)
	}

	out = lockedBuffer{}
	if err := trainctl(ctx, ns, &out, "get", "-l", "team=nlp", "-o", "yaml"); err != nil {
		t.Fatal(err)
	}
	var list struct {
		APIVersion string             `json:"apiVersion"`
		Kind       string             `json:"kind"`
		Items      []trainer.TrainJob `json:"items"`
	}
	if err := yaml.Unmarshal([]byte(out.String()), &list); err != nil {
		t.Fatalf("get -o yaml: %v\n%s", err, out.String())
	}
	stored := mustTrainJob(t, ns, "mnist")
	if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != 1 ||
		list.Items[0].UID != stored.UID || list.Items[0].Kind != trainer.TrainJobKind || list.Items[0].Status.State != trainer.TrainJobStateRunning {
		t.Errorf("get -o yaml printed, want a List of the running TrainJob %s:\n%s", stored.UID, out.String())
	}

	// A watch sees the TrainJob complete.
	watchCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	var watched lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- trainctl(watchCtx, ns, &watched, "get", "mnist", "--watch", "-o", "jsonpath={.status.state}{\"\\n\"}")
	}()
	cluster.Eventually(t, "get --watch to list the TrainJob", func() error {
		if watched.String() == "" {
			return errNothingYet
		}
		return nil
	})
	setJobStatus(t, ns, "mnist-node-0", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })

	out = lockedBuffer{}
	if err := trainctl(ctx, ns, &out, "wait", "mnist", "--for=condition=Complete", "--timeout", timeout.String()); err != nil {
		t.Fatalf("wait --for=condition=Complete: %v\n%s", err, out.String())
	}
	cluster.Eventually(t, "get --watch to print the TrainJob Complete", func() error {
		if !strings.HasSuffix(watched.String(), "Complete\n") {
			return errNothingYet
		}
		return nil
	})
	interrupt()
	if err := <-done; err != nil {
		t.Errorf("get --watch, interrupted: %v", err)
	}
	if lines := strings.Split(strings.TrimSpace(watched.String()), "\n"); lines[0] != "Running" {
		t.Errorf("get --watch printed %q first, want Running", lines)
	}

	out = lockedBuffer{}
	if err := trainctl(ctx, ns, &out, "describe", "mnist", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	var d cli.Description
	if err := yaml.Unmarshal([]byte(out.String()), &d); err != nil {
		t.Fatalf("describe -o json: %v\n%s", err, out.String())
	}
	if d.Kind != "TrainJobDescription" || d.TrainJob.UID != stored.UID || d.State != trainer.TrainJobStateComplete || len(d.Jobs) != 1 || d.Jobs[0].Name != "mnist-node-0" {
		t.Errorf("describe -o json printed, want the Complete TrainJob and its Job:\n%s", out.String())
	}

	out = lockedBuffer{}
	if err := trainctl(ctx, ns, &out, "__complete", "describe", "mn"); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "mnist\n:4\n"; !strings.HasPrefix(got, want) {
		t.Errorf("__complete describe mn printed %q, want %q first", got, want)
	}

	out = lockedBuffer{}
	err := trainctl(ctx, ns, &out, "wait", "mnist", "--for=condition=Failed", "--timeout", "1s")
	if want := "timed out after 1s waiting for condition Failed=True of TrainJob " + ns + "/mnist (Complete)"; err == nil || err.Error() != want {
		t.Errorf("wait --for=condition=Failed: %v, want %q", err, want)
	}
}

// errNothingYet is a wait's answer while what it waits for is not there.
var errNothingYet = errors.New("not yet")

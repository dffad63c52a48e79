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

// Package e2ekueue runs the product with the real Kueue, the version pinned
// in hack/tools/kueue, on the local cluster `make dev KUEUE=1` uses: the
// real Job controller and scheduler, kwok nodes (half of them reserved:
// labelled and tainted, see dev.PoolLabel), the manager and Kueue as local
// processes behind their webhooks. It brings up a cluster of its own and
// always tears it down. make test-e2e-kueue builds Kueue first.
package e2ekueue

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

const (
	// timeout bounds a wait for something the cluster does in seconds.
	timeout = 60 * time.Second
	// interval is how often a wait polls.
	interval = 200 * time.Millisecond
	// runFor is the annotation that sets how long a simulated Pod runs.
	runFor = "pod-complete.stage.kwok.x-k8s.io/delay"
	// podsReadyTimeout is Kueue's waitForPodsReady timeout.
	podsReadyTimeout = 15 * time.Second
	// afterSuspended is the manager's retention policy for TrainJobs
	// suspended this long.
	afterSuspended = 3 * time.Second
	// kueueVersion is the API version of Kueue's objects the tests use.
	kueueVersion = "kueue.x-k8s.io/v1beta2"
)

var (
	k8s      client.WithWatch
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
		WorkDir: filepath.Join(repoRoot, ".dev-e2e-kueue"),
		Name:    "trainjob-e2e-kueue",
		Nodes:   4,
		Out:     os.Stderr,
		Kueue:   true,
		// Kueue's Job webhooks and integration, as Kueue's manifests
		// install them: they see the TrainJob webhook's dry runs and the
		// child Jobs (TestCreatedWithoutWarnings).
		KueueJobs: true,
		// A TrainJob whose Pods are not all ready this long is evicted.
		KueuePodsReadyTimeout: podsReadyTimeout,
		// Suspended TrainJobs are deleted after a few seconds, unless
		// they wait in Kueue's queues: every test here checks that none
		// queued is.
		Configuration: strings.Replace(dev.DefaultConfiguration, "afterSuspended: 24h", "afterSuspended: "+afterSuspended.String(), 1),
	}
	return dev.RunTests(m, devOpts, func(cl client.WithWatch) { k8s = cl })
}

// progress logs a step of a test as it happens (go test -v).
func progress(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// newNamespace creates a namespace for one test; on failure it prints what
// was in it; afterwards it deletes it.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-kueue-"}}
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

// dump logs the TrainJobs, Workloads, Jobs, Pods and events of a namespace,
// Kueue's queues, and the end of the manager's and Kueue's logs.
func dump(t *testing.T, ns string) {
	t.Helper()
	for _, args := range [][]string{
		{"get", "trainjobs,workloads,jobs,pods", "-n", ns, "-o", "wide"},
		{"get", "trainjobs,workloads", "-n", ns, "-o", "yaml"},
		{"get", "clusterqueues,resourceflavors", "-o", "yaml"},
		{"get", "events", "-n", ns, "--sort-by=.lastTimestamp"},
	} {
		out, _ := kubectl(args...)
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
	for name, path := range map[string]string{"manager": devOpts.ManagerLog(), "Kueue": devOpts.KueueLog()} {
		if data, err := os.ReadFile(path); err == nil {
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			t.Logf("%s log (last lines):\n%s", name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	}
}

func kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot, "bin", "kubectl"), append([]string{"--kubeconfig", devOpts.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	utiltesting.Eventually(t, timeout, interval, what, check)
}

func eventuallyWithin(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	utiltesting.Eventually(t, d, interval, what, check)
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
}

// createYAML creates the object of a YAML manifest (Kueue's objects, which
// the product's scheme does not know), deleted when the test ends, unless
// it failed: dump shows it then.
func createYAML(t *testing.T, format string, args ...any) {
	t.Helper()
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(fmt.Appendf(nil, format, args...), &obj.Object); err != nil {
		t.Fatal(err)
	}
	create(t, &obj)
	t.Cleanup(func() {
		if !t.Failed() {
			_ = k8s.Delete(context.Background(), &obj)
		}
	})
}

// queue creates a ResourceFlavor, a ClusterQueue with cpu quota (and
// memory enough) of that flavor, and a LocalQueue of it in ns, all named
// name. The flavor has the reserved nodes' label and tolerates their taint
// if reserved.
func queue(t *testing.T, ns, name string, cpu string, reserved bool) {
	t.Helper()
	flavor := "{}"
	if reserved {
		flavor = fmt.Sprintf(`{nodeLabels: {%q: %q}, tolerations: [{key: %q, operator: Equal, value: %q, effect: %s}]}`,
			dev.PoolLabel, dev.ReservedPool, dev.ReservedTaint.Key, dev.ReservedTaint.Value, dev.ReservedTaint.Effect)
	}
	createYAML(t, `{apiVersion: %s, kind: ResourceFlavor, metadata: {name: %s}, spec: %s}`, kueueVersion, name, flavor)
	createYAML(t, `
apiVersion: %s
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: %s
      resources:
      - {name: cpu, nominalQuota: %q}
      - {name: memory, nominalQuota: 64Gi}
`, kueueVersion, name, name, cpu)
	createYAML(t, `{apiVersion: %s, kind: LocalQueue, metadata: {name: %s, namespace: %s}, spec: {clusterQueue: %s}}`, kueueVersion, name, ns, name)
	eventually(t, "ClusterQueue "+name+" to be active", func() error {
		var cq unstructured.Unstructured
		cq.SetAPIVersion(kueueVersion)
		cq.SetKind("ClusterQueue")
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, &cq); err != nil {
			return err
		}
		var status struct{ Conditions []metav1.Condition }
		if err := fromUnstructured(cq.Object["status"], &status); err != nil {
			return err
		}
		for _, c := range status.Conditions {
			if c.Type == "Active" && c.Status == metav1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions: %+v", status.Conditions)
	})
}

// workload is what the tests read of a Kueue Workload.
type workload struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		QueueName string `json:"queueName"`
		PodSets   []struct {
			Name  string `json:"name"`
			Count int32  `json:"count"`
		} `json:"podSets"`
	} `json:"spec"`
	Status struct {
		Admission *struct {
			ClusterQueue      string `json:"clusterQueue"`
			PodSetAssignments []struct {
				Name    string            `json:"name"`
				Flavors map[string]string `json:"flavors"`
			} `json:"podSetAssignments"`
		} `json:"admission"`
		Conditions []metav1.Condition `json:"conditions"`
	} `json:"status"`
}

func (w *workload) is(condType string) bool {
	for _, c := range w.Status.Conditions {
		if c.Type == condType {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// podSets returns the Workload's PodSets as name: count.
func (w *workload) podSets() map[string]int32 {
	out := map[string]int32{}
	for _, ps := range w.Spec.PodSets {
		out[ps.Name] = ps.Count
	}
	return out
}

// workloads lists the Workloads of ns by the UID of the job they are of.
func workloads(ns string) (map[string]*workload, error) {
	var list unstructured.UnstructuredList
	list.SetAPIVersion(kueueVersion)
	list.SetKind("WorkloadList")
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string]*workload{}
	for _, u := range list.Items {
		var w workload
		if err := fromUnstructured(u.Object, &w); err != nil {
			return nil, err
		}
		out[w.Labels["kueue.x-k8s.io/job-uid"]] = &w
	}
	return out, nil
}

// workloadOf waits for the Workload of the TrainJob and returns it.
func workloadOf(t *testing.T, tj *trainer.TrainJob) *workload {
	t.Helper()
	var w *workload
	eventually(t, "the Workload of "+tj.Name, func() error {
		all, err := workloads(tj.Namespace)
		if err != nil {
			return err
		}
		if w = all[string(tj.UID)]; w == nil {
			return fmt.Errorf("none among %d", len(all))
		}
		return nil
	})
	return w
}

func fromUnstructured(in any, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

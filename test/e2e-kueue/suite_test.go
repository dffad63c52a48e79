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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	"github.com/trainjob-operator/trainjob-operator/test/framework"
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
	// cluster is the suite's cluster.
	cluster *framework.Cluster
	// devOpts brought it up.
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
	return dev.RunTests(m, devOpts, func(cl client.WithWatch) {
		cluster = framework.DevCluster(devOpts, cl)
		cluster.NamespacePrefix = "e2e-kueue-"
		cluster.Timeout, cluster.Interval = timeout, interval
		// Kueue's objects too, and the end of its log.
		cluster.Dump = &framework.Dump{
			Listed:         []string{"trainjobs", "workloads", "jobs", "pods"},
			Printed:        []string{"trainjobs", "workloads"},
			ClusterPrinted: []string{"clusterqueues", "resourceflavors"},
			Logs:           []framework.Log{{Name: "manager", Path: devOpts.ManagerLog()}, {Name: "Kueue", Path: devOpts.KueueLog()}},
		}
	})
}

// progress logs a step of a test as it happens (go test -v).
func progress(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
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
	cluster.CreateYAML(t, `{apiVersion: %s, kind: ResourceFlavor, metadata: {name: %s}, spec: %s}`, kueueVersion, name, flavor)
	cluster.CreateYAML(t, `
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
	cluster.CreateYAML(t, `{apiVersion: %s, kind: LocalQueue, metadata: {name: %s, namespace: %s}, spec: {clusterQueue: %s}}`, kueueVersion, name, ns, name)
	cluster.Eventually(t, "ClusterQueue "+name+" to be active", func() error {
		var cq unstructured.Unstructured
		cq.SetAPIVersion(kueueVersion)
		cq.SetKind("ClusterQueue")
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: name}, &cq); err != nil {
			return err
		}
		var status struct{ Conditions []metav1.Condition }
		if err := framework.FromUnstructured(cq.Object["status"], &status); err != nil {
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
	if err := cluster.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string]*workload{}
	for _, u := range list.Items {
		var w workload
		if err := framework.FromUnstructured(u.Object, &w); err != nil {
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
	cluster.Eventually(t, "the Workload of "+tj.Name, func() error {
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

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

// Package e2emultikueue runs TrainJobs through Kueue's MultiKueue, the
// version pinned in hack/tools/kueue, on the local clusters `make dev
// MULTIKUEUE=1` uses: a manager cluster where TrainJobs are queued and two
// worker clusters where MultiKueue runs their copies, each a local cluster
// of its own (etcd, kube-apiserver, the real Job controller and scheduler,
// kwok nodes) with Kueue and the manager. It brings them up and always
// tears them down. make test-e2e-multikueue builds Kueue first.
package e2emultikueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
	"github.com/trainjob-operator/trainjob-operator/test/framework"
)

const (
	// timeout bounds a wait for something the clusters do in seconds.
	timeout = 90 * time.Second
	// interval is how often a wait polls.
	interval = 200 * time.Millisecond
	// runFor is the annotation that sets how long a simulated Pod runs.
	runFor = "pod-complete.stage.kwok.x-k8s.io/delay"
	// workerLostTimeout is MultiKueue's: how long it waits for a worker it
	// lost before it dispatches what ran there again.
	workerLostTimeout = 30 * time.Second
	// kueueVersion is the API version of Kueue's objects the tests use.
	kueueVersion = "kueue.x-k8s.io/v1beta2"
	// queueName is the LocalQueue the tests' TrainJobs name, in their
	// namespace on every cluster: on the manager cluster of the
	// ClusterQueue multikueue (config/samples/multikueue/manager), on the
	// workers of their ClusterQueue worker.
	queueName = "multikueue"
)

var (
	// manager is the manager cluster; workers are the worker clusters by
	// name (dev.MultiKueueWorkers).
	manager *framework.Cluster
	workers = map[string]*framework.Cluster{}
	// devOpts brought them up.
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
		Root:              repoRoot,
		WorkDir:           filepath.Join(repoRoot, ".dev-e2e-multikueue"),
		Name:              "trainjob-e2e-mk",
		Nodes:             4,
		Out:               os.Stderr,
		MultiKueue:        true,
		WorkerLostTimeout: workerLostTimeout,
	}
	return dev.RunTests(m, devOpts, func(cl client.WithWatch) {
		manager = setUp(devOpts, framework.DevCluster(devOpts, cl))
		for _, name := range dev.MultiKueueWorkers {
			w, err := framework.OpenDevCluster(devOpts.Worker(name))
			if err != nil {
				panic(fmt.Sprintf("worker cluster %s: %v", name, err))
			}
			workers[name] = setUp(devOpts.Worker(name), w)
		}
	})
}

// setUp gives a cluster of the suite its waits and what a failed test
// shows of it.
func setUp(o dev.Options, c *framework.Cluster) *framework.Cluster {
	c.Timeout, c.Interval = timeout, interval
	c.Dump = &framework.Dump{
		Listed:  []string{"trainjobs", "workloads", "jobs", "pods"},
		Printed: []string{"trainjobs", "workloads"},
		Logs:    []framework.Log{{Name: o.Name + " manager", Path: o.ManagerLog()}, {Name: o.Name + " Kueue", Path: o.KueueLog()}},
	}
	return c
}

// progress logs a step of a test as it happens (go test -v).
func progress(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("%s "+format, append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// newNamespace creates a namespace of the same name on every cluster, with
// the LocalQueue queueName in it; when the test ends it logs what each
// cluster holds there if the test failed, and deletes them.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-mk-"}}
	manager.Create(t, ns)
	clusters := map[string]*framework.Cluster{"manager": manager}
	for name, w := range workers {
		w.Create(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}})
		clusters[name] = w
	}
	t.Cleanup(func() {
		for name, c := range clusters {
			if t.Failed() {
				t.Logf("===== %s cluster", name)
				c.DumpNamespace(t, ns.Name)
			}
			_ = c.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}})
		}
	})
	localQueue(t, manager, ns.Name, queueName, "multikueue")
	for _, w := range workers {
		localQueue(t, w, ns.Name, queueName, "worker")
	}
	return ns.Name
}

// localQueue creates the LocalQueue name of ClusterQueue cq in ns on c.
func localQueue(t *testing.T, c *framework.Cluster, ns, name, cq string) {
	t.Helper()
	c.CreateYAML(t, `{apiVersion: %s, kind: LocalQueue, metadata: {name: %s, namespace: %s}, spec: {clusterQueue: %s}}`, kueueVersion, name, ns, cq)
}

// trainJob is a TrainJob of nodes nodes of one CPU each on Kubeflow's
// torch-distributed runtime, queued in queue, whose Pods run for run.
func trainJob(ns, name, queue string, nodes int32, run time.Duration) *trainer.TrainJob {
	return utiltesting.MakeTrainJob(name, ns).Label(trainer.KueueQueueNameLabel, queue).Annotation(runFor, run.String()).
		NumNodes(nodes).Resources(corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi"),
	}}).Obj()
}

// workload is what the tests read of the Workload Kueue keeps for a
// TrainJob on the manager cluster.
type workload struct {
	metav1.ObjectMeta `json:"metadata"`
	Status            struct {
		ClusterName string             `json:"clusterName"`
		Conditions  []metav1.Condition `json:"conditions"`
	} `json:"status"`
}

// workloadOf returns the Workload of the TrainJob ns/name on c, or nil if
// there is none.
func workloadOf(c *framework.Cluster, ns, name string) (*workload, error) {
	var list unstructured.UnstructuredList
	list.SetAPIVersion(kueueVersion)
	list.SetKind("WorkloadList")
	if err := c.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, item := range list.Items {
		var wl workload
		if err := framework.FromUnstructured(item.Object, &wl); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(wl.OwnerReferences, func(r metav1.OwnerReference) bool {
			return r.Kind == trainer.TrainJobKind && r.Name == name
		}) {
			return &wl, nil
		}
	}
	return nil, nil
}

// waitDispatched waits until MultiKueue has admitted the TrainJob ns/name
// on a worker, and returns the worker's name.
func waitDispatched(t *testing.T, ns, name string) string {
	t.Helper()
	var cluster string
	manager.Eventually(t, "TrainJob "+name+" to be dispatched to a worker", func() error {
		wl, err := workloadOf(manager, ns, name)
		switch {
		case err != nil:
			return err
		case wl == nil:
			return fmt.Errorf("no Workload yet")
		case wl.Status.ClusterName == "":
			return fmt.Errorf("Workload %s not on a worker yet; conditions %+v", wl.Name, wl.Status.Conditions)
		}
		cluster = wl.Status.ClusterName
		return nil
	})
	return cluster
}

// otherWorker is the worker that is not name.
func otherWorker(name string) string {
	for _, w := range dev.MultiKueueWorkers {
		if w != name {
			return w
		}
	}
	return ""
}

// nothingLeft waits until no TrainJob, Job, Pod or Workload is left in ns
// on any cluster.
func nothingLeft(t *testing.T, ns string, within time.Duration) {
	t.Helper()
	clusters := map[string]*framework.Cluster{"manager": manager}
	for name, w := range workers {
		clusters[name] = w
	}
	for name, c := range clusters {
		c.EventuallyWithin(t, within, "nothing left in "+ns+" on "+name, func() error {
			out, err := c.Kubectl("get", "trainjobs,jobs,pods,workloads", "-n", ns, "-o", "name")
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			if out != "" {
				return fmt.Errorf("left: %s", out)
			}
			return nil
		})
	}
}

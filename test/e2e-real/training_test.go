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

package e2ereal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

// The TrainJobs here are written as a Kubeflow user writes them: one of
// Kubeflow's runtimes, unchanged, the training image and a command, and
// nothing that names the real node; the dev cluster sends the Pods of an
// image built on this machine there (dev.RealImagePrefix).

// runLong bounds a wait for a real training program: a few Pods importing
// PyTorch at once on two cores take tens of seconds.
const runLong = 4 * time.Minute

// wantOnRealNode fails the test unless every Pod the TrainJob has ran on
// the real node.
func wantOnRealNode(t *testing.T, ns, name string) {
	t.Helper()
	var pods corev1.PodList
	if err := cluster.Client.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{trainer.TrainJobNameLabel: name}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Errorf("%s has no Pod", name)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != dev.RealNodeName {
			t.Errorf("Pod %s ran on %q, want the real node %s", p.Name, p.Spec.NodeName, dev.RealNodeName)
		}
	}
}

// trainJob is what a test's TrainJob says beyond its name: Kubeflow's
// runtime (a ClusterTrainingRuntime unless RuntimeKind says otherwise),
// the training image running Command (JSON), and more fields of the
// trainer, of the spec and labels, as YAML flow-map entries.
type trainJob struct {
	Runtime, RuntimeKind, Command string
	Trainer, Spec, Labels         string
}

// createTrainJob creates the TrainJob name in ns, as a Kubeflow user
// writes one: nothing in it names the real node.
func createTrainJob(t *testing.T, ns, name string, j trainJob) {
	t.Helper()
	if j.RuntimeKind == "" {
		j.RuntimeKind = trainer.ClusterTrainingRuntimeKind
	}
	cluster.CreateYAML(t, `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob,
  metadata: {name: %s, namespace: %s, labels: {%s}},
  spec: {runtimeRef: {name: %s, kind: %s}, %s
    trainer: {image: %q, command: %s, %s}}}`,
		name, ns, j.Labels, j.Runtime, j.RuntimeKind, j.Spec, dev.TrainImage, j.Command, j.Trainer)
}

// complete waits up to runLong for the TrainJob to be Complete, and fails
// the test at once if it fails.
func complete(t *testing.T, ns, name string) *trainer.TrainJob {
	t.Helper()
	var tj *trainer.TrainJob
	cluster.EventuallyWithin(t, runLong, "TrainJob "+name+" to complete", func() (err error) {
		if tj, err = cluster.GetTrainJob(ns, name); err != nil {
			return err
		}
		for _, c := range tj.Status.Conditions {
			if c.Type == trainer.TrainJobFailed && c.Status == metav1.ConditionTrue {
				t.Fatalf("TrainJob %s failed: %s: %s", name, c.Reason, c.Message)
			}
			if c.Type == trainer.TrainJobComplete && c.Status == metav1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", tj.Status.Conditions)
	})
	return tj
}

// TestTorchAllReduce runs torchrun on Kubeflow's torch-distributed
// runtime, 2 nodes x 2 processes: torchrun finds its master through the
// PET_* environment (rank 0's Pod by its name under the TrainJob's
// headless Service), the 4 processes join a gloo process group and
// all-reduce, and each checks the sum.
func TestTorchAllReduce(t *testing.T) {
	ns := newNamespace(t)
	const name = "torch"
	start := time.Now()
	createTrainJob(t, ns, name, trainJob{Runtime: "torch-distributed", Command: scriptCommand(t, "allreduce.py", "torchrun /tmp/allreduce.py"),
		Trainer: "numNodes: 2, numProcPerNode: 2"})
	cluster.WaitPodsRunning(t, ns, name, 2)
	progress(t, "2 Pods running after %s", time.Since(start).Round(time.Millisecond))
	tj := complete(t, ns, name)
	progress(t, "Complete after %s", time.Since(start).Round(time.Millisecond))
	wantOnRealNode(t, ns, name)
	logs := wantLogs(t, ns, name, "sum 10 = 10 over 2 hosts: OK", "sum 10 = 10 over 2 hosts: OK",
		"sum 10 = 10 over 2 hosts: OK", "sum 10 = 10 over 2 hosts: OK")
	for rank := range 4 {
		if !strings.Contains(logs, fmt.Sprintf("allreduce: rank %d of 4", rank)) {
			t.Errorf("no process says it is rank %d of 4:\n%s", rank, logs)
		}
	}
	if !strings.Contains(logs, "master "+name+"-node-0-0."+name+":29500") {
		t.Errorf("the processes did not find their master by rank 0's name:\n%s", logs)
	}
	if tj.Status.StartTime == nil || tj.Status.CompletionTime == nil {
		t.Errorf("startTime %v, completionTime %v: want both", tj.Status.StartTime, tj.Status.CompletionTime)
	}
}

// TestTorchProcsFromResources leaves numProcPerNode to the runtime (auto):
// a trainer asking for 1.5 CPUs gets 2 processes per node, as under
// Kubeflow. One node: the real node has 2 CPUs in all.
func TestTorchProcsFromResources(t *testing.T) {
	ns := newNamespace(t)
	const name = "torch-auto"
	createTrainJob(t, ns, name, trainJob{Runtime: "torch-distributed", Command: scriptCommand(t, "allreduce.py", "torchrun /tmp/allreduce.py"),
		Trainer: "numNodes: 1, resourcesPerNode: {requests: {cpu: 1500m}}"})
	complete(t, ns, name)
	wantOnRealNode(t, ns, name)
	wantLogs(t, ns, name, "allreduce: rank 0 of 2 (local 0)", "allreduce: rank 1 of 2 (local 1)",
		"sum 3 = 3 over 1 hosts: OK", "sum 3 = 3 over 1 hosts: OK")
}

// TestMPI runs Kubeflow's deepspeed-distributed runtime (OpenMPI, the
// launcher a node itself) with 3 nodes: the launcher's mpirun logs into
// the 2 other nodes over SSH, as the user mpiuser, with the key this
// controller made and the hostfile it wrote; every rank reports its host
// to rank 0, which checks that they span 3 hosts. As under Kubeflow, a
// TrainJob's image is its launcher's, and the nodes run the runtime's: the
// runtime is Kubeflow's with the training image in place of its own, as a
// namespaced TrainingRuntime.
func TestMPI(t *testing.T) {
	ns := newNamespace(t)
	const name = "mpi"
	cluster.Create(t, withImage(t, "deepspeed-distributed", ns, dev.TrainImage))
	createTrainJob(t, ns, name, trainJob{Runtime: "deepspeed-distributed", RuntimeKind: trainer.TrainingRuntimeKind,
		Command: jsonString(t, []string{"bash", "-c", "mpirun " + inlinePython(t, "mpi_hosts.py")}),
		Trainer: `numNodes: 3, env: [{name: EXPECT_HOSTS, value: "3"}]`})
	complete(t, ns, name)
	wantOnRealNode(t, ns, name)
	logs := trainctl(t, ns, "logs", name, "--step", "launcher")
	for _, want := range []string{"mpi: 3 ranks on 3 hosts, sum 6: OK", name + "-launcher-0-0", name + "-node-0-0", name + "-node-0-1"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the launcher's log lacks %q:\n%s", want, logs)
		}
	}
}

// TestXGBoost runs Kubeflow's xgboost-distributed runtime with 2 nodes:
// node 0 runs the tracker at DMLC_TRACKER_URI:DMLC_TRACKER_PORT, both
// train one model on their shards of a generated data set, and each checks
// it fits and is the other's.
func TestXGBoost(t *testing.T) {
	ns := newNamespace(t)
	const name = "xgboost"
	createTrainJob(t, ns, name, trainJob{Runtime: "xgboost-distributed", Command: scriptCommand(t, "xgboost_train.py", "python3 /tmp/xgboost_train.py"),
		Trainer: "numNodes: 2"})
	complete(t, ns, name)
	wantOnRealNode(t, ns, name)
	wantLogs(t, ns, name, "xgboost: worker 0 of 2", "xgboost: worker 1 of 2", "same as the others: True", "same as the others: True",
		"xgboost: OK", "xgboost: OK")
}

// TestJAX runs Kubeflow's jax-distributed runtime with 3 nodes and a
// program that does what jax.distributed.initialize() does with the
// JAX_* environment (JAX is not packaged): process 0 listens at the
// coordinator's address, the others resolve its name and connect.
func TestJAX(t *testing.T) {
	ns := newNamespace(t)
	const name = "jax"
	createTrainJob(t, ns, name, trainJob{Runtime: "jax-distributed", Command: scriptCommand(t, "jax_coordinator.py", "python3 /tmp/jax_coordinator.py"),
		Trainer: "numNodes: 3"})
	complete(t, ns, name)
	wantOnRealNode(t, ns, name)
	coordinator := fmt.Sprintf("coordinator %s-node-0-0.%s:29500", name, name)
	wantLogs(t, ns, name, coordinator, coordinator, coordinator, "jax: coordinator heard processes [1, 2]",
		"jax: connected to the coordinator", "jax: connected to the coordinator", "sum of process ids 3: OK", "sum of process ids 3: OK", "sum of process ids 3: OK")
}

// withImage returns the shipped runtime config/runtimes/<name>.yaml as a
// TrainingRuntime of the same name in ns, each of its containers running
// image.
func withImage(t *testing.T, name, ns, image string) *trainer.TrainingRuntime {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(devOpts.Root, "config", "runtimes", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var shipped trainer.ClusterTrainingRuntime
	if err := yaml.UnmarshalStrict(data, &shipped); err != nil {
		t.Fatal(err)
	}
	rt := &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: shipped.Labels},
		Spec:       *shipped.Spec.DeepCopy(),
	}
	for i := range rt.Spec.Template.Spec.ReplicatedJobs {
		pod := &rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec
		for j := range pod.Containers {
			pod.Containers[j].Image = image
		}
	}
	return rt
}

// TestRealSample runs the real sample of make dev REAL=1
// (config/samples/real) as it is: it trains to Complete, rank 0 reports
// 100 % to the status server, and every process prints its final loss.
func TestRealSample(t *testing.T) {
	ns := newNamespace(t)
	const name = "torch-real"
	cluster.MustKubectl(t, "apply", "-n", ns, "-f", filepath.Join(devOpts.Root, "config", "samples", "real"))
	tj := complete(t, ns, name)
	if s := tj.Status.TrainerStatus; s == nil || s.ProgressPercentage == nil || *s.ProgressPercentage != 100 {
		t.Errorf("trainerStatus = %+v, want rank 0's last report, 100%%", s)
	}
	wantOnRealNode(t, ns, name)
	wantLogs(t, ns, name, "step 60/60", "final loss", "final loss", "final loss", "final loss")
}

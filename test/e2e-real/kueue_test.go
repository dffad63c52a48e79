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
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	"github.com/trainjob-operator/trainjob-operator/test/framework"
)

// kueueVersion is the API version of Kueue's objects.
const kueueVersion = "kueue.x-k8s.io/v1beta2"

// TestKueueQueuesRealJobs queues two real torch TrainJobs in Kueue, on a
// ClusterQueue with room for one (1 CPU; each asks for 2 x 500m) whose
// flavor is the real node: the first is admitted and runs while the
// second waits suspended; when the first completes, the second is
// admitted and completes. Each is created suspended by Kueue, as under
// Kubeflow, and nothing else starts them.
func TestKueueQueuesRealJobs(t *testing.T) {
	ns := newNamespace(t)
	flavor := ns + "-real"
	cluster.CreateYAML(t, `{apiVersion: %s, kind: ResourceFlavor, metadata: {name: %s}, spec: {nodeLabels: {%q: %q}, tolerations: [{key: %q, operator: Equal, value: %q, effect: %s}]}}`,
		kueueVersion, flavor, dev.RealNodeLabel, dev.RealNodeValue, dev.RealNodeTaint.Key, dev.RealNodeTaint.Value, dev.RealNodeTaint.Effect)
	cluster.CreateYAML(t, `
apiVersion: %s
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: %s, resources: [{name: cpu, nominalQuota: "1"}]}]
`, kueueVersion, ns, flavor)
	cluster.CreateYAML(t, `{apiVersion: %s, kind: LocalQueue, metadata: {name: real, namespace: %s}, spec: {clusterQueue: %s}}`, kueueVersion, ns, ns)

	for _, name := range []string{"first", "second"} {
		createTrainJob(t, ns, name, trainJob{Runtime: "torch-distributed", Command: scriptCommand(t, "allreduce.py", "torchrun /tmp/allreduce.py"),
			Trainer: "numNodes: 2, resourcesPerNode: {requests: {cpu: 500m}}", Labels: trainer.KueueQueueNameLabel + ": real"})
		tj, err := cluster.GetTrainJob(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if !ptr.Deref(tj.Spec.Suspend, false) {
			t.Errorf("%s was created running; Kueue suspends a queued TrainJob as it is created", name)
		}
	}
	cluster.WaitPodsRunning(t, ns, "first", 2)
	if second := admittedTo(t, ns, "second"); second != "" {
		t.Errorf("second admitted to %s while first runs on the only quota", second)
	}
	if tj, _ := cluster.GetTrainJob(ns, "second"); !ptr.Deref(tj.Spec.Suspend, false) || len(cluster.ActivePods(t, ns, "second")) > 0 {
		t.Errorf("second runs while first does: suspend %v", tj.Spec.Suspend)
	}
	progress(t, "first runs; second waits in the queue")
	first := complete(t, ns, "first")
	second := complete(t, ns, "second")
	if !second.Status.StartTime.After(first.Status.CompletionTime.Time) && !second.Status.StartTime.Equal(first.Status.CompletionTime) {
		t.Errorf("second started at %s, before first completed at %s", second.Status.StartTime, first.Status.CompletionTime)
	}
	for _, name := range []string{"first", "second"} {
		if cq := admittedTo(t, ns, name); cq != ns {
			t.Errorf("%s's Workload is admitted to %q, want %s", name, cq, ns)
		}
		wantOnRealNode(t, ns, name)
		wantLogs(t, ns, name, "sum 3 = 3 over 2 hosts: OK", "sum 3 = 3 over 2 hosts: OK")
	}
}

// admittedTo returns the ClusterQueue the TrainJob's Workload is admitted
// to, or "" if it has no admitted Workload.
func admittedTo(t *testing.T, ns, name string) string {
	t.Helper()
	var list unstructured.UnstructuredList
	list.SetAPIVersion(kueueVersion)
	list.SetKind("WorkloadList")
	if err := cluster.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, w := range list.Items {
		owned := false
		for _, ref := range w.GetOwnerReferences() {
			owned = owned || ref.Kind == "TrainJob" && ref.Name == name
		}
		if !owned {
			continue
		}
		var status struct {
			Admission  *struct{ ClusterQueue string } `json:"admission"`
			Conditions []metav1.Condition             `json:"conditions"`
		}
		if err := framework.FromUnstructured(w.Object["status"], &status); err != nil {
			t.Fatal(err)
		}
		if status.Admission != nil && meta.IsStatusConditionTrue(status.Conditions, "Admitted") {
			return status.Admission.ClusterQueue
		}
	}
	return ""
}

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

package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// A TrainJob MultiKueue dispatched shows the state Kueue mirrors from its
// copy, and the worker cluster its Workload was admitted on; one not yet
// dispatched and one run here show their state alone.
func TestStateShowsTheWorkerCluster(t *testing.T) {
	done := cond(trainer.TrainJobComplete, "True", trainer.TrainJobJobsCompletedReason, now.Add(-time.Minute))
	dispatched := utiltesting.MakeTrainJob("dispatched", "ns").UID("uid-d").ManagedBy(lifecycle.MultiKueue).Condition(done).Obj()
	queued := utiltesting.MakeTrainJob("queued", "ns").UID("uid-q").ManagedBy(lifecycle.MultiKueue).Suspend(true).Obj()
	local := utiltesting.MakeTrainJob("local", "ns").UID("uid-l").Condition(done).Obj()
	workload := func(name string, owner *trainer.TrainJob, cluster string) *unstructured.Unstructured {
		wl := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
			"metadata": map[string]any{"name": name, "namespace": "ns", "ownerReferences": []any{map[string]any{
				"apiVersion": trainer.GroupVersion.String(), "kind": trainer.TrainJobKind, "name": owner.Name, "uid": string(owner.UID), "controller": true,
			}}},
		}}
		if cluster != "" {
			wl.Object["status"] = map[string]any{"clusterName": cluster}
		}
		return wl
	}
	cl := utiltesting.NewClientBuilder(nil, dispatched, queued, local,
		workload("trainjob-dispatched-1", dispatched, "worker2"), workload("trainjob-queued-1", queued, "")).Build()

	tjs, _, err := listTrainJobs(t.Context(), cl, scope{namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printTable(&out, tjs, nil, workerClusters(t.Context(), cl, "ns", tjs), false, now); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"dispatched": "Complete on worker2", "queued": "Suspending", "local": "Complete"} {
		var row string
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, name+" ") {
				row = line
			}
		}
		if fields := strings.Fields(row); len(fields) < 2 || !strings.HasPrefix(strings.Join(fields[1:], " "), want+" ") {
			t.Errorf("%s: row %q, want state %q", name, row, want)
		}
	}
}

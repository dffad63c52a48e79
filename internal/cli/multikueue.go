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
	"context"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

// workloadGVK is Kueue's Workload, which says on which worker cluster
// MultiKueue runs a TrainJob (status.clusterName).
var workloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadList"}

// workerClusters maps the TrainJobs of tjs that MultiKueue dispatched, by
// UID, to the worker cluster each runs on: the status.clusterName of the
// Workload Kueue keeps for it. Those not (yet) on a worker are left out;
// without Kueue, or without the right to read its Workloads, the map is
// empty: the cluster is something more to show, never a reason to fail.
func workerClusters(ctx context.Context, cl client.Client, namespace string, tjs []trainer.TrainJob) map[types.UID]string {
	if !slices.ContainsFunc(tjs, func(tj trainer.TrainJob) bool { return lifecycle.DispatchedByMultiKueue(&tj) }) {
		return nil
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(workloadGVK)
	if err := cl.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil
	}
	clusters := map[types.UID]string{}
	for _, wl := range list.Items {
		owner := metav1.GetControllerOf(&wl)
		if owner == nil || owner.Kind != trainer.TrainJobKind {
			continue
		}
		if name, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName"); name != "" {
			clusters[owner.UID] = name
		}
	}
	return clusters
}

// stateOn is a TrainJob's state (state), and for one MultiKueue dispatched,
// the worker cluster it runs on, if known.
func stateOn(tj *trainer.TrainJob, clusters map[types.UID]string) string {
	if c := clusters[tj.UID]; c != "" {
		return state(tj) + " on " + c
	}
	return state(tj)
}

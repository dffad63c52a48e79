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

package testing

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The states the Kubeflow SDK reports for a TrainJob
// (TrainerClient().get_job(name).status, and what wait_for_job_status
// waits for).
const (
	SDKCreated  = "Created"
	SDKRunning  = "Running"
	SDKComplete = "Complete"
	SDKFailed   = "Failed"
)

// KubeflowSDKStatus is the state the Kubeflow SDK's Kubernetes backend reads
// from a TrainJob and its Pods (those labelled with the TrainJob's name as
// jobset.sigs.k8s.io/jobset-name), by its rule: with any condition at all,
// Complete or Failed when one of those is True and Created otherwise; with
// none, Running once as many Pods of the node (or launcher) replicated Job
// run or succeeded as the TrainJob has nodes (spec.trainer.numNodes, or
// runtimeNodes, the runtime's mlPolicy.numNodes), and Created before.
func KubeflowSDKStatus(tj *trainer.TrainJob, runtimeNodes int32, pods []corev1.Pod) string {
	if len(tj.Status.Conditions) > 0 {
		state := SDKCreated
		for _, c := range tj.Status.Conditions {
			if (c.Type == trainer.TrainJobComplete || c.Type == trainer.TrainJobFailed) && c.Status == metav1.ConditionTrue {
				state = c.Type
			}
		}
		return state
	}
	nodes := runtimeNodes
	if tj.Spec.Trainer != nil && tj.Spec.Trainer.NumNodes != nil && *tj.Spec.Trainer.NumNodes != 0 {
		nodes = *tj.Spec.Trainer.NumNodes
	}
	var running int32
	for _, p := range pods {
		if p.Labels[trainer.JobSetNameLabel] != tj.Name || !slices.Contains([]string{"node", "launcher"}, p.Labels[trainer.JobSetReplicatedJobNameLabel]) {
			continue
		}
		if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded {
			running++
		}
	}
	if running == nodes {
		return SDKRunning
	}
	return SDKCreated
}

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
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

func TestKubeflowSDKStatus(t *testing.T) {
	pod := func(rjob string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{trainer.JobSetNameLabel: "tj", trainer.JobSetReplicatedJobNameLabel: rjob}},
			Status:     corev1.PodStatus{Phase: phase},
		}
	}
	cond := func(t, status, reason string) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason}
	}
	running2 := []corev1.Pod{pod("node", corev1.PodRunning), pod("node", corev1.PodSucceeded)}
	cases := map[string]struct {
		trainJob *trainer.TrainJob
		pods     []corev1.Pod
		want     string
	}{
		"no Pod yet": {
			trainJob: MakeTrainJob("tj", "ns").NumNodes(2).Obj(),
			want:     SDKCreated,
		},
		"one of two nodes running": {
			trainJob: MakeTrainJob("tj", "ns").NumNodes(2).Obj(),
			pods:     []corev1.Pod{pod("node", corev1.PodRunning), pod("node", corev1.PodPending), pod("dataset-initializer", corev1.PodSucceeded)},
			want:     SDKCreated,
		},
		"every node running or succeeded, no condition": {
			trainJob: MakeTrainJob("tj", "ns").NumNodes(2).Obj(),
			pods:     running2,
			want:     SDKRunning,
		},
		"the runtime's numNodes when the TrainJob sets none": {
			trainJob: MakeTrainJob("tj", "ns").Obj(),
			pods:     running2[:1],
			want:     SDKRunning,
		},
		"Pods of another TrainJob do not count": {
			trainJob: MakeTrainJob("other", "ns").NumNodes(2).Obj(),
			pods:     running2,
			want:     SDKCreated,
		},
		"any condition that is not a finish reads Created": {
			trainJob: MakeTrainJob("tj", "ns").NumNodes(2).Condition(cond(trainer.TrainJobSuspended, "False", trainer.TrainJobResumedReason)).Obj(),
			pods:     running2,
			want:     SDKCreated,
		},
		"Complete": {
			trainJob: MakeTrainJob("tj", "ns").Condition(cond(trainer.TrainJobComplete, "True", trainer.TrainJobJobsCompletedReason)).Obj(),
			want:     SDKComplete,
		},
		"Failed": {
			trainJob: MakeTrainJob("tj", "ns").Condition(cond(trainer.TrainJobFailed, "True", trainer.TrainJobDeadlineExceededReason)).Obj(),
			want:     SDKFailed,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := KubeflowSDKStatus(tc.trainJob, 1, tc.pods); got != tc.want {
				t.Errorf("KubeflowSDKStatus = %s, want %s", got, tc.want)
			}
		})
	}
}

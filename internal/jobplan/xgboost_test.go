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

package jobplan

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestXGBoostEnvironment(t *testing.T) {
	rt := runtimeOf(t, frameworkRuntime("xgboost-distributed", "xgboost"))
	gpus := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}}
	cases := map[string]struct {
		trainJob *utiltesting.TrainJobWrapper
		want     map[string]string
		err      string
	}{
		"one worker per node without GPUs": {
			trainJob: utiltesting.MakeTrainJob("x", "ns").NumNodes(3),
			want:     map[string]string{"DMLC_TRACKER_URI": "x-node-0-0.x", "DMLC_TRACKER_PORT": "29500", "DMLC_TASK_ID": "valueFrom", "DMLC_NUM_WORKER": "3"},
		},
		"one worker per GPU": {
			trainJob: utiltesting.MakeTrainJob("x", "ns").NumNodes(2).Resources(gpus),
			want:     map[string]string{"DMLC_TRACKER_URI": "x-node-0-0.x", "DMLC_TRACKER_PORT": "29500", "DMLC_TASK_ID": "valueFrom", "DMLC_NUM_WORKER": "8"},
		},
		"the TrainJob may not set them": {
			trainJob: utiltesting.MakeTrainJob("x", "ns").Env("DMLC_NUM_WORKER", "5"),
			err:      "spec.trainer.env[0].name: Forbidden: DMLC_NUM_WORKER is set by the xgboost runtime ClusterTrainingRuntime/xgboost-distributed; it cannot be set by the TrainJob",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan, err := Build(tc.trainJob.Obj(), rt)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("Build error = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if diff := cmp.Diff(tc.want, envOf(trainerContainer(plan.Jobs[0]))); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// initializerRuntime is the shape of Kubeflow's torchtune runtimes: dataset
// and model initializers sharing the volume initializer, then the trainer.
func initializerRuntime() *trainer.TrainingRuntimeSpec {
	mount := []corev1.VolumeMount{{Name: trainer.InitializerVolume, MountPath: "/workspace"}}
	dataset := utiltesting.MakeReplicatedJob(trainer.DatasetInitializerStep).Label(trainer.AncestorStepLabel, trainer.DatasetInitializerStep).Containers(corev1.Container{
		Name: trainer.DatasetInitializerStep, Image: "dataset-initializer", VolumeMounts: mount,
		Env: []corev1.EnvVar{{Name: trainer.StorageURIEnv, Value: "hf://tatsu-lab/alpaca"}, {Name: "KEEP", Value: "1"}},
	}).Obj()
	model := utiltesting.MakeReplicatedJob(trainer.ModelInitializerStep).Label(trainer.AncestorStepLabel, trainer.ModelInitializerStep).Containers(corev1.Container{
		Name: trainer.ModelInitializerStep, Image: "model-initializer",
	}).Obj()
	node := utiltesting.MakeReplicatedJob("node").Trainer().Obj()
	node.DependsOn = []trainer.DependsOn{{Name: dataset.Name, Status: trainer.DependsOnComplete}, {Name: model.Name, Status: trainer.DependsOnComplete}}
	return utiltesting.MakeRuntimeSpec().Torch().ReplicatedJobs(dataset, model, node).Obj()
}

func TestInitializers(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", "ns").Obj()
	tj.Spec.Initializer = &trainer.Initializer{
		Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("hf://org/data"), Env: []corev1.EnvVar{{Name: "SPLIT", Value: "train"}}, SecretRef: &corev1.LocalObjectReference{Name: "hf"}},
		Model:   &trainer.ModelInitializer{StorageUri: ptr.To("hf://org/model")},
	}
	plan, err := Build(tj, Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torchtune", Spec: initializerRuntime()})
	if err != nil {
		t.Fatal(err)
	}
	containers := map[string]corev1.Container{}
	for _, job := range plan.Jobs {
		for _, c := range job.Spec.Template.Spec.Containers {
			containers[c.Name] = c
		}
	}
	ds := containers[trainer.DatasetInitializerStep]
	if diff := cmp.Diff([]corev1.EnvVar{{Name: trainer.StorageURIEnv, Value: "hf://org/data"}, {Name: "KEEP", Value: "1"}, {Name: "SPLIT", Value: "train"}}, ds.Env); diff != "" {
		t.Errorf("dataset-initializer env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}}}}, ds.EnvFrom); diff != "" {
		t.Errorf("dataset-initializer envFrom (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.EnvVar{{Name: trainer.StorageURIEnv, Value: "hf://org/model"}}, containers[trainer.ModelInitializerStep].Env); diff != "" {
		t.Errorf("model-initializer env (-want +got):\n%s", diff)
	}
	// The model initializer shares no volume: a warning, not a refusal.
	if len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], `spec.initializer.model: the model-initializer container of runtime ClusterTrainingRuntime/torchtune mounts no volume named "initializer"`) {
		t.Errorf("warnings %q", plan.Warnings)
	}
}

func TestInitializersRefused(t *testing.T) {
	cases := map[string]struct {
		spec func() *trainer.TrainingRuntimeSpec
		want string
	}{
		"no dataset initializer step": {
			spec: func() *trainer.TrainingRuntimeSpec { return utiltesting.MakeRuntimeSpec().Torch().Obj() },
			want: `spec.initializer.dataset: Invalid value: "{...}": runtime ClusterTrainingRuntime/torchtune has no dataset-initializer step`,
		},
		"two replicas of the dataset initializer": {
			spec: func() *trainer.TrainingRuntimeSpec {
				s := initializerRuntime()
				s.Template.Spec.ReplicatedJobs[0].Replicas = 2
				return s
			},
			want: "replicatedJobs[0].replicas: Invalid value: 2: the dataset-initializer step must have exactly 1 replica",
		},
		"no container of the step's name": {
			spec: func() *trainer.TrainingRuntimeSpec {
				s := initializerRuntime()
				s.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Name = "fetch"
				return s
			},
			want: `the dataset-initializer step of runtime ClusterTrainingRuntime/torchtune has no container named "dataset-initializer"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := utiltesting.MakeTrainJob("tj", "ns").Obj()
			tj.Spec.Initializer = &trainer.Initializer{Dataset: &trainer.DatasetInitializer{StorageUri: ptr.To("hf://org/data")}}
			_, err := Build(tj, Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torchtune", Spec: tc.spec()})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

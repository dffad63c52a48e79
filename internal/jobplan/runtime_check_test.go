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
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestCheckRuntime(t *testing.T) {
	worker := utiltesting.MakeReplicatedJob("worker").Completions(2).Obj()
	launcher := utiltesting.MakeReplicatedJob("launcher").Trainer().Containers(corev1.Container{Name: "node", Image: "mpi"}).Obj()
	cases := map[string]struct {
		spec *trainer.TrainingRuntimeSpec
		// wantErrs are the refused fields and their error types.
		wantErrs []string
	}{
		"torch": {
			spec: utiltesting.MakeRuntimeSpec().Torch().Obj(),
		},
		"errors of the runtime point under its spec path": {
			spec:     utiltesting.MakeRuntimeSpec().Torch().ReplicatedJobs(utiltesting.MakeReplicatedJob("node").Trainer().Replicas(2).Obj()).Obj(),
			wantErrs: []string{"spec.template.spec.replicatedJobs[0].replicas: FieldValueInvalid"},
		},
		"coordinator Pod beyond the Pods of a step that is not the trainer": {
			spec: func() *trainer.TrainingRuntimeSpec {
				s := utiltesting.MakeRuntimeSpec().ReplicatedJob(worker).Obj()
				s.Template.Spec.Coordinator = &trainer.Coordinator{ReplicatedJob: "worker", PodIndex: 2}
				return s
			}(),
			wantErrs: []string{"spec.template.spec.coordinator.podIndex: FieldValueInvalid"},
		},
		"coordinator Pod beyond the runtime's numNodes: a TrainJob may ask for more": {
			spec: func() *trainer.TrainingRuntimeSpec {
				s := utiltesting.MakeRuntimeSpec().Torch().NumNodes(2).Obj()
				s.Template.Spec.Coordinator = &trainer.Coordinator{ReplicatedJob: "node", PodIndex: 5}
				return s
			}(),
		},
		"MPI launcher as a node, no workers, two nodes by default: a TrainJob may ask for one": {
			spec: func() *trainer.TrainingRuntimeSpec {
				s := utiltesting.MakeRuntimeSpec().ReplicatedJobs(launcher).NumNodes(2).Obj()
				s.MLPolicy.MPI = &trainer.MPIMLPolicySource{RunLauncherAsNode: ptr.To(true)}
				return s
			}(),
		},
		"MPI launcher without workers": {
			spec: func() *trainer.TrainingRuntimeSpec {
				s := utiltesting.MakeRuntimeSpec().ReplicatedJobs(launcher).NumNodes(2).Obj()
				s.MLPolicy.MPI = &trainer.MPIMLPolicySource{}
				return s
			}(),
			wantErrs: []string{"spec.template.spec.replicatedJobs: FieldValueRequired"},
		},
		"an error put on the TrainJob, which no TrainJob's name avoids, said of the runtime": {
			spec: func() *trainer.TrainingRuntimeSpec {
				long := strings.Repeat("d", 62)
				node := utiltesting.MakeReplicatedJob("node").Trainer().Containers(corev1.Container{
					Name: "node", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: long, MountPath: "/data"}},
				}).Obj()
				s := utiltesting.MakeRuntimeSpec().ReplicatedJobs(node).Obj()
				s.Template.Spec.VolumeClaimPolicies = []trainer.VolumeClaimPolicy{{Templates: []corev1.PersistentVolumeClaim{{}}}}
				s.Template.Spec.VolumeClaimPolicies[0].Templates[0].Name = long
				return s
			}(),
			wantErrs: []string{"spec: FieldValueInvalid"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := CheckRuntime(Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "rt", Spec: tc.spec, SpecPath: field.NewPath("spec")}, "")
			var got []string
			for _, e := range errs {
				got = append(got, e.Field+": "+string(e.Type))
			}
			if diff := cmp.Diff(tc.wantErrs, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s\n%v", diff, errs)
			}
		})
	}
}

// Without a spec path, errors name the runtime as a TrainJob's errors do.
func TestCheckRuntimeDefaultPath(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().Torch().ReplicatedJobs(utiltesting.MakeReplicatedJob("node").Trainer().Replicas(2).Obj()).Obj()
	errs := CheckRuntime(Runtime{Kind: trainer.TrainingRuntimeKind, Name: "rt", Spec: spec}, "ns")
	if len(errs) != 1 || errs[0].Field != "runtime[TrainingRuntime/rt].spec.template.spec.replicatedJobs[0].replicas" {
		t.Errorf("errors = %v, want one at runtime[TrainingRuntime/rt].spec.template.spec.replicatedJobs[0].replicas", errs)
	}
}

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
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The steps carry what they wait for, the plan its success policy, and
// every Job and Pod the coordinator's DNS name, as JobSet gives them.
func TestStagesSuccessAndCoordinator(t *testing.T) {
	workers := utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj()
	launcher := utiltesting.MakeReplicatedJob("launcher").Trainer().Obj()
	launcher.DependsOn = []trainer.DependsOn{{Name: "worker", Status: trainer.DependsOnReady}}
	spec := utiltesting.MakeRuntimeSpec().ReplicatedJobs(workers, launcher).Obj()
	spec.Template.Spec.SuccessPolicy = &trainer.SuccessPolicy{Operator: trainer.OperatorAll, TargetReplicatedJobs: []string{"launcher"}}
	spec.Template.Spec.Coordinator = &trainer.Coordinator{ReplicatedJob: "worker", JobIndex: 1}
	plan, err := Build(utiltesting.MakeTrainJob("mpi", "ns").Obj(), Runtime{Kind: trainer.TrainingRuntimeKind, Name: "rt", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Name: "worker", Replicas: 2},
		{Name: "launcher", Replicas: 1, Trainer: true, DependsOn: []trainer.DependsOn{{Name: "worker", Status: trainer.DependsOnReady}}},
	}
	if diff := cmp.Diff(want, plan.Steps); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(*spec.Template.Spec.SuccessPolicy, plan.Success); diff != "" {
		t.Errorf("success policy (-want +got):\n%s", diff)
	}
	for _, job := range plan.Jobs {
		for what, m := range map[string]map[string]string{
			"labels": job.Labels, "annotations": job.Annotations, "Pod labels": job.Spec.Template.Labels, "Pod annotations": job.Spec.Template.Annotations,
		} {
			if got := m[trainer.JobSetCoordinatorKey]; got != "mpi-worker-1-0.mpi" {
				t.Errorf("Job %s %s: coordinator %q, want mpi-worker-1-0.mpi", job.Name, what, got)
			}
		}
	}
}

func TestStartupInOrderAndDefaultSuccess(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().ReplicatedJobs(
		utiltesting.MakeReplicatedJob("a").Obj(), utiltesting.MakeReplicatedJob("b").Obj(), utiltesting.MakeReplicatedJob("node").Trainer().Obj(),
	).Obj()
	spec.Template.Spec.StartupPolicy = &trainer.StartupPolicy{StartupPolicyOrder: trainer.InOrder}
	plan, err := Build(utiltesting.MakeTrainJob("tj", "ns").Obj(), Runtime{Kind: trainer.TrainingRuntimeKind, Name: "rt", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]trainer.DependsOn
	for _, s := range plan.Steps {
		got = append(got, s.DependsOn)
	}
	want := [][]trainer.DependsOn{nil, {{Name: "a", Status: trainer.DependsOnReady}}, {{Name: "b", Status: trainer.DependsOnReady}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dependencies (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(trainer.SuccessPolicy{Operator: trainer.OperatorAll}, plan.Success); diff != "" {
		t.Errorf("default success policy (-want +got):\n%s", diff)
	}
}

// What the CRD cannot say about a runtime is refused when a TrainJob is
// built on it, naming the field.
func TestStagesRefused(t *testing.T) {
	cases := map[string]struct {
		change func(*trainer.TrainingRuntimeSpec)
		want   string
	}{
		"a dependency listed after": {
			change: func(s *trainer.TrainingRuntimeSpec) {
				s.Template.Spec.ReplicatedJobs[1].DependsOn = []trainer.DependsOn{{Name: "node", Status: trainer.DependsOnComplete}}
			},
			want: `runtime[TrainingRuntime/rt].spec.template.spec.replicatedJobs[1].dependsOn[0].name: Invalid value: "node": replicated Job "b" may only depend on replicated Jobs listed before it`,
		},
		"a failure message pattern that is not a regular expression": {
			change: func(s *trainer.TrainingRuntimeSpec) {
				s.Template.Spec.FailurePolicy = &trainer.FailurePolicy{Rules: []trainer.FailurePolicyRule{{Action: trainer.FailJobSet, OnJobFailureMessagePatterns: []string{"ok", "(oom"}}}}
			},
			want: `runtime[TrainingRuntime/rt].spec.template.spec.failurePolicy.rules[0].onJobFailureMessagePatterns[1]: Invalid value: "(oom": error parsing regexp`,
		},
		"a coordinator Pod the Job does not have": {
			change: func(s *trainer.TrainingRuntimeSpec) {
				s.Template.Spec.Coordinator = &trainer.Coordinator{ReplicatedJob: "node", PodIndex: 4}
			},
			want: `runtime[TrainingRuntime/rt].spec.template.spec.coordinator.podIndex: Invalid value: 4: the Jobs of replicated Job "node" have 3 Pod(s)`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := utiltesting.MakeRuntimeSpec().ReplicatedJobs(
				utiltesting.MakeReplicatedJob("a").Obj(), utiltesting.MakeReplicatedJob("b").Obj(), utiltesting.MakeReplicatedJob("node").Trainer().Obj(),
			).Obj()
			tc.change(spec)
			_, err := Build(utiltesting.MakeTrainJob("tj", "ns").NumNodes(3).Obj(), Runtime{Kind: trainer.TrainingRuntimeKind, Name: "rt", Spec: spec})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// The failure policy's rules are named as JobSet names them, and its
// restart strategy defaults to Recreate.
func TestFailurePolicyDefaults(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().Torch().Obj()
	spec.Template.Spec.FailurePolicy = &trainer.FailurePolicy{MaxRestarts: 2, Rules: []trainer.FailurePolicyRule{
		{Name: "oom", Action: trainer.FailJobSet}, {Action: trainer.RestartJobSetAndIgnoreMaxRestarts},
	}}
	plan, err := Build(utiltesting.MakeTrainJob("tj", "ns").Obj(), Runtime{Kind: trainer.TrainingRuntimeKind, Name: "rt", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	want := &trainer.FailurePolicy{MaxRestarts: 2, RestartStrategy: trainer.Recreate, Rules: []trainer.FailurePolicyRule{
		{Name: "oom", Action: trainer.FailJobSet}, {Name: "failurePolicyRule1", Action: trainer.RestartJobSetAndIgnoreMaxRestarts},
	}}
	if diff := cmp.Diff(want, plan.Failure); diff != "" {
		t.Errorf("failure policy (-want +got):\n%s", diff)
	}
	if spec.Template.Spec.FailurePolicy.Rules[1].Name != "" {
		t.Errorf("the runtime was changed")
	}
}

// A runtime's subdomain is the Pods' subdomain, the torch master's domain
// and the coordinator's; without DNS hostnames the Pods have none.
func TestNetworkSubdomain(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().Torch().Obj()
	spec.Template.Spec.Network = &trainer.Network{Subdomain: "ring"}
	spec.Template.Spec.Coordinator = &trainer.Coordinator{ReplicatedJob: "node"}
	tj := utiltesting.MakeTrainJob("tj", "ns").NumNodes(2).Command("torchrun", "train.py").Obj()
	plan, err := Build(tj, Runtime{Kind: trainer.TrainingRuntimeKind, Name: "rt", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	job := plan.Jobs[0]
	pod := job.Spec.Template.Spec
	var master string
	for _, e := range pod.Containers[0].Env {
		if e.Name == EnvMasterAddr {
			master = e.Value
		}
	}
	if pod.Subdomain != "ring" || master != "tj-node-0-0.ring" || job.Labels[trainer.JobSetCoordinatorKey] != "tj-node-0-0.ring" || plan.Service.Name != "ring" {
		t.Errorf("subdomain %q, %s %q, coordinator %q, Service %q; want ring throughout", pod.Subdomain, EnvMasterAddr, master, job.Labels[trainer.JobSetCoordinatorKey], plan.Service.Name)
	}
	spec.Template.Spec.Network = &trainer.Network{EnableDNSHostnames: ptr.To(false)}
	spec.Template.Spec.Coordinator = nil
	if plan, err = Build(tj, Runtime{Kind: trainer.TrainingRuntimeKind, Name: "rt", Spec: spec}); err != nil {
		t.Fatal(err)
	}
	if got := plan.Jobs[0].Spec.Template.Spec.Subdomain; got != "" || plan.Service != nil {
		t.Errorf("without DNS hostnames: subdomain %q, Service %v; want none", got, plan.Service)
	}
}

// Replicated Jobs in groups: each Job labelled with its group, the Jobs of
// the group and its index among them, as JobSet labels them.
func TestGroups(t *testing.T) {
	a := utiltesting.MakeReplicatedJob("a").Replicas(2).Obj()
	a.GroupName = ptr.To("prep")
	b := utiltesting.MakeReplicatedJob("b").Obj()
	c := utiltesting.MakeReplicatedJob("c").Replicas(3).Obj()
	c.GroupName = ptr.To("prep")
	spec := utiltesting.MakeRuntimeSpec().ReplicatedJobs(a, b, c).Obj()
	plan, err := Build(utiltesting.MakeTrainJob("tj", "ns").Obj(), Runtime{Kind: trainer.TrainingRuntimeKind, Name: "rt", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, job := range plan.Jobs {
		got[job.Name] = job.Labels[trainer.JobSetGroupNameLabel] + " " + job.Labels[trainer.JobSetGroupReplicasLabel] + " " +
			job.Labels[trainer.JobSetJobGroupIndexLabel] + " " + job.Spec.Template.Annotations[trainer.JobSetJobGroupIndexLabel]
	}
	want := map[string]string{
		"tj-a-0": "prep 5 0 0", "tj-a-1": "prep 5 1 1",
		"tj-b-0": "default 1 0 0",
		"tj-c-0": "prep 5 2 2", "tj-c-1": "prep 5 3 3", "tj-c-2": "prep 5 4 4",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("group name, replicas, index (label and annotation) (-want +got):\n%s", diff)
	}
}

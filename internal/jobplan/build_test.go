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
	"crypto/sha1"
	"encoding/hex"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func clusterRuntime(spec *utiltesting.RuntimeSpecWrapper) Runtime {
	return Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "torch-distributed", Spec: spec.Obj()}
}

func TestBuildTorchJob(t *testing.T) {
	tj := utiltesting.MakeTrainJob("mnist", "team-a").UID("uid-1").NumNodes(3).
		Command("torchrun", "train.py").
		Label("team", "vision").
		Annotation("pod-complete.stage.kwok.x-k8s.io/delay", "10s").
		Annotation("kubectl.kubernetes.io/last-applied-configuration", "{}").
		Obj()
	rt := clusterRuntime(utiltesting.MakeRuntimeSpec().Torch().NumNodes(1))

	plan, err := Build(tj, rt)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}

	owner := metav1.OwnerReference{
		APIVersion: "trainer.kubeflow.org/v1alpha1", Kind: "TrainJob", Name: "mnist", UID: "uid-1",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
	ours := map[string]string{
		trainer.TrainJobNameLabel:      "mnist",
		trainer.ReplicatedJobNameLabel: "node",
		trainer.ReplicaIndexLabel:      "0",
	}
	jobSet := map[string]string{
		"jobset.sigs.k8s.io/jobset-name":            "mnist",
		"jobset.sigs.k8s.io/jobset-uid":             "uid-1",
		"jobset.sigs.k8s.io/replicatedjob-name":     "node",
		"jobset.sigs.k8s.io/restart-attempt":        "0",
		"jobset.sigs.k8s.io/replicatedjob-replicas": "1",
		"jobset.sigs.k8s.io/global-replicas":        "1",
		"jobset.sigs.k8s.io/job-index":              "0",
		// printf team-a/mnist-node-0 | sha1sum
		"jobset.sigs.k8s.io/job-key":          "249a20573743e52c08a0b0acac490772a1e0d3b6",
		"jobset.sigs.k8s.io/job-global-index": "0",
		"jobset.sigs.k8s.io/group-name":       "default",
		"jobset.sigs.k8s.io/group-replicas":   "1",
		"jobset.sigs.k8s.io/job-group-index":  "0",
	}
	wantJob := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "mnist-node-0",
			Namespace: "team-a",
			Labels: union(jobSet, map[string]string{
				trainer.AncestorStepLabel:      trainer.TrainerStep,
				trainer.TrainJobNameLabel:      "mnist",
				trainer.ReplicatedJobNameLabel: "node",
				trainer.ReplicaIndexLabel:      "0",
			}),
			Annotations:     jobSet,
			OwnerReferences: []metav1.OwnerReference{owner},
			Finalizers:      []string{trainer.JobTrackingFinalizer},
		},
		Spec: batchv1.JobSpec{
			Completions:    ptr.To[int32](3),
			Parallelism:    ptr.To[int32](3),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Suspend:        ptr.To(false),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels: union(jobSet, map[string]string{
						"team":                         "vision",
						trainer.TrainJobNameLabel:      ours[trainer.TrainJobNameLabel],
						trainer.ReplicatedJobNameLabel: ours[trainer.ReplicatedJobNameLabel],
						trainer.ReplicaIndexLabel:      ours[trainer.ReplicaIndexLabel],
					}),
					Annotations: union(jobSet, map[string]string{"pod-complete.stage.kwok.x-k8s.io/delay": "10s"}),
				},
				Spec: corev1.PodSpec{
					Subdomain:     "mnist",
					RestartPolicy: corev1.RestartPolicyOnFailure,
					Containers: []corev1.Container{{
						Name:    "node",
						Image:   "registry.example/node:1",
						Command: []string{"torchrun", "train.py"},
						Ports:   []corev1.ContainerPort{{ContainerPort: 29500, Protocol: corev1.ProtocolTCP}},
						Env: []corev1.EnvVar{
							{Name: "PET_NNODES", Value: "3"},
							{Name: "PET_NPROC_PER_NODE", Value: "1"},
							{Name: "PET_NODE_RANK", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
								FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']",
							}}},
							{Name: "PET_MASTER_ADDR", Value: "mnist-node-0-0.mnist"},
							{Name: "PET_MASTER_PORT", Value: "29500"},
						},
					}},
				},
			},
		},
	}
	if len(plan.Jobs) != 1 {
		t.Fatalf("got %d Jobs, want 1", len(plan.Jobs))
	}
	if diff := cmp.Diff(wantJob, plan.Jobs[0]); diff != "" {
		t.Errorf("Job (-want +got):\n%s", diff)
	}

	wantSvc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: "mnist", Namespace: "team-a",
			Labels:          map[string]string{trainer.TrainJobNameLabel: "mnist"},
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                "None",
			Selector:                 map[string]string{trainer.TrainJobNameLabel: "mnist"},
			PublishNotReadyAddresses: true,
		},
	}
	if diff := cmp.Diff(wantSvc, plan.Service); diff != "" {
		t.Errorf("Service (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Step{{Name: "node", Replicas: 1, Trainer: true}}, plan.Steps); diff != "" {
		t.Errorf("Steps (-want +got):\n%s", diff)
	}
}

func TestBuildShapes(t *testing.T) {
	twoSteps := utiltesting.MakeRuntimeSpec().ReplicatedJobs(
		utiltesting.MakeReplicatedJob("launcher").Completions(1).Obj(),
		utiltesting.MakeReplicatedJob("node").Trainer().Obj(),
		utiltesting.MakeReplicatedJob("ps").Replicas(2).Completions(2).Obj(),
	)
	cases := map[string]struct {
		trainJob        *trainer.TrainJob
		spec            *utiltesting.RuntimeSpecWrapper
		wantNames       []string
		wantCompletions []int32
		wantSuspend     bool
		wantSteps       []Step
	}{
		"numNodes from the TrainJob": {
			trainJob:        utiltesting.MakeTrainJob("a", "ns").NumNodes(4).Obj(),
			spec:            utiltesting.MakeRuntimeSpec().NumNodes(2),
			wantNames:       []string{"a-node-0"},
			wantCompletions: []int32{4},
			wantSteps:       []Step{{Name: "node", Replicas: 1, Trainer: true}},
		},
		"numNodes from the runtime": {
			trainJob:        utiltesting.MakeTrainJob("a", "ns").Obj(),
			spec:            utiltesting.MakeRuntimeSpec().NumNodes(2),
			wantNames:       []string{"a-node-0"},
			wantCompletions: []int32{2},
			wantSteps:       []Step{{Name: "node", Replicas: 1, Trainer: true}},
		},
		"numNodes defaults to 1": {
			trainJob:        utiltesting.MakeTrainJob("a", "ns").Obj(),
			spec:            utiltesting.MakeRuntimeSpec(),
			wantNames:       []string{"a-node-0"},
			wantCompletions: []int32{1},
			wantSteps:       []Step{{Name: "node", Replicas: 1, Trainer: true}},
		},
		"several steps and replicas": {
			trainJob:        utiltesting.MakeTrainJob("a", "ns").NumNodes(3).Obj(),
			spec:            twoSteps,
			wantNames:       []string{"a-launcher-0", "a-node-0", "a-ps-0", "a-ps-1"},
			wantCompletions: []int32{1, 3, 2, 2},
			wantSteps: []Step{
				{Name: "launcher", Replicas: 1}, {Name: "node", Replicas: 1, Trainer: true}, {Name: "ps", Replicas: 2},
			},
		},
		"created suspended": {
			trainJob:        utiltesting.MakeTrainJob("a", "ns").Suspend(true).Obj(),
			spec:            utiltesting.MakeRuntimeSpec(),
			wantNames:       []string{"a-node-0"},
			wantCompletions: []int32{1},
			wantSuspend:     true,
			wantSteps:       []Step{{Name: "node", Replicas: 1, Trainer: true}},
		},
		"trainer step found by name without the label": {
			trainJob:        utiltesting.MakeTrainJob("a", "ns").NumNodes(2).Obj(),
			spec:            utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("node").Obj()),
			wantNames:       []string{"a-node-0"},
			wantCompletions: []int32{2},
			wantSteps:       []Step{{Name: "node", Replicas: 1, Trainer: true}},
		},
		"no trainer step": {
			trainJob:        utiltesting.MakeTrainJob("a", "ns").Obj(),
			spec:            utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj()),
			wantNames:       []string{"a-worker-0", "a-worker-1"},
			wantCompletions: []int32{1, 1},
			wantSteps:       []Step{{Name: "worker", Replicas: 2}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan, err := Build(tc.trainJob, clusterRuntime(tc.spec))
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			var names []string
			var completions []int32
			for _, j := range plan.Jobs {
				names = append(names, j.Name)
				completions = append(completions, ptr.Deref(j.Spec.Completions, 1))
				if got := ptr.Deref(j.Spec.Suspend, false); got != tc.wantSuspend {
					t.Errorf("Job %s suspend = %v, want %v", j.Name, got, tc.wantSuspend)
				}
				if ptr.Deref(j.Spec.CompletionMode, "") != batchv1.IndexedCompletion {
					t.Errorf("Job %s is not Indexed", j.Name)
				}
			}
			if diff := cmp.Diff(tc.wantNames, names); diff != "" {
				t.Errorf("Job names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCompletions, completions); diff != "" {
				t.Errorf("completions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantSteps, plan.Steps); diff != "" {
				t.Errorf("Steps (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildTrainerOverrides(t *testing.T) {
	rjob := utiltesting.MakeReplicatedJob("node").Trainer().Containers(corev1.Container{
		Name:    "node",
		Image:   "runtime-image",
		Command: []string{"python"},
		Args:    []string{"default.py"},
		Env:     []corev1.EnvVar{{Name: "A", Value: "runtime"}, {Name: "B", Value: "runtime"}},
		Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		},
	}, corev1.Container{Name: "sidecar", Image: "sidecar-image"}).Obj()
	res := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}
	tj := utiltesting.MakeTrainJob("a", "ns").Image("user-image").Command("torchrun").Args("train.py", "--lr=0.1").
		Env("B", "user").Env("C", "user").Resources(res).Obj()

	plan, err := Build(tj, clusterRuntime(utiltesting.MakeRuntimeSpec().ReplicatedJobs(rjob)))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	// resourcesPerNode merges into the runtime's resources, resource by
	// resource, as in Kubeflow Trainer v2.3.
	want := []corev1.Container{{
		Name:    "node",
		Image:   "user-image",
		Command: []string{"torchrun"},
		Args:    []string{"train.py", "--lr=0.1"},
		Env:     []corev1.EnvVar{{Name: "A", Value: "runtime"}, {Name: "B", Value: "user"}, {Name: "C", Value: "user"}},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), "nvidia.com/gpu": resource.MustParse("2"),
		}},
	}, {Name: "sidecar", Image: "sidecar-image"}}
	if diff := cmp.Diff(want, plan.Jobs[0].Spec.Template.Spec.Containers); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	if rjob.Template.Spec.Template.Spec.Containers[0].Image != "runtime-image" {
		t.Error("Build changed the runtime's template")
	}
}

func TestBuildMetadata(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().TemplateLabel("from", "jobset-template").TemplateLabel("shared", "jobset-template")
	spec.Template.Spec.ReplicatedJobs[0].Template.Labels["shared"] = "job-template"
	spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Labels = map[string]string{"pod": "template", "team": "runtime"}
	tj := utiltesting.MakeTrainJob("a", "ns").Label("team", "user").Obj()
	tj.Spec.Labels = map[string]string{"extra": "spec-labels", trainer.TrainJobNameLabel: "spoofed"}
	tj.Spec.Annotations = map[string]string{"note": "hello"}

	plan, err := Build(tj, clusterRuntime(spec))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	job := plan.Jobs[0]
	jobSet := map[string]string{
		"jobset.sigs.k8s.io/jobset-name": "a", "jobset.sigs.k8s.io/jobset-uid": "",
		"jobset.sigs.k8s.io/replicatedjob-name": "node", "jobset.sigs.k8s.io/restart-attempt": "0",
		"jobset.sigs.k8s.io/replicatedjob-replicas": "1", "jobset.sigs.k8s.io/global-replicas": "1",
		"jobset.sigs.k8s.io/job-index": "0", "jobset.sigs.k8s.io/job-global-index": "0",
		"jobset.sigs.k8s.io/job-key":    "9f4c3a88f096449fda7e447a0f3425b0590ce062", // printf ns/a-node-0 | sha1sum
		"jobset.sigs.k8s.io/group-name": "default", "jobset.sigs.k8s.io/group-replicas": "1", "jobset.sigs.k8s.io/job-group-index": "0",
	}
	wantJobLabels := union(jobSet, map[string]string{
		"from": "jobset-template", "shared": "job-template", "extra": "spec-labels",
		trainer.AncestorStepLabel: trainer.TrainerStep,
		trainer.TrainJobNameLabel: "a", trainer.ReplicatedJobNameLabel: "node", trainer.ReplicaIndexLabel: "0",
	})
	if diff := cmp.Diff(wantJobLabels, job.Labels); diff != "" {
		t.Errorf("Job labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(union(jobSet, map[string]string{"note": "hello"}), job.Annotations); diff != "" {
		t.Errorf("Job annotations (-want +got):\n%s", diff)
	}
	wantPodLabels := union(jobSet, map[string]string{
		"pod": "template", "team": "user",
		trainer.TrainJobNameLabel: "a", trainer.ReplicatedJobNameLabel: "node", trainer.ReplicaIndexLabel: "0",
	})
	if diff := cmp.Diff(wantPodLabels, job.Spec.Template.Labels); diff != "" {
		t.Errorf("Pod labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(jobSet, job.Spec.Template.Annotations); diff != "" {
		t.Errorf("Pod annotations (-want +got):\n%s", diff)
	}
}

// Each child Job and its Pod template carry the labels and annotations
// JobSet v0.12.0 gives them, with JobSet's values: indexes across
// replicated Jobs in the runtime's order, every replicated Job in group
// "default", and the SHA-1 of <namespace>/<job name> as the job key.
func TestBuildJobSetKeys(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().ReplicatedJobs(
		utiltesting.MakeReplicatedJob("launcher").Replicas(2).Obj(),
		utiltesting.MakeReplicatedJob("worker").Replicas(3).Obj(),
	)
	tj := utiltesting.MakeTrainJob("mnist", "team-a").UID("uid-1").Obj()

	plan, err := Build(tj, clusterRuntime(spec))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	type replica struct {
		rjob                  string
		index, global, rjobOf string
		key                   string // printf team-a/<job name> | sha1sum
	}
	want := map[string]replica{
		"mnist-launcher-0": {"launcher", "0", "0", "2", "fbec88e6ebbac8ef76f17e1562d7ee534b560937"},
		"mnist-launcher-1": {"launcher", "1", "1", "2", "ba8890ed6f3b0826c8f653f573a958cbe9181290"},
		"mnist-worker-0":   {"worker", "0", "2", "3", "c48394085cb471b616e549ecb3ef20b8eb435926"},
		"mnist-worker-1":   {"worker", "1", "3", "3", "7525006943e70a289b990a3850137b3182af1c49"},
		"mnist-worker-2":   {"worker", "2", "4", "3", "1b2c463ee34d22c131db46f0e795e8ece09ba883"},
	}
	if len(plan.Jobs) != len(want) {
		t.Fatalf("got %d Jobs, want %d", len(plan.Jobs), len(want))
	}
	for _, job := range plan.Jobs {
		w, ok := want[job.Name]
		if !ok {
			t.Fatalf("unexpected Job %s", job.Name)
		}
		sum := sha1.Sum([]byte(job.Namespace + "/" + job.Name))
		if got := hex.EncodeToString(sum[:]); got != w.key {
			t.Fatalf("the test's own SHA-1 of %s/%s is %s, want %s", job.Namespace, job.Name, got, w.key)
		}
		keys := map[string]string{
			"jobset.sigs.k8s.io/jobset-name":            "mnist",
			"jobset.sigs.k8s.io/jobset-uid":             "uid-1",
			"jobset.sigs.k8s.io/replicatedjob-name":     w.rjob,
			"jobset.sigs.k8s.io/restart-attempt":        "0",
			"jobset.sigs.k8s.io/replicatedjob-replicas": w.rjobOf,
			"jobset.sigs.k8s.io/global-replicas":        "5",
			"jobset.sigs.k8s.io/job-index":              w.index,
			"jobset.sigs.k8s.io/job-key":                w.key,
			"jobset.sigs.k8s.io/job-global-index":       w.global,
			"jobset.sigs.k8s.io/group-name":             "default",
			"jobset.sigs.k8s.io/group-replicas":         "5",
			"jobset.sigs.k8s.io/job-group-index":        w.global,
		}
		on := map[string]map[string]string{
			"Job labels":               job.Labels,
			"Job annotations":          job.Annotations,
			"Pod template labels":      job.Spec.Template.Labels,
			"Pod template annotations": job.Spec.Template.Annotations,
		}
		for where, got := range on {
			for k, v := range keys {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("Job %s: %s: %s = %q (set: %t), want %q", job.Name, where, k, g, ok, v)
				}
			}
		}
	}
}

// The keys the controller and JobSet's users rely on cannot be set by the
// runtime or the TrainJob: theirs are overwritten, as JobSet overwrites
// them. The Service still selects the Pods.
func TestBuildOwnKeysWin(t *testing.T) {
	spoofed := map[string]string{
		trainer.TrainJobNameLabel: "spoofed", trainer.ReplicatedJobNameLabel: "spoofed", trainer.ReplicaIndexLabel: "9",
		"jobset.sigs.k8s.io/jobset-name": "spoofed", "jobset.sigs.k8s.io/jobset-uid": "spoofed",
		"jobset.sigs.k8s.io/replicatedjob-name": "spoofed", "jobset.sigs.k8s.io/restart-attempt": "9",
		"jobset.sigs.k8s.io/replicatedjob-replicas": "9", "jobset.sigs.k8s.io/global-replicas": "9",
		"jobset.sigs.k8s.io/job-index": "9", "jobset.sigs.k8s.io/job-key": "spoofed",
		"jobset.sigs.k8s.io/job-global-index": "9", "jobset.sigs.k8s.io/group-name": "spoofed",
		"jobset.sigs.k8s.io/group-replicas": "9", "jobset.sigs.k8s.io/job-group-index": "9",
	}
	spec := utiltesting.MakeRuntimeSpec()
	spec.Template.Metadata.Labels = maps.Clone(spoofed)
	spec.Template.Metadata.Annotations = maps.Clone(spoofed)
	rjob := &spec.Template.Spec.ReplicatedJobs[0]
	rjob.Template.Labels = union(rjob.Template.Labels, spoofed)
	rjob.Template.Annotations = maps.Clone(spoofed)
	rjob.Template.Spec.Template.Labels = maps.Clone(spoofed)
	rjob.Template.Spec.Template.Annotations = maps.Clone(spoofed)
	tj := utiltesting.MakeTrainJob("a", "ns").UID("uid-1").Obj()
	tj.Labels = maps.Clone(spoofed)
	tj.Annotations = maps.Clone(spoofed)
	tj.Spec.Labels = maps.Clone(spoofed)
	tj.Spec.Annotations = maps.Clone(spoofed)

	plan, err := Build(tj, clusterRuntime(spec))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	job := plan.Jobs[0]
	want := map[string]string{
		trainer.TrainJobNameLabel: "a", trainer.ReplicatedJobNameLabel: "node", trainer.ReplicaIndexLabel: "0",
		"jobset.sigs.k8s.io/jobset-name": "a", "jobset.sigs.k8s.io/jobset-uid": "uid-1",
		"jobset.sigs.k8s.io/replicatedjob-name": "node", "jobset.sigs.k8s.io/restart-attempt": "0",
		"jobset.sigs.k8s.io/replicatedjob-replicas": "1", "jobset.sigs.k8s.io/global-replicas": "1",
		"jobset.sigs.k8s.io/job-index": "0", "jobset.sigs.k8s.io/job-key": "9f4c3a88f096449fda7e447a0f3425b0590ce062",
		"jobset.sigs.k8s.io/job-global-index": "0", "jobset.sigs.k8s.io/group-name": "default",
		"jobset.sigs.k8s.io/group-replicas": "1", "jobset.sigs.k8s.io/job-group-index": "0",
	}
	on := map[string]map[string]string{"Job labels": job.Labels, "Pod template labels": job.Spec.Template.Labels}
	for where, got := range on {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", where, k, got[k], v)
			}
		}
	}
	on = map[string]map[string]string{"Job annotations": job.Annotations, "Pod template annotations": job.Spec.Template.Annotations}
	for where, got := range on {
		for k, v := range want {
			if strings.HasPrefix(k, "jobset.sigs.k8s.io/") && got[k] != v {
				t.Errorf("%s: %s = %q, want %q", where, k, got[k], v)
			}
		}
	}
	sel := labels.SelectorFromSet(plan.Service.Spec.Selector)
	if !sel.Matches(labels.Set(job.Spec.Template.Labels)) {
		t.Errorf("Service selector %s does not select the Pods (labels %v)", sel, job.Spec.Template.Labels)
	}
}

// A Pod restartPolicy the runtime leaves unset is OnFailure, as JobSet's
// webhook defaults it; one the runtime sets is kept.
func TestBuildRestartPolicy(t *testing.T) {
	for _, tc := range []struct {
		runtime, want corev1.RestartPolicy
	}{
		{"", corev1.RestartPolicyOnFailure},
		{corev1.RestartPolicyNever, corev1.RestartPolicyNever},
		{corev1.RestartPolicyOnFailure, corev1.RestartPolicyOnFailure},
	} {
		spec := utiltesting.MakeRuntimeSpec()
		spec.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.RestartPolicy = tc.runtime
		plan, err := Build(utiltesting.MakeTrainJob("a", "ns").Obj(), clusterRuntime(spec))
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		if got := plan.Jobs[0].Spec.Template.Spec.RestartPolicy; got != tc.want {
			t.Errorf("runtime restartPolicy %q: Pods get %q, want %q", tc.runtime, got, tc.want)
		}
	}
}

// union returns the union of the maps; later maps win.
func union(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

func TestBuildPlainRuntimeHasNoTorchEnv(t *testing.T) {
	plan, err := Build(utiltesting.MakeTrainJob("a", "ns").NumNodes(2).Obj(), clusterRuntime(utiltesting.MakeRuntimeSpec()))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	c := plan.Jobs[0].Spec.Template.Spec.Containers[0]
	if len(c.Env) != 0 || len(c.Ports) != 0 {
		t.Errorf("plain runtime got env %v and ports %v, want none", c.Env, c.Ports)
	}
}

func TestBuildErrors(t *testing.T) {
	longName := strings.Repeat("a", 56)
	cases := map[string]struct {
		trainJob *trainer.TrainJob
		spec     *utiltesting.RuntimeSpecWrapper
		wantErrs []string
	}{
		"trainer overrides without a trainer step": {
			trainJob: utiltesting.MakeTrainJob("a", "ns").Image("x").Obj(),
			spec:     utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Obj()),
			wantErrs: []string{"spec.trainer", "has no trainer step"},
		},
		"torch without a trainer step": {
			trainJob: utiltesting.MakeTrainJob("a", "ns").Obj(),
			spec:     utiltesting.MakeRuntimeSpec().Torch().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Obj()),
			wantErrs: []string{"replicatedJobs", "torch policy needs a trainer step"},
		},
		"trainer step with several replicas": {
			trainJob: utiltesting.MakeTrainJob("a", "ns").Obj(),
			spec:     utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("node").Trainer().Replicas(2).Obj()),
			wantErrs: []string{"replicatedJobs[0].replicas", "exactly 1 replica"},
		},
		"two trainer steps": {
			trainJob: utiltesting.MakeTrainJob("a", "ns").Obj(),
			spec: utiltesting.MakeRuntimeSpec().ReplicatedJobs(
				utiltesting.MakeReplicatedJob("node").Trainer().Obj(),
				utiltesting.MakeReplicatedJob("other").Trainer().Obj()),
			wantErrs: []string{"replicatedJobs[1].template.metadata.labels", "only one replicated Job"},
		},
		"trainer step without a node container": {
			trainJob: utiltesting.MakeTrainJob("a", "ns").Image("x").Obj(),
			spec: utiltesting.MakeRuntimeSpec().ReplicatedJobs(
				utiltesting.MakeReplicatedJob("node").Trainer().Containers(corev1.Container{Name: "main"}).Obj()),
			wantErrs: []string{"containers", `container named "node"`},
		},
		"reserved env in the TrainJob": {
			trainJob: utiltesting.MakeTrainJob("a", "ns").Env("OK", "1").Env("PET_NNODES", "9").Obj(),
			spec:     utiltesting.MakeRuntimeSpec().Torch(),
			wantErrs: []string{"spec.trainer.env[1].name", "PET_NNODES is set by the torch runtime"},
		},
		"reserved env, and another step's name too long: both reported": {
			trainJob: utiltesting.MakeTrainJob(strings.Repeat("a", 40), "ns").Env("PET_NNODES", "9").Obj(),
			spec: utiltesting.MakeRuntimeSpec().Torch().ReplicatedJobs(
				utiltesting.MakeReplicatedJob("node").Trainer().Obj(),
				utiltesting.MakeReplicatedJob(strings.Repeat("w", 30)).Obj()),
			wantErrs: []string{"PET_NNODES is set by the torch runtime", "metadata.name"},
		},
		"name too long for the Pod hostnames": {
			trainJob: utiltesting.MakeTrainJob(longName, "ns").NumNodes(10).Obj(),
			spec:     utiltesting.MakeRuntimeSpec(),
			wantErrs: []string{"metadata.name", "would be 65 characters", "at most 54 characters"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Build(tc.trainJob, clusterRuntime(tc.spec))
			if err == nil {
				t.Fatal("Build succeeded, want an error")
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func envValue(job *batchv1.Job, name string) string {
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// JobNames names the Jobs Build builds, without building them.
func TestJobNamesAreBuildsJobs(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().ReplicatedJobs(
		utiltesting.MakeReplicatedJob("init").Replicas(2).Obj(),
		utiltesting.MakeReplicatedJob("node").Trainer().Obj(),
	).Torch().Obj()
	plan, err := Build(utiltesting.MakeTrainJob("tj", "ns").NumNodes(3).Obj(), Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "rt", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	var built []string
	for _, job := range plan.Jobs {
		built = append(built, job.Name)
	}
	if diff := cmp.Diff(built, JobNames("tj", spec)); diff != "" {
		t.Errorf("JobNames (-Build's +JobNames):\n%s", diff)
	}
}

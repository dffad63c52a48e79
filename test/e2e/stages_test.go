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

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// applyYAML applies a manifest in ns, as a user would.
func applyYAML(t *testing.T, ns, manifest string) {
	t.Helper()
	cmd := kubectlCmd("apply", "-n", ns, "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// jobsOf returns the TrainJob's Jobs by name.
func jobsOf(t *testing.T, ns, name string) map[string]batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{trainer.TrainJobNameLabel: name}); err != nil {
		t.Fatal(err)
	}
	jobs := map[string]batchv1.Job{}
	for _, j := range list.Items {
		jobs[j.Name] = j
	}
	return jobs
}

// finishedAt is when a Job's Complete condition became True, zero if not.
func finishedAt(j batchv1.Job) time.Time {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// The shape of Kubeflow v2.3's multi-step example (05-multi-step.yaml): a
// dataset initializer, then the trainer once it is Complete. The trainer's
// Job is created only after the initializer's completed, and the TrainJob
// completes once every Job succeeded.
func TestDependsOnCompleteRunsStepsInOrder(t *testing.T) {
	ns := newNamespace(t)
	applyYAML(t, ns, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: torch-with-dataset-init
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  template:
    spec:
      replicatedJobs:
        - name: dataset-initializer
          replicas: 1
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer
            spec:
              template:
                metadata:
                  annotations: {%[1]s: 4s}
                spec:
                  containers:
                    - name: dataset-initializer
                      image: ghcr.io/kubeflow/trainer/dataset-initializer
        - name: node
          dependsOn:
            - name: dataset-initializer
              status: Complete
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                metadata:
                  annotations: {%[1]s: 3s}
                spec:
                  containers:
                    - name: node
                      image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: multi-step
spec:
  runtimeRef:
    apiGroup: trainer.kubeflow.org
    kind: TrainingRuntime
    name: torch-with-dataset-init
  trainer:
    numNodes: 2
    command: [python3, train.py]
`, runFor))

	tj := waitCondition(t, ns, "multi-step", trainer.TrainJobComplete, trainer.TrainJobJobsCompletedReason)
	jobs := jobsOf(t, ns, "multi-step")
	init, node := jobs["multi-step-dataset-initializer-0"], jobs["multi-step-node-0"]
	if done := finishedAt(init); done.IsZero() || node.CreationTimestamp.Time.Before(done) {
		t.Errorf("trainer Job created at %s, initializer completed at %s: want the trainer after", node.CreationTimestamp.Time, done)
	}
	if got := ptr.Deref(node.Spec.Completions, 0); got != 2 {
		t.Errorf("trainer Job completions %d, want numNodes 2", got)
	}
	if msg := condition(tj, trainer.TrainJobComplete).Message; msg != "All 2 Job(s) of every replicated Job succeeded" {
		t.Errorf("Complete message %q, want every Job of both steps", msg)
	}
}

// An MPI-like shape, as Kubeflow's DeepSpeed runtime orders it: a launcher
// created once every worker is Ready, and a success policy on the launcher
// alone. The workers never finish on their own: the TrainJob completes when
// the launcher does, and the workers' Pods are stopped.
func TestDependsOnReadyAndSuccessPolicy(t *testing.T) {
	ns := newNamespace(t)
	applyYAML(t, ns, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: launcher-after-workers
spec:
  template:
    spec:
      network:
        publishNotReadyAddresses: true
      successPolicy:
        operator: All
        targetReplicatedJobs: [launcher]
      replicatedJobs:
        - name: worker
          replicas: 2
          template:
            spec:
              template:
                metadata:
                  annotations: {%[1]s: 10m}
                spec:
                  containers:
                    - name: sshd
                      image: sshd
        - name: launcher
          dependsOn:
            - name: worker
              status: Ready
          template:
            spec:
              template:
                metadata:
                  annotations: {%[1]s: 3s}
                spec:
                  containers:
                    - name: launcher
                      image: mpirun
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: mpi-like
spec:
  runtimeRef:
    apiGroup: trainer.kubeflow.org
    kind: TrainingRuntime
    name: launcher-after-workers
`, runFor))

	tj := waitCondition(t, ns, "mpi-like", trainer.TrainJobComplete, trainer.TrainJobJobsCompletedReason)
	if msg := condition(tj, trainer.TrainJobComplete).Message; msg != "All 1 Job(s) of replicated Job launcher succeeded" {
		t.Errorf("Complete message %q", msg)
	}
	jobs := jobsOf(t, ns, "mpi-like")
	launcher := jobs["mpi-like-launcher-0"]
	for _, name := range []string{"mpi-like-worker-0", "mpi-like-worker-1"} {
		w, ok := jobs[name]
		if !ok {
			t.Fatalf("no Job %s", name)
		}
		if launcher.CreationTimestamp.Time.Before(w.CreationTimestamp.Time) {
			t.Errorf("launcher created at %s, before worker %s (%s)", launcher.CreationTimestamp.Time, name, w.CreationTimestamp.Time)
		}
	}
	waitNoPods(t, timeout, ns, "mpi-like")
}

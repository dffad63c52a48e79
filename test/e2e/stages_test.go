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
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

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
// dataset initializer given its storageUri by the TrainJob, then the trainer
// once it is Complete. The trainer's Job is created only after the
// initializer's completed, and the TrainJob completes once every Job
// succeeded.
func TestDependsOnCompleteRunsStepsInOrder(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.ApplyYAML(t, ns, fmt.Sprintf(`
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
  initializer:
    dataset:
      storageUri: hf://tatsu-lab/alpaca
  trainer:
    numNodes: 2
    command: [python3, train.py]
`, runFor))

	tj := cluster.WaitCondition(t, ns, "multi-step", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	jobs := cluster.JobsOf(t, ns, "multi-step")
	init, node := jobs["multi-step-dataset-initializer-0"], jobs["multi-step-node-0"]
	if done := finishedAt(init); done.IsZero() || node.CreationTimestamp.Time.Before(done) {
		t.Errorf("trainer Job created at %s, initializer completed at %s: want the trainer after", node.CreationTimestamp.Time, done)
	}
	if got := ptr.Deref(node.Spec.Completions, 0); got != 2 {
		t.Errorf("trainer Job completions %d, want numNodes 2", got)
	}
	if env := init.Spec.Template.Spec.Containers[0].Env; !slices.Contains(env, corev1.EnvVar{Name: "STORAGE_URI", Value: "hf://tatsu-lab/alpaca"}) {
		t.Errorf("dataset-initializer env %v, want STORAGE_URI from spec.initializer.dataset", env)
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
	ns := cluster.NewNamespace(t)
	cluster.ApplyYAML(t, ns, fmt.Sprintf(`
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

	tj := cluster.WaitCondition(t, ns, "mpi-like", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	if msg := condition(tj, trainer.TrainJobComplete).Message; msg != "All 1 Job(s) of replicated Job launcher succeeded" {
		t.Errorf("Complete message %q", msg)
	}
	jobs := cluster.JobsOf(t, ns, "mpi-like")
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
	cluster.WaitNoPods(t, timeout, ns, "mpi-like")
}

// volumeFor makes a PersistentVolume of Kubeflow's initializer size bound
// to claim in ns, as a provisioner would (the local cluster has none), and
// deletes it after the test.
func volumeFor(t *testing.T, ns, claim string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + ns + "-" + claim}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
		},
	}
	cluster.Create(t, pv)
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), pv) })
}

// The shape of Kubeflow v2.3's torchtune runtimes: a volume claim template
// initializer, a dataset and a model initializer mounting it, and the
// trainer once both are Complete. The claim initializer-<trainjob> is made
// for the TrainJob (here bound to a volume made for it, as a provisioner
// would), every step's Pods mount it, the stages run in order, and the
// claim goes with the TrainJob.
func TestTorchtuneShape(t *testing.T) {
	ns := cluster.NewNamespace(t)
	volumeFor(t, ns, "initializer-tune")
	cluster.ApplyYAML(t, ns, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: torchtune-llama3.2-1b
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  template:
    spec:
      volumeClaimPolicies:
        - templates:
            - metadata:
                name: initializer
              spec:
                accessModes: ["ReadWriteOnce"]
                resources:
                  requests:
                    storage: 20Gi
      replicatedJobs:
        - name: dataset-initializer
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer
            spec:
              template:
                metadata:
                  annotations: {%[1]s: 3s}
                spec:
                  containers:
                    - name: dataset-initializer
                      image: ghcr.io/kubeflow/trainer/dataset-initializer
                      env:
                        - name: STORAGE_URI
                          value: hf://tatsu-lab/alpaca
                      volumeMounts:
                        - mountPath: /workspace
                          name: initializer
        - name: model-initializer
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: model-initializer
            spec:
              template:
                metadata:
                  annotations: {%[1]s: 5s}
                spec:
                  containers:
                    - name: model-initializer
                      image: ghcr.io/kubeflow/trainer/model-initializer
                      env:
                        - name: STORAGE_URI
                          value: hf://meta-llama/Llama-3.2-1B-Instruct
                      volumeMounts:
                        - mountPath: /workspace
                          name: initializer
        - name: node
          dependsOn:
            - name: dataset-initializer
              status: Complete
            - name: model-initializer
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
                      image: ghcr.io/kubeflow/trainer/torchtune-trainer
                      command: [tune, run, full_finetune_distributed, --config, llama3_2/1B_full]
                      resources:
                        limits:
                          nvidia.com/gpu: 2
                      volumeMounts:
                        - mountPath: /workspace
                          name: initializer
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: tune
spec:
  runtimeRef:
    apiGroup: trainer.kubeflow.org
    kind: TrainingRuntime
    name: torchtune-llama3.2-1b
  initializer:
    model:
      storageUri: hf://meta-llama/Llama-3.2-1B-Instruct
      env:
        - name: ACCESS_TOKEN
          value: token
`, runFor))

	tj := cluster.WaitCondition(t, ns, "tune", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	jobs := cluster.JobsOf(t, ns, "tune")
	node := jobs["tune-node-0"]
	for _, init := range []string{"tune-dataset-initializer-0", "tune-model-initializer-0"} {
		j, ok := jobs[init]
		if !ok {
			t.Fatalf("no Job %s", init)
		}
		if done := finishedAt(j); done.IsZero() || node.CreationTimestamp.Time.Before(done) {
			t.Errorf("trainer Job created at %s, %s completed at %s: want the trainer after", node.CreationTimestamp.Time, init, done)
		}
	}
	for name, j := range jobs {
		if !slices.ContainsFunc(j.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == "initializer" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "initializer-tune"
		}) {
			t.Errorf("Job %s volumes %v, want the claim initializer-tune as volume initializer", name, j.Spec.Template.Spec.Volumes)
		}
	}
	var claim corev1.PersistentVolumeClaim
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "initializer-tune"}, &claim); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&claim, tj) || claim.Status.Phase != corev1.ClaimBound {
		t.Errorf("claim owners %v, phase %s; want the TrainJob's, Bound", claim.OwnerReferences, claim.Status.Phase)
	}
	if err := cluster.Client.Delete(context.Background(), tj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "the claim to go with the TrainJob", func() error {
		var c corev1.PersistentVolumeClaim
		err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(&claim), &c)
		if err == nil && c.UID == claim.UID {
			return fmt.Errorf("still there (deletion %v)", c.DeletionTimestamp)
		}
		return nil
	})
}

// The shape of Kubeflow v2.3's data-cache runtime
// (torch-distributed-with-cache): a dataset initializer running as its own
// service account, then the trainer once it is Complete, both reading the
// TrainJob's name from their Pod's JobSet label. Its initializer shares no
// volume: the TrainJob is accepted with a warning that says so.
func TestDataCacheShape(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kubeflow-trainer-cache-initializer", Namespace: ns}})
	out := cluster.ApplyYAML(t, ns, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: torch-distributed-with-cache
  labels:
    trainer.kubeflow.org/framework: torch
    trainer.kubeflow.org/webhook-validation: disabled
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
                  annotations: {%[1]s: 3s}
                spec:
                  serviceAccountName: kubeflow-trainer-cache-initializer
                  containers:
                    - name: dataset-initializer
                      image: ghcr.io/kubeflow/trainer/dataset-initializer
                      env:
                        - name: CACHE_IMAGE
                          value: ghcr.io/kubeflow/trainer/data-cache
                        - name: TRAIN_JOB_NAME
                          valueFrom:
                            fieldRef:
                              fieldPath: metadata.labels['jobset.sigs.k8s.io/jobset-name']
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
                      env:
                        - name: TRAIN_JOB_NAME
                          valueFrom:
                            fieldRef:
                              fieldPath: metadata.labels['jobset.sigs.k8s.io/jobset-name']
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: cached
spec:
  runtimeRef:
    apiGroup: trainer.kubeflow.org
    kind: TrainingRuntime
    name: torch-distributed-with-cache
  initializer:
    dataset:
      storageUri: cache://schema/table
      env:
        - name: CLUSTER_SIZE
          value: "2"
  trainer:
    numNodes: 2
    command: [torchrun, train.py]
`, runFor))
	if !strings.Contains(out, `spec.initializer.dataset: the dataset-initializer container of runtime TrainingRuntime/torch-distributed-with-cache mounts no volume named "initializer"`) {
		t.Errorf("kubectl apply said:\n%s\nwant the warning that the initializer shares no volume", out)
	}
	cluster.WaitCondition(t, ns, "cached", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	jobs := cluster.JobsOf(t, ns, "cached")
	init, node := jobs["cached-dataset-initializer-0"], jobs["cached-node-0"]
	if done := finishedAt(init); done.IsZero() || node.CreationTimestamp.Time.Before(done) {
		t.Errorf("trainer Job created at %s, initializer completed at %s: want the trainer after", node.CreationTimestamp.Time, done)
	}
	pod := init.Spec.Template
	if pod.Labels[trainer.JobSetNameLabel] != "cached" || pod.Spec.ServiceAccountName != "kubeflow-trainer-cache-initializer" {
		t.Errorf("initializer Pods: label %s=%q, service account %q", trainer.JobSetNameLabel, pod.Labels[trainer.JobSetNameLabel], pod.Spec.ServiceAccountName)
	}
	env := pod.Spec.Containers[0].Env
	for _, want := range []corev1.EnvVar{{Name: "STORAGE_URI", Value: "cache://schema/table"}, {Name: "CLUSTER_SIZE", Value: "2"}} {
		if !slices.Contains(env, want) {
			t.Errorf("dataset-initializer env %v lacks %v", env, want)
		}
	}
}

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

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// torchRuntime creates a namespaced torch runtime "torch" with a trainer
// step "node" and returns a TrainJob wrapper that references it.
func torchRuntime(t testing.TB, ns string, spec *utiltesting.RuntimeSpecWrapper) {
	t.Helper()
	cluster.Create(t, spec.Runtime("torch", ns))
}

func trainJobOn(name, ns string) *utiltesting.TrainJobWrapper {
	return utiltesting.MakeTrainJob(name, ns).RuntimeRef(trainer.TrainingRuntimeKind, "torch")
}

func TestRunsToCompletion(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("mnist", ns).NumNodes(2).Command("torchrun", "train.py").Env("LR", "0.1").Obj())

	job := waitJob(t, ns, "mnist-node-0")
	if got := ptr.Deref(job.Spec.Completions, 0); got != 2 {
		t.Errorf("completions = %d, want 2", got)
	}
	if got := ptr.Deref(job.Spec.CompletionMode, ""); got != batchv1.IndexedCompletion {
		t.Errorf("completionMode = %q, want Indexed", got)
	}
	if !hasTrackingFinalizer(job) || !metav1.IsControlledBy(job, mustTrainJob(t, ns, "mnist")) {
		t.Errorf("Job is not tracked and owned: finalizers %v, owners %v", job.Finalizers, job.OwnerReferences)
	}
	if got := job.Spec.Template.Spec.Subdomain; got != "mnist" {
		t.Errorf("subdomain = %q, want mnist", got)
	}
	wantEnv := map[string]string{
		"KUBEFLOW_TRAINER_SERVER_URL":     fmt.Sprintf("https://trainjob-operator-webhook.trainjob-system.svc:%d/apis/trainer.kubeflow.org/v1alpha1/namespaces/%s/trainjobs/mnist/status", statusServerPort, ns),
		"KUBEFLOW_TRAINER_SERVER_CA_CERT": "/var/run/secrets/kubeflow/trainer/ca.crt",
		"KUBEFLOW_TRAINER_SERVER_TOKEN":   "/var/run/secrets/kubeflow/trainer/token",
		"LR":                              "0.1",
		"PET_NNODES":                      "2",
		"PET_NPROC_PER_NODE":              "1",
		"PET_NODE_RANK":                   "fieldRef:metadata.annotations['batch.kubernetes.io/job-completion-index']",
		"PET_MASTER_ADDR":                 "mnist-node-0-0.mnist",
		"PET_MASTER_PORT":                 "29500",
	}
	if diff := cmp.Diff(wantEnv, envOf(job)); diff != "" {
		t.Errorf("trainer env (-want +got):\n%s", diff)
	}
	var svc corev1.Service
	cluster.Eventually(t, "the headless Service", func() error {
		return cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mnist"}, &svc)
	})
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || svc.Spec.Selector[trainer.TrainJobNameLabel] != "mnist" {
		t.Errorf("Service is not headless for the TrainJob's Pods: %+v", svc.Spec)
	}
	tj := waitRunning(t, ns, "mnist")
	cluster.Eventually(t, "startTime", func() error {
		if tj, _ = cluster.GetTrainJob(ns, "mnist"); tj.Status.StartTime == nil {
			return fmt.Errorf("no startTime")
		}
		return nil
	})

	setJobStatus(t, ns, "mnist-node-0", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })
	tj = cluster.WaitCondition(t, ns, "mnist", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	if tj.Status.CompletionTime == nil {
		t.Error("Complete TrainJob has no completionTime")
	}
	if js := tj.Status.JobsStatus; len(js) != 1 || js[0].Succeeded != 1 {
		t.Errorf("jobsStatus = %+v, want one succeeded node Job", js)
	}
	waitReleased(t, ns, "mnist-node-0")
}

func mustTrainJob(t *testing.T, ns, name string) *trainer.TrainJob {
	t.Helper()
	tj, err := cluster.GetTrainJob(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return tj
}

func TestFailsWhenAJobFails(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().ReplicatedJobs(
		utiltesting.MakeReplicatedJob("node").Trainer().Obj(),
		utiltesting.MakeReplicatedJob("ps").Obj(),
	))
	cluster.Create(t, trainJobOn("tj", ns).Obj())
	waitJob(t, ns, "tj-node-0")
	waitJob(t, ns, "tj-ps-0")
	setJobStatus(t, ns, "tj-node-0", func(w *utiltesting.JobWrapper) { w.Active(1) })

	setJobStatus(t, ns, "tj-ps-0", func(w *utiltesting.JobWrapper) { w.Failed("BackoffLimitExceeded", time.Now()) })
	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobJobFailedReason)
	if c := tj.Status.Conditions[0]; c.Type != trainer.TrainJobFailed {
		t.Errorf("first condition is %s, want Failed (it is the State column)", c.Type)
	}
	cluster.Eventually(t, "the running Job to be stopped", func() error {
		job, err := getJob(ns, "tj-node-0")
		if err != nil {
			return err
		}
		if !ptr.Deref(job.Spec.Suspend, false) {
			return fmt.Errorf("tj-node-0 is not suspended")
		}
		return nil
	})
	waitReleased(t, ns, "tj-node-0")
	waitReleased(t, ns, "tj-ps-0")
}

// A Job that fails with its first failed Pod fails the TrainJob as soon as
// one of its Pods fails: envtest runs no Job controller, so the verdict
// comes from the Pod alone, through the manager's watch of failed Pods.
func TestFailsWhenAPodFailsItsJob(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().ReplicatedJobs(
		utiltesting.MakeReplicatedJob("node").Trainer().BackoffLimit(0).Obj()))
	cluster.Create(t, trainJobOn("tj", ns).NumNodes(2).Obj())
	job := waitJob(t, ns, "tj-node-0")
	setJobStatus(t, ns, "tj-node-0", func(w *utiltesting.JobWrapper) { w.Active(2) })
	waitRunning(t, ns, "tj")

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "tj-node-0-1-", Namespace: ns,
			Labels:          job.Spec.Template.Labels,
			Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: "1"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
			Finalizers:      []string{batchv1.JobTrackingFinalizer},
		},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "node", Image: "trainer"}}},
	}
	cluster.Create(t, pod)
	t.Cleanup(func() {
		pod.Finalizers = nil
		_ = cluster.Client.Update(context.Background(), pod)
	})
	pod.Status.Phase = corev1.PodFailed
	if err := cluster.Client.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("failing Pod %s: %v", pod.Name, err)
	}
	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobJobFailedReason)
	want := "Job tj-node-0 failed: BackoffLimitExceeded: Job has reached the specified backoff limit"
	if c := tj.Status.Conditions[0]; c.Message != want {
		t.Errorf("Failed message %q, want %q", c.Message, want)
	}
}

func TestCreatedSuspended(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("tj", ns).NumNodes(2).Suspend(true).Obj())

	job := waitJob(t, ns, "tj-node-0")
	if !ptr.Deref(job.Spec.Suspend, false) {
		t.Fatal("child Job of a suspended TrainJob was created unsuspended")
	}
	cluster.Consistently(t, consistently, "child Job stays suspended and the TrainJob has no startTime", func() error {
		job, err := getJob(ns, "tj-node-0")
		if err != nil {
			return err
		}
		if !ptr.Deref(job.Spec.Suspend, false) {
			return fmt.Errorf("child Job was unsuspended")
		}
		if tj, err := cluster.GetTrainJob(ns, "tj"); err != nil || tj.Status.StartTime != nil {
			return fmt.Errorf("startTime %v set (err %w)", tj.Status.StartTime, err)
		}
		return nil
	})

	// The Job controller reports the Job suspended with no Pod.
	setJobStatus(t, ns, "tj-node-0", func(w *utiltesting.JobWrapper) { w.SuspendedByController(time.Now()) })
	cluster.WaitCondition(t, ns, "tj", trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason)

	updateTrainJob(t, ns, "tj", func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(false) })
	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason)
	if tj.Status.StartTime == nil {
		t.Error("resumed TrainJob has no startTime")
	}
	cluster.Eventually(t, "the child Job to be resumed", func() error {
		job, err := getJob(ns, "tj-node-0")
		if err == nil && ptr.Deref(job.Spec.Suspend, false) {
			err = fmt.Errorf("still suspended")
		}
		return err
	})
}

func TestSuspendAndResumeMidRun(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("tj", ns).NumNodes(2).Obj())
	waitJob(t, ns, "tj-node-0")
	setJobStatus(t, ns, "tj-node-0", func(w *utiltesting.JobWrapper) { w.Active(2) })
	var started metav1.Time
	cluster.Eventually(t, "startTime", func() error {
		tj, err := cluster.GetTrainJob(ns, "tj")
		if err == nil && tj.Status.StartTime == nil {
			err = fmt.Errorf("no startTime")
		}
		if err == nil {
			started = *tj.Status.StartTime
		}
		return err
	})

	updateTrainJob(t, ns, "tj", func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(true) })
	cluster.Eventually(t, "the child Job to be suspended", func() error {
		job, err := getJob(ns, "tj-node-0")
		if err == nil && !ptr.Deref(job.Spec.Suspend, false) {
			err = fmt.Errorf("not suspended")
		}
		return err
	})
	cluster.Consistently(t, consistently, "Suspended stays unset while Pods are active", func() error {
		tj, err := cluster.GetTrainJob(ns, "tj")
		if err == nil && conditionStatus(tj, trainer.TrainJobSuspended) == metav1.ConditionTrue {
			err = fmt.Errorf("Suspended=True while the child Job still has active Pods")
		}
		return err
	})
	setJobStatus(t, ns, "tj-node-0", func(w *utiltesting.JobWrapper) { w.SuspendedByController(time.Now()) })
	cluster.WaitCondition(t, ns, "tj", trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason)

	// startTime has a resolution of one second: resume in a later second so
	// the reset shows.
	time.Sleep(time.Until(started.Add(1100 * time.Millisecond)))
	updateTrainJob(t, ns, "tj", func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(false) })
	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason)
	if tj.Status.StartTime == nil || !tj.Status.StartTime.After(started.Time) {
		t.Errorf("startTime after resume = %v, want later than %v", tj.Status.StartTime, started)
	}
}

func conditionStatus(tj *trainer.TrainJob, condType string) metav1.ConditionStatus {
	for _, c := range tj.Status.Conditions {
		if c.Type == condType {
			return c.Status
		}
	}
	return ""
}

// background deletes as kubectl does. The API's default for Jobs is to
// orphan their Pods, which needs the garbage collector envtest does not run.
var background = client.PropagationPolicy(metav1.DeletePropagationBackground)

func TestChildDeletedAfterFinishing(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().ReplicatedJobs(utiltesting.MakeReplicatedJob("worker").Replicas(2).Obj()))
	cluster.Create(t, trainJobOn("tj", ns).Obj())
	waitJob(t, ns, "tj-worker-0")
	waitJob(t, ns, "tj-worker-1")

	setJobStatus(t, ns, "tj-worker-0", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })
	waitReleased(t, ns, "tj-worker-0")
	// A user (or a Job-level TTL) deletes the finished Job early.
	job, _ := getJob(ns, "tj-worker-0")
	if err := cluster.Client.Delete(context.Background(), job, background); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	cluster.Consistently(t, consistently, "the deleted finished Job is not re-created and its success is kept", func() error {
		if _, err := getJob(ns, "tj-worker-0"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("tj-worker-0 exists again (err %w)", err)
		}
		tj, err := cluster.GetTrainJob(ns, "tj")
		if err != nil {
			return err
		}
		if conditionStatus(tj, trainer.TrainJobFailed) != "" {
			return fmt.Errorf("TrainJob failed: %+v", tj.Status.Conditions)
		}
		if js := tj.Status.JobsStatus; len(js) != 1 || js[0].Succeeded != 1 {
			return fmt.Errorf("jobsStatus = %+v, want 1 succeeded", js)
		}
		return nil
	})

	setJobStatus(t, ns, "tj-worker-1", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })
	cluster.WaitCondition(t, ns, "tj", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
}

func TestChildDeletedWhileRunning(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("tj", ns).Obj())
	job := waitJob(t, ns, "tj-node-0")
	waitRunning(t, ns, "tj")
	if err := cluster.Client.Delete(context.Background(), job, background); err != nil {
		t.Fatal(err)
	}
	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobJobDeletedReason)
	if js := tj.Status.JobsStatus; len(js) != 1 || js[0].Failed != 1 {
		t.Errorf("jobsStatus = %+v, want one failed Job", js)
	}
	cluster.Eventually(t, "the deleted Job to go", func() error {
		if _, err := getJob(ns, "tj-node-0"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (err %w)", err)
		}
		return nil
	})
	cluster.Consistently(t, consistently, "the Job is not run again", func() error {
		if _, err := getJob(ns, "tj-node-0"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("tj-node-0 was re-created")
		}
		return nil
	})
}

func TestDeletingTrainJobReleasesChildren(t *testing.T) {
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		t.Run(string(policy), func(t *testing.T) {
			ns := cluster.NewNamespace(t)
			torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().ReplicatedJobs(
				utiltesting.MakeReplicatedJob("node").Trainer().Obj(),
				utiltesting.MakeReplicatedJob("ps").Replicas(2).Obj(),
			))
			cluster.Create(t, trainJobOn("tj", ns).Obj())
			for _, name := range []string{"tj-node-0", "tj-ps-0", "tj-ps-1"} {
				waitJob(t, ns, name)
			}
			tj := mustTrainJob(t, ns, "tj")
			if err := cluster.Client.Delete(context.Background(), tj, client.PropagationPolicy(policy)); err != nil {
				t.Fatal(err)
			}
			// envtest runs no garbage collector: the children stay, and
			// none may keep the tracking finalizer.
			for _, name := range []string{"tj-node-0", "tj-ps-0", "tj-ps-1"} {
				waitReleased(t, ns, name)
			}
		})
	}
}

func TestStartsOnceTheRuntimeExists(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.Create(t, trainJobOn("tj", ns).Obj())
	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobCreated, metav1.ConditionFalse, trainer.TrainJobRuntimeNotFoundReason)
	want := fmt.Sprintf(`TrainingRuntime "torch" not found in namespace %s (spec.runtimeRef); the TrainJob starts once it exists`, ns)
	if got := tj.Status.Conditions[0].Message; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	waitJob(t, ns, "tj-node-0")
	waitRunning(t, ns, "tj")
}

func TestLeavesOtherManagersAlone(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("tj", ns).ManagedBy("kueue.x-k8s.io/multikueue").Obj())
	cluster.Consistently(t, consistently, "no Job and no status for a TrainJob managed elsewhere", func() error {
		if _, err := getJob(ns, "tj-node-0"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("a Job was created (err %w)", err)
		}
		tj, err := cluster.GetTrainJob(ns, "tj")
		if err == nil && len(tj.Status.Conditions) > 0 {
			err = fmt.Errorf("status written: %+v", tj.Status)
		}
		return err
	})
}

// A Kubeflow v2.1 TrainJob's podTemplateOverrides, and the runtimePatches
// that replaced them, reach the child Jobs' Pods; a patch written while the
// TrainJob waits suspended, as Kueue writes the flavor it admits it on,
// reaches them when it resumes.
func TestOverridesAndPatchesReachThePods(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	tj := trainJobOn("patched", ns).NumNodes(1).Suspend(true).Obj()
	tj.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{{
		TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
		Spec:       &trainer.PodTemplateSpecOverride{NodeSelector: map[string]string{"pool": "train"}},
	}}
	cluster.Create(t, tj)
	job := waitJob(t, ns, "patched-node-0")
	if got := job.Spec.Template.Spec.NodeSelector; got["pool"] != "train" {
		t.Errorf("nodeSelector = %v, want podTemplateOverrides' pool=train", got)
	}
	cluster.WaitCondition(t, ns, "patched", trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason)

	updateTrainJob(t, ns, "patched", func(tj *trainer.TrainJob) {
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{{
			Manager: trainer.KueueManager,
			TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{
				ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
					Template: &trainer.PodTemplatePatch{Spec: &trainer.PodSpecPatch{
						NodeSelector: map[string]string{"flavor": "spot"},
						Tolerations:  []corev1.Toleration{{Key: "spot", Operator: corev1.TolerationOpExists}},
					}},
				}}}},
			}}},
		}}
		tj.Spec.Suspend = ptr.To(false)
	})
	cluster.Eventually(t, "the Job resumed with the flavor", func() error {
		job, err := getJob(ns, "patched-node-0")
		if err != nil {
			return err
		}
		pod := job.Spec.Template.Spec
		if ptr.Deref(job.Spec.Suspend, true) || pod.NodeSelector["flavor"] != "spot" || pod.NodeSelector["pool"] != "train" || len(pod.Tolerations) != 1 {
			return fmt.Errorf("suspend %v, nodeSelector %v, tolerations %v", job.Spec.Suspend, pod.NodeSelector, pod.Tolerations)
		}
		return nil
	})
}

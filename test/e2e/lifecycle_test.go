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
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// Annotations that set how long a simulated Pod runs, and whether it fails.
const (
	runFor  = "pod-complete.stage.kwok.x-k8s.io/delay"
	failFor = "pod-fail.stage.trainjob-operator.dev/delay"
)

// trainJob returns a TrainJob on the torch-distributed runtime the dev
// cluster installs, whose Pods run for d.
func trainJob(name, ns string, d time.Duration) *utiltesting.TrainJobWrapper {
	return utiltesting.MakeTrainJob(name, ns).Annotation(runFor, d.String()).Command("torchrun", "train.py")
}

func condition(tj *trainer.TrainJob, condType string) *metav1.Condition {
	return meta.FindStatusCondition(tj.Status.Conditions, condType)
}

// waitGoneNotBefore waits until the TrainJob and all it owned are gone, and
// fails if the TrainJob went before notBefore.
func waitGoneNotBefore(t *testing.T, ns, name string, notBefore time.Time) {
	t.Helper()
	var goneAt time.Time
	cluster.Eventually(t, "TrainJob "+name+" to be deleted", func() error {
		if _, err := cluster.GetTrainJob(ns, name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (err %w), due at %s", err, notBefore.Format(time.RFC3339))
		}
		goneAt = time.Now()
		return nil
	})
	if goneAt.Before(notBefore) {
		t.Errorf("TrainJob %s deleted at %s, before it was due at %s", name, goneAt.Format(time.RFC3339Nano), notBefore.Format(time.RFC3339Nano))
	}
	cluster.Eventually(t, "nothing of "+name+" to be left", func() error {
		owned := client.MatchingLabels{trainer.TrainJobNameLabel: name}
		var jobs batchv1.JobList
		var ps corev1.PodList
		var svcs corev1.ServiceList
		for _, l := range []client.ObjectList{&jobs, &ps, &svcs} {
			if err := cluster.Client.List(context.Background(), l, client.InNamespace(ns), owned); err != nil {
				return err
			}
		}
		if n := len(jobs.Items) + len(ps.Items) + len(svcs.Items); n > 0 {
			return fmt.Errorf("%d Jobs, %d Pods, %d Services left", len(jobs.Items), len(ps.Items), len(svcs.Items))
		}
		return nil
	})
}

func envOf(p *corev1.Pod) map[string]string {
	out := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		out[e.Name] = e.Value
	}
	return out
}

// KEP-2899's user example, with its times shortened: ttl and deadline, on
// torch-distributed with 2 nodes. It runs to Complete before its deadline,
// its Pods carry the PET_* values torchrun reads, and its TTL deletes it
// with everything it owned.
func TestKEP2899ExampleRunsAndIsCleanedUp(t *testing.T) {
	ns := cluster.NewNamespace(t)
	sdk := followSDKStatus(t, ns, "my-training")
	cluster.Create(t, trainJob("my-training", ns, 8*time.Second).NumNodes(2).TTL(5).Deadline(60).Obj())
	sdk.poll(context.Background())

	running := cluster.WaitPodsRunning(t, ns, "my-training", 2)
	// kubectl's State column says so too.
	if out, err := cluster.Kubectl("get", "trainjob", "my-training", "-n", ns, "--no-headers", "-o", "custom-columns=STATE:.status.state"); err != nil || strings.TrimSpace(out) != trainer.TrainJobStateRunning {
		t.Errorf("kubectl get trainjob: state %q (err %v), want %s", strings.TrimSpace(out), err, trainer.TrainJobStateRunning)
	}
	for _, p := range running {
		index := p.Annotations["batch.kubernetes.io/job-completion-index"]
		want := map[string]string{
			"PET_NNODES":         "2",
			"PET_NPROC_PER_NODE": "1",
			"PET_NODE_RANK":      "", // from the completion index
			"PET_MASTER_ADDR":    "my-training-node-0-0.my-training",
			"PET_MASTER_PORT":    "29500",
		}
		got := envOf(&p)
		for k := range got {
			if _, ours := want[k]; !ours {
				delete(got, k) // set by Kubernetes, such as JOB_COMPLETION_INDEX
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Pod %s (index %s) env (-want +got):\n%s", p.Name, index, diff)
		}
		if got := p.Spec.Hostname + "." + p.Spec.Subdomain; got != "my-training-node-0-"+index+".my-training" {
			t.Errorf("Pod %s has DNS name %s, want my-training-node-0-%s.my-training", p.Name, got, index)
		}
	}
	tj := cluster.WaitCondition(t, ns, "my-training", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	if condition(tj, trainer.TrainJobFailed) != nil {
		t.Errorf("TrainJob failed: %+v", tj.Status.Conditions)
	}
	wantSDKStates(t, sdk, utiltesting.SDKCreated, utiltesting.SDKRunning, utiltesting.SDKComplete)
	waitGoneNotBefore(t, ns, "my-training", tj.FinishedCondition().LastTransitionTime.Add(5*time.Second))
}

// deadlineTolerance is how late after its due time a deadline may be
// enforced: KEP-2899's promise (±5 s; never early, since both times are
// stored timestamps). How close to the due time it really is, is measured by
// make bench, not asserted here.
const deadlineTolerance = 5 * time.Second

// A TrainJob that would run ten minutes, with a 10s deadline: Failed with
// DeadlineExceeded within 5s of the deadline, every Pod gone soon after.
func TestDeadlineStopsALongTrainJob(t *testing.T) {
	ns := cluster.NewNamespace(t)
	sdk := followSDKStatus(t, ns, "long")
	cluster.Create(t, trainJob("long", ns, 10*time.Minute).NumNodes(2).Deadline(10).Obj())
	sdk.poll(context.Background())
	cluster.WaitPodsRunning(t, ns, "long", 2)

	tj := cluster.WaitCondition(t, ns, "long", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
	due := tj.Status.StartTime.Add(10 * time.Second)
	failedAt := tj.FinishedCondition().LastTransitionTime.Time
	if failedAt.Before(due) || failedAt.After(due.Add(deadlineTolerance)) {
		t.Errorf("failed at %s, want within %s after the deadline %s", failedAt.Format(time.RFC3339), deadlineTolerance, due.Format(time.RFC3339))
	}
	cluster.WaitNoPods(t, 15*time.Second, ns, "long")
	wantSDKStates(t, sdk, utiltesting.SDKCreated, utiltesting.SDKRunning, utiltesting.SDKFailed)
}

// Suspended mid-run: its Pods go, and Suspended=True only once they are
// gone. Resumed: new Pods, startTime reset, the deadline counted from the
// resume (the run outlives the original deadline and completes).
func TestSuspendAndResume(t *testing.T) {
	ns := cluster.NewNamespace(t)
	sdk := followSDKStatus(t, ns, "tj")
	cluster.Create(t, trainJob("tj", ns, 15*time.Second).NumNodes(2).Deadline(20).Obj())
	sdk.poll(context.Background())
	first := cluster.WaitPodsRunning(t, ns, "tj", 2)
	tj, err := cluster.GetTrainJob(ns, "tj")
	if err != nil || tj.Status.StartTime == nil {
		t.Fatalf("no startTime (err %v)", err)
	}
	started := tj.Status.StartTime.Time

	time.Sleep(3 * time.Second)
	cluster.PatchSuspend(t, ns, "tj", true)
	cluster.Eventually(t, "Suspended=True", func() error {
		tj, err := cluster.GetTrainJob(ns, "tj")
		if err != nil {
			return err
		}
		if c := condition(tj, trainer.TrainJobSuspended); c == nil || c.Status != metav1.ConditionTrue {
			if left := cluster.ActivePods(t, ns, "tj"); len(left) == 0 {
				return fmt.Errorf("no Pod left and still not Suspended")
			}
			return fmt.Errorf("not yet")
		}
		// Suspended=True: no Pod may be left.
		if left := cluster.ActivePods(t, ns, "tj"); len(left) > 0 {
			t.Fatalf("Suspended=True with %d Pods still active", len(left))
		}
		return nil
	})

	time.Sleep(4 * time.Second)
	cluster.PatchSuspend(t, ns, "tj", false)
	second := cluster.WaitPodsRunning(t, ns, "tj", 2)
	for _, p := range second {
		if slices.ContainsFunc(first, func(q corev1.Pod) bool { return q.UID == p.UID }) {
			t.Errorf("Pod %s survived the suspension", p.Name)
		}
	}
	tj, err = cluster.GetTrainJob(ns, "tj")
	if err != nil {
		t.Fatal(err)
	}
	if !tj.Status.StartTime.After(started) {
		t.Errorf("startTime after resume %s is not after the first start %s", tj.Status.StartTime, started)
	}
	if c := condition(tj, trainer.TrainJobSuspended); c == nil || c.Reason != trainer.TrainJobResumedReason {
		t.Errorf("Suspended condition after resume: %+v", c)
	}
	// 20s from the first start has passed by the time it completes: only a
	// deadline counted from the resume lets it complete.
	tj = cluster.WaitCondition(t, ns, "tj", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	if finished := tj.FinishedCondition().LastTransitionTime.Time; !finished.After(started.Add(20 * time.Second)) {
		t.Logf("completed at %s, before the original deadline %s: the check above proved nothing this time", finished, started.Add(20*time.Second))
	}
	// As under Kubeflow Trainer: once suspended, the Suspended condition
	// stays (False, Resumed, after the resume), and the SDK reads Created
	// until the TrainJob finishes.
	wantSDKStates(t, sdk, utiltesting.SDKCreated, utiltesting.SDKRunning, utiltesting.SDKCreated, utiltesting.SDKComplete)
}

// wantSDKStates stops following a TrainJob as the Kubeflow SDK reads it,
// and fails the test unless the SDK read want, in that order.
func wantSDKStates(t *testing.T, sdk *sdkFollower, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, sdk.stop()); diff != "" {
		t.Errorf("states the Kubeflow SDK read (-want +got):\n%s", diff)
	}
}

// A failing Pod fails the TrainJob, which is not run again.
func TestFailingPodFailsTheTrainJob(t *testing.T) {
	ns := cluster.NewNamespace(t)
	noRetries := utiltesting.MakeRuntimeSpec().Torch().ReplicatedJobs(utiltesting.MakeReplicatedJob("node").Trainer().BackoffLimit(0).Obj())
	cluster.Create(t, noRetries.Runtime("no-retries", ns))
	sdk := followSDKStatus(t, ns, "tj")
	cluster.Create(t, utiltesting.MakeTrainJob("tj", ns).RuntimeRef(trainer.TrainingRuntimeKind, "no-retries").
		Annotation(failFor, "3s").NumNodes(2).Obj())

	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobJobFailedReason)
	// Whether both Pods were seen running before the first failed is up
	// to timing; that the SDK reads Failed, never Complete, is not.
	if states := sdk.stop(); len(states) == 0 || states[len(states)-1] != utiltesting.SDKFailed || slices.Contains(states, utiltesting.SDKComplete) {
		t.Errorf("the Kubeflow SDK read %v, want it to end Failed", states)
	}
	t.Logf("failed: %s", tj.FinishedCondition().Message)
	cluster.WaitNoPods(t, 15*time.Second, ns, "tj")
	cluster.Consistently(t, 5*time.Second, "nothing is run again", func() error {
		if left := cluster.ActivePods(t, ns, "tj"); len(left) > 0 {
			return fmt.Errorf("%d new Pods", len(left))
		}
		var jobs batchv1.JobList
		if err := cluster.Client.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(jobs.Items) != 1 {
			return fmt.Errorf("%d Jobs, want the 1 that failed", len(jobs.Items))
		}
		return nil
	})
}

// Kubeflow's own YAML runs to completion unchanged.
func TestKubeflowYAMLRunsToCompletion(t *testing.T) {
	ns := cluster.NewNamespace(t)
	compat := filepath.Join(devOpts.Root, "..", "shared", "compat")
	sdk := followSDKStatus(t, ns, "multi-node-example")
	for _, f := range []string{"kubeflow-torch-distributed-runtime.yaml", "kubeflow-multi-node-trainjob.yaml"} {
		// As Kubeflow's instructions say: kubectl apply -f.
		if out, err := cluster.Kubectl("apply", "-n", ns, "-f", filepath.Join(compat, f)); err != nil {
			t.Fatalf("kubectl apply -f %s: %v\n%s", f, err, out)
		}
	}
	sdk.poll(context.Background())
	t.Cleanup(func() {
		// Put the dev cluster's own runtime back.
		if out, err := cluster.Kubectl("apply", "--server-side", "--force-conflicts", "-k", filepath.Join(devOpts.Root, "config", "runtimes")); err != nil {
			t.Errorf("restoring config/runtimes: %v\n%s", err, out)
		}
	})
	cluster.WaitPodsRunning(t, ns, "multi-node-example", 3)
	// The Kubeflow SDK finds a TrainJob's Pods, and tells its steps and
	// nodes apart, by these labels.
	selector, err := labels.Parse(trainer.JobSetNameLabel + "=multi-node-example," + trainer.JobSetReplicatedJobNameLabel +
		" in (dataset-initializer, model-initializer, launcher, node)")
	if err != nil {
		t.Fatal(err)
	}
	var found corev1.PodList
	if err := cluster.Client.List(context.Background(), &found, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		t.Fatal(err)
	}
	indexes := map[string]bool{}
	for _, p := range found.Items {
		indexes[p.Labels[batchv1.JobCompletionIndexAnnotation]] = true
	}
	if want := map[string]bool{"0": true, "1": true, "2": true}; !cmp.Equal(want, indexes) {
		t.Errorf("the Kubeflow SDK's selector %q finds Pods of completion indexes %v, want %v", selector, indexes, want)
	}
	cluster.WaitCondition(t, ns, "multi-node-example", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	wantSDKStates(t, sdk, utiltesting.SDKCreated, utiltesting.SDKRunning, utiltesting.SDKComplete)
}

// The manager is killed (SIGKILL) while a TTL and a deadline are pending,
// and started again: each action happens at its time, neither early.
func TestManagerKilledWithTimersPending(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.Create(t, trainJob("ttl", ns, 2*time.Second).TTL(12).Obj())
	cluster.Create(t, trainJob("deadline", ns, 10*time.Minute).Deadline(12).Obj())
	finished := cluster.WaitCondition(t, ns, "ttl", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	cluster.WaitPodsRunning(t, ns, "deadline", 1)
	running, err := cluster.GetTrainJob(ns, "deadline")
	if err != nil || running.Status.StartTime == nil {
		t.Fatalf("deadline TrainJob not started (err %v)", err)
	}

	if err := dev.KillManager(devOpts); err != nil {
		t.Fatalf("killing the manager: %v", err)
	}
	time.Sleep(4 * time.Second)
	if err := dev.Up(context.Background(), devOpts); err != nil {
		t.Fatalf("starting the manager again: %v", err)
	}

	tj := cluster.WaitCondition(t, ns, "deadline", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
	due := running.Status.StartTime.Add(12 * time.Second)
	if at := tj.FinishedCondition().LastTransitionTime.Time; at.Before(due) || at.After(due.Add(deadlineTolerance)) {
		t.Errorf("deadline enforced at %s, want within %s after %s", at.Format(time.RFC3339), deadlineTolerance, due.Format(time.RFC3339))
	}
	waitGoneNotBefore(t, ns, "ttl", finished.FinishedCondition().LastTransitionTime.Add(12*time.Second))
}

// A runtime template's ttlSecondsAfterFinished keeps its JobSet meaning: the
// TrainJob's Jobs and Pods go that long after it finishes, and the
// TrainJob stays, Complete, with its status.
func TestRuntimeTTLDeletesTheJobsNotTheTrainJob(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.Create(t, utiltesting.MakeRuntimeSpec().Torch().JobsTTL(3).Runtime("jobs-ttl", ns))
	cluster.Create(t, utiltesting.MakeTrainJob("tj", ns).RuntimeRef(trainer.TrainingRuntimeKind, "jobs-ttl").
		Annotation(runFor, "2s").NumNodes(2).Command("torchrun", "train.py").Obj())
	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	due := tj.FinishedCondition().LastTransitionTime.Add(3 * time.Second)
	cluster.EventuallyWithin(t, time.Until(due)+deadlineTolerance, "the Jobs to go at the runtime's TTL", func() error {
		if jobs := cluster.JobsOf(t, ns, "tj"); len(jobs) > 0 {
			return fmt.Errorf("%d Jobs left", len(jobs))
		}
		return nil
	})
	if time.Now().Before(due) {
		t.Errorf("Jobs gone before the runtime's TTL (due %s)", due.Format(time.RFC3339))
	}
	cluster.WaitNoPods(t, 15*time.Second, ns, "tj")
	tj, err := cluster.GetTrainJob(ns, "tj")
	if err != nil {
		t.Fatalf("the TrainJob went with its Jobs: %v", err)
	}
	if c := tj.FinishedCondition(); c == nil || c.Type != trainer.TrainJobComplete || len(tj.Status.JobsStatus) == 0 || tj.Status.JobsStatus[0].Succeeded != 1 {
		t.Errorf("TrainJob after its Jobs went: %+v", tj.Status)
	}
}

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

package e2ereal

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

// restartAttemptEnv gives a process its Pod's restart attempt, from the
// Pod's labels through the downward API.
const restartAttemptEnv = `{name: RESTART_ATTEMPT, valueFrom: {fieldRef: {fieldPath: "metadata.labels['` + trainer.JobSetRestartAttemptLabel + `']"}}}`

// TestCrashRestarts crashes a real process: rank 1 of a torch job of 2
// nodes exits 1 in restart attempt 0. Its runtime is torch-distributed
// with JobSet's failure policy (maxRestarts: 2) and Jobs that fail with
// their first failed Pod, written as a Kubeflow user writes one: the Pod
// fails, its Job fails, the TrainJob restarts every Job, and attempt 1
// completes, with restarts: 1.
//
// The program runs without torchrun, one process per node: torchrun 1.13
// holds a node whose worker failed in its exit barrier until every other
// node's torchrun gets there too, or 300 s; the other node's workers wait
// for the failed one in the rendezvous (30 minutes), so the failure would
// reach Kubernetes 5 minutes late.
func TestCrashRestarts(t *testing.T) {
	ns := newNamespace(t)
	const name = "crash"
	cluster.CreateYAML(t, `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: torch-restarting, namespace: %s}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      failurePolicy: {maxRestarts: 2}
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            backoffLimit: 0
            template:
              spec:
                restartPolicy: Never
                containers: [{name: node, image: %s}]
`, ns, dev.TrainImage)
	createTrainJob(t, ns, name, trainJob{Runtime: "torch-restarting", RuntimeKind: trainer.TrainingRuntimeKind,
		Command: scriptCommand(t, "allreduce.py", "python3 /tmp/allreduce.py"),
		Trainer: `numNodes: 2, env: [{name: CRASH_RANK, value: "1"}, ` + restartAttemptEnv + `]`})
	tj := complete(t, ns, name)
	if tj.Status.Restarts != 1 {
		t.Errorf("restarts %d, want 1", tj.Status.Restarts)
	}
	for jobName, j := range cluster.JobsOf(t, ns, name) {
		if got := j.Labels[trainer.JobSetRestartAttemptLabel]; got != "1" {
			t.Errorf("Job %s is of restart attempt %q, want 1", jobName, got)
		}
	}
	wantOnRealNode(t, ns, name)
	logs := wantLogs(t, ns, name, "attempt 1,", "attempt 1,", "sum 3 = 3 over 2 hosts: OK", "sum 3 = 3 over 2 hosts: OK")
	if strings.Contains(logs, "crashes") {
		t.Errorf("attempt 1 crashed:\n%s", logs)
	}
}

// holdTrainJob creates a TrainJob of holdNodes nodes on torch-distributed
// running programs/hold.py, which reports to hs, with more spec fields
// (flow-map entries, each ending with a comma).
func holdTrainJob(t *testing.T, ns, name string, hs *holdServer, spec string) {
	t.Helper()
	createTrainJob(t, ns, name, trainJob{Runtime: "torch-distributed", Command: scriptCommand(t, "hold.py", "python3 /tmp/hold.py"),
		Trainer: fmt.Sprintf("numNodes: %d, env: [{name: REPORT_ADDR, value: %q}, %s]", holdNodes, hs.Addr(), restartAttemptEnv),
		Spec:    spec})
}

// TestSuspendResume suspends a TrainJob whose processes run: each gets
// SIGTERM (and says so) before the TrainJob is Suspended=True, when no Pod
// of it is left; resumed, it runs again, and completes when told to.
func TestSuspendResume(t *testing.T) {
	ns := newNamespace(t)
	const name = "suspend"
	hs := newHoldServer(t)
	holdTrainJob(t, ns, name, hs, "")
	hs.expect(t, runLong, "start")
	progress(t, "both processes run; suspending")

	cluster.PatchSuspend(t, ns, name, true)
	terms := hs.expect(t, cluster.Timeout, "sigterm")
	progress(t, "both processes got SIGTERM")
	cluster.WaitCondition(t, ns, name, trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason)
	suspended := time.Now()
	progress(t, "Suspended=True, %s after the last SIGTERM", suspended.Sub(terms[1].At).Round(time.Millisecond))
	if pods := cluster.ActivePods(t, ns, name); len(pods) > 0 {
		t.Errorf("Suspended=True with Pods left: %d", len(pods))
	}

	cluster.PatchSuspend(t, ns, name, false)
	started := hs.expect(t, runLong, "start")
	progress(t, "resumed: both processes run again")
	finish(t, started)
	complete(t, ns, name)
	wantOnRealNode(t, ns, name)
}

// TestDeadlineThenTTL gives processes that would run for an hour an
// activeDeadlineSeconds of 20: they get SIGTERM 20 s after the TrainJob
// started, within KEP-2899's ±5 s, it fails with DeadlineExceeded, and
// its ttlSecondsAfterFinished of 5 then deletes it, its Jobs and Pods.
func TestDeadlineThenTTL(t *testing.T) {
	ns := newNamespace(t)
	const (
		name      = "deadline"
		deadline  = 20 * time.Second
		ttl       = 5 * time.Second
		tolerance = 5 * time.Second
	)
	hs := newHoldServer(t)
	holdTrainJob(t, ns, name, hs, fmt.Sprintf("activeDeadlineSeconds: %d, ttlSecondsAfterFinished: %d,", int(deadline.Seconds()), int(ttl.Seconds())))
	hs.expect(t, runLong, "start")
	terms := hs.expect(t, deadline+tolerance+cluster.Timeout, "sigterm")
	tj := cluster.WaitCondition(t, ns, name, trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
	if tj.Status.StartTime == nil {
		t.Fatal("no startTime")
	}
	for _, term := range terms {
		// startTime has whole seconds: it may be up to 1 s early.
		after := term.At.Sub(tj.Status.StartTime.Time)
		progress(t, "%s got SIGTERM %s after the TrainJob started", term.Host, after.Round(time.Millisecond))
		if after < deadline-tolerance || after > deadline+time.Second+tolerance {
			t.Errorf("%s got SIGTERM %s after the TrainJob started, want %s ± %s", term.Host, after, deadline, tolerance)
		}
	}
	failed := time.Now()
	cluster.EventuallyWithin(t, ttl+cluster.Timeout, "the TrainJob, its Jobs and Pods to be deleted", func() error {
		if _, err := cluster.GetTrainJob(ns, name); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the TrainJob is there (%w)", err)
		}
		var jobs batchv1.JobList
		var pods corev1.PodList
		if err := cluster.Client.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
			return err
		}
		if err := cluster.Client.List(context.Background(), &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(jobs.Items)+len(pods.Items) > 0 {
			return fmt.Errorf("%d Jobs and %d Pods left", len(jobs.Items), len(pods.Items))
		}
		return nil
	})
	progress(t, "deleted with its Jobs and Pods %s after it failed", time.Since(failed).Round(time.Millisecond))
}

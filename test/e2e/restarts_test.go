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
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// failAttempts is the annotation that makes a simulated Pod fail only in
// the restart attempts before its value (internal/dev/stages.yaml).
const failAttempts = "pod-fail.stage.trainjob-operator.dev/attempts"

// restartingRuntime is a runtime of two nodes whose Jobs fail with their
// first failed Pod, with the given JobSet failure policy.
func restartingRuntime(name, ns string, policy trainer.FailurePolicy) *trainer.TrainingRuntime {
	node := utiltesting.MakeReplicatedJob("node").Trainer().BackoffLimit(0).RestartPolicy(corev1.RestartPolicyNever)
	return utiltesting.MakeRuntimeSpec().Torch().NumNodes(2).ReplicatedJobs(node.Obj()).FailurePolicy(policy).Runtime(name, ns)
}

// restartingTrainJob is a TrainJob on runtime whose Pods fail after 2s in
// the restart attempts before failingAttempts, and succeed after 2s in the
// others.
func restartingTrainJob(name, ns, runtime string, failingAttempts int) *utiltesting.TrainJobWrapper {
	return trainJob(name, ns, 2*time.Second).RuntimeRef(trainer.TrainingRuntimeKind, runtime).
		Annotation(failFor, "2s").Annotation(failAttempts, strconv.Itoa(failingAttempts))
}

// restartEvents returns the reasons of the TrainJob's restart events.
func restartEvents(t *testing.T, ns, name string) []string {
	t.Helper()
	var list corev1.EventList
	if err := cluster.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && strings.HasSuffix(e.Reason, "FailurePolicyAction") {
			for range max(e.Count, 1) {
				reasons = append(reasons, e.Reason)
			}
		}
	}
	return reasons
}

// A TrainJob whose Pods fail twice, with maxRestarts 3, completes on its
// third attempt: two restarts, each recreating its Jobs with the next
// restart attempt in their labels, an event for each.
func TestFailurePolicyRestartsUntilItSucceeds(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.Create(t, restartingRuntime("restarting", ns, trainer.FailurePolicy{MaxRestarts: 3}))
	cluster.Create(t, restartingTrainJob("twice", ns, "restarting", 2).Obj())
	tj := cluster.WaitCondition(t, ns, "twice", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	if tj.Status.Restarts != 2 || tj.Status.RestartsCountTowardsMax != 2 {
		t.Errorf("restarts %d (%d counted), want 2 (2)", tj.Status.Restarts, tj.Status.RestartsCountTowardsMax)
	}
	jobs := cluster.JobsOf(t, ns, "twice")
	if len(jobs) != 1 {
		t.Errorf("Jobs %d, want the last attempt's alone", len(jobs))
	}
	for name, j := range jobs {
		if got := j.Labels[trainer.JobSetRestartAttemptLabel]; got != "2" {
			t.Errorf("Job %s restart attempt %q, want 2", name, got)
		}
	}
	cluster.Eventually(t, "two restart events", func() error {
		if got := restartEvents(t, ns, "twice"); len(got) != 2 {
			return fmt.Errorf("restart events %v", got)
		}
		return nil
	})
}

// With maxRestarts 1, a TrainJob whose Pods keep failing restarts once,
// then fails with the restart budget spent.
func TestFailurePolicyMaxRestartsSpent(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.Create(t, restartingRuntime("restarting", ns, trainer.FailurePolicy{MaxRestarts: 1}))
	cluster.Create(t, restartingTrainJob("always", ns, "restarting", 100).Obj())
	tj := cluster.WaitCondition(t, ns, "always", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobReachedMaxRestartsReason)
	if tj.Status.Restarts != 1 {
		t.Errorf("restarts %d, want 1", tj.Status.Restarts)
	}
	cluster.WaitNoPods(t, timeout, ns, "always")
}

// A FailJobSet rule on the Job's failure reason fails the TrainJob at
// once, restart budget or not.
func TestFailurePolicyFailJobSetRule(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.Create(t, restartingRuntime("fail-fast", ns, trainer.FailurePolicy{MaxRestarts: 5, Rules: []trainer.FailurePolicyRule{{
		Name: "backoff", Action: trainer.FailJobSet, OnJobFailureReasons: []string{"BackoffLimitExceeded"},
	}}}))
	cluster.Create(t, restartingTrainJob("fast", ns, "fail-fast", 100).Obj())
	tj := cluster.WaitCondition(t, ns, "fast", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobFailJobSetReason)
	if tj.Status.Restarts != 0 {
		t.Errorf("restarts %d, want 0", tj.Status.Restarts)
	}
	if msg := condition(tj, trainer.TrainJobFailed).Message; !strings.Contains(msg, "rule backoff") {
		t.Errorf("Failed message %q does not name the rule", msg)
	}
}

// A TrainJob with restarts left keeps the runtime it started with: its
// runtime deleted, or edited (another node count and subdomain), while its
// first attempt runs, the attempt fails, and the restart is made from the
// runtime as it was, which it completes on, its Pods reaching each other
// by the names the first attempt had.
func TestRestartOutlivesItsRuntime(t *testing.T) {
	for name, change := range map[string][]string{
		"deleted": {"delete", "trainingruntime", "restarting"},
		"edited": {"patch", "trainingruntime", "restarting", "--type", "merge", "-p",
			`{"spec":{"mlPolicy":{"numNodes":3},"template":{"spec":{"network":{"subdomain":"elsewhere"}}}}}`},
	} {
		t.Run(name, func(t *testing.T) {
			ns := cluster.NewNamespace(t)
			cluster.Create(t, restartingRuntime("restarting", ns, trainer.FailurePolicy{MaxRestarts: 1}))
			// Its first attempt's Pods fail after 10s, the second's
			// succeed after 2s.
			cluster.Create(t, restartingTrainJob("tj", ns, "restarting", 1).Annotation(failFor, "10s").Obj())
			first := cluster.WaitPodsRunning(t, ns, "tj", 2)
			if out, err := cluster.Kubectl(append(change, "-n", ns)...); err != nil {
				t.Fatalf("kubectl %s: %v\n%s", change[0], err, out)
			}
			cluster.Eventually(t, "the second attempt to run", func() error {
				running := slices.DeleteFunc(cluster.ActivePods(t, ns, "tj"), func(p corev1.Pod) bool {
					return p.Status.Phase != corev1.PodRunning || p.Labels[trainer.JobSetRestartAttemptLabel] != "1"
				})
				if len(running) != 2 {
					return fmt.Errorf("%d Pods of restart attempt 1 running", len(running))
				}
				for _, p := range running {
					if got, want := envOf(&p)["PET_MASTER_ADDR"], envOf(&first[0])["PET_MASTER_ADDR"]; got != want || p.Spec.Subdomain != first[0].Spec.Subdomain {
						t.Errorf("Pod %s: PET_MASTER_ADDR %q, subdomain %q; the first attempt's were %q, %q", p.Name, got, p.Spec.Subdomain, want, first[0].Spec.Subdomain)
					}
				}
				return nil
			})
			tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
			if tj.Status.Restarts != 1 {
				t.Errorf("restarts %d, want 1", tj.Status.Restarts)
			}
		})
	}
}

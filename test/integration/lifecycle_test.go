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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// finishTime returns when a finished TrainJob finished.
func finishTime(t *testing.T, tj *trainer.TrainJob) time.Time {
	t.Helper()
	c := tj.FinishedCondition()
	if c == nil {
		t.Fatalf("TrainJob %s has not finished: %+v", tj.Name, tj.Status.Conditions)
	}
	return c.LastTransitionTime.Time
}

// waitDeletedNotBefore waits for a TrainJob to be gone, and fails if it is
// gone before notBefore.
func waitDeletedNotBefore(t *testing.T, ns, name string, notBefore time.Time) {
	t.Helper()
	var goneAt time.Time
	cluster.Eventually(t, "TrainJob "+name+" to be deleted", func() error {
		_, err := cluster.GetTrainJob(ns, name)
		if apierrors.IsNotFound(err) {
			goneAt = time.Now()
			return nil
		}
		if err == nil && time.Now().Before(notBefore) {
			return fmt.Errorf("still there, as it should be until %s", notBefore.Format(time.RFC3339Nano))
		}
		if err == nil {
			return fmt.Errorf("still there, due at %s", notBefore.Format(time.RFC3339Nano))
		}
		return err
	})
	if goneAt.Before(notBefore) {
		t.Fatalf("TrainJob %s deleted at %s, before it was due at %s", name, goneAt.Format(time.RFC3339Nano), notBefore.Format(time.RFC3339Nano))
	}
}

// waitGone waits for an object to be deleted.
func waitGone(t *testing.T, obj client.Object) {
	t.Helper()
	cluster.Eventually(t, fmt.Sprintf("%T %s to be gone", obj, obj.GetName()), func() error {
		err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("still there (deletionTimestamp %v, finalizers %v)", obj.GetDeletionTimestamp(), obj.GetFinalizers())
		}
		return err
	})
}

func TestTTLDeletesTheTrainJobAndItsChildren(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("tj", ns).NumNodes(2).TTL(2).Obj())
	waitJob(t, ns, "tj-node-0")
	setJobStatus(t, ns, "tj-node-0", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })
	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	// The headless Service goes as soon as the TrainJob finished.
	waitGone(t, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tj"}})

	waitDeletedNotBefore(t, ns, "tj", finishTime(t, tj).Add(2*time.Second))
	// Foreground deletion: the children went first.
	job, err := getJob(ns, "tj-node-0")
	if !apierrors.IsNotFound(err) {
		t.Errorf("child Job left behind: %v (err %v)", job.ObjectMeta, err)
	}
}

func TestDeadlineFailsARunningTrainJob(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("tj", ns).NumNodes(2).Deadline(3).Obj())
	waitJob(t, ns, "tj-node-0")
	setJobStatus(t, ns, "tj-node-0", func(w *utiltesting.JobWrapper) { w.Active(2) })

	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
	due := tj.Status.StartTime.Add(3 * time.Second)
	// KEP-2899: within 5 s of the deadline, and never before it.
	if failedAt := finishTime(t, tj); failedAt.Before(due) || failedAt.After(due.Add(5*time.Second)) {
		t.Errorf("failed at %s, want within 5s after the deadline %s", failedAt, due)
	}
	cluster.Eventually(t, "the Pods to be terminated (child Job suspended)", func() error {
		job, err := getJob(ns, "tj-node-0")
		if err == nil && !ptr.Deref(job.Spec.Suspend, false) {
			err = fmt.Errorf("child Job still running")
		}
		return err
	})
}

// The manager is stopped while a TTL and a deadline are pending; a new one
// acts on both at their time, neither early.
func TestTimersSurviveARestart(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("ttl", ns).TTL(6).Obj())
	cluster.Create(t, trainJobOn("deadline", ns).Deadline(6).Obj())
	waitJob(t, ns, "ttl-node-0")
	waitJob(t, ns, "deadline-node-0")
	setJobStatus(t, ns, "deadline-node-0", func(w *utiltesting.JobWrapper) { w.Active(1) })
	setJobStatus(t, ns, "ttl-node-0", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })
	finished := cluster.WaitCondition(t, ns, "ttl", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	var started time.Time
	cluster.Eventually(t, "the deadline TrainJob to start", func() error {
		tj, err := cluster.GetTrainJob(ns, "deadline")
		if err == nil && tj.Status.StartTime == nil {
			err = fmt.Errorf("no startTime")
		}
		if err == nil {
			started = tj.Status.StartTime.Time
		}
		return err
	})

	running.stop()
	time.Sleep(2 * time.Second) // nothing runs the timers now
	var err error
	running, err = startManager(nil)
	if err != nil {
		t.Fatalf("starting a new manager: %v", err)
	}

	deadline := cluster.WaitCondition(t, ns, "deadline", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
	if failedAt, due := finishTime(t, deadline), started.Add(6*time.Second); failedAt.Before(due) {
		t.Errorf("deadline enforced at %s, before it was due at %s", failedAt, due)
	}
	waitDeletedNotBefore(t, ns, "ttl", finishTime(t, finished).Add(6*time.Second))
}

// A user gives a finished TrainJob more time just before its TTL expires: it
// is not deleted.
func TestTTLExtendedJustBeforeExpiry(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("tj", ns).TTL(5).Obj())
	waitJob(t, ns, "tj-node-0")
	setJobStatus(t, ns, "tj-node-0", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })
	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	expiry := finishTime(t, tj).Add(5 * time.Second)

	// Far enough before the expiry that a loaded machine still lands the
	// update first; the controller has the expiry queued all along.
	time.Sleep(time.Until(expiry.Add(-2 * time.Second)))
	updateTrainJob(t, ns, "tj", func(tj *trainer.TrainJob) { tj.Spec.TTLSecondsAfterFinished = ptr.To[int32](3600) })
	cluster.Consistently(t, time.Until(expiry.Add(3*time.Second)), "the TrainJob whose TTL was extended is kept", func() error {
		_, err := cluster.GetTrainJob(ns, "tj")
		return err
	})
}

// A finalizer someone else put on the TrainJob holds it: the TTL deletion
// only marks it, and it goes once the finalizer is removed.
func TestTTLHonoursFinalizers(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	tj := trainJobOn("tj", ns).TTL(0).Obj()
	tj.Finalizers = []string{"example.com/archive-first"}
	cluster.Create(t, tj)
	waitJob(t, ns, "tj-node-0")
	setJobStatus(t, ns, "tj-node-0", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })
	cluster.Eventually(t, "the TrainJob to be marked for deletion", func() error {
		cur, err := cluster.GetTrainJob(ns, "tj")
		if err == nil && cur.DeletionTimestamp == nil {
			err = fmt.Errorf("not marked")
		}
		return err
	})
	cluster.Consistently(t, consistently, "the finalizer holds the TrainJob", func() error {
		cur, err := cluster.GetTrainJob(ns, "tj")
		if err == nil && !strings.Contains(strings.Join(cur.Finalizers, ","), "example.com/archive-first") {
			err = fmt.Errorf("finalizers changed: %v", cur.Finalizers)
		}
		return err
	})
	updateTrainJob(t, ns, "tj", func(tj *trainer.TrainJob) {
		var keep []string
		for _, f := range tj.Finalizers {
			if f != "example.com/archive-first" {
				keep = append(keep, f)
			}
		}
		tj.Finalizers = keep
	})
	waitGone(t, &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tj"}})
}

func TestRetentionPolicies(t *testing.T) {
	restartManager(t, func(cfg *configv1alpha1.Configuration) {
		cfg.ObjectRetentionPolicies = &configv1alpha1.ObjectRetentionPolicies{TrainJobs: &configv1alpha1.TrainJobRetentionPolicy{
			AfterFinished:  &metav1.Duration{Duration: time.Hour},
			AfterFailed:    &metav1.Duration{Duration: 3 * time.Second},
			AfterSuspended: &metav1.Duration{Duration: 4 * time.Second},
		}}
	})
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("failed", ns).Obj())
	cluster.Create(t, trainJobOn("complete", ns).Obj())
	cluster.Create(t, trainJobOn("complete-own-ttl", ns).TTL(3).Obj())
	cluster.Create(t, trainJobOn("suspended", ns).Obj())
	// Created suspended, never started: waiting to be started, not retired.
	cluster.Create(t, trainJobOn("waiting", ns).Suspend(true).Obj())
	for _, name := range []string{"failed", "complete", "complete-own-ttl", "suspended", "waiting"} {
		waitJob(t, ns, name+"-node-0")
	}
	// "suspended" runs, then is suspended.
	waitRunning(t, ns, "suspended")
	updateTrainJob(t, ns, "suspended", func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(true) })
	setJobStatus(t, ns, "suspended-node-0", func(w *utiltesting.JobWrapper) { w.SuspendedByController(time.Now()) })
	setJobStatus(t, ns, "failed-node-0", func(w *utiltesting.JobWrapper) { w.Failed("BackoffLimitExceeded", time.Now()) })
	setJobStatus(t, ns, "complete-node-0", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })
	setJobStatus(t, ns, "complete-own-ttl-node-0", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })

	// See each one finish (or be suspended) before any of them may go.
	failed := cluster.WaitCondition(t, ns, "failed", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobJobFailedReason)
	ownTTL := cluster.WaitCondition(t, ns, "complete-own-ttl", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	suspended := cluster.WaitCondition(t, ns, "suspended", trainer.TrainJobSuspended, metav1.ConditionTrue, trainer.TrainJobSuspendedReason)

	waitDeletedNotBefore(t, ns, "failed", finishTime(t, failed).Add(3*time.Second))
	waitDeletedNotBefore(t, ns, "complete-own-ttl", finishTime(t, ownTTL).Add(3*time.Second))
	waitDeletedNotBefore(t, ns, "suspended", suspended.Status.Conditions[0].LastTransitionTime.Add(4*time.Second))
	// afterFinished is an hour: the Complete one stays; the one waiting to
	// start, Suspended as long, stays too.
	for _, name := range []string{"complete", "waiting"} {
		if tj, err := cluster.GetTrainJob(ns, name); err != nil || tj.DeletionTimestamp != nil {
			t.Errorf("TrainJob %s deleted by a retention policy that does not apply to it (err %v)", name, err)
		}
	}
}

// The manager refuses to start on a configuration it cannot honour, and says
// which field is wrong.
func TestBadConfigurationStopsTheManager(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the manager: %v\n%s", err, out)
	}
	cases := map[string]struct {
		config string
		want   string
	}{
		"negative retention": {
			config: "objectRetentionPolicies:\n  trainJobs:\n    afterFinished: -5m\n",
			want:   `objectRetentionPolicies.trainJobs.afterFinished: Invalid value: "-5m0s": must be 0 (delete at once) or more`,
		},
		"unparsable retention": {
			config: "objectRetentionPolicies:\n  trainJobs:\n    afterFailed: a week\n",
			want:   `objectRetentionPolicies.trainJobs.afterFailed: Invalid value: "a week": must be a duration`,
		},
		"misspelt field": {
			config: "objectRetentionPolicy:\n  trainJobs: {}\n",
			want:   `unknown field "objectRetentionPolicy"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config.yaml")
			data := "apiVersion: config.trainer.kubeflow.org/v1alpha1\nkind: Configuration\n" + tc.config
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "--config", path, "--kubeconfig", cluster.Kubeconfig)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the manager kept running on a bad configuration:\n%s", out)
			}
			if err == nil {
				t.Fatalf("the manager exited 0 on a bad configuration:\n%s", out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output does not say %q:\n%s", tc.want, out)
			}
		})
	}
}

// The webhook, served through the real API server: what kubectl shows.
func TestWebhook(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	apply := func(manifest string) (string, error) {
		path := filepath.Join(t.TempDir(), "tj.yaml")
		if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		return cluster.Kubectl("apply", "-n", ns, "-f", path)
	}
	trainJob := func(name, spec string) string {
		return "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: " + name +
			"\nspec:\n  runtimeRef:\n    kind: TrainingRuntime\n    name: torch\n" + spec
	}

	out, err := apply(trainJob("short-ttl", "  ttlSecondsAfterFinished: 10\n"))
	if err != nil || !strings.Contains(out, "Warning: spec.ttlSecondsAfterFinished: 10: the TrainJob, its Jobs and its Pods' logs are deleted 10s after it finishes") {
		t.Errorf("short TTL: want it accepted with a warning; err %v, output:\n%s", err, out)
	}
	out, err = apply(strings.Replace(trainJob("no-runtime", ""), "name: torch", "name: absent", 1))
	if err != nil || !strings.Contains(out, `Warning: spec.runtimeRef: TrainingRuntime "absent" does not exist in namespace `+ns) {
		t.Errorf("missing runtime: want it accepted with a warning; err %v, output:\n%s", err, out)
	}
	out, err = apply(trainJob("reserved", "  trainer:\n    env:\n    - name: PET_MASTER_ADDR\n      value: elsewhere\n"))
	if err == nil || !strings.Contains(out, "spec.trainer.env[0].name: Forbidden: PET_MASTER_ADDR is set by the torch runtime") {
		t.Errorf("reserved variable: want it refused naming the field; err %v, output:\n%s", err, out)
	}

	// A finished TrainJob cannot be suspended.
	waitJob(t, ns, "short-ttl-node-0")
	updateTrainJob(t, ns, "short-ttl", func(tj *trainer.TrainJob) { tj.Spec.TTLSecondsAfterFinished = ptr.To[int32](3600) })
	setJobStatus(t, ns, "short-ttl-node-0", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })
	cluster.WaitCondition(t, ns, "short-ttl", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	out, err = cluster.Kubectl("patch", "trainjob", "short-ttl", "-n", ns, "--type=merge", "-p", `{"spec":{"suspend":true}}`)
	if err == nil || !strings.Contains(out, "spec.suspend: Forbidden: the TrainJob finished (it is Complete or Failed); a finished TrainJob cannot be suspended") {
		t.Errorf("suspending a finished TrainJob: want it refused; err %v, output:\n%s", err, out)
	}

	// A misspelt managedBy: accepted, with a warning that nothing here will
	// run it.
	out, err = apply(trainJob("typo", "  managedBy: trainer.kubeflow.org/trainjob-controler\n"))
	if err != nil || !strings.Contains(out, `Warning: spec.managedBy: "trainer.kubeflow.org/trainjob-controler" is neither trainer.kubeflow.org/trainjob-controller (trainjob-operator) nor kueue.x-k8s.io/multikueue`) {
		t.Errorf("misspelt managedBy: want it accepted with a warning; err %v, output:\n%s", err, out)
	}

	// A runtime the CRD schema accepts, whose Jobs the API server refuses
	// for a reason no rule foresaw: a TrainJob on it is refused with the API
	// server's message, naming the runtime and the replicated Job, and
	// nothing is created.
	refused := utiltesting.MakeRuntimeSpec().ReplicatedJob(utiltesting.MakeReplicatedJob("ps").Obj())
	refused.Template.Spec.ReplicatedJobs[1].Template.Spec.BackoffLimit = ptr.To[int32](-1)
	cluster.Create(t, refused.Runtime("refused-jobs", ns))
	out, err = apply(strings.Replace(trainJob("on-refused", ""), "name: torch", "name: refused-jobs", 1))
	for _, want := range []string{
		`runtime[TrainingRuntime/refused-jobs].spec.template.spec.replicatedJobs[1]: Invalid value: "ps": the API server refuses the Jobs of replicated Job "ps" of TrainingRuntime "refused-jobs"`,
		`Job.batch "on-refused-ps-0" is invalid: spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0`,
	} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("TrainJob whose Jobs the API server refuses: want it refused saying %q; err %v, output:\n%s", want, err, out)
		}
	}
	if _, err := getJob(ns, "on-refused-node-0"); !apierrors.IsNotFound(err) {
		t.Errorf("the dry run left Job on-refused-node-0 behind (err %v)", err)
	}

	// When the API server cannot say (a quota refusing every Job), the
	// TrainJob is accepted with a warning: the quota may change.
	quotaNS := cluster.NewNamespace(t)
	torchRuntime(t, quotaNS, utiltesting.MakeRuntimeSpec().Torch())
	noJobs := corev1.ResourceList{"count/jobs.batch": resource.MustParse("0")}
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-jobs", Namespace: quotaNS},
		Spec:       corev1.ResourceQuotaSpec{Hard: noJobs},
	}
	cluster.Create(t, quota)
	// The suite runs no quota controller: its status, which admission
	// enforces, is written here as that controller would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: noJobs, Used: noJobs}
	if err := cluster.Client.Status().Update(context.Background(), quota); err != nil {
		t.Fatalf("writing the quota's status: %v", err)
	}
	path := filepath.Join(t.TempDir(), "quota.yaml")
	if err := os.WriteFile(path, []byte(trainJob("over-quota", "")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = cluster.Kubectl("apply", "-n", quotaNS, "-f", path)
	if err != nil || !strings.Contains(out, `Warning: could not check that the API server accepts Job over-quota-node-0 of replicated Job "node" (dry run): jobs.batch "over-quota-node-0" is forbidden`) {
		t.Errorf("TrainJob in a namespace whose quota refuses Jobs: want it accepted with a warning; err %v, output:\n%s", err, out)
	}
}

// KEP-2899's "both fields set": the deadline fails the TrainJob, and the TTL
// then counts from that failure.
func TestDeadlineThenTTL(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("tj", ns).Deadline(2).TTL(3).Obj())
	waitJob(t, ns, "tj-node-0")
	setJobStatus(t, ns, "tj-node-0", func(w *utiltesting.JobWrapper) { w.Active(1) })

	tj := cluster.WaitCondition(t, ns, "tj", trainer.TrainJobFailed, metav1.ConditionTrue, trainer.TrainJobDeadlineExceededReason)
	if failedAt, due := finishTime(t, tj), tj.Status.StartTime.Add(2*time.Second); failedAt.Before(due) {
		t.Errorf("failed at %s, before the deadline %s", failedAt, due)
	}
	waitDeletedNotBefore(t, ns, "tj", finishTime(t, tj).Add(3*time.Second))
}

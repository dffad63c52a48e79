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

package e2emultikueue

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

// A TrainJob queued on the manager cluster is dispatched to a worker and
// run there by this controller, on its copy; the manager cluster runs
// nothing for it, and its TrainJob shows the copy's status, as Kueue
// mirrors it, and finishes when the copy does. Kueue then deletes the
// copy.
func TestDispatchedRunsOnAWorkerWithItsStatusMirrored(t *testing.T) {
	ns := newNamespace(t)
	tj := trainJob(ns, "mirrored", queueName, 2, 15*time.Second)
	// A field Kubeflow Trainer v2.2.1's types lack, through which Kueue
	// copies the TrainJob: kept on the manager cluster, not on the copy.
	tj.Spec.Labels = map[string]string{"team": "a"}
	manager.Create(t, tj)
	tj, err := manager.GetTrainJob(ns, "mirrored")
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(tj.Spec.ManagedBy, ""); got != dev.MultiKueueManagedBy {
		t.Fatalf("spec.managedBy = %q, want %q (Kueue's webhook)", got, dev.MultiKueueManagedBy)
	}
	on := waitDispatched(t, ns, "mirrored")
	w := workers[on]
	progress(t, "dispatched to %s", on)
	w.WaitPodsRunning(t, ns, "mirrored", 2)
	progress(t, "its 2 Pods run on %s", on)

	copied, err := w.GetTrainJob(ns, "mirrored")
	if err != nil {
		t.Fatal(err)
	}
	if copied.Labels[dev.MultiKueueOriginLabel] == "" {
		t.Errorf("the copy on %s has no %s label: %v", on, dev.MultiKueueOriginLabel, copied.Labels)
	}
	if got := ptr.Deref(copied.Spec.ManagedBy, trainer.DefaultManagedBy); got != trainer.DefaultManagedBy {
		t.Errorf("the copy's spec.managedBy = %q, want this controller's", got)
	}
	if tj.Spec.Labels["team"] != "a" || copied.Spec.Labels != nil {
		t.Errorf("spec.labels %v on the manager cluster, %v on the copy; want them on the manager cluster only (docs/multicluster.md: Kueue copies through Kubeflow's types)",
			tj.Spec.Labels, copied.Spec.Labels)
	}
	if _, err := workers[otherWorker(on)].GetTrainJob(ns, "mirrored"); !apierrors.IsNotFound(err) {
		t.Errorf("a copy on %s too (err %v), want none", otherWorker(on), err)
	}
	if jobs := manager.JobsOf(t, ns, "mirrored"); len(jobs) != 0 {
		t.Errorf("Jobs on the manager cluster: %v", jobs)
	}
	if pods := manager.ActivePods(t, ns, "mirrored"); len(pods) != 0 {
		t.Errorf("%d Pods on the manager cluster", len(pods))
	}

	// The copy's jobsStatus, mirrored.
	manager.Eventually(t, "jobsStatus mirrored while it runs", func() error {
		local, err := manager.GetTrainJob(ns, "mirrored")
		if err != nil {
			return err
		}
		remote, err := w.GetTrainJob(ns, "mirrored")
		if err != nil {
			return err
		}
		if len(remote.Status.JobsStatus) == 0 || remote.Status.JobsStatus[0].Active == 0 {
			return fmt.Errorf("the copy is not running yet: %+v", remote.Status.JobsStatus)
		}
		return diff(counts(remote), counts(local))
	})

	// Finished on the worker, then on the manager with the same condition.
	remote := w.WaitCondition(t, ns, "mirrored", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	local := manager.WaitCondition(t, ns, "mirrored", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	want := meta.FindStatusCondition(remote.Status.Conditions, trainer.TrainJobComplete)
	got := meta.FindStatusCondition(local.Status.Conditions, trainer.TrainJobComplete)
	if !got.LastTransitionTime.Equal(&want.LastTransitionTime) || got.Message != want.Message {
		t.Errorf("Complete on the manager cluster %+v, want the copy's %+v", got, want)
	}
	progress(t, "Complete on %s at %s, on the manager cluster the same", on, want.LastTransitionTime.Format(time.RFC3339))
	if err := diff(counts(remote), counts(local)); err != nil {
		t.Errorf("jobsStatus once finished: %v", err)
	}
	// Kueue v0.19 mirrors the fields of Kubeflow Trainer's TrainJobStatus
	// only: the copy's startTime and completionTime stay on the worker.
	if remote.Status.StartTime == nil || remote.Status.CompletionTime == nil {
		t.Errorf("the copy has startTime %v and completionTime %v, want both", remote.Status.StartTime, remote.Status.CompletionTime)
	}
	if local.Status.StartTime != nil || local.Status.CompletionTime != nil {
		t.Errorf("startTime %v and completionTime %v mirrored to the manager cluster: Kueue mirrors them now, docs/multicluster.md says it does not",
			local.Status.StartTime, local.Status.CompletionTime)
	}

	// Kueue deletes the copy of a finished TrainJob, and its Jobs and Pods
	// go with it; the manager's stays, until its TTL or retention.
	w.Eventually(t, "the copy on "+on+" to be deleted", func() error {
		if _, err := w.GetTrainJob(ns, "mirrored"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (err %w)", err)
		}
		if jobs := w.JobsOf(t, ns, "mirrored"); len(jobs) > 0 {
			return fmt.Errorf("%d Jobs left", len(jobs))
		}
		return nil
	})
	if _, err := manager.GetTrainJob(ns, "mirrored"); err != nil {
		t.Errorf("the manager cluster's TrainJob: %v, want it kept", err)
	}
}

// The manager cluster's TrainJob is deleted when its ttlSecondsAfterFinished
// expires, counted from the finish Kueue mirrors; the worker's copy, Jobs
// and Pods go too, and nothing is left on any cluster.
func TestTTLOnTheManagerDeletesItEverywhere(t *testing.T) {
	const ttl = 5 * time.Second
	ns := newNamespace(t)
	tj := trainJob(ns, "ttl", queueName, 1, 5*time.Second)
	tj.Spec.TTLSecondsAfterFinished = ptr.To(int32(ttl / time.Second))
	manager.Create(t, tj)
	on := waitDispatched(t, ns, "ttl")
	done := manager.WaitCondition(t, ns, "ttl", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	finished := meta.FindStatusCondition(done.Status.Conditions, trainer.TrainJobComplete).LastTransitionTime.Time
	progress(t, "Complete on %s at %s", on, finished.Format(time.RFC3339))

	var gone time.Time
	manager.EventuallyWithin(t, ttl+30*time.Second, "the TrainJob to be deleted on the manager cluster", func() error {
		if _, err := manager.GetTrainJob(ns, "ttl"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (err %w)", err)
		}
		gone = time.Now()
		return nil
	})
	// Seen gone within a poll of its deletion; the finish time has a
	// second's precision.
	if after := gone.Sub(finished); after < ttl || after > ttl+3*time.Second {
		t.Errorf("deleted %s after it finished, want its TTL %s (+3s)", after.Round(time.Millisecond), ttl)
	}
	progress(t, "deleted on the manager cluster %s after it finished", gone.Sub(finished).Round(time.Millisecond))
	nothingLeft(t, ns, time.Minute)
}

// activeDeadlineSeconds is enforced once, on the worker, by this
// controller on the copy; the manager cluster shows the copy's Failed
// (DeadlineExceeded) within 5 s of the deadline. The deadline extended on
// the manager cluster after dispatch does not reach the copy.
func TestDeadlineEnforcedOnTheWorker(t *testing.T) {
	const deadline = 20
	ns := newNamespace(t)
	tj := trainJob(ns, "deadline", queueName, 2, 10*time.Minute)
	tj.Spec.ActiveDeadlineSeconds = ptr.To(int64(deadline))
	manager.Create(t, tj)
	on := waitDispatched(t, ns, "deadline")
	w := workers[on]
	w.WaitPodsRunning(t, ns, "deadline", 2)
	copied, err := w.GetTrainJob(ns, "deadline")
	if err != nil {
		t.Fatal(err)
	}
	if copied.Spec.ActiveDeadlineSeconds == nil || *copied.Spec.ActiveDeadlineSeconds != deadline {
		t.Fatalf("the copy's activeDeadlineSeconds = %v, want %d", copied.Spec.ActiveDeadlineSeconds, deadline)
	}
	// Extended on the manager cluster: the copy keeps the deadline it was
	// dispatched with (Kueue never updates a copy's spec).
	manager.MustKubectl(t, "patch", "trainjob", "deadline", "-n", ns, "--type=merge", "-p", `{"spec":{"activeDeadlineSeconds":3600}}`)
	var due time.Time
	w.Eventually(t, "the copy to start", func() error {
		copied, err := w.GetTrainJob(ns, "deadline")
		if err != nil || copied.Status.StartTime == nil {
			return fmt.Errorf("no startTime yet (err %w)", err)
		}
		due = copied.Status.StartTime.Add(deadline * time.Second)
		return nil
	})
	progress(t, "running on %s, deadline at %s", on, due.Format(time.RFC3339))

	var seen time.Time
	manager.EventuallyWithin(t, time.Until(due)+30*time.Second, "Failed (DeadlineExceeded) on the manager cluster", func() error {
		local, err := manager.GetTrainJob(ns, "deadline")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(local.Status.Conditions, trainer.TrainJobFailed)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != trainer.TrainJobDeadlineExceededReason {
			return fmt.Errorf("conditions %+v", local.Status.Conditions)
		}
		seen = time.Now()
		return nil
	})
	if d := seen.Sub(due); d < -time.Second || d > 5*time.Second {
		t.Errorf("Failed (DeadlineExceeded) seen on the manager cluster %s after the deadline, want within 5s", d.Round(time.Millisecond))
	}
	progress(t, "Failed (DeadlineExceeded) on the manager cluster %s after the deadline", seen.Sub(due).Round(time.Millisecond))
	// Once: the manager cluster's controller wrote nothing of it.
	local, err := manager.GetTrainJob(ns, "deadline")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range local.ManagedFields {
		if f.Manager == managerFieldManager {
			t.Errorf("the manager cluster's controller wrote the TrainJob (%s, %s): it runs on the worker", f.Operation, f.Subresource)
		}
	}
	w.WaitNoPods(t, 30*time.Second, ns, "deadline")
}

// With room for one TrainJob on the manager's ClusterQueue, three run one
// after another, on whichever worker MultiKueue picks, never two at once.
func TestQuotaOfOneRunsThemOneAfterAnother(t *testing.T) {
	ns := newNamespace(t)
	const cq = "e2e-mk-one"
	manager.CreateYAML(t, `
apiVersion: %s
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: multikueue
      resources:
      - {name: cpu, nominalQuota: "1"}
      - {name: memory, nominalQuota: 64Gi}
  admissionChecksStrategy:
    admissionChecks: [{name: multikueue}]
`, kueueVersion, cq)
	localQueue(t, manager, ns, "one", cq)
	for _, w := range workers {
		localQueue(t, w, ns, "one", "worker")
	}
	names := []string{"first", "second", "third"}
	for _, name := range names {
		manager.Create(t, trainJob(ns, name, "one", 1, 5*time.Second))
	}
	// Which TrainJobs have Pods running, on any worker, polled until all
	// three are Complete on the manager cluster.
	ran := map[string]string{}
	most := 0
	manager.EventuallyWithin(t, 3*time.Minute, "the three to finish one after another", func() error {
		running := map[string]bool{}
		for wname, w := range workers {
			for _, name := range names {
				if len(w.ActivePods(t, ns, name)) > 0 {
					running[name] = true
					ran[name] = wname
				}
			}
		}
		most = max(most, len(running))
		for _, name := range names {
			tj, err := manager.GetTrainJob(ns, name)
			if err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
				return fmt.Errorf("%s not Complete yet", name)
			}
		}
		return nil
	})
	if most != 1 {
		t.Errorf("%d TrainJobs ran at once, want 1", most)
	}
	progress(t, "ran one at a time, on %v", ran)
}

// counts are a TrainJob's jobsStatus counts, as Kubeflow's TrainJobStatus
// has them (what Kueue mirrors).
func counts(tj *trainer.TrainJob) []trainer.JobStatus {
	var out []trainer.JobStatus
	for _, js := range tj.Status.JobsStatus {
		out = append(out, trainer.JobStatus{Name: js.Name, Ready: js.Ready, Succeeded: js.Succeeded, Failed: js.Failed, Active: js.Active, Suspended: js.Suspended})
	}
	return out
}

func diff(want, got []trainer.JobStatus) error {
	if d := cmp.Diff(want, got); d != "" {
		return fmt.Errorf("jobsStatus on the manager cluster (-the copy's +mirrored):\n%s", d)
	}
	return nil
}

// managerFieldManager is the field manager of the manager's writes: the
// name of its binary, as client-go names them.
const managerFieldManager = "manager"

// Kueue keeps an admitted TrainJob running: spec.suspend set on the
// manager cluster's TrainJob is undone by Kueue and never reaches the
// copy (Kueue does not update a copy's spec). A TrainJob is stopped the
// Kueue way, by deactivating its Workload: Kueue evicts it and deletes
// the copy, whose Pods go; reactivated, it is admitted again, dispatched
// again (to either worker) and runs to Complete.
func TestStoppedAndStartedAgainByItsWorkload(t *testing.T) {
	ns := newNamespace(t)
	manager.Create(t, trainJob(ns, "stopped", queueName, 2, 20*time.Second))
	on := waitDispatched(t, ns, "stopped")
	workers[on].WaitPodsRunning(t, ns, "stopped", 2)
	progress(t, "running on %s", on)

	manager.PatchSuspend(t, ns, "stopped", true)
	manager.Eventually(t, "Kueue to undo spec.suspend on the admitted TrainJob", func() error {
		tj, err := manager.GetTrainJob(ns, "stopped")
		if err != nil {
			return err
		}
		if ptr.Deref(tj.Spec.Suspend, false) {
			return fmt.Errorf("still suspended")
		}
		return nil
	})
	if pods := workers[on].ActivePods(t, ns, "stopped"); len(pods) != 2 {
		t.Errorf("%d Pods on %s after spec.suspend was set and undone, want 2 still", len(pods), on)
	}
	progress(t, "spec.suspend undone by Kueue; the copy runs on")

	wl, err := workloadOf(manager, ns, "stopped")
	if err != nil || wl == nil {
		t.Fatalf("its Workload: %v", err)
	}
	setActive(t, ns, wl.Name, false)
	workers[on].WaitNoPods(t, time.Minute, ns, "stopped")
	progress(t, "Workload deactivated: the copy's Pods on %s are gone", on)
	manager.Eventually(t, "the manager's TrainJob to be suspended", func() error {
		tj, err := manager.GetTrainJob(ns, "stopped")
		if err != nil {
			return err
		}
		if !ptr.Deref(tj.Spec.Suspend, false) {
			return fmt.Errorf("not suspended")
		}
		return nil
	})

	setActive(t, ns, wl.Name, true)
	again := waitDispatched(t, ns, "stopped")
	workers[again].WaitPodsRunning(t, ns, "stopped", 2)
	progress(t, "Workload reactivated: running again on %s", again)
	manager.WaitCondition(t, ns, "stopped", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
}

// setActive sets spec.active of the Workload ns/name on the manager
// cluster.
func setActive(t *testing.T, ns, name string, active bool) {
	t.Helper()
	manager.MustKubectl(t, "patch", "workloads.kueue.x-k8s.io", name, "-n", ns, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"active":%t}}`, active))
}

// A worker whose API server stops mid-run is lost to MultiKueue: after
// its workerLostTimeout, Kueue evicts the TrainJob and dispatches it to the
// other worker, where it runs to Complete. Until the lost worker comes
// back, its copy is out of Kueue's reach; when it does, Kueue deletes it.
// So two copies may run at once from the timeout until the lost worker is
// back: what Kueue's protocol allows.
func TestWorkerLostMidRun(t *testing.T) {
	ns := newNamespace(t)
	manager.Create(t, trainJob(ns, "lost", queueName, 2, 60*time.Second))
	on := waitDispatched(t, ns, "lost")
	workers[on].WaitPodsRunning(t, ns, "lost", 2)
	progress(t, "running on %s; stopping its API server", on)
	start, err := dev.StopAPIServer(devOpts.Worker(on))
	if err != nil {
		t.Fatal(err)
	}
	lostAt := time.Now()
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			if err := start(); err != nil {
				t.Errorf("starting the API server of %s again: %v", on, err)
			}
		}
	}
	t.Cleanup(restart)

	other := otherWorker(on)
	var moved time.Time
	manager.EventuallyWithin(t, workerLostTimeout+2*time.Minute, "the TrainJob dispatched to "+other, func() error {
		wl, err := workloadOf(manager, ns, "lost")
		if err != nil || wl == nil {
			return fmt.Errorf("its Workload: %w", err)
		}
		if wl.Status.ClusterName != other {
			return fmt.Errorf("on %q; conditions %+v", wl.Status.ClusterName, wl.Status.Conditions)
		}
		moved = time.Now()
		return nil
	})
	progress(t, "dispatched to %s %s after %s was lost (workerLostTimeout %s)", other, moved.Sub(lostAt).Round(time.Second), on, workerLostTimeout)
	if d := moved.Sub(lostAt); d < workerLostTimeout {
		t.Errorf("dispatched again %s after the worker was lost, before workerLostTimeout %s", d, workerLostTimeout)
	}
	workers[other].WaitPodsRunning(t, ns, "lost", 2)

	restart()
	progress(t, "%s's API server started again", on)
	var removed time.Time
	workers[on].EventuallyWithin(t, 3*time.Minute, "the stale copy on "+on+" to be deleted", func() error {
		if _, err := workers[on].GetTrainJob(ns, "lost"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (err %w)", err)
		}
		removed = time.Now()
		return nil
	})
	progress(t, "the stale copy on %s deleted %s after its API server came back", on, removed.Sub(moved).Round(time.Second))
	workers[on].WaitNoPods(t, time.Minute, ns, "lost")
	manager.EventuallyWithin(t, 2*time.Minute, "the TrainJob to complete on "+other, func() error {
		tj, err := manager.GetTrainJob(ns, "lost")
		if err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
			return fmt.Errorf("conditions %+v", tj.Status.Conditions)
		}
		return nil
	})
}

// A Kueue v0.19 limitation: a TrainJob whose Pods request none of the
// ClusterQueue's resources gets no flavor, so none of the ClusterQueue's
// admission checks, MultiKueue's among them: Kueue admits it on the
// manager cluster, where nothing runs it (it is MultiKueue's), and never
// dispatches it. The webhook warns of it. The same TrainJob with a CPU per
// node runs on a worker.
func TestWithoutRequestsItIsNeverDispatched(t *testing.T) {
	ns := newNamespace(t)
	out := manager.ApplyYAML(t, ns, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: no-requests
  labels: {%s: %s}
spec:
  runtimeRef: {name: torch-distributed}
  trainer: {numNodes: 1}
`, trainer.KueueQueueNameLabel, queueName))
	if !strings.Contains(out, "request no resources") {
		t.Errorf("kubectl apply said %q, want the webhook's warning that the Pods request no resources", out)
	}
	manager.Create(t, trainJob(ns, "one-cpu", queueName, 1, 5*time.Second))
	manager.WaitCondition(t, ns, "one-cpu", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	progress(t, "one-cpu ran on %s", waitDispatched(t, ns, "one-cpu"))

	wl, err := workloadOf(manager, ns, "no-requests")
	if err != nil || wl == nil {
		t.Fatalf("the Workload of no-requests: %v", err)
	}
	admitted := meta.IsStatusConditionTrue(wl.Status.Conditions, "Admitted")
	if !admitted || wl.Status.ClusterName != "" {
		t.Fatalf("no-requests: admitted %t on cluster %q; Kueue dispatches TrainJobs without requests now: docs/multicluster.md says it does not",
			admitted, wl.Status.ClusterName)
	}
	for name, w := range workers {
		if _, err := w.GetTrainJob(ns, "no-requests"); !apierrors.IsNotFound(err) {
			t.Errorf("a copy of no-requests on %s (err %v)", name, err)
		}
	}
	if tj, err := manager.GetTrainJob(ns, "no-requests"); err != nil || tj.FinishedCondition() != nil || len(manager.JobsOf(t, ns, "no-requests")) > 0 {
		t.Errorf("no-requests on the manager cluster: err %v, finished %v, want it unfinished and without Jobs", err, tj.FinishedCondition())
	}
	progress(t, "no-requests: admitted on the manager cluster, dispatched nowhere")
}

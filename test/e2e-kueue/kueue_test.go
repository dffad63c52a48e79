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

package e2ekueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// queueLabel names the LocalQueue a TrainJob is queued in.
const queueLabel = trainer.KueueQueueNameLabel

func cpu(q string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(q), corev1.ResourceMemory: resource.MustParse("1Gi"),
	}}
}

// waitComplete waits until the TrainJob is Complete, and returns it.
func waitComplete(t *testing.T, d time.Duration, ns, name string) *trainer.TrainJob {
	t.Helper()
	var tj *trainer.TrainJob
	cluster.EventuallyWithin(t, d, "TrainJob "+name+" to complete", func() (err error) {
		if tj, err = cluster.GetTrainJob(ns, name); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
			return fmt.Errorf("suspend %v, conditions %+v", ptr.Deref(tj.Spec.Suspend, false), tj.Status.Conditions)
		}
		return nil
	})
	return tj
}

func listOf[L client.ObjectList](t *testing.T, list L, ns, tjName string) L {
	t.Helper()
	if err := cluster.Client.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{trainer.TrainJobNameLabel: tjName}); err != nil {
		t.Fatal(err)
	}
	return list
}

// The Kueue samples make dev KUEUE=1 applies are accepted, Kueue's webhooks
// included.
func TestKueueSamplesApply(t *testing.T) {
	ns := cluster.NewNamespace(t)
	dir := filepath.Join(devOpts.Root, "config", "samples", "kueue")
	if out, err := cluster.Kubectl("apply", "--dry-run=server", "-n", ns, "-f", dir); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", dir, err, out)
	}
}

// A TrainJob queued in Kueue: suspended as it is created, with a Workload
// whose PodSets are its replicated Jobs; once admitted with a flavor of the
// reserved nodes, its Pods carry the flavor's node labels and toleration
// and run on those nodes; it completes, and its Workload finishes.
func TestQueuedTrainJobRunsWhereItsFlavorSays(t *testing.T) {
	ns := cluster.NewNamespace(t)
	queue(t, ns, ns, "16", true)
	// Two replicated Jobs: prep, two replicas of one Pod, and the trainer,
	// one Job of numNodes Pods.
	rt := utiltesting.MakeRuntimeSpec().NumNodes(1).ReplicatedJobs(
		utiltesting.MakeReplicatedJob("prep").Replicas(2).Containers(corev1.Container{
			Name: "prep", Image: "busybox:1.37", Command: []string{"true"}, Resources: cpu("500m"),
		}).Obj(),
		utiltesting.MakeReplicatedJob("node").Trainer().Obj(),
	).Runtime("two-steps", ns)
	cluster.Create(t, rt)
	tj := utiltesting.MakeTrainJob("queued", ns).RuntimeRef(trainer.TrainingRuntimeKind, "two-steps").
		Label(queueLabel, ns).Annotation(runFor, "5s").NumNodes(3).Resources(cpu("1")).Obj()
	cluster.Create(t, tj)
	progress(t, "created TrainJob %s/queued, queued in %s", ns, ns)
	if !ptr.Deref(tj.Spec.Suspend, false) {
		t.Errorf("TrainJob created with spec.suspend %v, want true (set by Kueue's webhook)", tj.Spec.Suspend)
	}

	w := workloadOf(t, tj)
	progress(t, "Workload %s: PodSets %v", w.Name, w.podSets())
	if diff := cmp.Diff(map[string]int32{"prep": 2, "node": 3}, w.podSets()); diff != "" {
		t.Errorf("Workload %s PodSets (-want +got):\n%s", w.Name, diff)
	}

	cluster.Eventually(t, "the Workload to be admitted", func() error {
		all, err := workloads(ns)
		if err != nil {
			return err
		}
		if w = all[string(tj.UID)]; w == nil || !w.is("Admitted") {
			return fmt.Errorf("not admitted: %+v", w)
		}
		return nil
	})
	progress(t, "admitted to %s", w.Status.Admission.ClusterQueue)

	// The child Jobs, once created, are the PodSets.
	var jobs *batchv1.JobList
	cluster.Eventually(t, "the child Jobs of queued", func() error {
		jobs = listOf(t, &batchv1.JobList{}, ns, "queued")
		if len(jobs.Items) != 3 {
			return fmt.Errorf("%d Jobs", len(jobs.Items))
		}
		return nil
	})
	pods := map[string]int32{}
	for _, j := range jobs.Items {
		pods[j.Labels[trainer.ReplicatedJobNameLabel]] += ptr.Deref(j.Spec.Parallelism, 1)
	}
	if diff := cmp.Diff(w.podSets(), pods); diff != "" {
		t.Errorf("Pods of the child Jobs by replicated Job differ from the Workload's PodSets (-podSets +Jobs):\n%s", diff)
	}

	// Every Pod is placed by the flavor.
	var placed []corev1.Pod
	cluster.Eventually(t, "the 5 Pods of queued to be scheduled", func() error {
		placed = slices.DeleteFunc(listOf(t, &corev1.PodList{}, ns, "queued").Items, func(p corev1.Pod) bool { return p.Spec.NodeName == "" })
		if len(placed) != 5 {
			return fmt.Errorf("%d scheduled", len(placed))
		}
		return nil
	})
	for _, p := range placed {
		if got := p.Spec.NodeSelector[dev.PoolLabel]; got != dev.ReservedPool {
			t.Errorf("Pod %s: nodeSelector %v, want %s=%s", p.Name, p.Spec.NodeSelector, dev.PoolLabel, dev.ReservedPool)
		}
		if !slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool {
			return tol.Key == dev.ReservedTaint.Key && tol.Value == dev.ReservedTaint.Value && tol.Effect == dev.ReservedTaint.Effect
		}) {
			t.Errorf("Pod %s: tolerations %+v, none of the reserved nodes' taint", p.Name, p.Spec.Tolerations)
		}
		var node corev1.Node
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: p.Spec.NodeName}, &node); err != nil {
			t.Fatal(err)
		}
		if node.Labels[dev.PoolLabel] != dev.ReservedPool {
			t.Errorf("Pod %s runs on %s, not a reserved node", p.Name, node.Name)
		}
	}
	progress(t, "%d Pods on reserved nodes", len(placed))

	waitComplete(t, timeout, ns, "queued")
	cluster.Eventually(t, "the Workload to finish", func() error {
		all, err := workloads(ns)
		if err != nil {
			return err
		}
		if w = all[string(tj.UID)]; w == nil || !w.is("Finished") {
			return fmt.Errorf("not finished: %+v", w)
		}
		return nil
	})
	progress(t, "complete; Workload finished")
}

// With quota for one, three TrainJobs queued at once run one after another:
// never two admitted, nor two unsuspended, at the same time.
func TestQuotaForOneRunsThemOneAtATime(t *testing.T) {
	ns := cluster.NewNamespace(t)
	queue(t, ns, ns, "2", false)
	names := []string{"first", "second", "third"}
	for _, name := range names {
		cluster.Create(t, utiltesting.MakeTrainJob(name, ns).Label(queueLabel, ns).Annotation(runFor, "4s").
			Command("torchrun", "train.py").NumNodes(2).Resources(cpu("1")).Obj())
	}
	progress(t, "created %v, 2 CPUs each, in a queue of 2 CPUs", names)

	// Polled rather than waited on: the invariant must hold at every poll.
	var order []string
	seen := map[string]bool{}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		all, err := workloads(ns)
		if err != nil {
			t.Fatal(err)
		}
		var tjs trainer.TrainJobList
		if err := cluster.Client.List(context.Background(), &tjs, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var admitted, unsuspended, complete []string
		for _, tj := range tjs.Items {
			finished := tj.FinishedCondition() != nil
			if meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
				complete = append(complete, tj.Name)
			}
			if !finished && !ptr.Deref(tj.Spec.Suspend, false) {
				unsuspended = append(unsuspended, tj.Name)
			}
			if w := all[string(tj.UID)]; w != nil && w.is("QuotaReserved") && !w.is("Finished") {
				admitted = append(admitted, tj.Name)
				if !seen[tj.Name] {
					seen[tj.Name] = true
					order = append(order, tj.Name)
					progress(t, "%s admitted", tj.Name)
				}
			}
		}
		if len(admitted) > 1 || len(unsuspended) > 1 {
			t.Fatalf("admitted at once: %v; unsuspended and unfinished at once: %v", admitted, unsuspended)
		}
		if len(complete) == len(names) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 3m for all three to complete; complete: %v", complete)
		}
		time.Sleep(interval)
	}
	progress(t, "admitted in the order %v", order)
	if len(order) != len(names) {
		t.Errorf("saw %v admitted, want all of %v (one poll may have missed a short admission)", order, names)
	}
	cluster.Eventually(t, "the three Workloads to finish", func() error {
		all, err := workloads(ns)
		if err != nil {
			return err
		}
		for uid, w := range all {
			if !w.is("Finished") {
				return fmt.Errorf("Workload %s (job %s) not finished", w.Name, uid)
			}
		}
		if len(all) != len(names) {
			return fmt.Errorf("%d Workloads", len(all))
		}
		return nil
	})
}

// Kueue admits a TrainJob by writing it back whole, through Kubeflow
// Trainer's Go types, which lack the fields this project adds or keeps from
// Kubeflow v2.1: the TTL and spec.labels survive the admission, and the
// TrainJob runs and completes. Kueue's runtime patch records when it was
// written.
func TestFieldsOfOursSurviveAdmission(t *testing.T) {
	ns := cluster.NewNamespace(t)
	queue(t, ns, ns, "2", false)
	tj := utiltesting.MakeTrainJob("kept", ns).Label(queueLabel, ns).Annotation(runFor, "2s").TTL(600).
		Command("torchrun", "train.py").NumNodes(1).Resources(cpu("1")).Obj()
	tj.Spec.Labels = map[string]string{"team": "vision"}
	cluster.Create(t, tj)
	done := waitComplete(t, 3*time.Minute, ns, "kept")
	progress(t, "kept completed")
	if ptr.Deref(done.Spec.TTLSecondsAfterFinished, 0) != 600 || done.Spec.Labels["team"] != "vision" {
		t.Errorf("after Kueue admitted it: ttlSecondsAfterFinished %v, spec.labels %v; want 600 and team=vision",
			done.Spec.TTLSecondsAfterFinished, done.Spec.Labels)
	}
	jobs := listOf(t, &batchv1.JobList{}, ns, "kept")
	for _, j := range jobs.Items {
		if j.Labels["team"] != "vision" {
			t.Errorf("Job %s labels %v lack spec.labels'", j.Name, j.Labels)
		}
	}
	i := slices.IndexFunc(done.Spec.RuntimePatches, func(p trainer.RuntimePatch) bool { return p.Manager == trainer.KueueManager })
	if i < 0 || done.Spec.RuntimePatches[i].Time == nil {
		t.Errorf("runtime patches %+v: want Kueue's, with the time it was written", done.Spec.RuntimePatches)
	}
}

// A higher-priority TrainJob preempts a lower one: the lower is suspended,
// its deadline paused and its Pods replaced. Its ClusterQueue has two
// flavors, the reserved nodes first and one node of the rest second, and
// preempts rather than try the next flavor: the high TrainJob takes the
// reserved flavor from the low one, which Kueue then admits again on the
// second flavor. The low one resumes there with the second flavor's node
// selector in place of the first's, and completes, its deadline counted
// from the resume.
func TestHigherPriorityPreemptsAndResumeMovesFlavor(t *testing.T) {
	ns := cluster.NewNamespace(t)
	reserved := fmt.Sprintf(`{nodeLabels: {%q: %q}, tolerations: [{key: %q, operator: Equal, value: %q, effect: %s}]}`,
		dev.PoolLabel, dev.ReservedPool, dev.ReservedTaint.Key, dev.ReservedTaint.Value, dev.ReservedTaint.Effect)
	const spareNode = "kwok-node-0"
	cluster.CreateYAML(t, `{apiVersion: %s, kind: ResourceFlavor, metadata: {name: %s-reserved}, spec: %s}`, kueueVersion, ns, reserved)
	cluster.CreateYAML(t, `{apiVersion: %s, kind: ResourceFlavor, metadata: {name: %s-spare}, spec: {nodeLabels: {%q: %q}}}`,
		kueueVersion, ns, corev1.LabelHostname, spareNode)
	cluster.CreateYAML(t, `
apiVersion: %s
kind: ClusterQueue
metadata: {name: %s}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  flavorFungibility: {whenCanPreempt: MayStopSearch}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: %s-reserved
      resources:
      - {name: cpu, nominalQuota: "2"}
      - {name: memory, nominalQuota: 64Gi}
    - name: %s-spare
      resources:
      - {name: cpu, nominalQuota: "2"}
      - {name: memory, nominalQuota: 64Gi}
`, kueueVersion, ns, ns, ns)
	cluster.CreateYAML(t, `{apiVersion: %s, kind: LocalQueue, metadata: {name: %s, namespace: %s}, spec: {clusterQueue: %s}}`, kueueVersion, ns, ns, ns)
	for name, value := range map[string]int{ns + "-low": 10, ns + "-high": 1000} {
		cluster.CreateYAML(t, `{apiVersion: %s, kind: WorkloadPriorityClass, metadata: {name: %s}, value: %d}`, kueueVersion, name, value)
	}
	trainJob := func(name, priority, runTime string) *trainer.TrainJob {
		return utiltesting.MakeTrainJob(name, ns).Label(queueLabel, ns).Label("kueue.x-k8s.io/priority-class", ns+"-"+priority).
			Annotation(runFor, runTime).Deadline(3600).Command("torchrun", "train.py").NumNodes(2).Resources(cpu("1")).Obj()
	}
	runningPods := func(name string) []corev1.Pod {
		var running []corev1.Pod
		for _, p := range listOf(t, &corev1.PodList{}, ns, name).Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running = append(running, p)
			}
		}
		return running
	}
	// onReserved reports whether a Pod was placed by the reserved flavor:
	// its node selector and node are the reserved pool's.
	onReserved := func(p corev1.Pod) bool {
		return p.Spec.NodeSelector[dev.PoolLabel] == dev.ReservedPool && strings.HasPrefix(p.Spec.NodeName, "kwok-node-") && p.Spec.NodeName != spareNode
	}

	cluster.Create(t, trainJob("low", "low", "20s"))
	cluster.Eventually(t, "low's 2 Pods to run on the reserved flavor", func() error {
		pods := runningPods("low")
		if len(pods) != 2 {
			return fmt.Errorf("%d running", len(pods))
		}
		for _, p := range pods {
			if !onReserved(p) {
				return fmt.Errorf("Pod %s: nodeSelector %v, node %s", p.Name, p.Spec.NodeSelector, p.Spec.NodeName)
			}
		}
		return nil
	})
	progress(t, "low runs on the reserved flavor")

	// Kueue preempts by suspending the TrainJob, and may admit it again
	// at once on the other flavor, even before its Pods are gone: then
	// Suspended=True (no Pod left) never comes. A watch sees the
	// suspension, however short.
	var mu sync.Mutex
	var suspendedAt time.Time
	var pausedWhileSuspended bool
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	err := utiltesting.Watch(ctx, cluster.Client, ns, func() client.ObjectList { return &trainer.TrainJobList{} }, func(ev utiltesting.Event) {
		tj, ok := ev.Object.(*trainer.TrainJob)
		if !ok || tj.Name != "low" || !ptr.Deref(tj.Spec.Suspend, false) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if suspendedAt.IsZero() {
			suspendedAt = ev.At
		}
		pausedWhileSuspended = pausedWhileSuspended || lifecycle.DeadlinePaused(tj)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}

	cluster.Create(t, trainJob("high", "high", "15s"))
	cluster.Eventually(t, "low to be preempted: suspended by Kueue", func() error {
		mu.Lock()
		defer mu.Unlock()
		if suspendedAt.IsZero() {
			return fmt.Errorf("not seen suspended yet")
		}
		return nil
	})
	mu.Lock()
	preempted, paused := suspendedAt, pausedWhileSuspended
	mu.Unlock()
	if !paused {
		t.Errorf("low was suspended, but its deadline was not paused")
	}
	progress(t, "low preempted: suspended, its deadline paused")

	cluster.Eventually(t, "high to run on the reserved flavor", func() error {
		pods := runningPods("high")
		if len(pods) != 2 {
			return fmt.Errorf("%d running", len(pods))
		}
		for _, p := range pods {
			if !onReserved(p) {
				return fmt.Errorf("Pod %s: nodeSelector %v, node %s", p.Name, p.Spec.NodeSelector, p.Spec.NodeName)
			}
		}
		return nil
	})
	cluster.Eventually(t, "low to resume on the spare flavor while high runs", func() error {
		pods := runningPods("low")
		if len(pods) != 2 {
			return fmt.Errorf("%d running", len(pods))
		}
		for _, p := range pods {
			if _, ok := p.Spec.NodeSelector[dev.PoolLabel]; ok || p.Spec.NodeSelector[corev1.LabelHostname] != spareNode || p.Spec.NodeName != spareNode {
				return fmt.Errorf("Pod %s: nodeSelector %v, node %s; want only the spare flavor's", p.Name, p.Spec.NodeSelector, p.Spec.NodeName)
			}
			if slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == dev.ReservedTaint.Key }) {
				return fmt.Errorf("Pod %s still tolerates the reserved nodes: %v", p.Name, p.Spec.Tolerations)
			}
		}
		return nil
	})
	progress(t, "low resumed on the spare flavor, with its selector in place of the reserved one's")

	low := waitComplete(t, 2*time.Minute, ns, "low")
	if low.Status.StartTime == nil || low.Status.StartTime.Time.Before(preempted.Add(-time.Second)) {
		t.Errorf("low's startTime %v, want after its resume (preempted at %v): the deadline counts from the resume", low.Status.StartTime, preempted)
	}
	waitComplete(t, 2*time.Minute, ns, "high")
	progress(t, "both completed")
	cluster.Eventually(t, "both Workloads to finish", func() error {
		all, err := workloads(ns)
		if err != nil {
			return err
		}
		for _, w := range all {
			if !w.is("Finished") {
				return fmt.Errorf("Workload %s not finished", w.Name)
			}
		}
		return nil
	})
}

// A TrainJob waiting in a queue is never deleted by the afterSuspended
// retention policy, however long it waits, even after it ran: here Kueue
// evicts it when its ClusterQueue is held and drained. One that ran outside
// any queue and was suspended by its user is deleted.
func TestQueuedIsNeverDeletedByRetention(t *testing.T) {
	ns := cluster.NewNamespace(t)
	queue(t, ns, ns, "2", false)
	started := func(name string) func() error {
		return func() error {
			tj, err := cluster.GetTrainJob(ns, name)
			if err != nil {
				return err
			}
			if tj.Status.StartTime == nil || len(listOf(t, &corev1.PodList{}, ns, name).Items) == 0 {
				return fmt.Errorf("not running: startTime %v, conditions %+v", tj.Status.StartTime, tj.Status.Conditions)
			}
			return nil
		}
	}
	cluster.Create(t, utiltesting.MakeTrainJob("waiting", ns).Label(queueLabel, ns).Annotation(runFor, "10m").NumNodes(1).Resources(cpu("1")).Obj())
	cluster.Create(t, utiltesting.MakeTrainJob("paused", ns).Annotation(runFor, "10m").NumNodes(1).Resources(cpu("1")).Obj())
	cluster.Eventually(t, "waiting, admitted, to run", started("waiting"))
	cluster.Eventually(t, "paused to run", started("paused"))

	// Kueue evicts the queued one; its user suspends the other.
	var cq unstructured.Unstructured
	cq.SetAPIVersion(kueueVersion)
	cq.SetKind("ClusterQueue")
	cq.SetName(ns)
	if err := cluster.Client.Patch(context.Background(), &cq, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"stopPolicy":"HoldAndDrain"}}`))); err != nil {
		t.Fatal(err)
	}
	cluster.PatchSuspend(t, ns, "paused", true)
	var since time.Time
	cluster.Eventually(t, "waiting to be evicted by Kueue and suspended", func() error {
		tj, err := cluster.GetTrainJob(ns, "waiting")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended)
		if c == nil || c.Status != metav1.ConditionTrue || tj.Status.StartTime == nil {
			return fmt.Errorf("suspend %v, startTime %v, conditions %+v", tj.Spec.Suspend, tj.Status.StartTime, tj.Status.Conditions)
		}
		since = c.LastTransitionTime.Time
		return nil
	})
	progress(t, "waiting evicted: suspended in its queue")
	cluster.EventuallyWithin(t, afterSuspended+time.Minute, "paused, suspended outside any queue, to be deleted by afterSuspended", func() error {
		if _, err := cluster.GetTrainJob(ns, "paused"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return nil
	})
	progress(t, "paused deleted by afterSuspended (%s)", afterSuspended)
	time.Sleep(time.Until(since.Add(5 * afterSuspended)))
	if _, err := cluster.GetTrainJob(ns, "waiting"); err != nil {
		t.Errorf("the queued TrainJob, suspended for %s, 5 times afterSuspended: %v", time.Since(since).Round(time.Second), err)
	}
	progress(t, "waiting, queued, kept after %s suspended", time.Since(since).Round(time.Second))
}

// A queued TrainJob's TTL, kept through Kueue's admission, deletes it once
// it finished, and its Workload with it (the garbage collector follows the
// Workload's owner reference).
func TestTTLDeletesTheWorkloadToo(t *testing.T) {
	ns := cluster.NewNamespace(t)
	queue(t, ns, ns, "2", false)
	cluster.Create(t, utiltesting.MakeTrainJob("short", ns).Label(queueLabel, ns).Annotation(runFor, "2s").TTL(2).
		Command("torchrun", "train.py").NumNodes(1).Resources(cpu("1")).Obj())
	cluster.Eventually(t, "the Workload of short", func() error {
		if all, err := workloads(ns); err != nil || len(all) != 1 {
			return fmt.Errorf("%d Workloads (%w)", len(all), err)
		}
		return nil
	})
	cluster.EventuallyWithin(t, 2*time.Minute, "short to run, finish and be deleted by its TTL, its Workload with it", func() error {
		if _, err := cluster.GetTrainJob(ns, "short"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("TrainJob still there (%w)", err)
		}
		all, err := workloads(ns)
		if err != nil {
			return err
		}
		if len(all) != 0 {
			return fmt.Errorf("%d Workloads left", len(all))
		}
		return nil
	})
	progress(t, "short and its Workload deleted by its TTL")
}

// waitForPodsReady: a TrainJob whose Pods cannot all become ready (here,
// placed by a user's runtime patch on nodes that do not exist) is evicted
// by Kueue after its timeout, and trainjob-operator stops it: Suspended, no
// Pod left, its Jobs kept for the next admission.
func TestPodsNeverReadyAreEvicted(t *testing.T) {
	ns := cluster.NewNamespace(t)
	queue(t, ns, ns, "2", false)
	tj := utiltesting.MakeTrainJob("stuck", ns).Label(queueLabel, ns).Command("torchrun", "train.py").NumNodes(1).Resources(cpu("1")).Obj()
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{{Manager: "example.com/user", TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
			Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
				Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"example.com/nowhere": "true"}},
			}}},
		}}}},
	}}}
	cluster.Create(t, tj)
	cluster.Eventually(t, "stuck's Pod to exist, unscheduled", func() error {
		if pods := listOf(t, &corev1.PodList{}, ns, "stuck").Items; len(pods) != 1 || pods[0].Spec.NodeName != "" {
			return fmt.Errorf("%d Pods", len(pods))
		}
		return nil
	})
	progress(t, "stuck admitted, its Pod pending")
	cluster.EventuallyWithin(t, podsReadyTimeout+time.Minute, "Kueue to evict stuck and trainjob-operator to stop it", func() error {
		all, err := workloads(ns)
		if err != nil {
			return err
		}
		var evicted bool
		for _, w := range all {
			evicted = evicted || w.is("Evicted")
		}
		tj, err := cluster.GetTrainJob(ns, "stuck")
		if err != nil {
			return err
		}
		if pods := listOf(t, &corev1.PodList{}, ns, "stuck").Items; !evicted || !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobSuspended) || len(pods) != 0 {
			return fmt.Errorf("evicted %t, conditions %+v, %d Pods", evicted, tj.Status.Conditions, len(pods))
		}
		return nil
	})
	if jobs := listOf(t, &batchv1.JobList{}, ns, "stuck").Items; len(jobs) != 1 || !ptr.Deref(jobs[0].Spec.Suspend, false) {
		t.Errorf("stuck's Jobs after the eviction: %d, want its one Job, suspended", len(jobs))
	}
	progress(t, "stuck evicted after %s without ready Pods: suspended, no Pod left", podsReadyTimeout)
}

// With Kueue's Job webhooks installed (mjob.kb.io looks up the owner of
// every Job it admits, and refuses a Job whose owner does not exist),
// creating a TrainJob prints no warning: the TrainJob webhook dry-runs its
// Jobs before the TrainJob exists, without an owner. Queued or not, the
// TrainJob then runs: Kueue admits the Jobs the controller creates, owned
// by the TrainJob that exists by then.
func TestCreatedWithoutWarnings(t *testing.T) {
	ns := cluster.NewNamespace(t)
	queue(t, ns, ns, "2", false)

	// The premise: Kueue's Job webhook refuses a Job owned by a TrainJob
	// that does not exist.
	orphan := utiltesting.MakeJob("orphan", ns, "busybox:1.37").ControlledByTrainJob("absent", "00000000-0000-4000-8000-000000000001").Obj()
	if err := cluster.Client.Create(context.Background(), orphan, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "mjob.kb.io") {
		t.Fatalf("a Job owned by a TrainJob that does not exist: %v, want it refused by Kueue's mjob.kb.io (is Kueue's batch/job integration on? dev.Options.KueueJobs)", err)
	}

	for _, tj := range []*trainer.TrainJob{
		utiltesting.MakeTrainJob("queued", ns).Label(queueLabel, ns).Annotation(runFor, "2s").NumNodes(1).Resources(cpu("1")).Obj(),
		utiltesting.MakeTrainJob("unqueued", ns).Annotation(runFor, "2s").NumNodes(1).Resources(cpu("1")).Obj(),
	} {
		manifest, err := yaml.Marshal(tj)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), tj.Name+".yaml")
		if err := os.WriteFile(path, manifest, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := cluster.Kubectl("create", "-f", path)
		if err != nil || strings.Contains(out, "Warning:") {
			t.Errorf("kubectl create TrainJob %s: %v; want it created without a warning, got:\n%s", tj.Name, err, out)
		}
		progress(t, "created TrainJob %s/%s: %s", ns, tj.Name, strings.TrimSpace(out))
	}
	for _, name := range []string{"queued", "unqueued"} {
		waitComplete(t, 3*time.Minute, ns, name)
		progress(t, "%s completed", name)
	}
}

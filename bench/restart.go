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

package main

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

const (
	// failAt is the kwok stage annotation that makes a running Pod fail
	// (exit code 1) at a time (RFC 3339) or after a duration of running
	// (internal/dev/stages.yaml).
	failAt = "pod-fail.stage.trainjob-operator.dev/delay"
	// restartMaxRestarts is the failure policy's maxRestarts in the
	// restart scenario: more than it measures.
	restartMaxRestarts = 1000
	// restartFailAfter and restartFailSpread place an attempt's failure:
	// at a random time this long after all its Pods run, up to the spread
	// later.
	restartFailAfter  = 2 * time.Second
	restartFailSpread = 3 * time.Second
)

// restartSide is one side's figures in the restart scenario at one size.
type restartSide struct {
	Controller string `json:"controller"`
	Objects    string `json:"objects"`
	Nodes      int    `json:"nodes"`
	Restarts   int    `json:"restarts"`
	// PodsGone is an attempt's failed Pod seen Failed → every Pod of the
	// attempt deleted; Running, → every Pod of the next attempt running.
	PodsGone dist `json:"failureToPodsGone"`
	Running  dist `json:"failureToNextAttemptRunning"`
	// The steps between, from the failure: the attempt's Job seen with its
	// FailureTarget condition (its Job controller's verdict, before it
	// terminates the Pods), with its Failed condition (once they are; the
	// bare client deletes the Job before), seen being deleted, seen gone,
	// and the next attempt's Job seen created.
	JobFailureTarget dist `json:"failureToJobFailureTarget"`
	JobFailed        dist `json:"failureToJobFailed"`
	JobDeleting      dist `json:"failureToJobDeleting"`
	JobGone          dist `json:"failureToJobGone"`
	NextJob          dist `json:"failureToNextJobCreated"`
	// Usage is per restart, from all Pods of the first attempt running
	// until all of the last one's run (and 5 s more). The bench's writes
	// that fail a Pod are taken off; the bare client's deletions and
	// creations of its Job are counted: it is the controller there.
	Usage usageFigures `json:"perRestart"`
}

// restartParams are the restart scenario's parameters.
type restartParams struct {
	Restarts    int `json:"restarts"`
	MaxRestarts int `json:"maxRestarts"`
}

// restartScenario is one TrainJob of N nodes, one Pod each, on a runtime
// whose failure policy restarts it (maxRestarts restartMaxRestarts) and
// whose Jobs fail with their first failed Pod (backoffLimit 0); in every
// attempt one Pod fails, a few seconds after all run: how soon are the
// attempt's Pods gone, how soon does the next attempt run, and what does a
// restart cost. Beside Kubeflow Trainer and JobSet with the same TrainJob
// and the same policy on Kubeflow's runtime, and beside a bare client that
// restarts one Indexed Job of N Pods (with a headless Service) itself,
// reacting to the failed Pod rather than to the Job's failure: the bound of
// what the controllers do on this cluster.
func (b *bench) restartScenario() sidedScenario {
	return sizedScenario(b, "restart", b.c.restartNodes, restartParams{Restarts: b.c.restartCount, MaxRestarts: restartMaxRestarts},
		b.restartSide, b.restartTable)
}

// restartAttempt is what the bench saw of one restart attempt's Pods.
type restartAttempt struct {
	// live are the attempt's Pods not deleted yet; running, those seen
	// running.
	live    sets.Set[string]
	running sets.Set[string]
	// victim is the Pod the bench made fail.
	victim string
	// failed is when victim was seen failed, gone when the last Pod of the
	// attempt was seen deleted after, and allRunning when the last of its
	// Pods was seen running.
	failed, gone, allRunning time.Time
	// When the attempt's Job was first seen, seen with its FailureTarget
	// and its Failed conditions, seen being deleted and seen gone.
	jobCreated, jobFailureTarget, jobFailed, jobDeleting, jobGone time.Time
}

// restartTracker follows one object's Jobs and Pods, attempt by attempt
// (the restart-attempt label, which the bare client's carry too).
type restartTracker struct {
	mu       sync.Mutex
	nodes    int
	attempts map[int]*restartAttempt
	// failures receives the attempts whose victim was seen failed, and
	// jobsGone the Jobs seen gone, for the bare client to act on as soon
	// as the watch says.
	failures chan int
	jobsGone chan types.UID
}

// newRestartTracker is the tracker of an object of nodes Pods restarted
// restarts times.
func newRestartTracker(nodes, restarts int) *restartTracker {
	return &restartTracker{nodes: nodes, attempts: map[int]*restartAttempt{},
		failures: make(chan int, restarts+1), jobsGone: make(chan types.UID, restarts+2)}
}

// attemptOf is the restart attempt of a Job or Pod, from its label.
func attemptOf(o client.Object) (int, bool) {
	k, err := strconv.Atoi(o.GetLabels()[trainer.JobSetRestartAttemptLabel])
	return k, err == nil
}

// notify sends v on ch unless its buffer is full: the events of a side that
// does not read them (any but the bare client's) are dropped after that.
func notify[T any](ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
	}
}

// once sets *at to t unless it is set.
func once(at *time.Time, t time.Time) {
	if at.IsZero() {
		*at = t
	}
}

// observeJob records the steps of the restart of a Job's attempt.
func (t *restartTracker) observeJob(ev event) {
	job := ev.Object.(*batchv1.Job)
	k, ok := attemptOf(job)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.attempt(k)
	once(&a.jobCreated, ev.At)
	for _, c := range job.Status.Conditions {
		switch {
		case c.Status != corev1.ConditionTrue:
		case c.Type == batchv1.JobFailureTarget:
			once(&a.jobFailureTarget, ev.At)
		case c.Type == batchv1.JobFailed:
			once(&a.jobFailed, ev.At)
		}
	}
	if job.DeletionTimestamp != nil || ev.Type == watch.Deleted {
		once(&a.jobDeleting, ev.At)
	}
	if ev.Type == watch.Deleted {
		once(&a.jobGone, ev.At)
		notify(t.jobsGone, job.UID)
	}
}

// attempt returns attempt k, with the lock held.
func (t *restartTracker) attempt(k int) *restartAttempt {
	a := t.attempts[k]
	if a == nil {
		a = &restartAttempt{live: sets.New[string](), running: sets.New[string]()}
		t.attempts[k] = a
	}
	return a
}

// observePod records a Pod's attempt running, failing and gone.
func (t *restartTracker) observePod(ev event) {
	pod := ev.Object.(*corev1.Pod)
	k, ok := attemptOf(pod)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.attempt(k)
	if ev.Type == watch.Deleted {
		a.live.Delete(pod.Name)
		if a.live.Len() == 0 && !a.failed.IsZero() {
			once(&a.gone, ev.At)
		}
		return
	}
	a.live.Insert(pod.Name)
	switch pod.Status.Phase {
	case corev1.PodRunning:
		a.running.Insert(pod.Name)
		if a.running.Len() == t.nodes {
			once(&a.allRunning, ev.At)
		}
	case corev1.PodFailed:
		if pod.Name == a.victim && a.failed.IsZero() {
			a.failed = ev.At
			notify(t.failures, k)
		}
	}
}

// when returns what at reads of attempt k.
func (t *restartTracker) when(k int, at func(*restartAttempt) time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return at(t.attempt(k))
}

// waitAttempt waits until at is set for attempt k.
func (b *bench) waitAttempt(ctx context.Context, t *restartTracker, what string, k int, at func(*restartAttempt) time.Time) error {
	timeout := 5*time.Minute + time.Duration(t.nodes)*time.Second/2
	return b.waitFor(ctx, fmt.Sprintf("attempt %d: %s", k, what), timeout, func() (bool, string) {
		t.mu.Lock()
		defer t.mu.Unlock()
		a := t.attempt(k)
		return !at(a).IsZero(), fmt.Sprintf("%d Pods, %d seen running", a.live.Len(), a.running.Len())
	})
}

// failOne makes one running Pod of attempt k, at random, fail at a random
// time a few seconds after all of the attempt's Pods ran, and returns it.
// The Pods of one Job share their template, whose annotations the stages
// read, so the bench gives the one Pod its fail time (an annotation on the
// Pod): kwok's fail stage then fails it, as a kubelet would, with exit code
// 1 at that time.
func (b *bench) failOne(ctx context.Context, ns string, t *restartTracker, k int) (string, error) {
	t.mu.Lock()
	a := t.attempt(k)
	running := sets.List(a.running.Intersection(a.live))
	if len(running) == 0 {
		t.mu.Unlock()
		return "", fmt.Errorf("attempt %d has no Pod running", k)
	}
	a.victim = running[rand.IntN(len(running))]
	at := a.allRunning.Add(restartFailAfter + rand.N(restartFailSpread))
	victim := a.victim
	t.mu.Unlock()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: victim, Namespace: ns}}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, failAt, at.Format(time.RFC3339Nano))
	return victim, b.cl.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch))
}

// restartRuntime makes the copy of the bench's runtime the restart
// scenario runs on: JobSet's failure policy with restartMaxRestarts, and
// Jobs that fail with their first failed Pod.
func (b *bench) restartRuntime(ctx context.Context) (string, func(), error) {
	return b.derivedRuntime(ctx, "restarting", func(spec map[string]any) error {
		policy := map[string]any{"maxRestarts": int64(restartMaxRestarts)}
		if err := unstructured.SetNestedMap(spec, policy, "template", "spec", "failurePolicy"); err != nil {
			return err
		}
		jobs, _, err := unstructured.NestedSlice(spec, "template", "spec", "replicatedJobs")
		if err != nil {
			return err
		}
		for _, j := range jobs {
			if err := unstructured.SetNestedField(j.(map[string]any), int64(0), "template", "spec", "backoffLimit"); err != nil {
				return err
			}
		}
		return unstructured.SetNestedSlice(spec, jobs, "template", "spec", "replicatedJobs")
	})
}

// bareJob is the bare client's Job of restart attempt k: one Indexed Job of
// n Pods, as the TrainJob's, that fails with its first failed Pod. Its Pods
// have a headless Service, as the TrainJob's have, which lives across
// attempts.
func bareJob(ns string, n, k int) *batchv1.Job {
	return batchJob("bare", ns, "1h", func(j *batchv1.Job) {
		j.Spec.Completions, j.Spec.Parallelism = ptr.To(int32(n)), ptr.To(int32(n))
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Labels = map[string]string{trainer.JobSetRestartAttemptLabel: strconv.Itoa(k)}
		j.Spec.Template.Labels = maps.Clone(j.Labels)
	})
}

// bareRestart restarts the bare client's Job of attempt k as the
// controllers restart theirs, as soon as the watch allows: once its
// failed Pod is seen, the Job is deleted in the foreground (no Pod of the
// attempt outlives it); once it is seen gone, the next attempt's Job of the
// same name is created. It returns that Job.
func (b *bench) bareRestart(ctx context.Context, t *restartTracker, job *batchv1.Job, k int) (*batchv1.Job, error) {
	timeout := time.NewTimer(5 * time.Minute)
	defer timeout.Stop()
	for failed := -1; failed != k; {
		select {
		case failed = <-t.failures:
		case <-timeout.C:
			return nil, fmt.Errorf("attempt %d: its Pod not seen failed after 5m", k)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	err := b.cl.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground), client.Preconditions{UID: &job.UID})
	if err != nil {
		return nil, fmt.Errorf("attempt %d: deleting its Job: %w", k, err)
	}
	for uid := types.UID(""); uid != job.UID; {
		select {
		case uid = <-t.jobsGone:
		case <-timeout.C:
			return nil, fmt.Errorf("attempt %d: its Job not gone after 5m", k)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	next := bareJob(job.Namespace, int(*job.Spec.Parallelism), k+1)
	if err := b.cl.Create(ctx, next); err != nil {
		return nil, fmt.Errorf("attempt %d: creating its Job: %w", k+1, err)
	}
	return next, nil
}

// restartSide runs one side of the restart scenario at n nodes.
func (b *bench) restartSide(ctx context.Context, side string, n int) (restartSide, error) {
	count := b.c.restartCount
	b.logf("restart %s: %d nodes of one Pod, %d restarts, one Pod failing in each attempt", side, n, count)
	if err := b.ensureNodes(ctx, n); err != nil {
		return restartSide{}, err
	}
	ns, drop, err := b.namespace(ctx, "bench-restart")
	if err != nil {
		return restartSide{}, err
	}
	defer drop()
	wctx, stop := context.WithCancel(ctx)
	defer stop()

	tr := newRestartTracker(n, count)
	if err := b.watchAll(wctx, ns, func() client.ObjectList { return &corev1.PodList{} }, tr.observePod); err != nil {
		return restartSide{}, err
	}
	if err := b.watchAll(wctx, ns, func() client.ObjectList { return &batchv1.JobList{} }, tr.observeJob); err != nil {
		return restartSide{}, err
	}
	var job *batchv1.Job
	if side == them {
		job = bareJob(ns, n, 0)
		for _, o := range []client.Object{headlessService(job), job} {
			if err := b.cl.Create(ctx, o); err != nil {
				return restartSide{}, err
			}
		}
	} else {
		runtime, remove, err := b.restartRuntime(ctx)
		if err != nil {
			return restartSide{}, err
		}
		defer remove()
		if err := b.cl.Create(ctx, benchTrainJob("restarting", ns, runtime, int32(n), "1h").Obj()); err != nil {
			return restartSide{}, err
		}
	}
	allRunning := func(a *restartAttempt) time.Time { return a.allRunning }
	if err := b.waitAttempt(ctx, tr, "all Pods running", 0, allRunning); err != nil {
		return restartSide{}, err
	}
	before, err := b.usage(ctx)
	if err != nil {
		return restartSide{}, err
	}
	for k := range count {
		victim, err := b.failOne(ctx, ns, tr, k)
		if err != nil {
			return restartSide{}, err
		}
		if side == them {
			if job, err = b.bareRestart(ctx, tr, job, k); err != nil {
				return restartSide{}, err
			}
		}
		if err := b.waitAttempt(ctx, tr, "all Pods running", k+1, allRunning); err != nil {
			return restartSide{}, err
		}
		if err := b.waitAttempt(ctx, tr, "all Pods gone", k, func(a *restartAttempt) time.Time { return a.gone }); err != nil {
			return restartSide{}, err
		}
		failed := tr.when(k, func(a *restartAttempt) time.Time { return a.failed })
		b.logf("  restart %d: %s failed; Pods gone %s after, the next attempt's running %s after", k+1, victim,
			secs(tr.when(k, func(a *restartAttempt) time.Time { return a.gone }).Sub(failed).Seconds()),
			secs(tr.when(k+1, allRunning).Sub(failed).Seconds()))
	}
	// Status writes that trail the last restart.
	if err := pause(ctx, 5*time.Second); err != nil {
		return restartSide{}, err
	}
	used, err := b.usageSince(ctx, before)
	if err != nil {
		return restartSide{}, err
	}

	// The bench's own write: the annotation that fails a Pod.
	s := restartSide{Controller: side, Objects: objects(side), Nodes: n, Restarts: count, Usage: used.share(count, "pods", 1)}
	// From each failure to a step of the restart, when seen.
	var steps [7][]time.Duration
	tr.mu.Lock()
	for k := range count {
		a, next := tr.attempt(k), tr.attempt(k+1)
		for i, at := range []time.Time{a.gone, next.allRunning, a.jobFailureTarget, a.jobFailed, a.jobDeleting, a.jobGone, next.jobCreated} {
			if !at.IsZero() {
				steps[i] = append(steps[i], at.Sub(a.failed))
			}
		}
	}
	tr.mu.Unlock()
	s.PodsGone, s.Running, s.JobFailureTarget = distOf(steps[0]), distOf(steps[1]), distOf(steps[2])
	s.JobFailed, s.JobDeleting, s.JobGone, s.NextJob = distOf(steps[3]), distOf(steps[4]), distOf(steps[5]), distOf(steps[6])
	b.logf("  failure → the attempt's Pods gone %s", s.PodsGone)
	b.logf("  failure → the next attempt's Pods running %s", s.Running)
	b.logf("  failure → its Job FailureTarget p50 %s, Failed %s, deleting %s, gone %s, the next one created %s",
		secs(s.JobFailureTarget.P50), secs(s.JobFailed.P50), secs(s.JobDeleting.P50), secs(s.JobGone.P50), secs(s.NextJob.P50))
	b.logf("  per restart: %.1f cluster writes; CPU seconds %s", s.Usage.WritesTotal, cpuShares(s.Usage.CPU))
	return s, nil
}

// restartTable prints the restart scenario's table at n nodes.
func (b *bench) restartTable(n int, sides []string, at []restartSide) figures {
	figures := figures{}
	for _, s := range at {
		figures.put("failure → Pods gone, p50", s.Controller, s.PodsGone.P50)
		figures.put("failure → Pods gone, p99", s.Controller, s.PodsGone.P99)
		figures.put("failure → next attempt running, p50", s.Controller, s.Running.P50)
		figures.put("failure → next attempt running, p99", s.Controller, s.Running.P99)
		for name, d := range map[string]dist{"Job FailureTarget": s.JobFailureTarget, "Job Failed": s.JobFailed, "Job deleting": s.JobDeleting, "Job gone": s.JobGone, "next Job created": s.NextJob} {
			if d.N > 0 {
				figures.put("  failure → "+name+", p50", s.Controller, d.P50)
			}
		}
		figures.put("cluster writes per restart", s.Controller, s.Usage.WritesTotal)
		putCPU(figures, "CPU seconds per restart", s.Controller, s.Usage.CPU)
	}
	fmt.Fprintf(b.out, "\nRestart: one TrainJob of %d nodes (one Pod each), %d restarts, one Pod failing a few seconds into each attempt; failurePolicy.maxRestarts %d, Jobs of backoffLimit 0; kcm: a bare client deleting and recreating one Indexed Job of %d Pods once it sees the Pod fail; client QPS %v / burst %d for every controller%s\n",
		n, b.c.restartCount, restartMaxRestarts, n, b.qps, b.burst, kubeflowWorkers(sides))
	row := b.table(sides)
	for _, f := range []string{"failure → Pods gone, p50", "failure → Pods gone, p99", "failure → next attempt running, p50", "failure → next attempt running, p99",
		"  failure → Job FailureTarget, p50", "  failure → Job Failed, p50", "  failure → Job deleting, p50", "  failure → Job gone, p50", "  failure → next Job created, p50"} {
		row(f, secs, figures[f])
	}
	row("cluster writes per restart", func(v float64) string { return fmt.Sprintf("%.1f", v) }, figures["cluster writes per restart"])
	cpuRows(row, figures, "CPU seconds per restart")
	fmt.Fprintln(b.out)
	return figures
}

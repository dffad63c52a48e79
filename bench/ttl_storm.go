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
	"path/filepath"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

// completeAt is the kwok stage annotation that makes a Pod succeed at a
// time (RFC 3339) or after a duration of running.
const completeAt = "pod-complete.stage.kwok.x-k8s.io/delay"

// side is one controller's figures in B1.
type ttlSide struct {
	Controller string `json:"controller"`
	Objects    string `json:"objects"`
	N          int    `json:"n"`
	// FinishSpread is the time between the first and the last object
	// finishing, seconds.
	FinishSpread float64 `json:"finishSpreadSeconds"`
	// Requested is delete request seen − (finish + TTL).
	Requested dist `json:"deleteRequested"`
	// Gone is deletion seen (the watch's DELETED event, children first) −
	// (finish + TTL).
	Gone dist `json:"deleted"`
	// Drain is from the first object due to the last one gone, seconds.
	Drain float64 `json:"drainSeconds"`
	// Early counts delete requests before finish + TTL; Missed, objects not
	// deleted by the end of the wait.
	Early  int `json:"early"`
	Missed int `json:"missed"`
	// GC is what kube-controller-manager's garbage collector did meanwhile.
	GC gcWork `json:"garbageCollector"`
	// GoneSamples are the Gone latencies, seconds, for plots.
	GoneSamples []float64 `json:"goneSamples"`
	// LeftBehind counts the TrainJobs left once the objects the TTL deletes
	// are gone: on the Kubeflow side the TTL is JobSet's, and deletes the
	// JobSet only.
	LeftBehind int `json:"leftBehind"`
}

// gcWork is the work of the garbage collector's attempt-to-delete queue,
// which runs every foreground cascade, from its workqueue metrics.
type gcWork struct {
	Items        float64 `json:"items"`
	MeanWait     float64 `json:"meanQueueWaitSeconds"`
	MeanWork     float64 `json:"meanWorkSeconds"`
	ItemsPerObj  float64 `json:"itemsPerObject"`
	WorkSecsPObj float64 `json:"workSecondsPerObject"`
}

// gcQueue reads the garbage collector's attempt-to-delete queue counters.
func (b *bench) gcQueue(ctx context.Context) (adds, wait, work float64, err error) {
	m, err := scrape(ctx, fmt.Sprintf("https://127.0.0.1:%d/metrics", b.kcmMetricsPort))
	if err != nil {
		return 0, 0, 0, err
	}
	q := map[string]string{"name": "garbage_collector_attempt_to_delete"}
	return m.Sum("workqueue_adds_total", q), m.Sum("workqueue_queue_duration_seconds_sum", q), m.Sum("workqueue_work_duration_seconds_sum", q), nil
}

type ttlResult struct {
	N          int                `json:"n"`
	TTLSeconds int                `json:"ttlSeconds"`
	QPS        float64            `json:"qps"`
	Burst      int                `json:"burst"`
	Sides      []ttlSide          `json:"sides"`
	Ratios     map[string]float64 `json:"ratios"`
}

// tracked is what the bench saw of one object.
type tracked struct {
	running           bool      // all its Pods were running (or done) once
	finish            time.Time // as the controllers read it (1s resolution)
	ttl               time.Duration
	requested         time.Time // arrival of the first event with a deletionTimestamp
	deletionTimestamp time.Time
	gone              time.Time // arrival of the DELETED event
}

type tracker struct {
	mu      sync.Mutex
	objs    map[types.NamespacedName]*tracked
	finish  func(client.Object) (time.Time, time.Duration, bool)
	running func(client.Object) bool
}

func newTracker(finish func(client.Object) (time.Time, time.Duration, bool), running func(client.Object) bool) *tracker {
	return &tracker{objs: map[types.NamespacedName]*tracked{}, finish: finish, running: running}
}

func (t *tracker) observe(ev event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := client.ObjectKeyFromObject(ev.Object)
	o := t.objs[key]
	if o == nil {
		o = &tracked{}
		t.objs[key] = o
	}
	if !o.running && t.running(ev.Object) {
		o.running = true
	}
	if f, ttl, ok := t.finish(ev.Object); ok && o.finish.IsZero() {
		o.finish, o.ttl = f, ttl
	}
	if dt := ev.Object.GetDeletionTimestamp(); dt != nil && o.requested.IsZero() {
		o.requested, o.deletionTimestamp = ev.At, dt.Time
	}
	if ev.Type == watch.Deleted {
		o.gone = ev.At
		if o.requested.IsZero() {
			o.requested = ev.At
		}
	}
}

type trackedCounts struct{ seen, running, finished, gone int }

// counts returns how many objects were seen, ran, finished and are gone.
func (t *tracker) counts() trackedCounts {
	t.mu.Lock()
	defer t.mu.Unlock()
	var c trackedCounts
	for _, o := range t.objs {
		c.seen++
		if o.running || !o.finish.IsZero() {
			c.running++
		}
		if !o.finish.IsZero() {
			c.finished++
		}
		if !o.gone.IsZero() {
			c.gone++
		}
	}
	return c
}

func trainJobFinish(o client.Object) (time.Time, time.Duration, bool) {
	exp := lifecycle.TTLAfterFinished(o.(*trainer.TrainJob))
	if exp == nil {
		return time.Time{}, 0, false
	}
	return exp.Since, exp.At.Sub(exp.Since), true
}

// trainJobRunning: every child Job has its Pods ready or succeeded.
func trainJobRunning(o client.Object) bool {
	tj := o.(*trainer.TrainJob)
	for _, js := range tj.Status.JobsStatus {
		if js.Ready+js.Succeeded < js.Replicas {
			return false
		}
	}
	return len(tj.Status.JobsStatus) > 0
}

// jobRunning: the Job's one Pod is ready or succeeded.
func jobRunning(o client.Object) bool {
	j := o.(*batchv1.Job)
	return ptr.Deref(j.Status.Ready, 0)+j.Status.Succeeded >= ptr.Deref(j.Spec.Parallelism, 1)
}

// jobFinished is whether a batch Job finished.
func jobFinished(o client.Object) bool {
	f, _, ok := jobFinish(o)
	return ok && !f.IsZero()
}

func jobFinish(o client.Object) (time.Time, time.Duration, bool) {
	j := o.(*batchv1.Job)
	for _, t := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		for _, c := range j.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				return c.LastTransitionTime.Time, time.Duration(ptr.Deref(j.Spec.TTLSecondsAfterFinished, 0)) * time.Second, true
			}
		}
	}
	return time.Time{}, 0, false
}

// ttlScenario is B1: N objects finish in the same second with the same
// TTL; how late is each deleted: ours, kube-controller-manager's TTL
// controller with batch Jobs, and, as Kubeflow Trainer has no TrainJob TTL,
// JobSet's TTL (ttlSecondsAfterFinished in the runtime's JobSet template,
// what its users set today), which deletes the JobSet and leaves the
// TrainJob.
func (b *bench) ttlScenario() sidedScenario {
	return sidedScenario{
		name:  "b1",
		sides: []string{ours, them, kubeflow},
		side: func(ctx context.Context, side string) (any, error) {
			n, ttl := b.c.ttlN, b.c.ttlSeconds
			b.logf("B1 TTL storm, %s: %d %s finishing together with ttlSecondsAfterFinished %d", side, n, objects(side), ttl)
			if err := b.ensureNodes(ctx, n); err != nil {
				return nil, err
			}
			return b.ttlSide(ctx, side, n, int32(ttl))
		},
		report: b.ttlReport,
	}
}

func (b *bench) ttlReport(results map[string]any) (any, error) {
	n, ttl := b.c.ttlN, b.c.ttlSeconds
	res := ttlResult{N: n, TTLSeconds: ttl, QPS: b.qps, Burst: b.burst}
	var sides []string
	res.Sides, sides = measured[ttlSide](results)
	if len(sides) == 0 {
		return nil, fmt.Errorf("no side measured")
	}
	figures := figures{}
	samples := map[string][]float64{}
	for _, s := range res.Sides {
		figures.put("finish spread", s.Controller, s.FinishSpread)
		figures.put("delete request − due, p50", s.Controller, s.Requested.P50)
		figures.put("delete request − due, p99", s.Controller, s.Requested.P99)
		figures.put("deleted − due, p50", s.Controller, s.Gone.P50)
		figures.put("deleted − due, p90", s.Controller, s.Gone.P90)
		figures.put("deleted − due, p99", s.Controller, s.Gone.P99)
		figures.put("deleted − due, max", s.Controller, s.Gone.Max)
		figures.put("drain (first due → last deleted)", s.Controller, s.Drain)
		if b.bare != nil && s.Drain > 0 {
			figures.put("  drain rate / bare client's delete rate", s.Controller, float64(s.N)/s.Drain/b.bare.DeleteRate)
		}
		samples[s.Controller+" ("+s.Objects+")"] = s.GoneSamples
	}
	res.Ratios = ratios(sides, figures)
	fmt.Fprintf(b.out, "\nB1 TTL storm: N=%d, ttlSecondsAfterFinished=%d (Kubeflow: JobSet's, deleting the JobSet), client QPS %v / burst %d for every controller\n", n, ttl, b.qps, b.burst)
	row := b.table(sides)
	for _, f := range []string{"finish spread", "delete request − due, p50", "delete request − due, p99", "deleted − due, p50",
		"deleted − due, p90", "deleted − due, p99", "deleted − due, max", "drain (first due → last deleted)"} {
		row(f, secs, figures[f])
	}
	if f := figures["  drain rate / bare client's delete rate"]; f != nil {
		row("  drain rate / bare client's delete rate", func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }, f)
	}
	text := func(name string, cell func(ttlSide) string) {
		fmt.Fprintf(b.out, "%-40s", name)
		for _, s := range res.Sides {
			fmt.Fprintf(b.out, " %-24s", cell(s))
		}
		fmt.Fprintln(b.out)
	}
	text("early / never deleted", func(s ttlSide) string { return fmt.Sprintf("%d / %d", s.Early, s.Missed) })
	text("TrainJobs left behind", func(s ttlSide) string { return fmt.Sprintf("%d", s.LeftBehind) })
	text("GC attempts to delete per object", func(s ttlSide) string { return fmt.Sprintf("%.1f", s.GC.ItemsPerObj) })
	text("GC mean queue wait / work", func(s ttlSide) string { return fmt.Sprintf("%s / %s", secs(s.GC.MeanWait), secs(s.GC.MeanWork)) })
	fmt.Fprintln(b.out)
	err := cdfPlot(filepath.Join(b.c.out, "b1.png"),
		fmt.Sprintf("B1 TTL storm: %d objects finish together, TTL %ds (QPS %v)", n, ttl, b.qps),
		"deleted (watch DELETED) − (finish + TTL), seconds", samples)
	return res, err
}

// b1Stall is how long B1 waits for the next object to run, finish or be
// deleted before it gives up.
const b1Stall = 5 * time.Minute

// waitProgressing waits until cond is done, giving up once the progress
// it reports has not changed for b1Stall, counted from no earlier than
// from; it returns whether it gave up.
func waitProgressing[P comparable](ctx context.Context, b *bench, what string, from time.Time, cond func() (done bool, progress P, msg string)) (bool, error) {
	var last P
	lastChange, stalled := from, false
	err := b.waitFor(ctx, what, 24*time.Hour, func() (bool, string) {
		done, progress, msg := cond()
		if progress != last {
			last, lastChange = progress, time.Now()
		}
		stalled = time.Since(lastChange) > b1Stall
		return done || stalled, msg
	})
	return stalled, err
}

// b1Running is how long B1's Pods run until the bench sets their finish
// time: longer than any side takes to start.
const b1Running = "1h"

// b1PatchLead is the time B1 allows per Pod to give every Pod its finish
// time, on top of 5s: 1,000 edits took 5 to 8s on two cores, the cluster
// still busy starting the Pods.
const b1PatchLead = 10 * time.Millisecond

// finishTogether gives every Pod in namespaces that has not ended one
// finish time, a few seconds after the last of them is expected to be
// edited, and returns it.
func (b *bench) finishTogether(ctx context.Context, namespaces []string) (time.Time, error) {
	var pods []client.Object
	for _, ns := range namespaces {
		var l corev1.PodList
		if err := b.cl.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return time.Time{}, err
		}
		for i := range l.Items {
			if p := &l.Items[i]; p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				pods = append(pods, p)
			}
		}
	}
	finishAt := time.Now().Add(5*time.Second + time.Duration(len(pods))*b1PatchLead).Truncate(time.Second).Add(time.Second)
	patch := client.RawPatch(types.MergePatchType,
		fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, completeAt, finishAt.Format(time.RFC3339)))
	err := b.forAll(ctx, "given their finish time", "Pods", pods, func(p client.Object) error {
		return client.IgnoreNotFound(b.cl.Patch(ctx, p, patch))
	})
	if err != nil {
		return time.Time{}, err
	}
	if late := time.Since(finishAt); late > 0 {
		b.logf("  the last Pod got its finish time %s after it: the Pods finish over that time", late.Round(100*time.Millisecond))
	} else {
		b.logf("  they succeed at %s, in %s", finishAt.Format("15:04:05"), (-late).Round(100*time.Millisecond))
	}
	return finishAt, nil
}

// ttlSide runs one side of B1 in namespaces of its own, perNamespace
// objects to each.
func (b *bench) ttlSide(ctx context.Context, side string, n int, ttl int32) (ttlSide, error) {
	namespaces, drop, err := b.namespaces(ctx, "bench-b1", (n+perNamespace-1)/perNamespace)
	if err != nil {
		return ttlSide{}, err
	}
	defer drop()
	wctx, stop := context.WithCancel(ctx)
	defer stop()

	// The Pods are created to run for an hour. Once all of them run, the
	// bench gives them one finish time, just after its last edit lands
	// (kwok reads a Pod's stage delay again whenever the Pod changes): the
	// N objects finish in the same second however long they took to start,
	// and neither side idles on a lead time sized for the slowest N.
	objs := make([]client.Object, n)
	var tr *tracker
	var list func() client.ObjectList
	what := objects(side)
	switch side {
	case ours:
		tr, list = newTracker(trainJobFinish, trainJobRunning), func() client.ObjectList { return &trainer.TrainJobList{} }
		for i := range objs {
			objs[i] = benchTrainJob(fmt.Sprintf("tj-%05d", i), namespaces[i/perNamespace], b.c.runtime, 1, b1Running).TTL(ttl).Obj()
		}
	case kubeflow:
		runtime, remove, err := b.jobSetTTLRuntime(ctx, ttl)
		if err != nil {
			return ttlSide{}, err
		}
		defer remove()
		tr, list = newTracker(jobSetFinish, jobSetRunning), jobSetList
		for i := range objs {
			objs[i] = benchTrainJob(fmt.Sprintf("tj-%05d", i), namespaces[i/perNamespace], runtime, 1, b1Running).Obj()
		}
	default:
		tr, list = newTracker(jobFinish, jobRunning), func() client.ObjectList { return &batchv1.JobList{} }
		for i := range objs {
			objs[i] = batchJob(fmt.Sprintf("job-%05d", i), namespaces[i/perNamespace], b1Running, func(j *batchv1.Job) {
				j.Spec.TTLSecondsAfterFinished = ptr.To(ttl)
			})
		}
	}
	if err := b.watchIn(wctx, namespaces, list, tr.observe); err != nil {
		return ttlSide{}, err
	}
	adds0, wait0, work0, err := b.gcQueue(ctx)
	if err != nil {
		return ttlSide{}, err
	}
	b.logf("B1 %s: %d %s in %d namespace(s)", side, n, what, len(namespaces))
	if err := b.createAll(ctx, what, objs); err != nil {
		return ttlSide{}, err
	}
	// Whether the Pods run is read off the objects' status, which the
	// bench watches anyway: a watch of every Pod as well would cost the
	// bench, starved on two cores, more events than it can take, and the
	// API server drops watchers that fall behind.
	stalled, err := waitProgressing(ctx, b, "B1 "+side+" running", time.Now(), func() (bool, int, string) {
		c := tr.counts()
		return c.running >= n, c.running, fmt.Sprintf("%d of %d running", c.running, n)
	})
	if err != nil {
		return ttlSide{}, err
	}
	if stalled {
		b.logf("  B1 %s: %d of %d running, none more for %s; Pods created from now on run for %s", side, tr.counts().running, n, b1Stall, b1Running)
	}
	finishAt, err := b.finishTogether(ctx, namespaces)
	if err != nil {
		return ttlSide{}, err
	}
	// However long the drain takes on this machine, it is measured to its
	// end; the wait ends early only when nothing finishes and nothing is
	// deleted for b1Stall, counted from the first due time.
	due := finishAt.Add(time.Duration(ttl) * time.Second)
	stalled, err = waitProgressing(ctx, b, "B1 "+side, due, func() (bool, [2]int, string) {
		c := tr.counts()
		return c.gone == n, [2]int{c.finished, c.gone}, fmt.Sprintf("%d seen, %d finished, %d deleted", c.seen, c.finished, c.gone)
	})
	if err != nil {
		return ttlSide{}, err
	}
	if stalled {
		b.logf("  B1 %s: nothing finished or deleted for %s; %d of %d deleted", side, b1Stall, tr.counts().gone, n)
	}
	s := tr.ttlFigures(side, what, n)
	for _, ns := range namespaces {
		var l trainer.TrainJobList
		if err := b.cl.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return ttlSide{}, err
		}
		s.LeftBehind += len(l.Items)
	}
	adds, wait, work, err := b.gcQueue(ctx)
	if err != nil {
		return ttlSide{}, err
	}
	if d := adds - adds0; d > 0 {
		s.GC = gcWork{Items: d, MeanWait: (wait - wait0) / d, MeanWork: (work - work0) / d,
			ItemsPerObj: d / float64(n), WorkSecsPObj: (work - work0) / float64(n)}
	}
	return s, nil
}

// jobSetTTLRuntime makes a copy of the bench's runtime, Kubeflow's, whose
// JobSet template has ttlSecondsAfterFinished: what a Kubeflow Trainer user
// sets today for finished TrainJobs to free their resources. It returns the
// copy's name and what removes it.
func (b *bench) jobSetTTLRuntime(ctx context.Context, ttl int32) (string, func(), error) {
	return b.derivedRuntime(ctx, "jobset-ttl", func(spec map[string]any) error {
		return unstructured.SetNestedField(spec, int64(ttl), "template", "spec", "ttlSecondsAfterFinished")
	})
}

// derivedRuntime creates bench-<runtime>-<suffix>, a ClusterTrainingRuntime
// whose spec is the bench's runtime's as the cluster has it (this
// project's, or Kubeflow's on the Kubeflow side) changed by edit, so that
// both sides run the same change on their own runtime. It returns the
// copy's name and what removes it.
func (b *bench) derivedRuntime(ctx context.Context, suffix string, edit func(spec map[string]any) error) (string, func(), error) {
	rt := &unstructured.Unstructured{}
	rt.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.ClusterTrainingRuntimeKind))
	if err := b.cl.Get(ctx, client.ObjectKey{Name: b.c.runtime}, rt); err != nil {
		return "", nil, fmt.Errorf("reading the runtime %s: %w", b.c.runtime, err)
	}
	spec, _, _ := unstructured.NestedMap(rt.Object, "spec")
	if err := edit(spec); err != nil {
		return "", nil, fmt.Errorf("editing the runtime %s: %w", b.c.runtime, err)
	}
	out := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	out.SetGroupVersionKind(rt.GroupVersionKind())
	out.SetName("bench-" + b.c.runtime + "-" + suffix)
	out.SetLabels(rt.GetLabels())
	if err := b.cl.Create(ctx, out); err != nil {
		return "", nil, fmt.Errorf("creating the runtime %s: %w", out.GetName(), err)
	}
	remove := func() {
		if err := b.cl.Delete(context.Background(), out); err != nil {
			b.logf("  deleting the runtime %s: %v", out.GetName(), err)
		}
	}
	return out.GetName(), remove, nil
}

// jobSetList lists JobSets, which the bench's scheme does not know.
func jobSetList() client.ObjectList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSetList"})
	return l
}

// jobSetFinish reads a JobSet's finish time (its Completed or Failed
// condition) and TTL, as JobSet's TTL controller does.
func jobSetFinish(o client.Object) (time.Time, time.Duration, bool) {
	u := o.(*unstructured.Unstructured)
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	ttl, _, _ := unstructured.NestedInt64(u.Object, "spec", "ttlSecondsAfterFinished")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if (m["type"] == "Completed" || m["type"] == "Failed") && m["status"] == "True" {
			at, err := time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"]))
			return at, time.Duration(ttl) * time.Second, err == nil
		}
	}
	return time.Time{}, 0, false
}

// jobSetRunning: every replicated Job of the JobSet has its Jobs ready or
// succeeded.
func jobSetRunning(o client.Object) bool {
	u := o.(*unstructured.Unstructured)
	specs, _, _ := unstructured.NestedSlice(u.Object, "spec", "replicatedJobs")
	statuses, _, _ := unstructured.NestedSlice(u.Object, "status", "replicatedJobsStatus")
	done := map[string]int64{}
	for _, st := range statuses {
		m, _ := st.(map[string]any)
		ready, _, _ := unstructured.NestedInt64(m, "ready")
		succeeded, _, _ := unstructured.NestedInt64(m, "succeeded")
		done[fmt.Sprint(m["name"])] = ready + succeeded
	}
	for _, sp := range specs {
		m, _ := sp.(map[string]any)
		replicas, found, _ := unstructured.NestedInt64(m, "replicas")
		if !found {
			replicas = 1
		}
		if done[fmt.Sprint(m["name"])] < replicas {
			return false
		}
	}
	return len(specs) > 0
}

func (t *tracker) ttlFigures(side, what string, n int) ttlSide {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := ttlSide{Controller: side, Objects: what, N: n}
	var requested, gone []time.Duration
	var firstFinish, lastFinish, firstDue, lastGone time.Time
	for _, o := range t.objs {
		if o.finish.IsZero() {
			s.Missed++
			continue
		}
		due := o.finish.Add(o.ttl)
		if firstFinish.IsZero() || o.finish.Before(firstFinish) {
			firstFinish = o.finish
		}
		if o.finish.After(lastFinish) {
			lastFinish = o.finish
		}
		if firstDue.IsZero() || due.Before(firstDue) {
			firstDue = due
		}
		if !o.deletionTimestamp.IsZero() && o.deletionTimestamp.Before(due) {
			s.Early++
		}
		if o.gone.IsZero() {
			s.Missed++
			continue
		}
		requested = append(requested, o.requested.Sub(due))
		gone = append(gone, o.gone.Sub(due))
		s.GoneSamples = append(s.GoneSamples, o.gone.Sub(due).Seconds())
		if o.gone.After(lastGone) {
			lastGone = o.gone
		}
	}
	s.Missed += n - len(t.objs)
	s.FinishSpread = lastFinish.Sub(firstFinish).Seconds()
	s.Requested, s.Gone = distOf(requested), distOf(gone)
	s.Drain = lastGone.Sub(firstDue).Seconds()
	return s
}

// batchJob is a plain Job of one Pod, as kube-controller-manager runs it,
// whose Pod succeeds as annotated.
func batchJob(name, ns, complete string, edit func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{completeAt: complete}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "node", Image: "pytorch/pytorch", Command: []string{"torchrun", "train.py"}}},
				},
			},
		},
	}
	if edit != nil {
		edit(j)
	}
	return j
}

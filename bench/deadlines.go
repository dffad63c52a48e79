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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// firstDeadline is the shortest deadline of B2, in seconds; the others are
// spread over the minute after it. It leaves time to create every object
// before the first deadline.
const firstDeadline = 20

type deadlineSide struct {
	Controller string `json:"controller"`
	Objects    string `json:"objects"`
	N          int    `json:"n"`
	// Error is |deadline enforced (the failure condition seen) − (startTime
	// + deadline)|.
	Error dist `json:"error"`
	// PodsGone is the last Pod of an object gone − (startTime + deadline).
	PodsGone dist `json:"podsGone"`
	// Early counts objects failed before their deadline; Missed, objects
	// never failed by their deadline.
	Early        int       `json:"early"`
	Missed       int       `json:"missed"`
	ErrorSamples []float64 `json:"errorSamples"`
}

type deadlineResult struct {
	N      int                `json:"n"`
	Spread string             `json:"deadlinesSpread"`
	QPS    float64            `json:"qps"`
	Burst  int                `json:"burst"`
	Sides  []deadlineSide     `json:"sides"`
	Ratios map[string]float64 `json:"ratios"`
}

// deadlineTrack is what the bench saw of one object with a deadline.
type deadlineTrack struct {
	due      time.Time // startTime + deadline, as the controllers compute it
	enforced time.Time // arrival of the failure condition
	early    bool
	pods     map[string]bool // Pods not gone yet
	podsSeen bool
	// lastDeleted is the last deletion of a Pod seen: the failure can
	// arrive after the Pods' deletions.
	lastDeleted time.Time
	podsGone    time.Time
}

type deadlineTracker struct {
	mu       sync.Mutex
	objs     map[string]*deadlineTrack
	deadline map[string]time.Duration
	// read returns the start time and whether the object failed by its
	// deadline, and how.
	read func(client.Object) (start *time.Time, exceeded bool)
	// owner names the object a Pod belongs to.
	owner func(*corev1.Pod) string
}

func (t *deadlineTracker) get(name string) *deadlineTrack {
	o := t.objs[name]
	if o == nil {
		o = &deadlineTrack{pods: map[string]bool{}}
		t.objs[name] = o
	}
	return o
}

func (t *deadlineTracker) observe(ev event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.get(ev.Object.GetName())
	start, exceeded := t.read(ev.Object)
	if start != nil && o.due.IsZero() {
		o.due = start.Add(t.deadline[ev.Object.GetName()])
	}
	if exceeded && o.enforced.IsZero() {
		o.enforced = ev.At
		o.early = !o.due.IsZero() && ev.At.Before(o.due)
		if o.podsSeen && len(o.pods) == 0 {
			o.podsGone = o.lastDeleted
		}
	}
}

func (t *deadlineTracker) observePod(ev event) {
	pod := ev.Object.(*corev1.Pod)
	name := t.owner(pod)
	if name == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.get(name)
	if ev.Type == watch.Deleted {
		delete(o.pods, pod.Name)
		o.lastDeleted = ev.At
		if len(o.pods) == 0 && !o.enforced.IsZero() {
			o.podsGone = ev.At
		}
		return
	}
	o.pods[pod.Name], o.podsSeen = true, true
}

func (t *deadlineTracker) counts() (enforced, podsGone int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, o := range t.objs {
		if !o.enforced.IsZero() {
			enforced++
		}
		if !o.podsGone.IsZero() {
			podsGone++
		}
	}
	return
}

func trainJobDeadline(o client.Object) (*time.Time, bool) {
	tj := o.(*trainer.TrainJob)
	var start *time.Time
	if tj.Status.StartTime != nil {
		start = &tj.Status.StartTime.Time
	}
	c := tj.FinishedCondition()
	return start, c != nil && c.Type == trainer.TrainJobFailed && c.Reason == trainer.TrainJobDeadlineExceededReason
}

func jobDeadline(o client.Object) (*time.Time, bool) {
	j := o.(*batchv1.Job)
	var start *time.Time
	if j.Status.StartTime != nil {
		start = &j.Status.StartTime.Time
	}
	for _, c := range j.Status.Conditions {
		// The Job controller marks FailureTarget at the deadline, then
		// Failed once the Pods are gone.
		if (c.Type == batchv1.JobFailureTarget || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue && c.Reason == batchv1.JobReasonDeadlineExceeded {
			return start, true
		}
	}
	return start, false
}

// kubeflowDeadline reads a TrainJob's deadline as Kubeflow Trainer v2.3
// enforces it: counted from the TrainJob's creation, or from its last
// resume (the Suspended condition turning False).
func kubeflowDeadline(o client.Object) (*time.Time, bool) {
	tj := o.(*trainer.TrainJob)
	start := tj.CreationTimestamp.Time
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended); c != nil && c.Status == metav1.ConditionFalse {
		start = c.LastTransitionTime.Time
	}
	_, exceeded := trainJobDeadline(o)
	return &start, exceeded
}

// deadlineScenario is B2: N running objects with active deadlines spread
// over a minute; how far from its deadline is each failed, and when are
// its Pods gone, on each side.
func (b *bench) deadlineScenario() sidedScenario {
	return sidedScenario{
		name:  "b2",
		sides: []string{ours, them, kubeflow},
		side: func(ctx context.Context, side string) (any, error) {
			n := b.c.deadlineN
			b.logf("B2 deadline accuracy, %s: %d %s, running, with deadlines of %ds to %ds", side, n, objects(side), firstDeadline, firstDeadline+59)
			if err := b.ensureNodes(ctx, n); err != nil {
				return nil, err
			}
			return b.deadlineSide(ctx, side, n)
		},
		report: b.deadlineReport,
	}
}

func (b *bench) deadlineReport(results map[string]any) (any, error) {
	n := b.c.deadlineN
	res := deadlineResult{N: n, Spread: fmt.Sprintf("%ds + (i mod 60)s", firstDeadline), QPS: b.qps, Burst: b.burst}
	var sides []string
	res.Sides, sides = measured[deadlineSide](results)
	figures := figures{}
	put := figures.put
	samples := map[string][]float64{}
	for _, s := range res.Sides {
		side := s.Controller
		put("|failed − deadline|, p50", side, s.Error.P50)
		put("|failed − deadline|, p99", side, s.Error.P99)
		put("|failed − deadline|, max", side, s.Error.Max)
		put("last Pod gone − deadline, p50", side, s.PodsGone.P50)
		put("last Pod gone − deadline, p99", side, s.PodsGone.P99)
		put("last Pod gone − deadline, max", side, s.PodsGone.Max)
		put("early", side, float64(s.Early))
		put("missed", side, float64(s.Missed))
		samples[side+" ("+s.Objects+")"] = s.ErrorSamples
	}
	if len(sides) == 0 {
		return nil, fmt.Errorf("no side measured")
	}
	res.Ratios = ratios(sides, figures)
	fmt.Fprintf(b.out, "\nB2 deadline accuracy: N=%d, deadlines %ds–%ds after start (Kubeflow Trainer: after creation, as it counts them), client QPS %v / burst %d for every controller\n",
		n, firstDeadline, firstDeadline+59, b.qps, b.burst)
	row := b.table(sides)
	for _, f := range []string{"|failed − deadline|, p50", "|failed − deadline|, p99", "|failed − deadline|, max",
		"last Pod gone − deadline, p50", "last Pod gone − deadline, p99", "last Pod gone − deadline, max"} {
		row(f, secs, figures[f])
	}
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	row("early", count, figures["early"])
	row("missed", count, figures["missed"])
	fmt.Fprintln(b.out)
	err := cdfPlot(filepath.Join(b.c.out, "b2.png"),
		fmt.Sprintf("B2 deadline accuracy: %d objects, deadlines %d–%ds (QPS %v)", n, firstDeadline, firstDeadline+59, b.qps),
		"|failed − due time|, seconds", samples)
	return res, err
}

func (b *bench) deadlineSide(ctx context.Context, side string, n int) (deadlineSide, error) {
	ns, drop, err := b.namespace(ctx, "bench-b2")
	if err != nil {
		return deadlineSide{}, err
	}
	defer drop()
	wctx, stop := context.WithCancel(ctx)
	defer stop()

	tr := &deadlineTracker{objs: map[string]*deadlineTrack{}, deadline: map[string]time.Duration{}}
	objs := make([]client.Object, n)
	var list func() client.ObjectList
	what := objects(side)
	for i := range objs {
		deadline := int64(firstDeadline + i%60)
		if side == them {
			name := fmt.Sprintf("job-%05d", i)
			objs[i] = batchJob(name, ns, "1h", func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To(deadline) })
			tr.deadline[name] = time.Duration(deadline) * time.Second
			continue
		}
		name := fmt.Sprintf("tj-%05d", i)
		objs[i] = benchTrainJob(name, ns, b.c.runtime, 1, "1h").Deadline(deadline).Obj()
		tr.deadline[name] = time.Duration(deadline) * time.Second
	}
	switch side {
	case them:
		tr.read, list = jobDeadline, func() client.ObjectList { return &batchv1.JobList{} }
		tr.owner = func(p *corev1.Pod) string { return p.Labels[batchv1.JobNameLabel] }
	case kubeflow:
		tr.read, list = kubeflowDeadline, func() client.ObjectList { return &trainer.TrainJobList{} }
		tr.owner = trainJobOf
	default:
		tr.read, list = trainJobDeadline, func() client.ObjectList { return &trainer.TrainJobList{} }
		tr.owner = trainJobOf
	}
	if err := b.watchAll(wctx, ns, list, tr.observe); err != nil {
		return deadlineSide{}, err
	}
	if err := b.watchAll(wctx, ns, func() client.ObjectList { return &corev1.PodList{} }, tr.observePod); err != nil {
		return deadlineSide{}, err
	}
	b.logf("B2 %s: %d %s whose Pods run an hour", side, n, what)
	if err := b.createAll(ctx, what, objs); err != nil {
		return deadlineSide{}, err
	}
	if err := b.waitSaying(ctx, "B2 "+side, 5*time.Minute+time.Duration(n)*50*time.Millisecond, func() (bool, string) {
		enforced, gone := tr.counts()
		return enforced == n && gone == n, fmt.Sprintf("%d of %d failed by their deadline, Pods of %d gone", enforced, n, gone)
	}); err != nil {
		return deadlineSide{}, err
	}

	tr.mu.Lock()
	defer tr.mu.Unlock()
	s := deadlineSide{Controller: side, Objects: what, N: n}
	var errs, gone []time.Duration
	for _, o := range tr.objs {
		if o.enforced.IsZero() || o.due.IsZero() {
			s.Missed++
			continue
		}
		if o.early {
			s.Early++
		}
		e := o.enforced.Sub(o.due).Abs()
		errs = append(errs, e)
		s.ErrorSamples = append(s.ErrorSamples, e.Seconds())
		if !o.podsGone.IsZero() {
			gone = append(gone, o.podsGone.Sub(o.due))
		}
	}
	s.Missed += n - len(tr.objs)
	s.Error, s.PodsGone = distOf(errs), distOf(gone)
	return s, nil
}

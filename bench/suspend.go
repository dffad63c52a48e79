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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// suspendSide is one side's figures in the suspend scenario.
type suspendSide struct {
	Controller string `json:"controller"`
	Objects    string `json:"objects"`
	N          int    `json:"n"`
	// PodsGone is the suspend request → the object's last Pod deleted;
	// Suspended, → its Suspended condition seen; Running, the resume
	// request → all its Pods running again.
	PodsGone       dist      `json:"suspendToPodsGone"`
	Suspended      dist      `json:"suspendToSuspendedCondition"`
	Running        dist      `json:"resumeToAllPodsRunning"`
	GoneSamples    []float64 `json:"-"`
	NotGone        int       `json:"podsNotGone"`
	NotSuspended   int       `json:"notSuspended"`
	NotRunningBack int       `json:"notRunningAgain"`
}

type suspendResult struct {
	N      int                `json:"n"`
	QPS    float64            `json:"qps"`
	Burst  int                `json:"burst"`
	Sides  []suspendSide      `json:"sides"`
	Ratios map[string]float64 `json:"ratios"`
}

// suspendScenario is N running objects of one Pod suspended at once, then
// resumed at once: how soon are their Pods gone and the objects marked
// Suspended, and how soon do they run again.
func (b *bench) suspendScenario() sidedScenario {
	return sidedScenario{
		name:   "suspend",
		sides:  []string{ours, them, kubeflow},
		side:   func(ctx context.Context, side string) (any, error) { return b.suspendSide(ctx, side, b.c.suspendN) },
		report: b.suspendReport,
	}
}

// suspendTrack is what the bench saw of one object.
type suspendTrack struct {
	pods map[string]corev1.PodPhase // live Pods
	// before are the Pods seen before the suspension: a Pod running again
	// is another (its creation time has a resolution of a second, too
	// coarse to tell).
	before    map[string]bool
	suspendAt time.Time
	goneAt    time.Time
	suspended time.Time
	resumeAt  time.Time
	runningAt time.Time
}

type suspendTracker struct {
	mu          sync.Mutex
	objs        map[string]*suspendTrack
	owner       func(*corev1.Pod) string
	isSuspended func(client.Object) bool
}

func (t *suspendTracker) get(name string) *suspendTrack {
	o := t.objs[name]
	if o == nil {
		o = &suspendTrack{pods: map[string]corev1.PodPhase{}, before: map[string]bool{}}
		t.objs[name] = o
	}
	return o
}

func (t *suspendTracker) observe(ev event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o := t.get(ev.Object.GetName())
	if !o.suspendAt.IsZero() && o.suspended.IsZero() && t.isSuspended(ev.Object) {
		o.suspended = ev.At
	}
}

func (t *suspendTracker) observePod(ev event) {
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
		if len(o.pods) == 0 && !o.suspendAt.IsZero() && o.goneAt.IsZero() {
			o.goneAt = ev.At
		}
		return
	}
	o.pods[pod.Name] = pod.Status.Phase
	if o.suspendAt.IsZero() {
		o.before[pod.Name] = true
	}
	if !o.resumeAt.IsZero() && o.runningAt.IsZero() && pod.Status.Phase == corev1.PodRunning && !o.before[pod.Name] {
		o.runningAt = ev.At
	}
}

// count counts the objects for which at is set.
func (t *suspendTracker) count(at func(*suspendTrack) time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, o := range t.objs {
		if !at(o).IsZero() {
			n++
		}
	}
	return n
}

func (t *suspendTracker) running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, o := range t.objs {
		for _, phase := range o.pods {
			if phase == corev1.PodRunning {
				n++
				break
			}
		}
	}
	return n
}

func (b *bench) suspendSide(ctx context.Context, side string, n int) (suspendSide, error) {
	b.logf("suspend %s: %d %s of one Pod running, suspended at once, then resumed at once", side, n, objects(side))
	if err := b.ensureNodes(ctx, n); err != nil {
		return suspendSide{}, err
	}
	ns, drop, err := b.namespace(ctx, "bench-suspend")
	if err != nil {
		return suspendSide{}, err
	}
	defer drop()
	wctx, stop := context.WithCancel(ctx)
	defer stop()

	tr := &suspendTracker{objs: map[string]*suspendTrack{}}
	objs := make([]client.Object, n)
	var list func() client.ObjectList
	for i := range objs {
		if side == them {
			objs[i] = batchJob(fmt.Sprintf("job-%05d", i), ns, "1h", nil)
		} else {
			objs[i] = benchTrainJob(fmt.Sprintf("tj-%05d", i), ns, b.c.runtime, 1, "1h").Obj()
		}
	}
	if side == them {
		tr.owner = func(p *corev1.Pod) string { return p.Labels[batchv1.JobNameLabel] }
		tr.isSuspended = func(o client.Object) bool {
			for _, c := range o.(*batchv1.Job).Status.Conditions {
				if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
					return true
				}
			}
			return false
		}
		list = func() client.ObjectList { return &batchv1.JobList{} }
	} else {
		tr.owner = trainJobOf
		tr.isSuspended = func(o client.Object) bool {
			return meta.IsStatusConditionTrue(o.(*trainer.TrainJob).Status.Conditions, trainer.TrainJobSuspended)
		}
		list = func() client.ObjectList { return &trainer.TrainJobList{} }
	}
	if err := b.watchAll(wctx, ns, list, tr.observe); err != nil {
		return suspendSide{}, err
	}
	if err := b.watchAll(wctx, ns, func() client.ObjectList { return &corev1.PodList{} }, tr.observePod); err != nil {
		return suspendSide{}, err
	}
	if err := b.createAll(ctx, objects(side), objs); err != nil {
		return suspendSide{}, err
	}
	err = b.waitFor(ctx, "suspend "+side+": running", 5*time.Minute, func() (bool, string) {
		running := tr.running()
		return running == n, fmt.Sprintf("%d of %d running", running, n)
	})
	if err != nil {
		return suspendSide{}, err
	}

	patch := func(suspend bool, at func(*suspendTrack) *time.Time) func(client.Object) error {
		body := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend)
		return func(o client.Object) error {
			tr.mu.Lock()
			*at(tr.get(o.GetName())) = time.Now()
			tr.mu.Unlock()
			return b.cl.Patch(ctx, o, client.RawPatch(types.MergePatchType, body))
		}
	}
	if err := b.forAll(ctx, "suspended", objects(side), objs, patch(true, func(o *suspendTrack) *time.Time { return &o.suspendAt })); err != nil {
		return suspendSide{}, err
	}
	if err := b.waitSaying(ctx, "suspend "+side, 5*time.Minute, func() (bool, string) {
		gone, suspended := tr.count(func(o *suspendTrack) time.Time { return o.goneAt }), tr.count(func(o *suspendTrack) time.Time { return o.suspended })
		return gone == n && suspended == n, fmt.Sprintf("Pods gone for %d, Suspended %d, of %d", gone, suspended, n)
	}); err != nil {
		return suspendSide{}, err
	}
	if err := b.forAll(ctx, "resumed", objects(side), objs, patch(false, func(o *suspendTrack) *time.Time { return &o.resumeAt })); err != nil {
		return suspendSide{}, err
	}
	if err := b.waitSaying(ctx, "resume "+side, 5*time.Minute, func() (bool, string) {
		running := tr.count(func(o *suspendTrack) time.Time { return o.runningAt })
		return running == n, fmt.Sprintf("%d of %d running again", running, n)
	}); err != nil {
		return suspendSide{}, err
	}

	tr.mu.Lock()
	defer tr.mu.Unlock()
	s := suspendSide{Controller: side, Objects: objects(side), N: n}
	var gone, suspended, running []time.Duration
	for _, o := range tr.objs {
		if o.goneAt.IsZero() {
			s.NotGone++
		} else {
			gone = append(gone, o.goneAt.Sub(o.suspendAt))
			s.GoneSamples = append(s.GoneSamples, o.goneAt.Sub(o.suspendAt).Seconds())
		}
		if o.suspended.IsZero() {
			s.NotSuspended++
		} else {
			suspended = append(suspended, o.suspended.Sub(o.suspendAt))
		}
		if o.runningAt.IsZero() {
			s.NotRunningBack++
		} else {
			running = append(running, o.runningAt.Sub(o.resumeAt))
		}
	}
	s.PodsGone, s.Suspended, s.Running = distOf(gone), distOf(suspended), distOf(running)
	b.logf("  suspend → Pods gone %s", s.PodsGone)
	b.logf("  suspend → Suspended %s", s.Suspended)
	b.logf("  resume → all Pods running %s", s.Running)
	return s, nil
}

func (b *bench) suspendReport(results map[string]any) (any, error) {
	res := suspendResult{N: b.c.suspendN, QPS: b.qps, Burst: b.burst}
	var sides []string
	res.Sides, sides = measured[suspendSide](results)
	figures := figures{}
	put := figures.put
	samples := map[string][]float64{}
	for _, s := range res.Sides {
		side := s.Controller
		put("suspend → Pods gone, p50", side, s.PodsGone.P50)
		put("suspend → Pods gone, p99", side, s.PodsGone.P99)
		put("suspend → Suspended, p50", side, s.Suspended.P50)
		put("suspend → Suspended, p99", side, s.Suspended.P99)
		put("resume → all Pods running, p50", side, s.Running.P50)
		put("resume → all Pods running, p99", side, s.Running.P99)
		put("not gone / not suspended / not back", side, float64(s.NotGone+s.NotSuspended+s.NotRunningBack))
		samples[side+" ("+s.Objects+")"] = s.GoneSamples
	}
	if len(sides) == 0 {
		return nil, fmt.Errorf("no side measured")
	}
	res.Ratios = ratios(sides, figures)
	fmt.Fprintf(b.out, "\nSuspend and resume: %d running objects of one Pod, suspended at once, then resumed at once; client QPS %v / burst %d for every controller\n", res.N, b.qps, b.burst)
	row := b.table(sides)
	for _, f := range []string{"suspend → Pods gone, p50", "suspend → Pods gone, p99", "suspend → Suspended, p50", "suspend → Suspended, p99",
		"resume → all Pods running, p50", "resume → all Pods running, p99"} {
		row(f, secs, figures[f])
	}
	row("not gone / not suspended / not back", func(v float64) string { return fmt.Sprintf("%.0f", v) }, figures["not gone / not suspended / not back"])
	fmt.Fprintln(b.out)
	err := cdfPlot(filepath.Join(b.c.out, "suspend.png"),
		fmt.Sprintf("Suspend: %d running objects suspended at once, → all Pods gone (QPS %v)", res.N, b.qps), "seconds", samples)
	return res, err
}

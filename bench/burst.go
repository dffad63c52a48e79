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
	"errors"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

const (
	// burstRun is how long the Pods of the burst scenario run.
	burstRun = "30s"
	// burstProfileWindow is how long -pprof profiles the burst from its
	// start: the creations and the Pods' start.
	burstProfileWindow = 60 * time.Second
)

// burstSide is one side's figures in the burst scenario.
type burstSide struct {
	Controller string `json:"controller"`
	Objects    string `json:"objects"`
	N          int    `json:"n"`
	Completed  int    `json:"completed"`
	// Running is the create request → all Pods of the object running;
	// Complete, → the object's Complete condition seen.
	Running  dist `json:"createToAllPodsRunning"`
	Complete dist `json:"createToComplete"`
	// Writes are the requests that wrote, per object, as the API server
	// counted them over the objects' whole life: from the first creation
	// until, deleted, nothing of them is left (and 5 s more), by resource,
	// from every client but the bench (its creation and deletion of each
	// object are taken off): the controllers', kube-controller-manager's,
	// the scheduler's and the simulated kubelets'. WritesToComplete are
	// those until every object completed (and 5 s more).
	Writes                map[string]float64 `json:"clusterWritesPerObject"`
	WritesTotal           float64            `json:"clusterWritesPerObjectTotal"`
	WritesToComplete      map[string]float64 `json:"clusterWritesPerObjectToComplete"`
	WritesToCompleteTotal float64            `json:"clusterWritesPerObjectToCompleteTotal"`
	// ControllerWrites are the writes, per object, until every object
	// completed, of the side's own controller as it counts them: the
	// manager's, Kubeflow Trainer's (JobSet's are not served, see
	// dev.StartKubeflow), or kube-controller-manager's.
	ControllerWrites float64 `json:"controllerWritesPerObject"`
	// ChildRate is the objects whose child Job exists per second, from the
	// first creation until the last child Job's: the pace the controllers
	// create at (none for batch Jobs, which the bench creates).
	ChildRate      float64   `json:"childJobsPerSecond,omitempty"`
	Seconds        float64   `json:"seconds"`
	RunningSamples []float64 `json:"-"`
}

type burstResult struct {
	N       int                `json:"n"`
	PodsRun string             `json:"podsRun"`
	Runtime string             `json:"runtime"`
	QPS     float64            `json:"qps"`
	Burst   int                `json:"burst"`
	Sides   []burstSide        `json:"sides"`
	Ratios  map[string]float64 `json:"ratios"`
}

// burst is N TrainJobs of one node created at once, their Pods running
// burstRun: create → all Pods running, create → Complete, and the cluster's
// writes per TrainJob, on each side.
func (b *bench) burstScenario() sidedScenario {
	return sidedScenario{
		name:  "burst",
		sides: []string{ours, them, kubeflow},
		side: func(ctx context.Context, side string) (any, error) {
			return b.burstSide(ctx, side, b.c.burstN)
		},
		report: b.burstReport,
	}
}

func (b *bench) burstSide(ctx context.Context, side string, n int) (burstSide, error) {
	b.logf("burst %s: %d %s of one Pod created at once, Pods running %s", side, n, objects(side), burstRun)
	if err := b.ensureNodes(ctx, n); err != nil {
		return burstSide{}, err
	}
	pprofPort, restore, err := b.servingProfiles(ctx, side)
	if err != nil {
		return burstSide{}, err
	}
	defer restore()
	namespaces, drop, err := b.namespaces(ctx, "bench-burst", (n+perNamespace-1)/perNamespace)
	if err != nil {
		return burstSide{}, err
	}
	defer drop()
	wctx, stop := context.WithCancel(ctx)
	defer stop()

	var tr *podTracker
	var list func() client.ObjectList
	objs := make([]client.Object, n)
	created := "trainer.kubeflow.org/trainjobs"
	for i := range objs {
		ns := namespaces[i/perNamespace]
		if side == them {
			objs[i] = batchJob(fmt.Sprintf("job-%05d", i), ns, burstRun, nil)
		} else {
			objs[i] = benchTrainJob(fmt.Sprintf("tj-%05d", i), ns, b.c.runtime, 1, burstRun).Obj()
		}
	}
	if side == them {
		created = "batch/jobs"
		tr = newPodTracker(1, func(p *corev1.Pod) string { return p.Labels[batchv1.JobNameLabel] }, jobFinished)
		list = func() client.ObjectList { return &batchv1.JobList{} }
	} else {
		tr = newPodTracker(1, trainJobOf, trainJobComplete)
		list = func() client.ObjectList { return &trainer.TrainJobList{} }
	}
	if err := b.watchIn(wctx, namespaces, list, tr.observe); err != nil {
		return burstSide{}, err
	}
	if err := b.watchIn(wctx, namespaces, func() client.ObjectList { return &corev1.PodList{} }, tr.observePod); err != nil {
		return burstSide{}, err
	}
	var childMu sync.Mutex
	var lastChild time.Time
	children := 0
	if side != them {
		err := b.watchIn(wctx, namespaces, func() client.ObjectList { return &batchv1.JobList{} }, func(ev event) {
			if ev.Type == watch.Added {
				childMu.Lock()
				children, lastChild = children+1, ev.At
				childMu.Unlock()
			}
		})
		if err != nil {
			return burstSide{}, err
		}
	}
	before, err := b.apiServerWrites(ctx)
	if err != nil {
		return burstSide{}, err
	}
	ctrlBefore, err := b.controllerWrites(ctx, side)
	if err != nil {
		return burstSide{}, err
	}

	start := time.Now()
	profiles := b.burstProfiles(ctx, side, pprofPort)
	err = b.forAll(ctx, "created", objects(side), objs, func(o client.Object) error {
		tr.mu.Lock()
		tr.created[o.GetName()] = time.Now()
		tr.mu.Unlock()
		return b.cl.Create(ctx, o)
	})
	if err != nil {
		return burstSide{}, err
	}
	if err := b.waitSaying(ctx, "burst "+side, 10*time.Minute+time.Duration(n)*time.Second/2, func() (bool, string) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.completed) == n, fmt.Sprintf("all Pods running for %d, %d complete of %d", len(tr.allAt), len(tr.completed), n)
	}); err != nil {
		return burstSide{}, err
	}
	if err := profiles(); err != nil {
		b.logf("  profiles: %v", err)
	}
	// Status writes that trail the last completion.
	if err := pause(ctx, 5*time.Second); err != nil {
		return burstSide{}, err
	}
	atComplete, err := b.apiServerWrites(ctx)
	if err != nil {
		return burstSide{}, err
	}
	ctrlAfter, err := b.controllerWrites(ctx, side)
	if err != nil {
		return burstSide{}, err
	}
	// Then the rest of their life: deleted as kubectl deletes (in the
	// background), until nothing of them is left.
	err = b.forAll(ctx, "deleted", objects(side), objs, func(o client.Object) error {
		return client.IgnoreNotFound(b.cl.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	})
	if err != nil {
		return burstSide{}, err
	}
	if err := b.waitSaying(ctx, "burst "+side+" deletion", 10*time.Minute, func() (bool, string) {
		left := 0
		for _, ns := range namespaces {
			left += b.leftIn(ctx, ns)
		}
		return left == 0, fmt.Sprintf("%d objects left", left)
	}); err != nil {
		return burstSide{}, err
	}
	if err := pause(ctx, 5*time.Second); err != nil {
		return burstSide{}, err
	}
	atGone, err := b.apiServerWrites(ctx)
	if err != nil {
		return burstSide{}, err
	}

	tr.mu.Lock()
	defer tr.mu.Unlock()
	s := burstSide{Controller: side, Objects: objects(side), N: n, Completed: len(tr.completed), Seconds: time.Since(start).Seconds(),
		ControllerWrites: (ctrlAfter - ctrlBefore) / float64(n)}
	var running, complete []time.Duration
	for name, c := range tr.created {
		if at, ok := tr.allAt[name]; ok {
			running = append(running, at.Sub(c))
			s.RunningSamples = append(s.RunningSamples, at.Sub(c).Seconds())
		} else {
			running = append(running, time.Hour) // never ran: counts against the side
		}
		if at, ok := tr.completed[name]; ok {
			complete = append(complete, at.Sub(c))
		} else {
			complete = append(complete, time.Hour)
		}
	}
	s.Running, s.Complete = distOf(running), distOf(complete)
	childMu.Lock()
	if children >= n {
		s.ChildRate = float64(n) / lastChild.Sub(start).Seconds()
	}
	childMu.Unlock()
	// The bench's own writes (one creation and one deletion per object)
	// are taken off.
	s.WritesToComplete = perObject(delta(before, atComplete), created, n, 1)
	s.Writes = perObject(delta(before, atGone), created, n, 2)
	s.WritesToCompleteTotal, s.WritesTotal = sum(s.WritesToComplete), sum(s.Writes)
	b.logf("  create → all Pods running %s", s.Running)
	b.logf("  create → Complete %s", s.Complete)
	b.logf("  cluster writes per object: %.2f to Complete (%.2f of them by %s), %.2f over its whole life", s.WritesToCompleteTotal, s.ControllerWrites, side, s.WritesTotal)
	return s, nil
}

// burstProfiles, under -pprof, saves CPU profiles of the first
// burstProfileWindow from now, while the objects are created and start: the
// API server's, on every side, and the manager's, when pprofPort serves
// them. It returns what waits for them.
func (b *bench) burstProfiles(ctx context.Context, side string, pprofPort int) (wait func() error) {
	if !b.c.pprof {
		return func() error { return nil }
	}
	what := fmt.Sprintf("profile?seconds=%d", int(burstProfileWindow.Seconds()))
	done := make(chan error, 2)
	profiles := 1
	// The API server answers once the window is over: longer than the
	// bench's client waits for a scrape.
	api := *b.apiHTTP
	api.Timeout = burstProfileWindow + 30*time.Second
	go func() {
		done <- b.saveProfile(ctx, &api, b.apiHost+"/debug/pprof", what, "burst-"+side+"-apiserver-cpu.pprof")
	}()
	if pprofPort != 0 {
		profiles++
		go func() {
			done <- b.saveProfile(ctx, http.DefaultClient, managerPprof(pprofPort), what, "burst-"+side+"-cpu.pprof")
		}()
	}
	return func() error {
		var errs []error
		for range profiles {
			errs = append(errs, <-done)
		}
		return errors.Join(errs...)
	}
}

// perObject is writes per object, the bench's own (mine per object, of
// resource created) taken off.
func perObject(writes map[string]float64, created string, n int, mine float64) map[string]float64 {
	writes[created] -= mine * float64(n)
	out := map[string]float64{}
	for resource, v := range writes {
		if v != 0 {
			out[resource] = v / float64(n)
		}
	}
	return out
}

func sum(m map[string]float64) float64 {
	total := 0.0
	for _, v := range m {
		total += v
	}
	return total
}

// controllerWrites is the count of writes the side's controller made, as
// it counts them.
func (b *bench) controllerWrites(ctx context.Context, side string) (float64, error) {
	switch side {
	case ours:
		counts, err := b.requestCounts(ctx)
		if err != nil {
			return 0, err
		}
		total := 0.0
		for key, v := range counts.manager {
			if verb, _, _ := strings.Cut(key, " "); verb != "get" && verb != "list" && verb != "watch" {
				total += v
			}
		}
		return total, nil
	case kubeflow:
		m, err := scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", b.kf.TrainerMetricsPort))
		if err != nil {
			return 0, fmt.Errorf("reading Kubeflow Trainer's metrics: %w", err)
		}
		return writesByMethod(m.By("rest_client_requests_total", "method")), nil
	default:
		m, err := scrape(ctx, fmt.Sprintf("https://127.0.0.1:%d/metrics", b.kcmMetricsPort))
		if err != nil {
			return 0, fmt.Errorf("reading %s's metrics: %w", kcm, err)
		}
		return writesByMethod(m.By("rest_client_requests_total", "method")), nil
	}
}

// writesByMethod adds up the requests of the HTTP methods that write.
func writesByMethod(byMethod map[string]float64) float64 {
	return byMethod["POST"] + byMethod["PUT"] + byMethod["PATCH"] + byMethod["DELETE"]
}

func (b *bench) burstReport(results map[string]any) (any, error) {
	res := burstResult{N: b.c.burstN, PodsRun: burstRun, Runtime: b.c.runtime, QPS: b.qps, Burst: b.burst}
	var sides []string
	res.Sides, sides = measured[burstSide](results)
	if len(sides) == 0 {
		return nil, fmt.Errorf("no side measured")
	}
	figures := figures{}
	put := figures.put
	samples := map[string][]float64{}
	for _, s := range res.Sides {
		put("create → all Pods running, p50", s.Controller, s.Running.P50)
		put("create → all Pods running, p99", s.Controller, s.Running.P99)
		put("create → all Pods running, max", s.Controller, s.Running.Max)
		put("create → Complete, p50", s.Controller, s.Complete.P50)
		put("create → Complete, p99", s.Controller, s.Complete.P99)
		put("cluster writes per object to Complete", s.Controller, s.WritesToCompleteTotal)
		put("cluster writes per object, whole life", s.Controller, s.WritesTotal)
		put("its controller's writes per object", s.Controller, s.ControllerWrites)
		put("completed", s.Controller, float64(s.Completed))
		if s.ChildRate > 0 {
			put("child Jobs created", s.Controller, s.ChildRate)
		}
		samples[s.Controller+" ("+s.Objects+")"] = s.RunningSamples
	}

	fmt.Fprintf(b.out, "\nBurst: %d objects of one Pod created at once, Pods run %s, TrainJobs on %s; client QPS %v / burst %d for every controller\n",
		res.N, burstRun, b.c.runtime, b.qps, b.burst)
	row := b.table(sides)
	for _, f := range []string{"create → all Pods running, p50", "create → all Pods running, p99", "create → all Pods running, max",
		"create → Complete, p50", "create → Complete, p99"} {
		row(f, secs, figures[f])
	}
	count := func(v float64) string { return fmt.Sprintf("%.2f", v) }
	row("cluster writes per object to Complete", count, figures["cluster writes per object to Complete"])
	row("cluster writes per object, whole life", count, figures["cluster writes per object, whole life"])
	row("its controller's writes per object", count, figures["its controller's writes per object"])
	rate := func(v float64) string { return fmt.Sprintf("%.1f/s", v) }
	row("child Jobs created", rate, figures["child Jobs created"])
	if b.bare != nil {
		fraction := map[string]float64{}
		for side, v := range figures["child Jobs created"] {
			fraction[side] = v / b.bare.CreateRate
		}
		figures["child Jobs created / bare client's"] = fraction
		row("  of the bare client's", func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }, fraction)
	}
	row("completed", func(v float64) string { return fmt.Sprintf("%.0f of %d", v, res.N) }, figures["completed"])
	fmt.Fprintf(b.out, "cluster writes per object over its whole life, by resource:\n")
	resources := map[string]bool{}
	for _, s := range res.Sides {
		for r := range s.Writes {
			resources[r] = true
		}
	}
	res.Ratios = ratios(sides, figures)
	for _, r := range slices.Sorted(maps.Keys(resources)) {
		vals := map[string]float64{}
		for _, s := range res.Sides {
			vals[s.Controller] = s.Writes[r]
		}
		row("  "+r, count, vals)
	}
	fmt.Fprintln(b.out)
	err := cdfPlot(filepath.Join(b.c.out, "burst.png"),
		fmt.Sprintf("Burst: %d objects at once, create → all Pods running (QPS %v)", res.N, b.qps),
		"seconds", samples)
	return res, err
}

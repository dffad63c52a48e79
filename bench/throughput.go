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
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot/plotter"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/controller/trainjob"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

// B3 settings: TrainJobs of 2 nodes whose Pods run a few seconds, deleted as
// soon as they finish.
const (
	throughputNodes = 2
	throughputRun   = "3s"
	// runningGoal is the p99 of create → all Pods running a rate must keep.
	runningGoal = 5 * time.Second
)

type rateStep struct {
	Controller string  `json:"controller"`
	Rate       float64 `json:"ratePerSecond"`
	Window     float64 `json:"windowSeconds"`
	Created    int     `json:"created"`
	Completed  int     `json:"completed"`
	// Running is create request → all Pods of the object running.
	Running dist `json:"createToAllPodsRunning"`
	// Drain is from the end of the window until nothing is left.
	Drain     float64 `json:"drainSeconds"`
	LeftOver  int     `json:"leftBehind"`
	Sustained bool    `json:"sustained"`
	// Requests are the API requests per object: of the manager by verb and
	// resource (ours), and of kube-controller-manager by HTTP method.
	ManagerRequests map[string]float64 `json:"managerRequestsPerObject,omitempty"`
	// ManagerRefused are the manager's requests the API server refused, per
	// object, by HTTP method and status code (409: a write on a version
	// that was no longer the latest).
	ManagerRefused map[string]float64 `json:"managerRefusedPerObject,omitempty"`
	KCMRequests    map[string]float64 `json:"kubeControllerManagerRequestsPerObject"`
	// Reconciles are the TrainJob controller's reconciles per TrainJob and
	// their mean duration: a reconcile holds one of its workers.
	Reconciles       float64 `json:"managerReconcilesPerTrainJob,omitempty"`
	ReconcileSeconds float64 `json:"managerReconcileMeanSeconds,omitempty"`
	// ClusterCPU is the CPU time each process of the cluster used from the
	// start of the window to the end of the drain; Seconds is that span.
	ClusterCPU     map[string]float64 `json:"clusterCPUSeconds"`
	Seconds        float64            `json:"seconds"`
	RunningSamples []float64          `json:"-"`
}

type throughputResult struct {
	Nodes        int        `json:"nodesPerTrainJob"`
	Runtime      string     `json:"runtime"`
	PodsRun      string     `json:"podsRun"`
	Goal         string     `json:"goal"`
	Steps        []rateStep `json:"steps"`
	Highest      float64    `json:"highestSustainedRate"`
	KCMSteps     []rateStep `json:"kubeControllerManagerSteps,omitempty"`
	KCMHighest   float64    `json:"kubeControllerManagerHighestSustainedRate,omitempty"`
	KFSteps      []rateStep `json:"kubeflowSteps,omitempty"`
	KFHighest    float64    `json:"kubeflowHighestSustainedRate,omitempty"`
	WritesPerObj float64    `json:"managerWritesPerTrainJob"`
}

// throughputScenario is B3: objects created at rising rates, each side up
// to the first rate it does not sustain (every Pod running within 5s, p99,
// and nothing left behind), and the API requests of a TrainJob's life next
// to a batch Job's.
func (b *bench) throughputScenario() sidedScenario {
	return sidedScenario{
		name:  "b3",
		sides: []string{ours, them, kubeflow},
		side: func(ctx context.Context, side string) (any, error) {
			b.logf("B3 throughput, %s: %s of %d Pods running %s, deleted once finished, at %v per second, %s each",
				side, objects(side), throughputNodes, throughputRun, b.c.rates, b.c.window)
			maxObjs := int(slices.Max(b.c.rates)*b.c.window.Seconds()) * throughputNodes
			if err := b.ensureNodes(ctx, maxObjs); err != nil {
				return nil, err
			}
			var steps []rateStep
			for _, rate := range b.c.rates {
				s, err := b.rateStep(ctx, side, rate)
				if err != nil {
					return nil, err
				}
				steps = append(steps, s)
				if !s.Sustained {
					break
				}
			}
			return steps, nil
		},
		report: b.throughputReport,
	}
}

// highest is the highest rate of steps sustained, every lower one too.
func highest(steps []rateStep) float64 {
	h := 0.0
	for _, s := range steps {
		if !s.Sustained {
			break
		}
		h = s.Rate
	}
	return h
}

func (b *bench) throughputReport(results map[string]any) (any, error) {
	res := throughputResult{Nodes: throughputNodes, Runtime: b.c.runtime, PodsRun: throughputRun, Goal: "p99 create → all Pods running < 5s, every object completed and deleted, nothing left"}
	res.Steps, _ = results[ours].([]rateStep)
	res.KCMSteps, _ = results[them].([]rateStep)
	res.KFSteps, _ = results[kubeflow].([]rateStep)
	res.Highest, res.KCMHighest, res.KFHighest = highest(res.Steps), highest(res.KCMSteps), highest(res.KFSteps)
	// Requests per object at our highest sustained rate (or the first).
	at := res.Highest
	if at == 0 {
		at = b.c.rates[0]
	}
	stepAt := func(steps []rateStep) rateStep {
		for _, s := range steps {
			if s.Rate == at {
				return s
			}
		}
		return rateStep{}
	}
	o, k := stepAt(res.Steps), stepAt(res.KCMSteps)

	fmt.Fprintf(b.out, "\nB3 throughput: objects of %d Pods (TrainJobs on %s), Pods run %s, deleted once finished; goal p99 create→running < %s\n", throughputNodes, b.c.runtime, throughputRun, runningGoal)
	fmt.Fprintf(b.out, "%-26s %-8s %-9s %-10s %-34s %-9s %-6s %-10s %s\n", "controller", "rate/s", "created", "completed", "create → all Pods running", "drain", "left", "sustained", "cores used: kube-apiserver, all")
	var pts []series
	line := map[string]plotter.XYs{}
	var names []string
	for _, s := range slices.Concat(res.Steps, res.KCMSteps, res.KFSteps) {
		all := 0.0
		for _, v := range s.ClusterCPU {
			all += v
		}
		fmt.Fprintf(b.out, "%-26s %-8g %-9d %-10d %-34s %-9s %-6d %-10t %.2f, %.2f\n", s.Controller, s.Rate, s.Created, s.Completed,
			fmt.Sprintf("p50 %s p99 %s", secs(s.Running.P50), secs(s.Running.P99)), secs(s.Drain), s.LeftOver, s.Sustained,
			s.ClusterCPU["kube-apiserver"]/s.Seconds, all/s.Seconds)
		if line[s.Controller] == nil {
			names = append(names, s.Controller)
		}
		line[s.Controller] = append(line[s.Controller], plotter.XY{X: s.Rate, Y: s.Running.P99})
	}
	for _, name := range names {
		pts = append(pts, series{name + " p99", line[name]})
	}
	fmt.Fprintf(b.out, "highest rate sustained: %g TrainJobs/s", res.Highest)
	if res.KCMSteps != nil {
		fmt.Fprintf(b.out, "; kube-controller-manager: %g batch Jobs/s", res.KCMHighest)
	}
	if res.KFSteps != nil {
		fmt.Fprintf(b.out, "; Kubeflow Trainer: %g TrainJobs/s", res.KFHighest)
	}
	fmt.Fprintln(b.out)

	if o.Controller != "" {
		fmt.Fprintf(b.out, "\nAPI requests per object at %g/s:\n", at)
		fmt.Fprintf(b.out, "  the manager, per TrainJob, by verb and resource:\n")
		writes := 0.0
		for _, key := range slices.Sorted(maps.Keys(o.ManagerRequests)) {
			fmt.Fprintf(b.out, "    %-52s %.2f\n", key, o.ManagerRequests[key])
			if verb, _, _ := strings.Cut(key, " "); verb != "get" && verb != "list" && verb != "watch" {
				writes += o.ManagerRequests[key]
			}
		}
		res.WritesPerObj = writes
		fmt.Fprintf(b.out, "  the manager's writes per TrainJob: %.2f\n", writes)
		for _, key := range slices.Sorted(maps.Keys(o.ManagerRefused)) {
			fmt.Fprintf(b.out, "    of which refused, %-39s %.2f\n", key, o.ManagerRefused[key])
		}
		fmt.Fprintf(b.out, "  kube-controller-manager, by method: %-28s %s\n", "per TrainJob (its child Jobs)", "per batch Job")
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			fmt.Fprintf(b.out, "    %-34s %-28.2f %.2f\n", m, o.KCMRequests[m], k.KCMRequests[m])
		}
	}
	fmt.Fprintln(b.out)
	err := linePlot(filepath.Join(b.c.out, "b3.png"), fmt.Sprintf("B3 create → all Pods running, p99 (objects of %d Pods)", throughputNodes),
		"objects created per second", "seconds", pts)
	return res, err
}

// podTracker records when all Pods of each object first ran, and when the
// object finished.
type podTracker struct {
	mu sync.Mutex
	// pods is how many Pods an object runs.
	pods      int
	created   map[string]time.Time
	running   map[string]map[string]bool
	allAt     map[string]time.Time
	completed map[string]time.Time
	gone      map[string]bool
	owner     func(*corev1.Pod) string
	finished  func(client.Object) bool
}

func newPodTracker(pods int, owner func(*corev1.Pod) string, finished func(client.Object) bool) *podTracker {
	return &podTracker{pods: pods, created: map[string]time.Time{}, running: map[string]map[string]bool{}, allAt: map[string]time.Time{},
		completed: map[string]time.Time{}, gone: map[string]bool{}, owner: owner, finished: finished}
}

func (t *podTracker) observePod(ev event) {
	pod := ev.Object.(*corev1.Pod)
	if pod.Status.Phase != corev1.PodRunning && pod.Status.Phase != corev1.PodSucceeded {
		return
	}
	name := t.owner(pod)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running[name] == nil {
		t.running[name] = map[string]bool{}
	}
	t.running[name][pod.Name] = true
	if _, done := t.allAt[name]; !done && len(t.running[name]) >= t.pods {
		t.allAt[name] = ev.At
	}
}

func (t *podTracker) observe(ev event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := t.completed[ev.Object.GetName()]; !seen && t.finished(ev.Object) {
		t.completed[ev.Object.GetName()] = ev.At
	}
	if ev.Type == watch.Deleted {
		t.gone[ev.Object.GetName()] = true
	}
}

// rateStep creates objects at rate per second for the window, then waits
// for them to drain.
func (b *bench) rateStep(ctx context.Context, side string, rate float64) (rateStep, error) {
	ns, drop, err := b.namespace(ctx, "bench-b3")
	if err != nil {
		return rateStep{}, err
	}
	defer drop()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var tr *podTracker
	var list func() client.ObjectList
	var newObj func(i int) client.Object
	if side == them {
		tr = newPodTracker(throughputNodes, func(p *corev1.Pod) string { return p.Labels[batchv1.JobNameLabel] },
			jobFinished)
		list = func() client.ObjectList { return &batchv1.JobList{} }
		newObj = func(i int) client.Object {
			return batchJob(fmt.Sprintf("job-%05d", i), ns, throughputRun, func(j *batchv1.Job) {
				j.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
				j.Spec.Completions, j.Spec.Parallelism = ptr.To[int32](throughputNodes), ptr.To[int32](throughputNodes)
				j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			})
		}
	} else {
		tr = newPodTracker(throughputNodes, trainJobOf, trainJobComplete)
		list = func() client.ObjectList { return &trainer.TrainJobList{} }
		newObj = func(i int) client.Object {
			return benchTrainJob(fmt.Sprintf("tj-%05d", i), ns, b.c.runtime, throughputNodes, throughputRun).TTL(0).Obj()
		}
	}
	observe := tr.observe
	if side == kubeflow {
		// Kubeflow Trainer has no TTL for TrainJobs: the bench deletes
		// each once it completes, as a user's pipeline would.
		observe = func(ev event) {
			tr.observe(ev)
			if ev.Type != watch.Deleted && trainJobComplete(ev.Object) && ev.Object.GetDeletionTimestamp() == nil {
				go func() {
					_ = b.cl.Delete(wctx, ev.Object, client.PropagationPolicy(metav1.DeletePropagationBackground))
				}()
			}
		}
	}
	if err := b.watchAll(wctx, ns, list, observe); err != nil {
		return rateStep{}, err
	}
	if err := b.watchAll(wctx, ns, func() client.ObjectList { return &corev1.PodList{} }, tr.observePod); err != nil {
		return rateStep{}, err
	}
	before, err := b.requestCounts(ctx)
	if err != nil {
		return rateStep{}, err
	}
	cpuBefore := b.clusterCPU()

	b.logf("B3 %s: %g per second for %s", side, rate, b.c.window)
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var createErr error
	n := 0
	// Paced by hand, not by a wait helper: creations keep to a schedule
	// from start and catch up after a slow moment, so the rate offered is
	// the rate asked; a ticker would drop the ticks it missed.
	for next := start; time.Since(start) < b.c.window && ctx.Err() == nil; next = next.Add(interval) {
		time.Sleep(time.Until(next))
		obj := newObj(n)
		n++
		wg.Go(func() {
			at := time.Now()
			tr.mu.Lock()
			tr.created[obj.GetName()] = at
			tr.mu.Unlock()
			if err := b.cl.Create(ctx, obj); err != nil {
				errMu.Lock()
				createErr = err
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	if createErr != nil {
		return rateStep{}, fmt.Errorf("creating: %w", createErr)
	}
	windowEnd := time.Now()
	left := 0
	err = b.waitFor(ctx, fmt.Sprintf("B3 %s %g/s drain", side, rate), 2*time.Minute, func() (bool, string) {
		left = b.leftIn(ctx, ns)
		return left == 0, fmt.Sprintf("%d objects left", left)
	})
	if err != nil && ctx.Err() != nil {
		return rateStep{}, err
	}
	drain := time.Since(windowEnd)
	cpuAfter := b.clusterCPU()
	after, err := b.requestCounts(ctx)
	if err != nil {
		return rateStep{}, err
	}

	tr.mu.Lock()
	defer tr.mu.Unlock()
	s := rateStep{Controller: side, Rate: rate, Window: b.c.window.Seconds(), Created: n, Completed: len(tr.completed),
		Drain: drain.Seconds(), LeftOver: left, Seconds: time.Since(start).Seconds(), ClusterCPU: delta(cpuBefore, cpuAfter)}
	var running []time.Duration
	for name, c := range tr.created {
		at, ok := tr.allAt[name]
		if !ok {
			running = append(running, time.Hour) // never ran: counts against the step
			continue
		}
		running = append(running, at.Sub(c))
		s.RunningSamples = append(s.RunningSamples, at.Sub(c).Seconds())
	}
	s.Running = distOf(running)
	s.Sustained = s.Running.P99 < runningGoal.Seconds() && left == 0 && s.Completed == n
	per := func(m map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range m {
			out[k] = v / float64(n)
		}
		return out
	}
	if side == ours {
		s.ManagerRequests = per(delta(before.manager, after.manager))
		s.ManagerRefused = map[string]float64{}
		for key, v := range per(delta(before.managerCodes, after.managerCodes)) {
			if _, code, _ := strings.Cut(key, " "); v > 0 && !strings.HasPrefix(code, "2") {
				s.ManagerRefused[key] = v
			}
		}
	}
	if side == ours {
		if r := after.reconciles - before.reconciles; r > 0 {
			s.Reconciles = r / float64(n)
			s.ReconcileSeconds = (after.reconcileSeconds - before.reconcileSeconds) / r
		}
	}
	s.KCMRequests = per(delta(before.kcm, after.kcm))
	b.logf("  %g/s: %d created, %d completed, create → all Pods running %s; drained in %s, %d left; sustained: %t",
		rate, n, s.Completed, s.Running, drain.Round(100*time.Millisecond), left, s.Sustained)
	if side == ours {
		b.logf("  %.1f reconciles per TrainJob, %.0f ms each on average, %d workers", s.Reconciles, 1000*s.ReconcileSeconds, b.trainJobWorkers)
	}
	b.logf("  CPU seconds over %.0fs: %s", s.Seconds, cpuShares(s.ClusterCPU))
	return s, nil
}

// leftIn counts the objects of a step still in ns.
func (b *bench) leftIn(ctx context.Context, ns string) int {
	left := 0
	for _, l := range []client.ObjectList{&trainer.TrainJobList{}, &batchv1.JobList{}, &corev1.PodList{}, &corev1.ServiceList{}} {
		if err := b.cl.List(ctx, l, client.InNamespace(ns)); err != nil {
			return -1
		}
		items, _ := metaItems(l)
		left += len(items)
	}
	return left
}

type requestCounts struct {
	manager      map[string]float64 // "verb group/resource"
	managerCodes map[string]float64 // "method code"
	kcm          map[string]float64 // HTTP method
	// reconciles and reconcileSeconds are the TrainJob controller's
	// reconciles and the time they took.
	reconciles, reconcileSeconds float64
}

// requestCounts reads the request counters of kube-controller-manager, and
// of the manager unless it is not running (on the Kubeflow side).
func (b *bench) requestCounts(ctx context.Context) (requestCounts, error) {
	k, err := scrape(ctx, fmt.Sprintf("https://127.0.0.1:%d/metrics", b.kcmMetricsPort))
	if err != nil {
		return requestCounts{}, fmt.Errorf("reading %s's metrics: %w", kcm, err)
	}
	if b.kf != nil {
		return requestCounts{kcm: k.By("rest_client_requests_total", "method")}, nil
	}
	_, port, err := dev.Manager(b.o)
	if err != nil {
		return requestCounts{}, err
	}
	m, err := scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return requestCounts{}, err
	}
	return requestCounts{
		manager:      m.By("trainjob_api_requests_total", "verb", "resource"),
		managerCodes: m.By("rest_client_requests_total", "method", "code"),
		kcm:          k.By("rest_client_requests_total", "method"),
		reconciles:   m.Sum("controller_runtime_reconcile_total", map[string]string{"controller": trainjob.ControllerName}),
		reconcileSeconds: m.Sum("controller_runtime_reconcile_time_seconds_sum",
			map[string]string{"controller": trainjob.ControllerName}),
	}, nil
}

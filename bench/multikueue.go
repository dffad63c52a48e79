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
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The multikueue scenario, on `make dev-up MULTIKUEUE=1`: TrainJobs of one
// node, one after another, run three ways on the same manager cluster —
// here without Kueue, queued in a ClusterQueue of this cluster (Kueue), and
// queued in config/samples/multikueue's ClusterQueue, which MultiKueue
// dispatches to a worker cluster. What dispatching costs: create → the
// Pods running (here, or on the worker), and how late the manager cluster
// sees the copy's status (Kueue mirrors it).

// multiKueueWays are the scenario's ways of running a TrainJob, in table
// order, and the LocalQueue each names ("" for none).
var multiKueueWays = []struct{ name, queue string }{
	{"local", ""},
	{"kueue", "bench-kueue"},
	{"multikueue", "multikueue"},
}

// multiKueueRun is one TrainJob's times, from its creation request.
type multiKueueRun struct {
	created                     time.Time
	dispatched, copied, running time.Time
	// Running and Complete as the copy's watch and the manager cluster's
	// watch saw them.
	copyRunning, mirroredRunning   time.Time
	copyComplete, mirroredComplete time.Time
	cluster                        string
}

// multiKueueWay is the figures of one way.
type multiKueueWay struct {
	Way string `json:"way"`
	N   int    `json:"n"`
	// Running is create → its Pod running (on the worker with
	// MultiKueue); Dispatched, → its Workload on a worker; Copied, → the
	// copy seen on the worker.
	Running    dist `json:"createToPodRunning"`
	Dispatched dist `json:"createToDispatched,omitzero"`
	Copied     dist `json:"createToCopyCreated,omitzero"`
	// MirrorRunning is the copy seen running (jobsStatus active) → the
	// manager cluster's TrainJob seen so; MirrorComplete the same for
	// Complete.
	MirrorRunning  dist `json:"copyRunningToMirrored,omitzero"`
	MirrorComplete dist `json:"copyCompleteToMirrored,omitzero"`
	// Clusters counts the TrainJobs each worker ran.
	Clusters map[string]int `json:"clusters,omitempty"`
}

type multiKueueResult struct {
	Ways []multiKueueWay `json:"ways"`
}

// multiKueueTracker is what the watches saw, by TrainJob name.
type multiKueueTracker struct {
	mu   sync.Mutex
	runs map[string]*multiKueueRun
}

func (t *multiKueueTracker) run(name string) *multiKueueRun {
	if t.runs[name] == nil {
		t.runs[name] = &multiKueueRun{}
	}
	return t.runs[name]
}

// observeTrainJob records a TrainJob's running and Complete, on the
// manager cluster (cluster "") or a worker's copy.
func (t *multiKueueTracker) observeTrainJob(cluster string) func(event) {
	return func(e event) {
		tj, ok := e.Object.(*trainer.TrainJob)
		if !ok {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		r := t.run(tj.Name)
		running, complete := &r.mirroredRunning, &r.mirroredComplete
		if cluster != "" {
			once(&r.copied, e.At)
			running, complete = &r.copyRunning, &r.copyComplete
		}
		if slices.ContainsFunc(tj.Status.JobsStatus, func(js trainer.JobStatus) bool { return js.Active > 0 }) {
			once(running, e.At)
		}
		if meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
			once(complete, e.At)
		}
	}
}

// observePod records a TrainJob's Pod running.
func (t *multiKueueTracker) observePod(e event) {
	p, ok := e.Object.(*corev1.Pod)
	if !ok || p.Status.Phase != corev1.PodRunning {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	once(&t.run(p.Labels[trainer.TrainJobNameLabel]).running, e.At)
}

// observeWorkload records a Workload admitted on a worker.
func (t *multiKueueTracker) observeWorkload(e event) {
	wl, ok := e.Object.(*unstructured.Unstructured)
	if !ok {
		return
	}
	owner := metav1.GetControllerOf(wl)
	cluster, _, _ := unstructured.NestedString(wl.Object, "status", "clusterName")
	if owner == nil || cluster == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.run(owner.Name)
	once(&r.dispatched, e.At)
	r.cluster = cluster
}

func (b *bench) multiKueueScenario() sidedScenario {
	return sidedScenario{
		name:   "multikueue",
		sides:  []string{ours},
		side:   func(ctx context.Context, _ string) (any, error) { return b.multiKueueSide(ctx) },
		report: b.multiKueueReport,
	}
}

// multiKueueSide runs the scenario's TrainJobs, each way in turn.
func (b *bench) multiKueueSide(ctx context.Context) (multiKueueResult, error) {
	workers := map[string]client.WithWatch{}
	for _, name := range dev.MultiKueueWorkers {
		w := b.o.Worker(name)
		if _, err := os.Stat(w.Kubeconfig()); err != nil {
			return multiKueueResult{}, fmt.Errorf("no worker cluster %s (%w): run 'make dev-up MULTIKUEUE=1' first", name, err)
		}
		cl, err := dev.NewClient(w)
		if err != nil {
			return multiKueueResult{}, err
		}
		workers[name] = cl
	}
	ns, drop, err := b.namespace(ctx, "bench-multikueue")
	if err != nil {
		return multiKueueResult{}, err
	}
	defer drop()
	cleanup, err := b.multiKueueQueues(ctx, ns, workers)
	defer cleanup()
	if err != nil {
		return multiKueueResult{}, err
	}

	wctx, stop := context.WithCancel(ctx)
	defer stop()
	tr := &multiKueueTracker{runs: map[string]*multiKueueRun{}}
	var errs []error
	errs = append(errs,
		b.watchAll(wctx, ns, func() client.ObjectList { return &trainer.TrainJobList{} }, tr.observeTrainJob("")),
		b.watchAll(wctx, ns, func() client.ObjectList { return &corev1.PodList{} }, tr.observePod),
		b.watchAll(wctx, ns, func() client.ObjectList {
			l := &unstructured.UnstructuredList{}
			l.SetAPIVersion("kueue.x-k8s.io/v1beta2")
			l.SetKind("WorkloadList")
			return l
		}, tr.observeWorkload))
	for name, cl := range workers {
		errs = append(errs,
			utiltesting.Watch(wctx, cl, ns, func() client.ObjectList { return &trainer.TrainJobList{} }, tr.observeTrainJob(name), nil),
			utiltesting.Watch(wctx, cl, ns, func() client.ObjectList { return &corev1.PodList{} }, tr.observePod, nil))
	}
	if err := errors.Join(errs...); err != nil {
		return multiKueueResult{}, err
	}

	var result multiKueueResult
	for _, way := range multiKueueWays {
		b.logf("multikueue %s: %d TrainJobs of one node, one after another", way.name, b.c.multiKueueN)
		for i := range b.c.multiKueueN {
			name := fmt.Sprintf("%s-%d", way.name, i)
			// A CPU each: Kueue v0.19 admits a TrainJob that requests
			// none of the ClusterQueue's resources without its
			// admission checks, so MultiKueue never dispatches it (see
			// docs/multicluster.md).
			tj := benchTrainJob(name, ns, b.c.runtime, 1, "2s").Resources(corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}).Obj()
			if way.queue != "" {
				tj.Labels = map[string]string{trainer.KueueQueueNameLabel: way.queue}
			}
			tr.mu.Lock()
			tr.run(name).created = time.Now()
			tr.mu.Unlock()
			if err := b.cl.Create(ctx, tj); err != nil {
				return result, err
			}
			if err := b.waitFor(ctx, name+" Complete on the manager cluster", 2*time.Minute, func() (bool, string) {
				tr.mu.Lock()
				defer tr.mu.Unlock()
				r := tr.run(name)
				return !r.mirroredComplete.IsZero(), fmt.Sprintf("on %q, Pod running %t", r.cluster, !r.running.IsZero())
			}); err != nil {
				return result, err
			}
		}
		result.Ways = append(result.Ways, tr.figures(way.name, b.c.multiKueueN))
		w := result.Ways[len(result.Ways)-1]
		b.logf("  create → Pod running %s", w.Running)
		if way.name == "multikueue" {
			b.logf("  create → dispatched %s, → copy created %s; copy running → mirrored %s, copy Complete → mirrored %s; on %v",
				w.Dispatched, w.Copied, w.MirrorRunning, w.MirrorComplete, w.Clusters)
		}
	}
	return result, nil
}

// figures are the times of the TrainJobs of way.
func (t *multiKueueTracker) figures(way string, n int) multiKueueWay {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := multiKueueWay{Way: way, N: n}
	var running, dispatched, copied, mirrorRunning, mirrorComplete []time.Duration
	since := func(list *[]time.Duration, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() {
			*list = append(*list, to.Sub(from))
		}
	}
	for i := range n {
		r := t.run(fmt.Sprintf("%s-%d", way, i))
		since(&running, r.created, r.running)
		since(&dispatched, r.created, r.dispatched)
		since(&copied, r.created, r.copied)
		since(&mirrorRunning, r.copyRunning, r.mirroredRunning)
		since(&mirrorComplete, r.copyComplete, r.mirroredComplete)
		if r.cluster != "" {
			if w.Clusters == nil {
				w.Clusters = map[string]int{}
			}
			w.Clusters[r.cluster]++
		}
	}
	w.Running, w.Dispatched, w.Copied = distOf(running), distOf(dispatched), distOf(copied)
	w.MirrorRunning, w.MirrorComplete = distOf(mirrorRunning), distOf(mirrorComplete)
	return w
}

// multiKueueQueues creates the scenario's LocalQueues in ns: on the
// manager cluster, one of a ClusterQueue of its own (bench-kueue, on
// config/samples/multikueue's flavor, without MultiKueue) and one of the
// ClusterQueue multikueue; on each worker, one of its ClusterQueue worker.
// It returns what deletes the ClusterQueue.
func (b *bench) multiKueueQueues(ctx context.Context, ns string, workers map[string]client.WithWatch) (func(), error) {
	obj := func(kind, name, namespace string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
		u.SetAPIVersion("kueue.x-k8s.io/v1beta2")
		u.SetKind(kind)
		u.SetName(name)
		u.SetNamespace(namespace)
		return u
	}
	cq := obj("ClusterQueue", "bench-kueue", "", map[string]any{
		"namespaceSelector": map[string]any{},
		"resourceGroups": []any{map[string]any{
			"coveredResources": []any{"cpu", "memory"},
			"flavors": []any{map[string]any{"name": "multikueue", "resources": []any{
				map[string]any{"name": "cpu", "nominalQuota": "16"},
				map[string]any{"name": "memory", "nominalQuota": "64Gi"},
			}}},
		}},
	})
	var deletes []func()
	cleanup := func() {
		for _, d := range deletes {
			d()
		}
	}
	deletes = append(deletes, func() { _ = b.cl.Delete(context.Background(), cq) })
	objects := []client.Object{cq,
		obj("LocalQueue", "bench-kueue", ns, map[string]any{"clusterQueue": "bench-kueue"}),
		obj("LocalQueue", "multikueue", ns, map[string]any{"clusterQueue": "multikueue"}),
	}
	for _, o := range objects {
		if err := b.cl.Create(ctx, o); err != nil {
			return cleanup, fmt.Errorf("creating %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
		}
	}
	for name, cl := range workers {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		if err := cl.Create(ctx, namespace); err != nil {
			return cleanup, fmt.Errorf("worker %s: %w", name, err)
		}
		deletes = append(deletes, func() { _ = cl.Delete(context.Background(), namespace) })
		if err := cl.Create(ctx, obj("LocalQueue", "multikueue", ns, map[string]any{"clusterQueue": "worker"})); err != nil {
			return cleanup, fmt.Errorf("worker %s: %w", name, err)
		}
	}
	return cleanup, nil
}

// multiKueueReport prints the scenario's table.
func (b *bench) multiKueueReport(sides map[string]any) (any, error) {
	r, ok := sides[ours].(multiKueueResult)
	if !ok {
		return nil, fmt.Errorf("no result")
	}
	fmt.Fprintf(b.out, "\nMultiKueue: TrainJobs of one node, one after another, created on the manager cluster; local: run there; kueue: queued there; multikueue: dispatched to a worker cluster\n")
	fmt.Fprintf(b.out, "%-44s %-16s %-16s %-16s\n", "", "local", "kueue", "multikueue")
	row := func(name string, get func(w multiKueueWay) dist, p99 bool) {
		fmt.Fprintf(b.out, "%-44s", name)
		for _, w := range r.Ways {
			d := get(w)
			v := d.P50
			if p99 {
				v = d.P99
			}
			if d.N == 0 {
				fmt.Fprintf(b.out, " %-16s", "-")
			} else {
				fmt.Fprintf(b.out, " %-16s", secs(v))
			}
		}
		fmt.Fprintln(b.out)
	}
	row("create → Pod running, p50", func(w multiKueueWay) dist { return w.Running }, false)
	row("create → Pod running, p99", func(w multiKueueWay) dist { return w.Running }, true)
	row("  create → on a worker (Workload), p50", func(w multiKueueWay) dist { return w.Dispatched }, false)
	row("  create → copy on the worker, p50", func(w multiKueueWay) dist { return w.Copied }, false)
	row("copy running → mirrored, p50", func(w multiKueueWay) dist { return w.MirrorRunning }, false)
	row("copy running → mirrored, p99", func(w multiKueueWay) dist { return w.MirrorRunning }, true)
	row("copy Complete → mirrored, p50", func(w multiKueueWay) dist { return w.MirrorComplete }, false)
	row("copy Complete → mirrored, p99", func(w multiKueueWay) dist { return w.MirrorComplete }, true)
	return r, nil
}

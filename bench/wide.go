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
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

const (
	// wideRun is how long the Pods of the wide scenario run.
	wideRun = "30s"
	// wideTTL is the wide scenario's ttlSecondsAfterFinished.
	wideTTL = 5
)

// wideSide is one side's figures in the wide scenario at one size, in
// seconds.
type wideSide struct {
	Controller string `json:"controller"`
	Objects    string `json:"objects"`
	Pods       int    `json:"pods"`
	// Running is the create request → every Pod seen running (or done);
	// Complete, → the object's Complete condition seen.
	Running  float64 `json:"createToAllPodsRunning"`
	Complete float64 `json:"createToComplete"`
	// JobCreated is the create request → the (first) Job seen, the bare
	// Job itself on kube-controller-manager's side; PodsCreated, → the
	// last of the Pods seen created.
	JobCreated  float64 `json:"createToJobCreated"`
	PodsCreated float64 `json:"createToAllPodsCreated"`
	// Deleted is Complete seen → the object the TTL deletes seen gone: the
	// TrainJob; on the Kubeflow side its JobSet (JobSet's TTL: the TrainJob
	// stays); the Job on kube-controller-manager's. PodsGone is Complete
	// seen → the last Pod seen deleted.
	Deleted  float64 `json:"completeToDeleted"`
	PodsGone float64 `json:"completeToPodsGone"`
	// Late is the object seen gone − (its finish, as its condition reads
	// with a second's resolution, + the TTL): what B1 measures.
	Late float64 `json:"deletedAfterDue"`
	// Usage is from the creation until the last Pod is gone (and 5 s
	// more), the bench's creation taken off.
	Usage usageFigures `json:"usage"`
}

// wideParams are the wide scenario's parameters.
type wideParams struct {
	PodsRun    string `json:"podsRun"`
	TTLSeconds int    `json:"ttlSeconds"`
	// KCMService is set when kube-controller-manager's Job had the
	// TrainJob's headless Service (-wide-service).
	KCMService bool `json:"kcmService,omitempty"`
}

// wideScenario is one TrainJob of many nodes of one Pod each, whose Pods
// run wideRun and which its TTL deletes wideTTL seconds after it completes:
// create → all Pods running, → Complete, → deleted. Beside Kubeflow Trainer
// and JobSet with the same TrainJob (JobSet's TTL, on a copy of Kubeflow's
// runtime), and beside one Indexed Job of the same Pods with its own TTL.
func (b *bench) wideScenario() sidedScenario {
	return sizedScenario(b, "wide", b.c.widePods, wideParams{PodsRun: wideRun, TTLSeconds: wideTTL, KCMService: b.c.wideService}, b.wideSide, b.wideTable)
}

// wideSide runs one side of the wide scenario at n Pods.
func (b *bench) wideSide(ctx context.Context, side string, n int) (wideSide, error) {
	b.logf("wide %s: %d Pods of one object (%s) running %s, ttlSecondsAfterFinished %d", side, n, objects(side), wideRun, wideTTL)
	if err := b.ensureNodes(ctx, n); err != nil {
		return wideSide{}, err
	}
	ns, drop, err := b.namespace(ctx, "bench-wide")
	if err != nil {
		return wideSide{}, err
	}
	defer drop()
	wctx, stop := context.WithCancel(ctx)
	defer stop()

	// tr follows the object and its Pods; ttl, the object its TTL deletes.
	var obj client.Object
	// service is the bare Job's headless Service (-wide-service), created
	// before it.
	var service *corev1.Service
	var tr *podTracker
	var ttl *tracker
	list, ttlList := func() client.ObjectList { return &trainer.TrainJobList{} }, jobSetList
	created := "trainer.kubeflow.org/trainjobs"
	switch side {
	case ours:
		obj = benchTrainJob("wide", ns, b.c.runtime, int32(n), wideRun).TTL(wideTTL).Obj()
		tr, ttl, ttlList = newPodTracker(n, trainJobOf, trainJobComplete), newTracker(trainJobFinish, trainJobRunning), list
	case kubeflow:
		runtime, remove, err := b.jobSetTTLRuntime(ctx, wideTTL)
		if err != nil {
			return wideSide{}, err
		}
		defer remove()
		obj = benchTrainJob("wide", ns, runtime, int32(n), wideRun).Obj()
		tr, ttl = newPodTracker(n, trainJobOf, trainJobComplete), newTracker(jobSetFinish, jobSetRunning)
	default:
		obj = batchJob("wide", ns, wideRun, func(j *batchv1.Job) {
			j.Spec.Completions, j.Spec.Parallelism = ptr.To(int32(n)), ptr.To(int32(n))
			j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
			j.Spec.TTLSecondsAfterFinished = ptr.To[int32](wideTTL)
			if b.c.wideService {
				j.Spec.Template.Spec.Subdomain = j.Name
			}
		})
		if b.c.wideService {
			service = &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Namespace: ns},
				Spec: corev1.ServiceSpec{
					ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
					Selector: map[string]string{batchv1.JobNameLabel: obj.GetName()},
				},
			}
		}
		created = "batch/jobs"
		list = func() client.ObjectList { return &batchv1.JobList{} }
		tr, ttl, ttlList = newPodTracker(n, func(p *corev1.Pod) string { return p.Labels[batchv1.JobNameLabel] }, jobFinished), newTracker(jobFinish, jobRunning), list
	}
	var mu sync.Mutex
	live, seen := sets.New[string](), sets.New[string]()
	var jobCreated, podsCreated, podsGone time.Time
	observeJob := func(ev event) {
		mu.Lock()
		defer mu.Unlock()
		if ev.Type == watch.Added && jobCreated.IsZero() {
			jobCreated = ev.At
		}
	}
	observePod := func(ev event) {
		tr.observePod(ev)
		mu.Lock()
		defer mu.Unlock()
		if ev.Type != watch.Deleted {
			live.Insert(ev.Object.GetName())
			if seen.Insert(ev.Object.GetName()); seen.Len() == n && podsCreated.IsZero() {
				podsCreated = ev.At
			}
			return
		}
		if live.Delete(ev.Object.GetName()); live.Len() == 0 {
			podsGone = ev.At
		}
	}
	for _, w := range []struct {
		list    func() client.ObjectList
		observe func(event)
	}{{list, tr.observe}, {ttlList, ttl.observe}, {func() client.ObjectList { return &batchv1.JobList{} }, observeJob}, {func() client.ObjectList { return &corev1.PodList{} }, observePod}} {
		if err := b.watchAll(wctx, ns, w.list, w.observe); err != nil {
			return wideSide{}, err
		}
	}
	before, err := b.usage(ctx)
	if err != nil {
		return wideSide{}, err
	}

	start := time.Now()
	tr.mu.Lock()
	tr.created[obj.GetName()] = start
	tr.mu.Unlock()
	if service != nil {
		if err := b.cl.Create(ctx, service); err != nil {
			return wideSide{}, err
		}
	}
	if err := b.cl.Create(ctx, obj); err != nil {
		return wideSide{}, err
	}
	timeout := 10*time.Minute + time.Duration(n)*time.Second/2
	if err := b.waitFor(ctx, "wide "+side, timeout, func() (bool, string) {
		c := ttl.counts()
		mu.Lock()
		defer mu.Unlock()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return c.gone == 1 && !podsGone.IsZero(), fmt.Sprintf("%d Pods, %d running or done; complete %t; deleted %t",
			live.Len(), len(tr.running[obj.GetName()]), len(tr.completed) == 1, c.gone == 1)
	}); err != nil {
		return wideSide{}, err
	}
	if err := pause(ctx, 5*time.Second); err != nil {
		return wideSide{}, err
	}
	used, err := b.usageSince(ctx, before)
	if err != nil {
		return wideSide{}, err
	}

	s := wideSide{Controller: side, Objects: objects(side), Pods: n, Usage: used.share(1, created, 1)}
	tr.mu.Lock()
	complete := tr.completed[obj.GetName()]
	s.Running, s.Complete = tr.allAt[obj.GetName()].Sub(start).Seconds(), complete.Sub(start).Seconds()
	tr.mu.Unlock()
	ttl.mu.Lock()
	for _, o := range ttl.objs {
		s.Deleted, s.Late = o.gone.Sub(complete).Seconds(), o.gone.Sub(o.finish.Add(o.ttl)).Seconds()
	}
	ttl.mu.Unlock()
	mu.Lock()
	s.PodsGone = podsGone.Sub(complete).Seconds()
	s.JobCreated, s.PodsCreated = jobCreated.Sub(start).Seconds(), podsCreated.Sub(start).Seconds()
	mu.Unlock()
	b.logf("  create → Job %s, → all Pods created %s, → all Pods running %s, → Complete %s; Complete → deleted %s (%s after due), → Pods gone %s",
		secs(s.JobCreated), secs(s.PodsCreated), secs(s.Running), secs(s.Complete), secs(s.Deleted), secs(s.Late), secs(s.PodsGone))
	b.logf("  %.0f cluster writes; CPU seconds %s", s.Usage.WritesTotal, cpuShares(s.Usage.CPU))
	return s, nil
}

// wideTable prints the wide scenario's table at n Pods.
func (b *bench) wideTable(n int, sides []string, at []wideSide) figures {
	figures := figures{}
	for _, s := range at {
		figures.put("create → Job created", s.Controller, s.JobCreated)
		figures.put("create → all Pods created", s.Controller, s.PodsCreated)
		figures.put("create → all Pods running", s.Controller, s.Running)
		figures.put("create → Complete", s.Controller, s.Complete)
		figures.put("Complete → deleted", s.Controller, s.Deleted)
		figures.put("Complete → last Pod gone", s.Controller, s.PodsGone)
		figures.put("deleted − due (finish + TTL)", s.Controller, s.Late)
		figures.put("cluster writes", s.Controller, s.Usage.WritesTotal)
		figures.put("  Endpoints and EndpointSlices", s.Controller, s.Usage.Writes["endpoints"]+s.Usage.Writes["discovery.k8s.io/endpointslices"])
		putCPU(figures, "CPU seconds", s.Controller, s.Usage.CPU)
	}
	kcmService := "no Service"
	if b.c.wideService {
		kcmService = "and the TrainJob's headless Service"
	}
	fmt.Fprintf(b.out, "\nWide: one TrainJob of %d nodes of one Pod (kcm: one Indexed Job of %d Pods, %s), Pods run %s, ttlSecondsAfterFinished %d (Kubeflow: JobSet's, deleting the JobSet; the TrainJob stays); client QPS %v / burst %d for every controller%s\n",
		n, n, kcmService, wideRun, wideTTL, b.qps, b.burst, kubeflowWorkers(sides))
	row := b.table(sides)
	for _, f := range []string{"create → Job created", "create → all Pods created", "create → all Pods running", "create → Complete", "Complete → deleted", "Complete → last Pod gone", "deleted − due (finish + TTL)"} {
		row(f, secs, figures[f])
	}
	count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	row("cluster writes", count, figures["cluster writes"])
	row("  Endpoints and EndpointSlices", count, figures["  Endpoints and EndpointSlices"])
	cpuRows(row, figures, "CPU seconds")
	fmt.Fprintln(b.out)
	return figures
}

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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

// realProgram is the torch job of the real scenario: every process of
// torchrun joins a gloo process group and all-reduces its rank.
const realProgram = `import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank())])
dist.all_reduce(t)
assert t.item() == sum(range(dist.get_world_size())), t
dist.destroy_process_group()
`

// realNodes is how many nodes the real scenario's TrainJob has, each a
// Pod.
const realNodes = 2

// kwokImage is the image of the kwok runs: torch-distributed's own, which
// no simulated node pulls, and which the dev cluster does not send to the
// real node.
const kwokImage = "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"

// realRun is one TrainJob's times, from its creation request.
type realRun struct {
	running, complete time.Duration
}

// realNodeSide is the figures of one node kind.
type realNodeSide struct {
	Node string `json:"node"`
	N    int    `json:"n"`
	// Running is create → every Pod running; Complete, → Complete seen;
	// Run, every Pod running → Complete.
	Running  dist `json:"createToAllPodsRunning"`
	Complete dist `json:"createToComplete"`
	Run      dist `json:"allPodsRunningToComplete"`
}

type realResult struct {
	// Load is loading the training image into the real node, Build
	// finding or building it (hack/train-image.sh).
	BuildSeconds float64        `json:"trainImageBuildSeconds"`
	LoadSeconds  float64        `json:"trainImageLoadSeconds"`
	Nodes        []realNodeSide `json:"nodes"`
}

// realScenario runs the same torch TrainJob (torch-distributed, 2 nodes x
// 2 processes, an all-reduce) one after another on the real node, then on
// kwok with its Pods running as long as the real ones ran: what a real
// node adds to starting and finishing a job. It needs make dev-up REAL=1.
func (b *bench) realScenario() sidedScenario {
	return sidedScenario{
		name:   "real",
		sides:  []string{ours},
		side:   func(ctx context.Context, _ string) (any, error) { return b.realSide(ctx) },
		report: b.realReport,
	}
}

func (b *bench) realSide(ctx context.Context) (any, error) {
	var node corev1.Node
	if err := b.cl.Get(ctx, client.ObjectKey{Name: dev.RealNodeName}, &node); err != nil {
		return nil, fmt.Errorf("the real scenario needs the real node (make dev-up REAL=1): %w", err)
	}
	var res realResult
	start := time.Now()
	archive, err := dev.BuildTrainImage(ctx, b.o, b.out)
	if err != nil {
		return nil, err
	}
	res.BuildSeconds = time.Since(start).Seconds()
	start = time.Now()
	if err := dev.LoadImageArchive(ctx, b.o, archive, dev.TrainImage); err != nil {
		return nil, err
	}
	res.LoadSeconds = time.Since(start).Seconds()
	b.logf("real: %s found or built in %.1fs, loaded in %.1fs", dev.TrainImage, res.BuildSeconds, res.LoadSeconds)

	real, err := b.realRuns(ctx, "real node", dev.TrainImage, 0)
	if err != nil {
		return nil, err
	}
	// The simulated Pods run as long as the real ones did.
	kwok, err := b.realRuns(ctx, "kwok", kwokImage, time.Duration(real.Run.P50*float64(time.Second)))
	if err != nil {
		return nil, err
	}
	res.Nodes = []realNodeSide{real, kwok}
	return res, nil
}

// realRuns creates the TrainJob -real-n times, one after another, with
// image, and measures each from the watch; runFor, if set, is how long a
// simulated Pod runs.
func (b *bench) realRuns(ctx context.Context, node, image string, runFor time.Duration) (realNodeSide, error) {
	side := realNodeSide{Node: node, N: b.c.realN}
	ns, drop, err := b.namespace(ctx, "bench-real-")
	if err != nil {
		return side, err
	}
	defer drop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	running := map[string]time.Time{}
	complete := map[string]time.Time{}
	podsRunning := map[string]map[string]bool{}
	if err := b.watchAll(ctx, ns, func() client.ObjectList { return &corev1.PodList{} }, func(e event) {
		p := e.Object.(*corev1.Pod)
		tj := p.Labels[trainer.TrainJobNameLabel]
		mu.Lock()
		defer mu.Unlock()
		if podsRunning[tj] == nil {
			podsRunning[tj] = map[string]bool{}
		}
		podsRunning[tj][p.Name] = p.Status.Phase == corev1.PodRunning
		n := 0
		for _, r := range podsRunning[tj] {
			if r {
				n++
			}
		}
		if _, seen := running[tj]; !seen && n == realNodes {
			running[tj] = e.At
		}
	}); err != nil {
		return side, err
	}
	if err := b.watchAll(ctx, ns, func() client.ObjectList { return &trainer.TrainJobList{} }, func(e event) {
		tj := e.Object.(*trainer.TrainJob)
		mu.Lock()
		defer mu.Unlock()
		if _, seen := complete[tj.Name]; !seen && meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) {
			complete[tj.Name] = e.At
		}
	}); err != nil {
		return side, err
	}
	var runs []realRun
	for i := range b.c.realN {
		name := fmt.Sprintf("torch-%d", i)
		tj := &trainer.TrainJob{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: trainer.TrainJobSpec{
				RuntimeRef: trainer.RuntimeRef{Name: "torch-distributed", Kind: ptr.To(trainer.ClusterTrainingRuntimeKind)},
				Trainer: &trainer.Trainer{
					Image:          ptr.To(image),
					Command:        []string{"torchrun", "--no_python", "python3", "-c", realProgram},
					NumNodes:       ptr.To[int32](realNodes),
					NumProcPerNode: ptr.To[int32](2),
				},
			},
		}
		if runFor > 0 {
			tj.Annotations = map[string]string{completeAt: runFor.Round(time.Millisecond).String()}
		}
		created := time.Now()
		if err := b.cl.Create(ctx, tj); err != nil {
			return side, err
		}
		if err := b.waitFor(ctx, "TrainJob "+name+" on the "+node+" to complete", 5*time.Minute, func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			_, done := complete[name]
			return done, fmt.Sprintf("%d Pods seen", len(podsRunning[name]))
		}); err != nil {
			return side, err
		}
		mu.Lock()
		run := realRun{running: running[name].Sub(created), complete: complete[name].Sub(created)}
		mu.Unlock()
		b.logf("  %s on the %s: all Pods running %.2fs after create, Complete %.2fs", name, node, run.running.Seconds(), run.complete.Seconds())
		runs = append(runs, run)
		if err := b.cl.Delete(ctx, tj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			return side, err
		}
	}
	var toRunning, toComplete, run []time.Duration
	for _, r := range runs {
		toRunning, toComplete, run = append(toRunning, r.running), append(toComplete, r.complete), append(run, r.complete-r.running)
	}
	side.Running, side.Complete, side.Run = distOf(toRunning), distOf(toComplete), distOf(run)
	return side, nil
}

func (b *bench) realReport(results map[string]any) (any, error) {
	res, ok := results[ours].(realResult)
	if !ok {
		return nil, fmt.Errorf("no side measured")
	}
	real, kwok := res.Nodes[0], res.Nodes[1]
	fmt.Fprintf(b.out, "\nReal node: the torch TrainJob (torch-distributed, %d nodes x 2 processes, an all-reduce), %d times one after another on each; the simulated Pods run as long as the real ones did (p50)\n", realNodes, real.N)
	fmt.Fprintf(b.out, "%-36s %-14s %-14s %-14s\n", "", "real node", "kwok", "real − kwok")
	row := func(name string, r, k float64) {
		fmt.Fprintf(b.out, "%-36s %-14s %-14s %-14s\n", name, secs(r), secs(k), secs(r-k))
	}
	row("create → all Pods running, p50", real.Running.P50, kwok.Running.P50)
	row("create → all Pods running, max", real.Running.Max, kwok.Running.Max)
	row("create → Complete, p50", real.Complete.P50, kwok.Complete.P50)
	row("create → Complete, max", real.Complete.Max, kwok.Complete.Max)
	row("all Pods running → Complete, p50", real.Run.P50, kwok.Run.P50)
	fmt.Fprintf(b.out, "training image: found or built in %s, loaded into the real node in %s\n\n", secs(res.BuildSeconds), secs(res.LoadSeconds))
	return res, nil
}

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
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The sides a scenario compares: this project with TrainJobs (ours),
// kube-controller-manager's controllers with batch Jobs (them), and
// Kubeflow Trainer v2.3 with JobSet v0.12 with the same TrainJobs on
// Kubeflow's runtimes (kubeflow), which run in the manager's place: see
// dev.StartKubeflow.
const (
	ours     = "trainjob-operator"
	them     = "kube-controller-manager"
	kubeflow = "kubeflow-trainer"
)

// sideNames are the names -sides takes, in table order.
var sideNames = []struct{ flag, side string }{{"ours", ours}, {"kcm", them}, {"kubeflow", kubeflow}}

// objects says what a side runs.
func objects(side string) string {
	if side == them {
		return "batch Jobs"
	}
	return "TrainJobs"
}

// sidedScenario is a scenario measured one side at a time, so that the
// Kubeflow sides of every scenario of a run share one swap of the
// cluster's CRDs and controllers; report then compares the sides.
type sidedScenario struct {
	name string
	// sides it has, in table order.
	sides []string
	side  func(ctx context.Context, side string) (any, error)
	// report prints the comparison and returns the scenario's results.
	report func(sides map[string]any) (any, error)
}

// sidesOf are the sides of s the run measures, in table order.
func (b *bench) sidesOf(s sidedScenario) []string {
	return slices.DeleteFunc(slices.Clone(s.sides), func(side string) bool { return !b.c.sides[side] })
}

// onKubeflow runs fn with Kubeflow Trainer and JobSet in the manager's
// place, and puts the manager back after.
func (b *bench) onKubeflow(ctx context.Context, fn func(context.Context) error) error {
	b.logf("swapping the manager for Kubeflow Trainer and JobSet (client QPS %v, burst %d)", b.qps, b.burst)
	o := b.o
	o.ManagerArgs = b.managerArgs()
	k, err := dev.StartKubeflow(ctx, o, b.qps, b.burst)
	if err != nil {
		return err
	}
	b.kf = k
	defer func() { b.kf = nil }()
	runErr := fn(ctx)
	b.logf("putting the manager back")
	if err := k.Stop(context.WithoutCancel(ctx)); err != nil {
		return errors.Join(runErr, fmt.Errorf("restoring the manager: %w", err))
	}
	return runErr
}

// benchTrainJob is a TrainJob of nodes nodes on the runtime whose Pods run
// for run (a duration or a time; see dev's stages.yaml) then succeed. The
// run time reaches the Pods through a runtime patch of their template,
// which both this project and Kubeflow Trainer apply (Kubeflow Trainer
// passes no TrainJob annotation to the Pods).
func benchTrainJob(name, ns, runtime string, nodes int32, run string) *utiltesting.TrainJobWrapper {
	tj := utiltesting.MakeTrainJob(name, ns).RuntimeRef(trainer.ClusterTrainingRuntimeKind, runtime).
		NumNodes(nodes).Command("torchrun", "train.py")
	tj.Spec.RuntimePatches = []trainer.RuntimePatch{{
		Manager: "bench.trainjob-operator.dev/run-time",
		TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{
			ReplicatedJobs: []trainer.ReplicatedJobPatch{{Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{
				Template: &trainer.PodTemplatePatch{Metadata: &trainer.PatchMetadata{Annotations: map[string]string{completeAt: run}}},
			}}}},
		}}},
	}}
	return tj
}

// trainJobOf names the TrainJob a Pod runs for, on this project's side and
// on Kubeflow's: the JobSet name label, which both set.
func trainJobOf(p *corev1.Pod) string { return p.Labels[trainer.JobSetNameLabel] }

// table prints the header of a table of the sides and returns the function
// that prints a row: each side's value, then ours over each other's. A side
// without a value for the row (a figure it does not have) gets a dash, and
// so does its ratio.
func (b *bench) table(sides []string) func(name string, format func(float64) string, vals map[string]float64) {
	fmt.Fprintf(b.out, "%-40s", "")
	for _, s := range sides {
		fmt.Fprintf(b.out, " %-24s", s+" ("+objects(s)+")")
	}
	for _, s := range sides[1:] {
		fmt.Fprintf(b.out, " %-12s", "ours/"+shortName(s))
	}
	fmt.Fprintln(b.out)
	return func(name string, format func(float64) string, vals map[string]float64) {
		fmt.Fprintf(b.out, "%-40s", name)
		for _, s := range sides {
			cell := "-"
			if v, ok := vals[s]; ok {
				cell = format(v)
			}
			fmt.Fprintf(b.out, " %-24s", cell)
		}
		if sides[0] == ours {
			for _, s := range sides[1:] {
				cell := "-"
				if v, ok := vals[s]; ok {
					cell = fmt.Sprintf("%.2f", ratio(vals[ours], v))
				}
				fmt.Fprintf(b.out, " %-12s", cell)
			}
		}
		fmt.Fprintln(b.out)
	}
}

// shortName is a side's -sides name.
func shortName(side string) string {
	for _, n := range sideNames {
		if n.side == side {
			return n.flag
		}
	}
	return side
}

// figures are a scenario's figures, by name and side.
type figures map[string]map[string]float64

func (f figures) put(figure, side string, v float64) {
	if f[figure] == nil {
		f[figure] = map[string]float64{}
	}
	f[figure][side] = v
}

// measured returns the results of the sides measured, in table order, and
// those sides.
func measured[T any](results map[string]any) ([]T, []string) {
	var out []T
	var sides []string
	for _, n := range sideNames {
		if r, ok := results[n.side].(T); ok {
			out, sides = append(out, r), append(sides, n.side)
		}
	}
	return out, sides
}

// ratios are ours over each other side's, for each figure, keyed
// "<figure> ours/<side>".
func ratios(sides []string, figures figures) map[string]float64 {
	out := map[string]float64{}
	if len(sides) == 0 || sides[0] != ours {
		return out
	}
	for _, f := range slices.Sorted(maps.Keys(figures)) {
		for _, s := range sides[1:] {
			if _, ok := figures[f][s]; !ok {
				continue // a figure the other side does not have
			}
			out[f+" ours/"+shortName(s)] = ratio(figures[f][ours], figures[f][s])
		}
	}
	return out
}

// apiServerWrites reads the API server's count of the requests it served
// that write, by resource ("group/resource", "resource" for the core
// group), from every client of the cluster, but the background ones.
func (b *bench) apiServerWrites(ctx context.Context) (map[string]float64, error) {
	m, err := dev.ScrapeWith(ctx, b.apiHTTP, b.apiHost+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	out := map[string]float64{}
	for key, v := range m.By("apiserver_request_total", "verb", "group", "resource", "code") {
		f := strings.Split(key, " ")
		verb, group, resource, code := f[0], f[1], f[2], f[3]
		if !writeVerbs[verb] || !strings.HasPrefix(code, "2") {
			continue
		}
		if group != "" {
			resource = group + "/" + resource
		}
		if background[resource] {
			continue
		}
		out[resource] += v
	}
	return out, nil
}

// background are the resources written at a pace of their own, whatever
// the objects measured: the nodes' heartbeats (their Leases and status)
// and the controllers' leader election.
var background = map[string]bool{"coordination.k8s.io/leases": true, "nodes": true}

// writeVerbs are the API server's verbs (its metrics' verb label) that
// write. A dry run (the manager's check of its first Job) is counted: the
// API server does the work of a write for it.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// newAPIHTTP is the bench's HTTP client to the API server, with its
// credentials.
func newAPIHTTP(rc *rest.Config) (*http.Client, error) {
	c, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, err
	}
	c.Timeout = 10 * time.Second
	return c, nil
}

// trainJobComplete is whether a TrainJob, this project's or Kubeflow's,
// completed.
func trainJobComplete(o client.Object) bool {
	c := o.(*trainer.TrainJob).FinishedCondition()
	return c != nil && c.Type == trainer.TrainJobComplete
}

// sized is the figures of the sides of a sized scenario at one size.
type sized[S any] struct {
	N      int                `json:"n"`
	Sides  []S                `json:"sides"`
	Ratios map[string]float64 `json:"ratios"`
}

// sizedResult is the results of a sized scenario: its parameters, the
// client QPS and burst of every controller, and its figures at each size.
type sizedResult[S any] struct {
	Params any        `json:"params"`
	QPS    float64    `json:"qps"`
	Burst  int        `json:"burst"`
	Sizes  []sized[S] `json:"sizes"`
}

// sizedScenario is a sided scenario of b on every side, run at each of
// sizes in turn by run: a side's result is its figures at each size. Its
// report calls table for each size with the figures of the sides measured,
// in table order, for it to print and to return by name; its results are a
// sizedResult with params.
func sizedScenario[S any](b *bench, name string, sizes []int, params any, run func(ctx context.Context, side string, n int) (S, error),
	table func(n int, sides []string, at []S) figures) sidedScenario {
	return sidedScenario{
		name:  name,
		sides: []string{ours, them, kubeflow},
		side: func(ctx context.Context, side string) (any, error) {
			var out []S
			for _, n := range sizes {
				s, err := run(ctx, side, n)
				if err != nil {
					return nil, fmt.Errorf("size %d: %w", n, err)
				}
				out = append(out, s)
			}
			return out, nil
		},
		report: func(results map[string]any) (any, error) {
			all, sides := measured[[]S](results)
			if len(sides) == 0 {
				return nil, fmt.Errorf("no side measured")
			}
			res := sizedResult[S]{Params: params, QPS: b.qps, Burst: b.burst}
			for i, n := range sizes {
				at := make([]S, len(all))
				for j := range all {
					at[j] = all[j][i]
				}
				res.Sizes = append(res.Sizes, sized[S]{N: n, Sides: at, Ratios: ratios(sides, table(n, sides, at))})
			}
			return res, nil
		},
	}
}

// kubeflowWorkers says, in a table's heading, that Kubeflow Trainer
// reconciles TrainJobs one at a time, when the table has its side.
func kubeflowWorkers(sides []string) string {
	if !slices.Contains(sides, kubeflow) {
		return ""
	}
	return "; Kubeflow Trainer v2.3 reconciles TrainJobs with one worker"
}

// usage is what the cluster did up to a moment: the API server's writes
// (apiServerWrites) and its processes' CPU seconds (clusterCPU).
type usage struct {
	writes, cpu map[string]float64
}

// usage reads the cluster's usage so far.
func (b *bench) usage(ctx context.Context) (usage, error) {
	writes, err := b.apiServerWrites(ctx)
	if err != nil {
		return usage{}, err
	}
	return usage{writes: writes, cpu: b.clusterCPU()}, nil
}

// usageFigures are a side's share of what the cluster did: its writes, by
// resource and in all, from every client but the bench's own requests, and
// its processes' CPU seconds, by name.
type usageFigures struct {
	Writes      map[string]float64 `json:"clusterWrites"`
	WritesTotal float64            `json:"clusterWritesTotal"`
	CPU         map[string]float64 `json:"cpuSeconds"`
}

// share is u split over n (objects, restarts), the bench's own writes (mine
// of resource each) taken off.
func (u usage) share(n int, resource string, mine float64) usageFigures {
	f := usageFigures{Writes: perObject(u.writes, resource, n, mine), CPU: map[string]float64{}}
	f.WritesTotal = sum(f.Writes)
	for name, v := range u.cpu {
		f.CPU[name] = v / float64(n)
	}
	return f
}

// usageSince is what the cluster did since before.
func (b *bench) usageSince(ctx context.Context, before usage) (usage, error) {
	after, err := b.usage(ctx)
	if err != nil {
		return usage{}, err
	}
	return usage{writes: delta(before.writes, after.writes), cpu: delta(before.cpu, after.cpu)}, nil
}

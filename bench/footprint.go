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
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

type footprintPoint struct {
	TrainJobs int `json:"trainJobs"`
	// RSSMiB is the manager's resident memory 15 s after the last of the
	// TrainJobs finished: still holding the garbage of the burst.
	RSSMiB float64 `json:"rssMiB"`
	// HeapMiB is the Go heap in use then (go_memstats_heap_inuse_bytes).
	HeapMiB float64 `json:"heapInUseMiB"`
	// RestRSSMiB and RestHeapMiB are the same, -rest after the last
	// TrainJob finished (with -rest), the manager idle meanwhile: what
	// holding the TrainJobs costs once the Go runtime's periodic
	// collection (every 2 minutes) and its scavenger have run.
	RestRSSMiB  float64 `json:"restRSSMiB,omitempty"`
	RestHeapMiB float64 `json:"restHeapInUseMiB,omitempty"`
	// CPUSeconds is the manager's CPU time from its start.
	CPUSeconds float64 `json:"cpuSeconds"`
	// CPUSecondsStep is the CPU time spent bringing the TrainJobs added
	// since the previous point to their end.
	CPUSecondsStep float64 `json:"cpuSecondsStep"`
	// StepSeconds is the wall-clock time of the step, and
	// ClusterCPUSecondsStep the CPU time each process of the cluster spent
	// in it: on a machine of two cores, what the manager waited for.
	StepSeconds           float64            `json:"stepSeconds,omitempty"`
	ClusterCPUSecondsStep map[string]float64 `json:"clusterCPUSecondsStep,omitempty"`
}

type footprintResult struct {
	Note   string           `json:"note"`
	Points []footprintPoint `json:"points"`
	// KubeflowPoints are Kubeflow Trainer's and JobSet's together: RSS and
	// CPU of both, heap of Kubeflow Trainer (JobSet serves no metrics
	// here).
	KubeflowPoints []footprintPoint   `json:"kubeflowPoints,omitempty"`
	Ratios         map[string]float64 `json:"ratios,omitempty"`
}

// footprintScenario is B4: the controllers' memory and CPU with 1k, 5k and
// 10k finished TrainJobs (and their children) in their caches: the
// manager's, or Kubeflow Trainer's and JobSet's together.
func (b *bench) footprintScenario() sidedScenario {
	return sidedScenario{name: "b4", sides: []string{ours, kubeflow}, side: b.footprintSide, report: b.footprintReport}
}

func (b *bench) footprintSide(ctx context.Context, side string) (any, error) {
	sizes := b.c.sizes
	b.logf("B4 footprint, %s: RSS and CPU with %v finished TrainJobs in its cache", side, sizes)
	if err := b.ensureNodes(ctx, 200); err != nil {
		return nil, err
	}
	// A fresh manager, so the figures are of these TrainJobs alone (the
	// Kubeflow side runs first on its fresh controllers).
	pprofPort, restore, err := b.servingProfiles(ctx, side)
	if err != nil {
		return nil, err
	}
	defer restore()
	if side == ours && pprofPort == 0 {
		if err := b.restartManager(ctx, b.managerArgs()...); err != nil {
			return nil, err
		}
	}
	// Namespaces of perNamespace TrainJobs each, created as they fill.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var namespaces []string
	var finished []*counter
	defer func() {
		if err := b.dropNamespaces(context.Background(), namespaces...); err != nil {
			b.logf("  %v", err)
		}
	}()
	namespaceOf := func(i int) (string, error) {
		for len(namespaces) <= i/perNamespace {
			ns, _, err := b.namespace(ctx, "bench-b4") // all dropped at once, above
			if err != nil {
				return "", err
			}
			namespaces = append(namespaces, ns)
			c, err := b.countWhere(wctx, []string{ns}, func() client.ObjectList { return &trainer.TrainJobList{} }, func(o client.Object) bool {
				return o.(*trainer.TrainJob).FinishedCondition() != nil
			})
			if err != nil {
				return "", err
			}
			finished = append(finished, c)
		}
		return namespaces[i/perNamespace], nil
	}
	var points []footprintPoint
	p0, err := b.sample(ctx, side)
	if err != nil {
		return nil, err
	}
	if b.c.rest > 0 {
		// A manager just started, with nothing to do, is at rest.
		p0.RestRSSMiB, p0.RestHeapMiB = p0.RSSMiB, p0.HeapMiB
	}
	points = append(points, p0)
	b.logf("  0 TrainJobs: RSS %.1f MiB, heap %.1f MiB, CPU %.1fs", p0.RSSMiB, p0.HeapMiB, p0.CPUSeconds)
	have := 0
	for _, size := range sizes {
		if size <= have {
			continue
		}
		objs := make([]client.Object, 0, size-have)
		for i := have; i < size; i++ {
			ns, err := namespaceOf(i)
			if err != nil {
				return nil, err
			}
			objs = append(objs, benchTrainJob(fmt.Sprintf("tj-%05d", i), ns, b.c.runtime, 1, "1s").TTL(86400).Obj())
		}
		stepStart, cpuBefore := time.Now(), b.clusterCPU()
		if err := b.createAll(ctx, "TrainJobs", objs); err != nil {
			return nil, err
		}
		var cpuProfile chan error
		if pprofPort != 0 {
			cpuProfile = make(chan error, 1)
			go func() {
				cpuProfile <- b.saveProfile(ctx, http.DefaultClient, managerPprof(pprofPort), "profile?seconds=60", fmt.Sprintf("b4-%d-cpu.pprof", size))
			}()
		}
		err := b.waitFor(ctx, fmt.Sprintf("B4 %d TrainJobs", size), 10*time.Minute+time.Duration(size)*100*time.Millisecond, func() (bool, string) {
			done := 0
			for _, c := range finished {
				done += c.count()
			}
			return done >= size, fmt.Sprintf("%d of %d finished", done, size)
		})
		if err != nil {
			return nil, err
		}
		have = size
		stepEnd := time.Now()
		stepSeconds, cpuAfter := stepEnd.Sub(stepStart).Seconds(), b.clusterCPU()
		// Let the manager settle.
		if err := pause(ctx, 15*time.Second); err != nil {
			return nil, err
		}
		p, err := b.sample(ctx, side)
		if err != nil {
			return nil, err
		}
		b.logf("  %d TrainJobs: RSS %.1f MiB, heap %.1f MiB", size, p.RSSMiB, p.HeapMiB)
		if rest := b.c.rest; rest > 0 {
			b.logf("  at rest in %s", time.Until(stepEnd.Add(rest)).Round(time.Second))
			if err := pause(ctx, time.Until(stepEnd.Add(rest))); err != nil {
				return nil, err
			}
			r, err := b.sample(ctx, side)
			if err != nil {
				return nil, err
			}
			p.RestRSSMiB, p.RestHeapMiB = r.RSSMiB, r.HeapMiB
		}
		if cpuProfile != nil {
			if err := errors.Join(<-cpuProfile, b.saveProfile(ctx, http.DefaultClient, managerPprof(pprofPort), "heap", fmt.Sprintf("b4-%d-heap.pprof", size))); err != nil {
				b.logf("  profiles: %v", err)
			}
		}
		p.TrainJobs = size
		p.CPUSecondsStep = p.CPUSeconds - points[len(points)-1].CPUSeconds
		p.StepSeconds = stepSeconds
		p.ClusterCPUSecondsStep = map[string]float64{}
		for name, after := range cpuAfter {
			if before, ok := cpuBefore[name]; ok && after >= before {
				p.ClusterCPUSecondsStep[name] = after - before
			}
		}
		points = append(points, p)
		if b.c.rest > 0 {
			b.logf("  %d TrainJobs, at rest: RSS %.1f MiB, heap %.1f MiB", size, p.RestRSSMiB, p.RestHeapMiB)
		}
		b.logf("  %d TrainJobs: CPU %.1fs (%.1fs for this step); the step took %.0fs, CPU seconds of each process: %s",
			size, p.CPUSeconds, p.CPUSecondsStep, stepSeconds, cpuShares(p.ClusterCPUSecondsStep))
	}
	return points, nil
}

func (b *bench) footprintReport(results map[string]any) (any, error) {
	res := footprintResult{Note: fmt.Sprintf("finished TrainJobs of 1 node (ttlSecondsAfterFinished 1 day on this project's side; Kubeflow Trainer has none), %d to a namespace: each keeps its Job and Pod", perNamespace)}
	res.Points, _ = results[ours].([]footprintPoint)
	res.KubeflowPoints, _ = results[kubeflow].([]footprintPoint)
	var ss []series
	for _, side := range []struct {
		name, label string
		points      []footprintPoint
	}{{ours, "the manager", res.Points}, {kubeflow, "Kubeflow Trainer + JobSet (heap: Kubeflow Trainer's)", res.KubeflowPoints}} {
		if side.points == nil {
			continue
		}
		fmt.Fprintf(b.out, "\nB4 footprint of %s (finished TrainJobs with their children in the cluster)\n", side.label)
		fmt.Fprintf(b.out, "%-12s %-10s %-11s %-12s %-20s %s\n", "TrainJobs", "RSS MiB", "heap MiB", "CPU s", "CPU s for the step", "at rest: RSS, heap MiB")
		var rss, heap, restRSS plotter.XYs
		for _, p := range side.points {
			rest := "-"
			if b.c.rest > 0 {
				rest = fmt.Sprintf("%.1f, %.1f (%s after)", p.RestRSSMiB, p.RestHeapMiB, b.c.rest)
				restRSS = append(restRSS, plotter.XY{X: float64(p.TrainJobs), Y: p.RestRSSMiB})
			}
			fmt.Fprintf(b.out, "%-12d %-10.1f %-11.1f %-12.1f %-20.1f %s\n", p.TrainJobs, p.RSSMiB, p.HeapMiB, p.CPUSeconds, p.CPUSecondsStep, rest)
			rss = append(rss, plotter.XY{X: float64(p.TrainJobs), Y: p.RSSMiB})
			heap = append(heap, plotter.XY{X: float64(p.TrainJobs), Y: p.HeapMiB})
		}
		fmt.Fprintf(b.out, "\nCPU seconds of each process during each step (wall clock in brackets)\n")
		for _, p := range side.points[1:] {
			fmt.Fprintf(b.out, "%-12d (%.0fs) %s\n", p.TrainJobs, p.StepSeconds, cpuShares(p.ClusterCPUSecondsStep))
		}
		ss = append(ss, series{side.name + " RSS, 15 s after", rss}, series{side.name + " Go heap in use, 15 s after", heap})
		if restRSS != nil {
			ss = append(ss, series{side.name + " RSS at rest", restRSS})
		}
	}
	if res.Points != nil && res.KubeflowPoints != nil {
		figures := figures{}
		fmt.Fprintf(b.out, "\nMemory, ours against Kubeflow Trainer + JobSet\n")
		row := b.table([]string{ours, kubeflow})
		mib := func(v float64) string { return fmt.Sprintf("%.1f MiB", v) }
		for i, p := range res.Points {
			if i >= len(res.KubeflowPoints) || p.TrainJobs == 0 {
				continue
			}
			k := res.KubeflowPoints[i]
			name := fmt.Sprintf("RSS with %d TrainJobs", p.TrainJobs)
			figures[name] = map[string]float64{ours: p.RSSMiB, kubeflow: k.RSSMiB}
			row(name, mib, figures[name])
			if b.c.rest > 0 {
				name := fmt.Sprintf("RSS at rest with %d TrainJobs", p.TrainJobs)
				figures[name] = map[string]float64{ours: p.RestRSSMiB, kubeflow: k.RestRSSMiB}
				row(name, mib, figures[name])
			}
		}
		res.Ratios = ratios([]string{ours, kubeflow}, figures)
	}
	fmt.Fprintln(b.out)
	err := linePlot(filepath.Join(b.c.out, "b4.png"), "B4 controllers' footprint with finished TrainJobs cached",
		"TrainJobs (each with its Job and Pod)", "MiB", ss)
	return res, err
}

// sample reads the side's controllers' RSS and CPU time.
func (b *bench) sample(ctx context.Context, side string) (footprintPoint, error) {
	if side == ours {
		return b.sampleManager(ctx)
	}
	var p footprintPoint
	for _, pid := range []int{b.kf.TrainerPID, b.kf.JobSetPID} {
		rss, err := rssMiB(pid)
		if err != nil {
			return p, err
		}
		cpu, err := cpuSeconds(pid)
		if err != nil {
			return p, err
		}
		p.RSSMiB, p.CPUSeconds = p.RSSMiB+rss, p.CPUSeconds+cpu
	}
	m, err := scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", b.kf.TrainerMetricsPort))
	if err != nil {
		return p, err
	}
	p.HeapMiB = m.Sum("go_memstats_heap_inuse_bytes", nil) / (1 << 20)
	return p, nil
}

// rssMiB is process pid's resident memory, from /proc.
func rssMiB(pid int) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

// sampleManager reads the manager's RSS and CPU time from /proc and its
// heap from its metrics.
func (b *bench) sampleManager(ctx context.Context) (footprintPoint, error) {
	pid, port, err := dev.Manager(b.o)
	if err != nil {
		return footprintPoint{}, err
	}
	var p footprintPoint
	if p.RSSMiB, err = rssMiB(pid); err != nil {
		return p, err
	}
	if p.CPUSeconds, err = cpuSeconds(pid); err != nil {
		return p, err
	}
	m, err := scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return p, err
	}
	p.HeapMiB = m.Sum("go_memstats_heap_inuse_bytes", nil) / (1 << 20)
	return p, nil
}

// servingProfiles restarts the manager, on side ours under -pprof, with
// its profiles served on a port of its own, and returns that port and what
// restarts it without them (the next scenario's manager serves none). On
// any other side, or without -pprof, it returns 0 and does nothing.
func (b *bench) servingProfiles(ctx context.Context, side string) (port int, restore func(), err error) {
	if side != ours || !b.c.pprof {
		return 0, func() {}, nil
	}
	if port, err = dev.FreePort(); err != nil {
		return 0, nil, err
	}
	if err := b.restartManager(ctx, append(b.managerArgs(), fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", port))...); err != nil {
		return 0, nil, err
	}
	return port, func() {
		if err := b.restartManager(context.Background(), b.managerArgs()...); err != nil {
			b.logf("  restarting the manager without profiles: %v", err)
		}
	}, nil
}

// managerPprof is where the manager serves its profiles on port.
func managerPprof(port int) string {
	return fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", port)
}

// saveProfile fetches <base>/<what> (a net/http/pprof endpoint) with hc into
// file in the output directory.
func (b *bench) saveProfile(ctx context.Context, hc *http.Client, base, what, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/"+what, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("fetching %s: %w", what, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching %s: %s", what, resp.Status)
	}
	if err := os.MkdirAll(b.c.out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(b.c.out, file)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	b.logf("  saved %s (go tool pprof %s)", path, path)
	return f.Close()
}

// cpuSeconds is the CPU time process pid has used, from /proc.
func cpuSeconds(pid int) (float64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / clockTicks, nil
}

// clusterCPU is the CPU time each process of the cluster has used, by name;
// and the bench's own, as "bench". Processes it cannot read are left out.
func (b *bench) clusterCPU() map[string]float64 {
	out := map[string]float64{}
	pids, err := dev.Components(b.o)
	if err != nil {
		b.logf("  reading the cluster's processes: %v", err)
	}
	if pids == nil {
		pids = map[string]int{}
	}
	pids["bench"] = os.Getpid()
	if b.kf != nil {
		pids["kubeflow-trainer"], pids["jobset"] = b.kf.TrainerPID, b.kf.JobSetPID
	}
	for name, pid := range pids {
		if s, err := cpuSeconds(pid); err == nil {
			out[name] = s
		}
	}
	return out
}

// cpuShares prints CPU seconds by process, the largest first.
func cpuShares(m map[string]float64) string {
	names := slices.Collect(maps.Keys(m))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.0f", n, m[n]))
	}
	return strings.Join(parts, ", ")
}

// controllerProcesses are, by side, the processes of clusterCPU that are
// the side's own controllers; the kcm side has none of its own: it runs on
// kube-controller-manager, which every side runs.
var controllerProcesses = map[string][]string{ours: {"manager"}, kubeflow: {"kubeflow-trainer", "jobset"}}

// cpuParts are the processes whose CPU seconds putCPU puts, by the name of
// their figure: the side's controllers, kube-controller-manager and the API
// server.
var cpuParts = []struct{ figure, process string }{{"controller", ""}, {"kcm", kcm}, {"API server", "kube-apiserver"}}

// putCPU puts into f the CPU seconds of a side's processes (clusterCPU's,
// or a share of them) as figures named "<what>, <part>".
func putCPU(f figures, what, side string, cpu map[string]float64) {
	for _, p := range cpuParts {
		if p.process != "" {
			f.put(what+", "+p.figure, side, cpu[p.process])
			continue
		}
		if procs, ok := controllerProcesses[side]; ok {
			total := 0.0
			for _, name := range procs {
				total += cpu[name]
			}
			f.put(what+", "+p.figure, side, total)
		}
	}
}

// cpuRows prints the rows of the figures putCPU put.
func cpuRows(row func(string, func(float64) string, map[string]float64), f figures, what string) {
	for _, p := range cpuParts {
		row(what+", "+p.figure, func(v float64) string { return fmt.Sprintf("%.2f", v) }, f[what+", "+p.figure])
	}
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times, 100 on Linux.
const clockTicks = 100

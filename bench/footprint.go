package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

type footprintPoint struct {
	TrainJobs int `json:"trainJobs"`
	// RSSMiB is the manager's resident memory once the TrainJobs finished
	// and it settled.
	RSSMiB float64 `json:"rssMiB"`
	// HeapMiB is the Go heap in use then (go_memstats_heap_inuse_bytes).
	HeapMiB float64 `json:"heapInUseMiB"`
	// CPUSeconds is the manager's CPU time from its start.
	CPUSeconds float64 `json:"cpuSeconds"`
	// CPUSecondsStep is the CPU time spent bringing the TrainJobs added
	// since the previous point to their end.
	CPUSecondsStep float64 `json:"cpuSecondsStep"`
}

type footprintResult struct {
	Note   string           `json:"note"`
	Points []footprintPoint `json:"points"`
}

// footprint is B4: the manager's memory and CPU with 1k, 5k and 10k
// finished TrainJobs (and their Jobs and Services) in its caches.
func (b *bench) footprint(ctx context.Context) (any, error) {
	sizes := b.c.sizes
	b.logf("B4 footprint: the manager's RSS and CPU with %v finished TrainJobs in its cache", sizes)
	if err := b.ensureNodes(ctx, 200); err != nil {
		return nil, err
	}
	// A fresh manager, so the figures are of these TrainJobs alone.
	if err := b.restartManager(ctx, b.managerArgs()...); err != nil {
		return nil, err
	}
	ns, drop, err := b.namespace(ctx, "bench-b4")
	if err != nil {
		return nil, err
	}
	defer drop()
	res := footprintResult{Note: "finished TrainJobs of 1 node, ttlSecondsAfterFinished 1 day: each keeps its Job, Service and Pod"}
	p0, err := b.sampleManager(ctx)
	if err != nil {
		return nil, err
	}
	res.Points = append(res.Points, p0)
	b.logf("  0 TrainJobs: RSS %.1f MiB, heap %.1f MiB, CPU %.1fs", p0.RSSMiB, p0.HeapMiB, p0.CPUSeconds)
	have := 0
	for _, size := range sizes {
		if size <= have {
			continue
		}
		objs := make([]client.Object, 0, size-have)
		for i := have; i < size; i++ {
			objs = append(objs, utiltesting.MakeTrainJob(fmt.Sprintf("tj-%05d", i), ns).NumNodes(1).
				Command("torchrun", "train.py").Annotation(completeAt, "1s").TTL(86400).Obj())
		}
		if err := b.createAll(ctx, "TrainJobs", objs); err != nil {
			return nil, err
		}
		err := b.waitFor(ctx, fmt.Sprintf("B4 %d TrainJobs", size), 10*time.Minute+time.Duration(size)*100*time.Millisecond, func() (bool, string) {
			var list trainer.TrainJobList
			if err := b.cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			done := 0
			for i := range list.Items {
				if list.Items[i].FinishedCondition() != nil {
					done++
				}
			}
			return done >= size, fmt.Sprintf("%d of %d finished", done, size)
		})
		if err != nil {
			return nil, err
		}
		have = size
		time.Sleep(15 * time.Second) // let the manager settle
		p, err := b.sampleManager(ctx)
		if err != nil {
			return nil, err
		}
		p.TrainJobs = size
		p.CPUSecondsStep = p.CPUSeconds - res.Points[len(res.Points)-1].CPUSeconds
		res.Points = append(res.Points, p)
		b.logf("  %d TrainJobs: RSS %.1f MiB, heap %.1f MiB, CPU %.1fs (%.1fs for this step)", size, p.RSSMiB, p.HeapMiB, p.CPUSeconds, p.CPUSecondsStep)
	}
	fmt.Fprintf(b.out, "\nB4 footprint of the manager (finished TrainJobs with their Job, Service and Pod in the cluster)\n")
	fmt.Fprintf(b.out, "%-12s %-10s %-14s %-12s %s\n", "TrainJobs", "RSS MiB", "heap in use", "CPU s", "CPU s for the step")
	var rss, heap plotter.XYs
	for _, p := range res.Points {
		fmt.Fprintf(b.out, "%-12d %-10.1f %-14.1f %-12.1f %.1f\n", p.TrainJobs, p.RSSMiB, p.HeapMiB, p.CPUSeconds, p.CPUSecondsStep)
		rss = append(rss, plotter.XY{X: float64(p.TrainJobs), Y: p.RSSMiB})
		heap = append(heap, plotter.XY{X: float64(p.TrainJobs), Y: p.HeapMiB})
	}
	fmt.Fprintln(b.out)
	err = linePlot(filepath.Join(b.c.out, "b4.png"), "B4 manager footprint with finished TrainJobs cached",
		"TrainJobs (each with its Job, Service and Pod)", "MiB", []series{{"RSS", rss}, {"Go heap in use", heap}})
	return res, err
}

// managerArgs are the manager flags of the run.
func (b *bench) managerArgs() []string {
	return []string{"--kube-api-qps=" + strconv.FormatFloat(b.qps, 'f', -1, 64), "--kube-api-burst=" + strconv.Itoa(b.burst)}
}

// sampleManager reads the manager's RSS and CPU time from /proc and its
// heap from its metrics.
func (b *bench) sampleManager(ctx context.Context) (footprintPoint, error) {
	pid, port, err := dev.Manager(b.o)
	if err != nil {
		return footprintPoint{}, err
	}
	var p footprintPoint
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			p.RSSMiB = kb / 1024
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return p, err
	}
	// Fields after the command name: state is field 3, utime 14, stime 15.
	f := strings.Fields(string(stat)[strings.LastIndexByte(string(stat), ')')+2:])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	p.CPUSeconds = (utime + stime) / clockTicks
	m, err := scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return p, err
	}
	p.HeapMiB = m.sum("go_memstats_heap_inuse_bytes", nil) / (1 << 20)
	return p, nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times, 100 on Linux.
const clockTicks = 100

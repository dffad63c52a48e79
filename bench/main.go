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

// Command bench measures trainjob-operator on the local cluster of
// `make dev-up`, side by side with kube-controller-manager's own controllers
// in the same run: TTL storms (B1), deadline accuracy (B2), lifecycle
// throughput and API requests (B3) and the manager's footprint (B4), bursts,
// suspension, what progress reports cost (progress), restarts under a
// failure policy (restart) and one TrainJob of many Pods (wide). Each
// scenario prints a table and writes JSON (and most a PNG plot) to -out.
// See docs/performance.md.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type config struct {
	root, out  string
	scenarios  map[string]bool
	sides      map[string]bool
	burstN     int
	suspendN   int
	ttlN       int
	ttlSeconds int
	deadlineN  int
	rates      []float64
	window     time.Duration
	runtime    string
	sizes      []int
	rest       time.Duration
	qps        float64
	burst      int
	pprof      bool
	// progressN, progressInterval and progressWindow size the progress
	// scenario.
	progressN        int
	progressInterval time.Duration
	progressWindow   time.Duration
	// realN is how many times the real scenario runs its TrainJob on each
	// kind of node.
	realN int
	// restartNodes are the sizes of the restart scenario's TrainJob, and
	// restartCount the restarts it measures at each.
	restartNodes []int
	restartCount int
	// widePods are the sizes of the wide scenario's TrainJob; with
	// wideService, kube-controller-manager's Indexed Job has the headless
	// Service a TrainJob's Pods have.
	widePods    []int
	wideService bool
	// multiKueueN is how many TrainJobs the multikueue scenario runs each
	// way.
	multiKueueN int
	// trainJobWorkers, when set, overrides the manager configuration's
	// controller.trainJobWorkers for the run.
	trainJobWorkers int
}

func main() {
	var c config
	var scenarios, rates, sizes, sides, restartNodes, widePods string
	var full bool
	flag.StringVar(&c.root, "root", "..", "The repository: its .dev cluster (make dev-up) is benchmarked.")
	flag.StringVar(&c.out, "out", "", "Directory for the JSON and PNG results, relative to -root. Default <root>/bench/results.")
	flag.StringVar(&scenarios, "scenarios", "limit,b1,b2,b3,b4,burst,suspend,progress", "Scenarios to run, comma-separated: limit (a bare client's, on the same API server), b1, b2, b3, b4, burst, suspend, progress (ours only), real (ours only, on make dev-up REAL=1; not by default), restart (not by default), wide (not by default), multikueue (ours only, on make dev-up MULTIKUEUE=1; not by default).")
	flag.StringVar(&sides, "sides", "ours,kcm", "Sides to compare, comma-separated: ours (trainjob-operator), kcm (kube-controller-manager with batch Jobs), kubeflow (Kubeflow Trainer v2.3 and JobSet v0.12, run in the manager's place, built the first time).")
	flag.BoolVar(&full, "full", false, "Full sizes: B1 N=10000, B2 N=1000, B3 rates 4 to 32 per second for 3m each, B4 1k/5k/10k sampled at rest after 3m as well, burst and suspend N=1000.")
	flag.IntVar(&c.burstN, "burst-n", 300, "burst: TrainJobs (and batch Jobs) of one Pod created at once.")
	flag.IntVar(&c.suspendN, "suspend-n", 200, "suspend: running TrainJobs (and batch Jobs) of one Pod suspended at once, then resumed.")
	flag.IntVar(&c.ttlN, "ttl-n", 1000, "B1: TrainJobs (and batch Jobs) finishing together.")
	flag.IntVar(&c.ttlSeconds, "ttl-seconds", 10, "B1: their ttlSecondsAfterFinished.")
	flag.IntVar(&c.deadlineN, "deadline-n", 300, "B2: running TrainJobs (and batch Jobs) with deadlines.")
	flag.StringVar(&rates, "rates", "4,8,16", "B3: creation rates to try, TrainJobs per second, rising.")
	flag.DurationVar(&c.window, "window", 30*time.Second, "B3: how long each rate must be sustained.")
	flag.StringVar(&c.runtime, "runtime", "torch-distributed", "The ClusterTrainingRuntime of config/runtimes the TrainJobs of every scenario run on (its ML policy's own children are counted in the writes).")
	flag.StringVar(&sizes, "sizes", "1000", "B4: TrainJobs held in the manager's cache, rising, comma-separated.")
	flag.DurationVar(&c.rest, "rest", 0, "B4: also sample the manager this long after each step, idle meanwhile (at rest, once the Go runtime's periodic collection has run); 0: not.")
	flag.BoolVar(&c.pprof, "pprof", false, "Save profiles in -out. B4: a 60s CPU profile of the manager from the end of each step's creation, and a heap profile once it settles (b4-<size>-cpu.pprof, b4-<size>-heap.pprof). burst: 60s CPU profiles from the first creation, of the API server on each side (burst-<side>-apiserver-cpu.pprof) and of the manager (burst-trainjob-operator-cpu.pprof).")
	flag.IntVar(&c.progressN, "progress-n", 64, "progress: nodes of the TrainJob, each of whose Pods reports its progress.")
	flag.DurationVar(&c.progressInterval, "progress-interval", time.Second, "progress: how often each Pod reports.")
	flag.DurationVar(&c.progressWindow, "progress-window", time.Minute, "progress: how long the Pods report.")
	flag.IntVar(&c.realN, "real-n", 5, "real: times the torch TrainJob runs on the real node, and then on kwok.")
	flag.StringVar(&restartNodes, "restart-nodes", "64,256", "restart: nodes (one Pod each) of the restarting TrainJob, comma-separated; one run each.")
	flag.IntVar(&c.restartCount, "restart-count", 20, fmt.Sprintf("restart: restarts measured at each size (at most the runtime's maxRestarts, %d).", restartMaxRestarts))
	flag.IntVar(&c.multiKueueN, "multikueue-n", 10, "multikueue: TrainJobs run one after another each way (here, queued here, dispatched to a worker).")
	flag.StringVar(&widePods, "wide-pods", "1000", "wide: Pods of the one TrainJob (one node each), comma-separated; one run each.")
	flag.BoolVar(&c.wideService, "wide-service", false, "wide: give kube-controller-manager's Indexed Job the headless Service of a TrainJob's Pods (the Job's Pods as its selector, not-ready addresses published, the Pods' subdomain), to show what the Service costs.")
	flag.Float64Var(&c.qps, "qps", 0, "Client QPS given to both the manager and kube-controller-manager. Default: kube-controller-manager's.")
	flag.IntVar(&c.burst, "burst", 0, "Client burst given to both. Default: kube-controller-manager's.")
	flag.IntVar(&c.trainJobWorkers, "trainjob-workers", 0, "The manager's controller.trainJobWorkers for the run (TrainJobs reconciled at once). Default: the dev configuration's.")
	flag.Parse()

	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if full {
		for name, value := range map[string]string{"ttl-n": "10000", "deadline-n": "1000", "rates": "4,8,16,32", "window": "3m", "sizes": "1000,5000,10000", "rest": "3m"} {
			if !set[name] {
				if err := flag.Set(name, value); err != nil {
					fail(err)
				}
			}
		}
	}
	if set["kubeconfig"] {
		// controller-runtime registers -kubeconfig; the bench needs the
		// processes of the local cluster as well as its API.
		fail(fmt.Errorf("-kubeconfig: the bench runs on the cluster of make dev-up under -root"))
	}
	c.scenarios = map[string]bool{}
	for _, s := range strings.Split(scenarios, ",") {
		s = strings.TrimSpace(strings.ToLower(s))
		if !slices.Contains([]string{"limit", "b1", "b2", "b3", "b4", "burst", "suspend", "progress", "real", "restart", "wide", "multikueue"}, s) {
			fail(fmt.Errorf("-scenarios: unknown scenario %q (limit, b1, b2, b3, b4, burst, suspend, progress, real, restart, wide, multikueue)", s))
		}
		c.scenarios[s] = true
	}
	c.sides = map[string]bool{}
	for _, s := range strings.Split(sides, ",") {
		s = strings.TrimSpace(strings.ToLower(s))
		i := slices.IndexFunc(sideNames, func(n struct{ flag, side string }) bool { return n.flag == s })
		if i < 0 {
			fail(fmt.Errorf("-sides: unknown side %q (ours, kcm, kubeflow)", s))
		}
		c.sides[sideNames[i].side] = true
	}
	if !c.sides[ours] {
		fail(fmt.Errorf("-sides: ours is what the bench measures; compare it with kcm, kubeflow or both"))
	}
	var err error
	if c.rates, err = parseList(rates, strconv.ParseFloat); err != nil {
		fail(fmt.Errorf("-rates: %w", err))
	}
	atoi := func(s string, _ int) (int, error) { return strconv.Atoi(s) }
	if c.sizes, err = parseList(sizes, atoi); err != nil {
		fail(fmt.Errorf("-sizes: %w", err))
	}
	for _, l := range []struct {
		name  string
		value string
		into  *[]int
	}{{"restart-nodes", restartNodes, &c.restartNodes}, {"wide-pods", widePods, &c.widePods}} {
		if *l.into, err = parseList(l.value, atoi); err != nil {
			fail(fmt.Errorf("-%s: %w", l.name, err))
		}
		if slices.Min(*l.into) < 1 {
			fail(fmt.Errorf("-%s: every size must be at least 1", l.name))
		}
	}
	for _, n := range []struct {
		name  string
		value int
	}{{"ttl-n", c.ttlN}, {"deadline-n", c.deadlineN}, {"ttl-seconds", c.ttlSeconds}, {"burst-n", c.burstN}, {"suspend-n", c.suspendN}, {"progress-n", c.progressN}, {"restart-count", c.restartCount}} {
		if n.value < 1 {
			fail(fmt.Errorf("-%s must be at least 1", n.name))
		}
	}
	if c.restartCount > restartMaxRestarts {
		fail(fmt.Errorf("-restart-count must be at most the restart runtime's maxRestarts, %d", restartMaxRestarts))
	}
	if c.progressInterval <= 0 || c.progressWindow < c.progressInterval {
		fail(fmt.Errorf("-progress-interval must be positive and -progress-window at least as long"))
	}
	if c.trainJobWorkers < 0 {
		fail(fmt.Errorf("-trainjob-workers must be at least 1, or 0 for the configuration's"))
	}
	if c.root, err = filepath.Abs(c.root); err != nil {
		fail(err)
	}
	if c.out == "" {
		c.out = filepath.Join("bench", "results")
	}
	if !filepath.IsAbs(c.out) {
		c.out = filepath.Join(c.root, c.out)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		fail(err)
	}
}

func run(ctx context.Context, c config) error {
	b, err := newBench(ctx, c)
	if err != nil {
		return err
	}
	defer b.close()
	b.logf("machine: %d CPUs, %s; client QPS/burst of the manager and of kube-controller-manager: %v/%d; the manager's TrainJob workers: %d",
		runtime.NumCPU(), memTotal(), b.qps, b.burst, b.trainJobWorkers)
	machine, runs := b.machine(), readRuns(filepath.Join(c.out, "machine.json"))
	machine["scenarios"] = runs
	version := sourceVersion(c.root)
	// B4 first: on the Kubeflow side it measures controllers just started,
	// as the manager is restarted for it.
	sided := []sidedScenario{b.footprintScenario(), b.ttlScenario(), b.deadlineScenario(), b.throughputScenario(), b.burstScenario(), b.suspendScenario(), b.progressScenario(), b.realScenario(),
		b.restartScenario(), b.wideScenario(), b.multiKueueScenario()}
	var errs []error
	record := func(name string, start time.Time, minutes float64, r any) error {
		if err := writeJSON(filepath.Join(c.out, name+".json"), r); err != nil {
			return err
		}
		runs[name] = scenarioRun{
			Date: start.UTC().Format(time.RFC3339), Minutes: minutes, Source: version, Args: os.Args[1:],
			TrainJobWorkers: b.trainJobWorkers,
		}
		b.logf("%s done in %.0f minutes; results in %s", name, minutes, c.out)
		return nil
	}
	// The bare client's limit first: B1 and burst compare with it.
	if c.scenarios["limit"] && ctx.Err() == nil {
		start := time.Now()
		if r, err := b.limit(ctx); err != nil {
			errs = append(errs, fmt.Errorf("limit: %w", err))
		} else if err := record("limit", start, time.Since(start).Minutes(), r); err != nil {
			return err
		}
	}

	// Each side of the sided scenarios, the Kubeflow ones last, together.
	results := map[string]map[string]any{}
	started := map[string]time.Time{}
	minutes := map[string]float64{}
	measure := func(ctx context.Context, s sidedScenario, side string) {
		if _, ok := started[s.name]; !ok {
			started[s.name] = time.Now()
		}
		start := time.Now()
		r, err := s.side(ctx, side)
		minutes[s.name] += time.Since(start).Minutes()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s, %s: %w", s.name, side, err))
			return
		}
		if results[s.name] == nil {
			results[s.name] = map[string]any{}
		}
		results[s.name][side] = r
	}
	for _, s := range sided {
		for _, side := range b.sidesOf(s) {
			if c.scenarios[s.name] && side != kubeflow && ctx.Err() == nil {
				measure(ctx, s, side)
			}
		}
	}
	onKubeflow := slices.ContainsFunc(sided, func(s sidedScenario) bool {
		return c.scenarios[s.name] && slices.Contains(b.sidesOf(s), kubeflow)
	})
	if onKubeflow && ctx.Err() == nil {
		err := b.onKubeflow(ctx, func(ctx context.Context) error {
			for _, s := range sided {
				if c.scenarios[s.name] && slices.Contains(b.sidesOf(s), kubeflow) && ctx.Err() == nil {
					measure(ctx, s, kubeflow)
				}
			}
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("the Kubeflow side: %w", err))
		}
	}
	for _, s := range sided {
		if results[s.name] == nil {
			continue
		}
		r, err := s.report(results[s.name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			continue
		}
		if err := record(s.name, started[s.name], minutes[s.name], r); err != nil {
			return err
		}
	}
	if err := writeJSON(filepath.Join(c.out, "machine.json"), machine); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// scenarioRun says when and from what source a scenario's results in the
// directory were measured: scenarios can be run apart.
type scenarioRun struct {
	Date    string   `json:"date"`
	Minutes float64  `json:"minutes"`
	Source  string   `json:"source"`
	Args    []string `json:"args"`
	// TrainJobWorkers is the manager's controller.trainJobWorkers.
	TrainJobWorkers int `json:"trainJobWorkers"`
}

// readRuns returns the scenario runs recorded in machine.json, if any.
func readRuns(path string) map[string]scenarioRun {
	var m struct {
		Scenarios map[string]scenarioRun `json:"scenarios"`
	}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &m)
	}
	if m.Scenarios == nil {
		m.Scenarios = map[string]scenarioRun{}
	}
	return m.Scenarios
}

// sourceVersion is the commit of the source under root, marked dirty when
// files other than the results and the documentation differ from it.
func sourceVersion(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	v := strings.TrimSpace(string(out))
	status, err := exec.Command("git", "-C", root, "status", "--porcelain", "--", ".", ":!bench/results", ":!docs", ":!*.md").Output()
	if err != nil || len(bytes.TrimSpace(status)) > 0 {
		v += "-dirty"
	}
	return v
}

func parseList[T any](s string, parse func(string, int) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

// memTotal is the machine's memory, from /proc/meminfo.
func memTotal() string {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "memory unknown"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.Atoi(f[1])
			return fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	return "memory unknown"
}

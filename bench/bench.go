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
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	managerconfig "github.com/trainjob-operator/trainjob-operator/internal/config"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

const kcm = "kube-controller-manager"

// bench holds what every scenario uses.
type bench struct {
	c   config
	o   dev.Options
	cl  client.WithWatch
	out *os.File

	qps   float64
	burst int
	// restore undoes the changes to the cluster's processes.
	restore []func() error
	// kcmMetricsPort is where kube-controller-manager serves /metrics.
	kcmMetricsPort int
	nodes          []string
	// managerConfig is the configuration file the manager runs with when
	// the run overrides the dev one; trainJobWorkers is its
	// controller.trainJobWorkers.
	managerConfig   string
	trainJobWorkers int
	// kf is Kubeflow Trainer and JobSet while they run in the manager's
	// place (the Kubeflow side).
	kf *dev.Kubeflow
	// apiHTTP reaches the API server at apiHost with the bench's
	// credentials.
	apiHTTP *http.Client
	apiHost string
	// rc is the bench's client configuration.
	rc *rest.Config
	// bare is the API server's limit for a bare client, once measured.
	bare *limitResult
}

func newBench(ctx context.Context, c config) (*bench, error) {
	b := &bench{c: c, out: os.Stdout, o: dev.Options{Root: c.root, Out: os.Stdout}}
	if _, _, err := dev.Manager(b.o); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(c.root, ".dev", "kubeconfig")
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	// The bench's own client is not the bottleneck. The webhook's warnings
	// (a TTL of 0 in B3) are expected.
	rc.QPS, rc.Burst = 2000, 4000
	rc.WarningHandler = rest.NoWarnings{}
	ctrllog.SetLogger(logr.Discard())
	if b.cl, err = client.NewWithWatch(rc, client.Options{Scheme: scheme.Scheme}); err != nil {
		return nil, err
	}
	if b.apiHTTP, err = newAPIHTTP(rc); err != nil {
		return nil, err
	}
	b.apiHost = strings.TrimSuffix(rc.Host, "/")
	b.rc = rc
	args, err := dev.ComponentArgs(b.o, kcm)
	if err != nil {
		return nil, err
	}
	kcmQPS, kcmBurst, port := flagValue(args, "--kube-api-qps"), flagValue(args, "--kube-api-burst"), flagValue(args, "--secure-port")
	if b.kcmMetricsPort, err = strconv.Atoi(port); err != nil {
		return nil, fmt.Errorf("%s has no --secure-port: %v", kcm, args)
	}
	b.qps, b.burst = c.qps, c.burst
	if b.qps == 0 {
		if b.qps, err = strconv.ParseFloat(kcmQPS, 64); err != nil {
			return nil, fmt.Errorf("%s has no --kube-api-qps to match: %v", kcm, args)
		}
	}
	if b.burst == 0 {
		if b.burst, err = strconv.Atoi(kcmBurst); err != nil {
			return nil, fmt.Errorf("%s has no --kube-api-burst to match: %v", kcm, args)
		}
	}
	if err := b.configureManager(); err != nil {
		return nil, err
	}
	if err := b.equalizeQPS(ctx, kcmQPS, kcmBurst); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// equalizeQPS gives the manager and kube-controller-manager the same client
// QPS and burst, restarting each that has other values.
func (b *bench) equalizeQPS(ctx context.Context, kcmQPS, kcmBurst string) error {
	qps, burst := strconv.FormatFloat(b.qps, 'f', -1, 64), strconv.Itoa(b.burst)
	if qps != kcmQPS || burst != kcmBurst {
		b.logf("restarting %s with --kube-api-qps=%s --kube-api-burst=%s", kcm, qps, burst)
		edit := func(want map[string]string) func([]string) []string {
			return func(args []string) []string {
				args = slices.DeleteFunc(args, func(a string) bool {
					return strings.HasPrefix(a, "--kube-api-qps=") || strings.HasPrefix(a, "--kube-api-burst=")
				})
				return append(args, "--kube-api-qps="+want["qps"], "--kube-api-burst="+want["burst"])
			}
		}
		if err := dev.RestartComponent(b.o, kcm, edit(map[string]string{"qps": qps, "burst": burst})); err != nil {
			return err
		}
		b.restore = append(b.restore, func() error {
			return dev.RestartComponent(b.o, kcm, edit(map[string]string{"qps": kcmQPS, "burst": kcmBurst}))
		})
	}
	b.logf("restarting the manager with %s", strings.Join(b.managerArgs(), " "))
	if err := b.restartManager(ctx, b.managerArgs()...); err != nil {
		return err
	}
	b.restore = append(b.restore, func() error { return b.restartManager(context.Background()) })
	return nil
}

// configureManager settles the manager's configuration for the run: the
// dev one, or with -trainjob-workers a copy of it with that many workers.
func (b *bench) configureManager() error {
	devConfig := filepath.Join(b.c.root, ".dev", "config.yaml")
	path := devConfig
	if b.c.trainJobWorkers > 0 {
		data, err := os.ReadFile(devConfig)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := yaml.Unmarshal(data, &m); err != nil {
			return fmt.Errorf("%s: %w", devConfig, err)
		}
		ctrl, _ := m["controller"].(map[string]any)
		if ctrl == nil {
			ctrl = map[string]any{}
		}
		ctrl["trainJobWorkers"] = b.c.trainJobWorkers
		m["controller"] = ctrl
		if data, err = yaml.Marshal(m); err != nil {
			return err
		}
		path = filepath.Join(b.c.root, ".dev", "bench-config.yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		b.managerConfig = path
	}
	// Read back as the manager reads it, defaults included.
	cfg, err := managerconfig.Load(path)
	if err != nil {
		return err
	}
	b.trainJobWorkers = int(*cfg.Controller.TrainJobWorkers)
	return nil
}

// managerArgs are the manager flags of the run.
func (b *bench) managerArgs() []string {
	args := []string{"--kube-api-qps=" + strconv.FormatFloat(b.qps, 'f', -1, 64), "--kube-api-burst=" + strconv.Itoa(b.burst)}
	if b.managerConfig != "" {
		args = append(args, "--config="+b.managerConfig) // the last --config counts
	}
	return args
}

// restartManager starts the dev manager again with args.
func (b *bench) restartManager(ctx context.Context, args ...string) error {
	if err := dev.KillManager(b.o); err != nil {
		return err
	}
	o := b.o
	o.ManagerArgs = args
	return dev.RestartManager(ctx, o)
}

// close deletes the bench's nodes and puts the processes back as they were.
func (b *bench) close() {
	ctx := context.Background()
	for _, n := range b.nodes {
		_ = b.cl.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	for i := len(b.restore) - 1; i >= 0; i-- {
		if err := b.restore[i](); err != nil {
			b.logf("restoring the cluster: %v", err)
		}
	}
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.out, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// machine describes where the run happened.
func (b *bench) machine() map[string]any {
	return map[string]any{
		"cpus": runtime.NumCPU(), "memory": memTotal(), "date": time.Now().UTC().Format(time.RFC3339),
		"managerQPS": b.qps, "managerBurst": b.burst, "managerTrainJobWorkers": b.trainJobWorkers, "kubeControllerManagerQPS": b.qps, "kubeControllerManagerBurst": b.burst,
		"go": runtime.Version(),
	}
}

func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// ensureNodes adds simulated nodes until the cluster can run pods more Pods
// at once; the bench removes them at the end.
func (b *bench) ensureNodes(ctx context.Context, pods int) error {
	const perNode = 1000
	want := (pods + perNode - 1) / perNode
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("16Ti"),
		corev1.ResourcePods:   resource.MustParse(strconv.Itoa(perNode)),
	}
	for i := len(b.nodes); i < want; i++ {
		name := fmt.Sprintf("bench-node-%d", i)
		if err := b.cl.Create(ctx, dev.SimulatedNode(name, capacity)); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		b.nodes = append(b.nodes, name)
	}
	return nil
}

// namespace creates a namespace for one side of a scenario, and returns the
// function that drops it (and waits until it is gone) when the side is done.
func (b *bench) namespace(ctx context.Context, prefix string) (string, func(), error) {
	names, drop, err := b.namespaces(ctx, prefix, 1)
	if err != nil {
		return "", nil, err
	}
	return names[0], drop, nil
}

// perNamespace is how many objects of a side share a namespace when a
// scenario runs more: KEP-2899 sizes TTL at 1,000+ TrainJobs in a
// namespace and more in the cluster. With every object in one namespace,
// large runs are bound by kube-controller-manager's endpoint controllers,
// which match each Pod change in a namespace against every Service there
// (see docs/performance.md).
const perNamespace = 1000

// namespaces creates count namespaces for one side of a scenario, and
// returns the function that drops them together.
func (b *bench) namespaces(ctx context.Context, prefix string, count int) ([]string, func(), error) {
	var names []string
	drop := func() {
		if err := b.dropNamespaces(context.Background(), names...); err != nil {
			b.logf("  %v", err)
		}
	}
	for range count {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
		if err := b.cl.Create(ctx, ns); err != nil {
			drop()
			return nil, nil, err
		}
		names = append(names, ns.Name)
	}
	return names, drop, nil
}

// dropNamespaces deletes namespaces and waits until they are gone, so the
// next scenario starts on a quiet cluster.
func (b *bench) dropNamespaces(ctx context.Context, names ...string) error {
	for _, name := range names {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := b.cl.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	start := time.Now()
	said := start
	left := names
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		var still []string
		for _, name := range left {
			if err := b.cl.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				still = append(still, name)
			}
		}
		if left = still; len(left) == 0 {
			return true, nil
		}
		if time.Since(said) >= 15*time.Second {
			b.logf("  deleting %d namespace(s) and what they hold, %s first: %s so far", len(left), left[0], time.Since(start).Round(time.Second))
			said = time.Now()
		}
		return false, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("namespaces %v still exist after 10 minutes", left)
	}
	return err
}

// createAll creates objects with a few workers, reporting progress.
func (b *bench) createAll(ctx context.Context, what string, objs []client.Object) error {
	return b.forAll(ctx, "created", what, objs, func(o client.Object) error { return b.cl.Create(ctx, o) })
}

// forAll calls fn for each object with a few workers, reporting progress
// as done (a past participle: "created"); it stops at ctx's end and
// returns the first error.
func (b *bench) forAll(ctx context.Context, done, what string, objs []client.Object, fn func(client.Object) error) error {
	return b.forAllWith(ctx, 16, done, what, objs, fn)
}

// forAllWith is forAll with workers workers.
func (b *bench) forAllWith(ctx context.Context, workers int, done, what string, objs []client.Object, fn func(client.Object) error) error {
	var mu sync.Mutex
	var firstErr error
	next := make(chan client.Object)
	var wg sync.WaitGroup
	count := 0
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for o := range next {
				err := fn(o)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s %s not %s: %w", what, o.GetName(), done, err)
				}
				count++
				mu.Unlock()
			}
		})
	}
	// Not a poll: this loop hands the objects to the workers, and the
	// ticker only says how far they are.
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for _, o := range objs {
		select {
		case next <- o:
		case <-tick.C:
			mu.Lock()
			b.logf("  %s %d/%d %s", done, count, len(objs), what)
			mu.Unlock()
			next <- o
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil {
		b.logf("  %s %d %s in %s", done, len(objs), what, time.Since(start).Round(100*time.Millisecond))
	}
	return firstErr
}

// event is one watch event with the time it arrived.
type event = utiltesting.Event

// watchAll watches the objects of list's kind in ns from now on, and calls
// fn for each event, with its arrival time, until ctx ends; a watch that
// stalls is restarted, and the bench says so, since the events it missed
// meanwhile arrive late.
func (b *bench) watchAll(ctx context.Context, ns string, newList func() client.ObjectList, fn func(event)) error {
	return utiltesting.Watch(ctx, b.cl, ns, newList, fn, func(rv string) {
		b.logf("  the watch of %T stalled (nothing for %s, not even a bookmark); watching again from version %s",
			newList(), utiltesting.WatchSilence, rv)
	})
}

// watchIn is watchAll over several namespaces: one watch of the cluster,
// filtered, rather than a watch for each.
func (b *bench) watchIn(ctx context.Context, namespaces []string, newList func() client.ObjectList, fn func(event)) error {
	if len(namespaces) == 1 {
		return b.watchAll(ctx, namespaces[0], newList, fn)
	}
	in := sets.New(namespaces...)
	return b.watchAll(ctx, metav1.NamespaceAll, newList, func(e event) {
		if in.Has(e.Object.GetNamespace()) {
			fn(e)
		}
	})
}

// counter counts the objects of some namespaces that match a condition,
// kept up to date by a watch: waiting on it costs the API server nothing,
// where listing thousands of objects every poll would load it more than
// the controllers being measured.
type counter struct {
	mu      sync.Mutex
	match   sets.Set[types.NamespacedName]
	matches func(client.Object) bool
}

// countWhere counts the objects of newList's kind in namespaces that
// match, until ctx ends.
func (b *bench) countWhere(ctx context.Context, namespaces []string, newList func() client.ObjectList, matches func(client.Object) bool) (*counter, error) {
	c := &counter{match: sets.New[types.NamespacedName](), matches: matches}
	return c, b.watchIn(ctx, namespaces, newList, c.observe)
}

func (c *counter) observe(e event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := client.ObjectKeyFromObject(e.Object)
	if e.Type == watch.Deleted || !c.matches(e.Object) {
		c.match.Delete(key)
		return
	}
	c.match.Insert(key)
}

func (c *counter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.match.Len()
}

func metaItems(l client.ObjectList) ([]client.Object, error) {
	objs, err := meta.ExtractList(l)
	if err != nil {
		return nil, err
	}
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		if co, ok := o.(client.Object); ok {
			out = append(out, co)
		}
	}
	return out, nil
}

// waitFor polls cond every 250ms until it holds, printing progress every
// 5 seconds, or fails after timeout.
func (b *bench) waitFor(ctx context.Context, what string, timeout time.Duration, cond func() (bool, string)) error {
	last := time.Now()
	var progress string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		var ok bool
		if ok, progress = cond(); ok {
			return true, nil
		}
		if time.Since(last) >= 5*time.Second {
			b.logf("  %s: %s", what, progress)
			last = time.Now()
		}
		return false, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("%s: not done after %s (%s)", what, timeout, progress)
	}
	return err
}

// pause waits d, a settling time rather than a wait for a condition, or
// until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitSaying is waitFor for a wait whose end leaves figures to take
// anyway: a timeout is said and the side goes on; only the end of the run
// is returned.
func (b *bench) waitSaying(ctx context.Context, what string, timeout time.Duration, cond func() (bool, string)) error {
	err := b.waitFor(ctx, what, timeout, cond)
	if err != nil && ctx.Err() == nil {
		b.logf("  %v", err)
		return nil
	}
	return err
}

// dist is a distribution of durations, in seconds.
type dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func distOf(ds []time.Duration) dist {
	if len(ds) == 0 {
		return dist{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[max(0, min(len(s)-1, i))].Seconds()
	}
	return dist{N: len(s), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: s[len(s)-1].Seconds()}
}

func (d dist) String() string {
	return fmt.Sprintf("p50 %s  p90 %s  p99 %s  max %s", secs(d.P50), secs(d.P90), secs(d.P99), secs(d.Max))
}

func secs(s float64) string {
	return fmt.Sprintf("%.3fs", s)
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

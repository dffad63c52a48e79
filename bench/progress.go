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
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	managerconfig "github.com/trainjob-operator/trainjob-operator/internal/config"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	"github.com/trainjob-operator/trainjob-operator/internal/statusserver"
	"github.com/trainjob-operator/trainjob-operator/test/framework"
)

// The manager's status server counters and the request series of its
// TokenReviews (trainjob_api_requests_total's labels).
const (
	statusRequests  = "trainjob_status_server_requests_total"
	statusReports   = "trainjob_status_server_reports_total"
	statusWrites    = "trainjob_status_server_writes_total"
	tokenReviews    = "create authentication.k8s.io/tokenreviews"
	podReads        = "get /pods"
	trainerStatuses = "patch trainer.kubeflow.org/trainjobs/status"
	// sentMetric is the metric of each report that carries the time it was
	// sent, in Unix nanoseconds, so the watch can tell which report a
	// status write holds.
	sentMetric = "bench_sent_unix_nano"
)

// progressSide is the figures of the progress scenario.
type progressSide struct {
	Controller string `json:"controller"`
	// Nodes are the TrainJob's Pods, each of which reports every Interval
	// for Window with a token of its own.
	Nodes         int     `json:"nodes"`
	Interval      string  `json:"interval"`
	Window        string  `json:"window"`
	WriteInterval string  `json:"writeInterval"`
	WindowSeconds float64 `json:"windowSeconds"`
	// Sent are the reports posted; Answered, by HTTP code ("error" for no
	// answer).
	Sent     int            `json:"sent"`
	Answered map[string]int `json:"answered"`
	// Requests, Reports and Writes are the manager's status server
	// counters over the window and the last write after it, by label.
	Requests map[string]float64 `json:"statusServerRequests"`
	Reports  map[string]float64 `json:"statusServerReports"`
	Writes   map[string]float64 `json:"statusServerWrites"`
	// APIRequests are the manager's requests to the API server over the
	// same time, by "verb group/resource".
	APIRequests map[string]float64 `json:"managerAPIRequests"`
	// WatchedWrites are the TrainJob's watch events whose trainerStatus
	// changed, over the same time; QuietWrites those from the creation
	// until the first report (none expected).
	WatchedWrites int `json:"watchedTrainerStatusChanges"`
	QuietWrites   int `json:"trainerStatusChangesBeforeReports"`
	// WritesPerMinute is the succeeded writes per minute of the window,
	// Bound what the write interval allows: one at once, then one per
	// interval.
	WritesPerMinute float64 `json:"writesPerMinute"`
	Bound           float64 `json:"boundPerMinute"`
	// Delay is, for each trainerStatus change seen, the report it holds
	// sent → seen in the watch; Staleness, for each report sent, → it or
	// a newer one seen; LastDelay the window's last report's.
	Delay     dist    `json:"heldReportToStatus"`
	Staleness dist    `json:"reportToItOrNewerInStatus"`
	LastDelay float64 `json:"lastReportToStatusSeconds"`
	// LastSeen is whether the last report sent reached the status.
	LastSeen bool `json:"lastReportSeen"`
	// RoundTrip is each report's post → answer.
	RoundTrip dist `json:"roundTrip"`
	// ManagerCPU is the manager's CPU seconds over the window and the
	// last write; ClusterCPU each process's of the cluster.
	ManagerCPU float64            `json:"managerCPUSeconds"`
	ClusterCPU map[string]float64 `json:"clusterCPUSeconds"`
}

type progressResult struct {
	Sides []progressSide `json:"sides"`
}

// progressScenario is one TrainJob of N nodes whose every Pod reports its
// progress every interval, as the Kubeflow SDK does, with its own token:
// how many reports are accepted, and how many writes of trainerStatus they
// cost.
func (b *bench) progressScenario() sidedScenario {
	return sidedScenario{
		name:   "progress",
		sides:  []string{ours},
		side:   func(ctx context.Context, side string) (any, error) { return b.progressSide(ctx, side) },
		report: b.progressReport,
	}
}

// progressTrack is what the watch saw of the TrainJob.
type progressTrack struct {
	mu   sync.Mutex
	last *trainer.TrainerStatus
	// changes are the arrivals of trainerStatus changes, with the send
	// time of the report each holds.
	changes []statusChange
	// pods are the TrainJob's Pods that run.
	pods map[string]*corev1.Pod
}

type statusChange struct {
	at, sent time.Time
}

func (t *progressTrack) observe(e event) {
	tj, ok := e.Object.(*trainer.TrainJob)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := tj.Status.TrainerStatus
	if st == nil || equality.Semantic.DeepEqual(st, t.last) {
		return
	}
	t.last = st.DeepCopy()
	c := statusChange{at: e.At}
	for _, m := range st.Metrics {
		if m.Name == sentMetric {
			if ns, err := strconv.ParseInt(m.Value, 10, 64); err == nil {
				c.sent = time.Unix(0, ns)
			}
		}
	}
	t.changes = append(t.changes, c)
}

func (t *progressTrack) observePod(e event) {
	p := e.Object.(*corev1.Pod)
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.Type == "DELETED" || p.Status.Phase != corev1.PodRunning {
		delete(t.pods, p.Name)
		return
	}
	t.pods[p.Name] = p
}

// changesBetween are the changes that arrived in [from, to).
func (t *progressTrack) changesBetween(from, to time.Time) []statusChange {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(t.changes), func(c statusChange) bool { return c.at.Before(from) || !c.at.Before(to) })
}

// reporter posts one Pod's reports.
type reporter struct {
	url, token string
}

func (b *bench) progressSide(ctx context.Context, side string) (progressSide, error) {
	n, interval, window := b.c.progressN, b.c.progressInterval, b.c.progressWindow
	cfgPath := b.managerConfig
	if cfgPath == "" {
		cfgPath = filepath.Join(b.c.root, ".dev", "config.yaml")
	}
	cfg, err := managerconfig.Load(cfgPath)
	if err != nil {
		return progressSide{}, err
	}
	if !*cfg.StatusServer.Enable {
		return progressSide{}, fmt.Errorf("the manager's status server is off (%s: statusServer.enable)", cfgPath)
	}
	writeInterval := cfg.StatusServer.WriteInterval.Duration
	b.logf("progress %s: one TrainJob of %d nodes; every Pod reports every %s for %s (status written at most every %s)", side, n, interval, window, writeInterval)
	server, err := dev.StatusServerURL(b.o)
	if err != nil {
		return progressSide{}, err
	}
	if err := b.ensureNodes(ctx, n); err != nil {
		return progressSide{}, err
	}
	ns, drop, err := b.namespace(ctx, "bench-progress")
	if err != nil {
		return progressSide{}, err
	}
	defer drop()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	tr := &progressTrack{pods: map[string]*corev1.Pod{}}
	if err := b.watchAll(wctx, ns, func() client.ObjectList { return &trainer.TrainJobList{} }, tr.observe); err != nil {
		return progressSide{}, err
	}
	if err := b.watchAll(wctx, ns, func() client.ObjectList { return &corev1.PodList{} }, tr.observePod); err != nil {
		return progressSide{}, err
	}
	created := time.Now()
	tj := benchTrainJob("progress", ns, b.c.runtime, int32(n), "1h").Obj()
	if err := b.cl.Create(ctx, tj); err != nil {
		return progressSide{}, err
	}
	if err := b.waitFor(ctx, "progress: Pods running", 5*time.Minute, func() (bool, string) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.pods) == n, fmt.Sprintf("%d of %d running", len(tr.pods), n)
	}); err != nil {
		return progressSide{}, err
	}
	tr.mu.Lock()
	pods := make([]*corev1.Pod, 0, n)
	for _, p := range tr.pods {
		pods = append(pods, p)
	}
	tr.mu.Unlock()

	// What a Pod gets from its volume: the CA of the namespace's ConfigMap
	// and a token of the volume's audience bound to the Pod, which the
	// kubelet would ask for (kwok runs none).
	var ca corev1.ConfigMap
	if err := b.waitFor(ctx, "progress: the status server's CA in "+ns, time.Minute, func() (bool, string) {
		err := b.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: statusserver.CAConfigMap}, &ca)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		return progressSide{}, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(ca.Data[statusserver.CAKey])) {
		return progressSide{}, fmt.Errorf("ConfigMap %s/%s holds no PEM certificate", ns, statusserver.CAConfigMap)
	}
	cs, err := kubernetes.NewForConfig(b.rc)
	if err != nil {
		return progressSide{}, err
	}
	reporters := make([]reporter, len(pods))
	for i, p := range pods {
		r, err := podReporter(ctx, cs, p, server)
		if err != nil {
			return progressSide{}, err
		}
		reporters[i] = r
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: n,
	}}

	metricsBefore, err := b.managerMetrics(ctx)
	if err != nil {
		return progressSide{}, err
	}
	pid, _, err := dev.Manager(b.o)
	if err != nil {
		return progressSide{}, err
	}
	cpuBefore, err := cpuSeconds(pid)
	if err != nil {
		return progressSide{}, err
	}
	clusterBefore := b.clusterCPU()

	// Every Pod reports every interval from its own offset in the first
	// one, as Pods started apart would.
	start := time.Now()
	end := start.Add(window)
	var mu sync.Mutex
	answered := map[string]int{}
	var roundTrips []time.Duration
	var sentTimes []time.Time
	var lastSent time.Time
	var wg sync.WaitGroup
	for i, r := range reporters {
		offset := time.Duration(rand.Int64N(int64(interval)))
		wg.Go(func() {
			if pause(ctx, offset) != nil {
				return
			}
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for ctx.Err() == nil && time.Now().Before(end) {
				progress := int32(min(100, 100*time.Since(start)/window))
				sent := time.Now()
				code := r.post(ctx, hc, progress, int32((end.Sub(sent)).Seconds()), i, sent)
				mu.Lock()
				answered[code]++
				roundTrips = append(roundTrips, time.Since(sent))
				if code == "200" {
					sentTimes = append(sentTimes, sent)
				}
				if sent.After(lastSent) {
					lastSent = sent
				}
				mu.Unlock()
				select {
				case <-tick.C:
				case <-ctx.Done():
				}
			}
		})
	}
	// Not a poll: it says how far the window is.
	say := time.NewTicker(15 * time.Second)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-say.C:
			mu.Lock()
			b.logf("  %s of %s: %d reports answered %v", time.Since(start).Round(time.Second), window, sumCounts(answered), answered)
			mu.Unlock()
		}
	}
	say.Stop()
	if ctx.Err() != nil {
		return progressSide{}, ctx.Err()
	}
	// The reports left after the last write wait at most an interval.
	if err := b.waitSaying(ctx, "progress: the last report in status", writeInterval+10*time.Second, func() (bool, string) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		n := len(tr.changes)
		return n > 0 && !tr.changes[n-1].sent.Before(lastSent), "waiting"
	}); err != nil {
		return progressSide{}, err
	}
	// And then a write interval more, for a write that would come late.
	if err := pause(ctx, writeInterval+time.Second); err != nil {
		return progressSide{}, err
	}
	stopped := time.Now()
	cpuAfter, err := cpuSeconds(pid)
	if err != nil {
		return progressSide{}, err
	}
	clusterAfter := b.clusterCPU()
	metricsAfter, err := b.managerMetrics(ctx)
	if err != nil {
		return progressSide{}, err
	}

	s := progressSide{
		Controller: side, Nodes: n, Interval: interval.String(), Window: window.String(), WriteInterval: writeInterval.String(),
		WindowSeconds: window.Seconds(), Answered: answered,
		Requests:    delta(metricsBefore.requests, metricsAfter.requests),
		Reports:     delta(metricsBefore.reports, metricsAfter.reports),
		Writes:      delta(metricsBefore.writes, metricsAfter.writes),
		APIRequests: delta(metricsBefore.api, metricsAfter.api),
		ManagerCPU:  cpuAfter - cpuBefore,
		ClusterCPU:  delta(clusterBefore, clusterAfter),
		RoundTrip:   distOf(roundTrips),
	}
	s.Sent = sumCounts(answered)
	s.QuietWrites = len(tr.changesBetween(created, start))
	changes := tr.changesBetween(start, stopped)
	s.WatchedWrites = len(changes)
	var delays []time.Duration
	for _, c := range changes {
		if !c.sent.IsZero() {
			delays = append(delays, c.at.Sub(c.sent))
		}
		if c.sent.Equal(lastSent) {
			s.LastSeen, s.LastDelay = true, c.at.Sub(c.sent).Seconds()
		}
	}
	s.Delay = distOf(delays)
	// changes arrive in the order of the reports they hold: each is the
	// newest when written.
	var stale []time.Duration
	for _, t := range sentTimes {
		if i := slices.IndexFunc(changes, func(c statusChange) bool { return !c.sent.Before(t) }); i >= 0 {
			stale = append(stale, changes[i].at.Sub(t))
		}
	}
	s.Staleness = distOf(stale)
	s.WritesPerMinute = s.Writes["succeeded"] * 60 / window.Seconds()
	s.Bound = (window.Seconds()/writeInterval.Seconds() + 1) * 60 / window.Seconds()
	b.logf("  %d reports sent, answered %v; %v status writes (%d seen in the watch), %.1f a minute (bound %.1f); %v TokenReviews",
		s.Sent, s.Answered, s.Writes, s.WatchedWrites, s.WritesPerMinute, s.Bound, s.APIRequests[tokenReviews])
	b.logf("  held report → status %s; the last report's %.3fs", s.Delay, s.LastDelay)
	b.logf("  any report → it or a newer one in status %s; the manager's CPU %.1fs", s.Staleness, s.ManagerCPU)
	return s, nil
}

// podReporter reports for p as a trainer Pod does, at server (see
// framework.PodReportTarget).
func podReporter(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod, server string) (reporter, error) {
	url, token, err := framework.PodReportTarget(ctx, cs, p, server)
	if err != nil {
		return reporter{}, err
	}
	return reporter{url: url, token: token}, nil
}

// post sends one UpdateTrainJobStatusRequest and returns the answer's HTTP
// code, or "error".
func (r reporter) post(ctx context.Context, hc *http.Client, progress, remaining int32, pod int, sent time.Time) string {
	body, err := json.Marshal(map[string]any{"trainerStatus": trainer.TrainerStatus{
		ProgressPercentage:        &progress,
		EstimatedRemainingSeconds: &remaining,
		Metrics: []trainer.Metric{
			{Name: sentMetric, Value: strconv.FormatInt(sent.UnixNano(), 10)},
			{Name: "pod", Value: strconv.Itoa(pod)},
		},
		LastUpdatedTime: metav1.NewTime(sent),
	}})
	if err != nil {
		return "error"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, strings.NewReader(string(body)))
	if err != nil {
		return "error"
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "error"
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return strconv.Itoa(resp.StatusCode)
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// progressCounts are the manager's counters the progress scenario reads.
type progressCounts struct {
	requests, reports, writes, api map[string]float64
}

func (b *bench) managerMetrics(ctx context.Context) (progressCounts, error) {
	_, port, err := dev.Manager(b.o)
	if err != nil {
		return progressCounts{}, err
	}
	m, err := scrape(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return progressCounts{}, fmt.Errorf("reading the manager's metrics: %w", err)
	}
	return progressCounts{
		requests: m.By(statusRequests, "code"),
		reports:  m.By(statusReports, "result"),
		writes:   m.By(statusWrites, "result"),
		api:      m.By("trainjob_api_requests_total", "verb", "resource"),
	}, nil
}

func (b *bench) progressReport(results map[string]any) (any, error) {
	var res progressResult
	var sides []string
	res.Sides, sides = measured[progressSide](results)
	if len(sides) == 0 {
		return nil, fmt.Errorf("no side measured")
	}
	s := res.Sides[0]
	fmt.Fprintf(b.out, "\nProgress reports: one TrainJob of %d nodes, every Pod reporting every %s for %s with its own token; status written at most every %s\n",
		s.Nodes, s.Interval, s.Window, s.WriteInterval)
	num := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	row := b.table(sides)
	figures := figures{}
	for _, s := range res.Sides {
		put := func(name string, v float64) { figures.put(name, s.Controller, v) }
		put("reports sent", float64(s.Sent))
		put("accepted (200)", float64(s.Answered["200"]))
		put("refused or unanswered", float64(s.Sent-s.Answered["200"]))
		put("reports written", s.Reports["written"])
		put("reports coalesced", s.Reports["coalesced"])
		put("status writes: succeeded", s.Writes["succeeded"])
		put("status writes: failed", s.Writes["failed"])
		put("trainerStatus changes seen", float64(s.WatchedWrites))
		put("trainerStatus changes before reports", float64(s.QuietWrites))
		put("status writes per minute", s.WritesPerMinute)
		put("bound per minute", s.Bound)
		put("TokenReviews", s.APIRequests[tokenReviews])
		put("Pod reads", s.APIRequests[podReads])
		put("held report → status, p50", s.Delay.P50)
		put("held report → status, max", s.Delay.Max)
		put("any report → it or newer, p50", s.Staleness.P50)
		put("any report → it or newer, max", s.Staleness.Max)
		put("last report → status", s.LastDelay)
		put("post → answer, p99", s.RoundTrip.P99)
		put("manager CPU seconds", s.ManagerCPU)
		put("kube-apiserver CPU seconds", s.ClusterCPU["kube-apiserver"])
	}
	for _, f := range []string{"reports sent", "accepted (200)", "refused or unanswered", "reports written", "reports coalesced", "status writes: succeeded",
		"status writes: failed", "trainerStatus changes seen", "trainerStatus changes before reports"} {
		row(f, num, figures[f])
	}
	row("status writes per minute", func(v float64) string { return fmt.Sprintf("%.1f", v) }, figures["status writes per minute"])
	row("bound per minute", func(v float64) string { return fmt.Sprintf("%.1f", v) }, figures["bound per minute"])
	row("TokenReviews", num, figures["TokenReviews"])
	row("Pod reads", num, figures["Pod reads"])
	for _, f := range []string{"held report → status, p50", "held report → status, max", "any report → it or newer, p50", "any report → it or newer, max", "last report → status", "post → answer, p99"} {
		row(f, secs, figures[f])
	}
	row("manager CPU seconds", func(v float64) string { return fmt.Sprintf("%.1f", v) }, figures["manager CPU seconds"])
	row("kube-apiserver CPU seconds", func(v float64) string { return fmt.Sprintf("%.1f", v) }, figures["kube-apiserver CPU seconds"])
	fmt.Fprintln(b.out)
	if s.WritesPerMinute > s.Bound {
		b.logf("progress: %.1f status writes a minute, OVER the bound of %.1f", s.WritesPerMinute, s.Bound)
	}
	return res, nil
}

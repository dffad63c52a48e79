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

package e2eprometheus

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// Annotations that set how long a simulated Pod runs, and whether it fails.
const (
	runFor  = "pod-complete.stage.kwok.x-k8s.io/delay"
	failFor = "pod-fail.stage.trainjob-operator.dev/delay"
)

// rangeStep is the resolution of the dashboard's range queries: the
// scrape interval.
var rangeStep = dev.PrometheusInterval

// TestAlertsAndDashboard runs TrainJobs through what the alerts and the
// dashboard watch (running, finished, failed, past a deadline, deleted by
// TTL, suspended, not created, refused), stops the manager across a
// TrainJob's active deadline, and then holds every alert and dashboard
// query to the real Prometheus: each parses, each series it selects was
// scraped, each dashboard query returns data, and the alerts of the
// faults (manager down, webhook errors, a deadline enforced late) fire.
// Their order matters: the last step reads what the others made.
func TestAlertsAndDashboard(t *testing.T) {
	t.Cleanup(func() { logTargets(t) })
	ns := cluster.NewNamespace(t)
	t.Run("lifecycle", func(t *testing.T) { lifecycle(t, ns) })
	if t.Failed() {
		return
	}
	t.Run("manager down across a deadline", func(t *testing.T) { managerDown(t, ns) })
	t.Run("every query has data", everyQueryHasData)
}

func trainJob(name, ns string, d time.Duration) *utiltesting.TrainJobWrapper {
	return utiltesting.MakeTrainJob(name, ns).Annotation(runFor, d.String()).Command("torchrun", "train.py")
}

// waitState waits until the TrainJob's status.state is want (with reason,
// if not empty, on the condition behind it), and returns it.
func waitState(t *testing.T, ns, name, want, reason string) *trainer.TrainJob {
	t.Helper()
	var tj *trainer.TrainJob
	cluster.Eventually(t, fmt.Sprintf("TrainJob %s to be %s %s", name, want, reason), func() (err error) {
		if tj, err = cluster.GetTrainJob(ns, name); err != nil {
			return err
		}
		if tj.Status.State != want {
			return fmt.Errorf("state %q, conditions %+v", tj.Status.State, tj.Status.Conditions)
		}
		if reason != "" && !slices.ContainsFunc(tj.Status.Conditions, func(c metav1.Condition) bool { return c.Reason == reason }) {
			return fmt.Errorf("no condition with reason %s: %+v", reason, tj.Status.Conditions)
		}
		return nil
	})
	return tj
}

func lifecycle(t *testing.T, ns string) {
	ctx := context.Background()
	// A Job in the way of a TrainJob's: it stays Created=False, NameTaken.
	cluster.Create(t, utiltesting.MakeJob("taken-node-0", ns, "busybox").Obj())
	cluster.Create(t, trainJob("taken", ns, time.Second).Obj())
	cluster.Create(t, trainJob("finishes", ns, 2*time.Second).TTL(3).Obj())
	// Two deadlines enforced on time. A deadline enforced late by the
	// restarted manager (managerDown) is then, in every bucket of its
	// histogram, fewer observations than the manager before it had:
	// Prometheus' rate sees the restart as a reset, and the late one as
	// an increase. One on-time observation would equal it in the buckets
	// above the late delay, hiding it, as it never would in a manager that
	// has run a while.
	cluster.Create(t, trainJob("deadline", ns, 10*time.Minute).Deadline(15).Obj())
	cluster.Create(t, trainJob("deadline-again", ns, 10*time.Minute).Deadline(15).Obj())
	noRetries := utiltesting.MakeRuntimeSpec().Torch()
	noRetries.Template.Spec.ReplicatedJobs[0].Template.Spec.BackoffLimit = ptr.To[int32](0)
	cluster.Create(t, noRetries.Runtime("no-retries", ns))
	cluster.Create(t, trainJob("fails", ns, 10*time.Minute).RuntimeRef(trainer.TrainingRuntimeKind, "no-retries").Annotation(failFor, "2s").Obj())
	cluster.Create(t, trainJob("suspended", ns, 10*time.Minute).Obj())
	// A TrainJob whose trainer reports its progress.
	cluster.Create(t, trainJob("reports", ns, 10*time.Minute).Obj())
	// Jobs the API server refuses: the webhook refuses the TrainJob.
	refused := trainJob("refused", ns, time.Second).Resources(corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
	}).Obj()
	if err := cluster.Client.Create(ctx, refused); err == nil || !strings.Contains(err.Error(), "denied the request") {
		t.Errorf("creating a TrainJob whose Jobs are invalid: %v, want the webhook's refusal", err)
	}

	// A TrainJob every few scrapes, so that rates over Grafana's
	// $__rate_interval (four scrapes) see requests and the quantiles of
	// the time to running have observations at more than one time.
	for i := range 4 {
		time.Sleep(2 * dev.PrometheusInterval)
		cluster.Create(t, trainJob(fmt.Sprintf("steady-%d", i), ns, time.Second).TTL(2).Obj())
	}

	pods := cluster.WaitPodsRunning(t, ns, "reports", 1)
	server, err := dev.StatusServerURL(devOpts)
	if err != nil {
		t.Fatal(err)
	}
	cluster.NewReporter(t, &pods[0], server).Report(t, 50, 300, trainer.Metric{Name: "loss", Value: "0.5"})

	waitState(t, ns, "taken", trainer.TrainJobStateCreated, trainer.TrainJobNameTakenReason)
	waitState(t, ns, "suspended", trainer.TrainJobStateRunning, "")
	cluster.PatchSuspend(t, ns, "suspended", true)
	waitState(t, ns, "suspended", trainer.TrainJobStateSuspended, "")
	waitState(t, ns, "fails", trainer.TrainJobStateFailed, trainer.TrainJobJobFailedReason)
	cluster.Eventually(t, "TrainJob finishes to be deleted by its TTL", func() error {
		if tj, err := cluster.GetTrainJob(ns, "finishes"); err == nil {
			return fmt.Errorf("still there: %s", tj.Status.State)
		}
		return nil
	})
	for _, name := range []string{"deadline", "deadline-again"} {
		waitState(t, ns, name, trainer.TrainJobStateFailed, trainer.TrainJobDeadlineExceededReason)
	}

	// Prometheus has scraped what the leader observed once it shows the
	// deadlines' delays and the steady TrainJobs' times to running.
	cluster.Eventually(t, "Prometheus to have scraped the deadlines' delays and the times to running", func() error {
		if err := hasSamples(`trainjob_deadline_enforcement_delay_seconds_count{job="` + dev.PrometheusManagerJob + `"} == 2`); err != nil {
			return err
		}
		return hasSamples(`trainjob_time_to_running_seconds_count{job="` + dev.PrometheusManagerJob + `"} >= 4`)
	})
	cluster.Eventually(t, "Prometheus to show the TrainJobs by state", func() error {
		return hasSamples(`trainjob_trainjobs{state="Created", reason="NameTaken"} == 1`)
	})
	// The deadlines were enforced on time: the alert on late ones is
	// quiet, as the fault below must change.
	if states, err := alertStates(); err != nil {
		t.Error(err)
	} else if s := states["TrainJobDeadlinesEnforcedLate"]; s != "" {
		t.Errorf("TrainJobDeadlinesEnforcedLate is %s with every deadline enforced on time", s)
	}
}

// lateDeadline is the active deadline of the TrainJob managerDown stops
// the manager across, and lateBy how long after it, at least, the manager
// starts again: over the 10 s of TrainJobDeadlinesEnforcedLate.
const (
	lateDeadline = 20
	lateBy       = 15 * time.Second
)

// managerDown stops the manager with a TrainJob running whose active
// deadline falls while it is down. The alerts of that fault fire: the
// manager down, and the API server failing to call its webhook (users
// keep creating TrainJobs meanwhile: a rate sees a counter's increase, not
// the first value of a new series). Started again past the deadline, the
// manager fails the TrainJob at once, late by its downtime: the
// manager-down alert resolves, the restarted manager's histogram holds
// that delay as the TrainJob's status shows it, and the alert on late
// deadlines fires.
func managerDown(t *testing.T, ns string) {
	ctx := context.Background()
	cluster.Create(t, trainJob("late", ns, 10*time.Minute).Deadline(lateDeadline).Obj())
	tj := waitState(t, ns, "late", trainer.TrainJobStateRunning, "")
	if tj.Status.StartTime == nil {
		t.Fatalf("TrainJob late runs without a startTime: %+v", tj.Status)
	}
	due := tj.Status.StartTime.Add(lateDeadline * time.Second)

	if err := dev.KillManager(devOpts); err != nil {
		t.Fatalf("killing the manager: %v", err)
	}
	down := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := dev.Up(ctx, devOpts); err != nil {
				t.Errorf("starting the manager again: %v", err)
			}
		}
	})
	var tried time.Time
	tryCreate := func() {
		if time.Since(tried) < dev.PrometheusInterval {
			return
		}
		tried = time.Now()
		err := cluster.Client.Create(ctx, trainJob("no-webhook", ns, time.Second).Obj())
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Errorf("creating a TrainJob with the manager down: %v, want the API server's failure to call the webhook", err)
		}
	}
	for _, alert := range []string{"TrainJobOperatorDown", "TrainJobWebhookErrors"} {
		waitAlert(t, alert, "firing", 2*time.Minute, tryCreate)
		t.Logf("alert %s firing %s after the manager stopped", alert, time.Since(down).Round(time.Second))
	}

	// Nothing enforces the deadline while the manager is down.
	cluster.EventuallyWithin(t, lateDeadline*time.Second+lateBy+timeout, "the manager to have been down past the deadline", func() error {
		tryCreate()
		if wait := time.Until(due.Add(lateBy)); wait > 0 {
			return fmt.Errorf("%s to go", wait.Round(time.Second))
		}
		return nil
	})
	if tj, err := cluster.GetTrainJob(ns, "late"); err != nil || tj.FinishedCondition() != nil {
		t.Fatalf("TrainJob late with no manager running: %v, %+v; want it unfinished", err, tj.Status.Conditions)
	}
	if states, err := alertStates(); err != nil || states["TrainJobDeadlinesEnforcedLate"] != "" {
		t.Errorf("before the late deadline is enforced: alerts %v, %v; want TrainJobDeadlinesEnforcedLate inactive", states, err)
	}

	if err := dev.Up(ctx, devOpts); err != nil {
		t.Fatalf("starting the manager again: %v", err)
	}
	restarted = true
	waitAlert(t, "TrainJobOperatorDown", "", 2*time.Minute, nil)
	t.Log("alert TrainJobOperatorDown resolved")

	tj = waitState(t, ns, "late", trainer.TrainJobStateFailed, trainer.TrainJobDeadlineExceededReason)
	delay := tj.FinishedCondition().LastTransitionTime.Sub(due)
	if delay < lateBy {
		t.Fatalf("TrainJob late failed %s after its deadline, want at least %s: the manager was down past it", delay, lateBy)
	}
	// The restarted manager observed that delay, once: its histogram holds
	// nothing else. The status' times are to the second.
	cluster.Eventually(t, "Prometheus to scrape the restarted manager's deadline delay", func() error {
		var result struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
		q := `{__name__=~"trainjob_deadline_enforcement_delay_seconds_(sum|count)", job="` + dev.PrometheusManagerJob + `"}`
		if err := prometheusAPI("query", url.Values{"query": {q}}, &result); err != nil {
			return err
		}
		got := map[string]float64{}
		for _, r := range result.Result {
			v, err := strconv.ParseFloat(fmt.Sprint(r.Value[1]), 64)
			if err != nil {
				return err
			}
			got[r.Metric["__name__"]] = v
		}
		count, sum := got["trainjob_deadline_enforcement_delay_seconds_count"], got["trainjob_deadline_enforcement_delay_seconds_sum"]
		if count != 1 || math.Abs(sum-delay.Seconds()) > 1.5 {
			return fmt.Errorf("count %v, sum %v; want 1 observation of %v", count, sum, delay)
		}
		return nil
	})
	waitAlert(t, "TrainJobDeadlinesEnforcedLate", "firing", 2*time.Minute, nil)
	t.Logf("alert TrainJobDeadlinesEnforcedLate firing, the deadline enforced %s late", delay)
}

// alertStates returns the state of each alert Prometheus has active,
// pending or firing, by name: firing if any of its instances fires.
func alertStates() (map[string]string, error) {
	var alerts struct {
		Alerts []struct {
			Labels map[string]string
			State  string
		}
	}
	if err := prometheusAPI("alerts", nil, &alerts); err != nil {
		return nil, err
	}
	states := map[string]string{}
	for _, a := range alerts.Alerts {
		if name := a.Labels["alertname"]; states[name] != "firing" {
			states[name] = a.State
		}
	}
	return states, nil
}

// waitAlert waits up to d until the alert's state is want: "pending",
// "firing", or "" for inactive (resolved); each poll calls meanwhile, if
// not nil, first.
func waitAlert(t *testing.T, alert, want string, d time.Duration, meanwhile func()) {
	t.Helper()
	what := fmt.Sprintf("alert %s to be %s", alert, cmp.Or(want, "inactive"))
	cluster.EventuallyWithin(t, d, what, func() error {
		if meanwhile != nil {
			meanwhile()
		}
		states, err := alertStates()
		if err != nil {
			return err
		}
		if states[alert] != want {
			return fmt.Errorf("active alerts: %v", states)
		}
		return nil
	})
}

// query is an expression of the chart's, and where it is from.
type query struct {
	from, expr string
	// dashboard: a panel's query, which must return data; an alert's
	// returns series only when it fires.
	dashboard bool
}

// chartQueries reads the alerts' expressions and the dashboard's queries
// from the chart, with Grafana's $__rate_interval as the scrape interval
// times four, as Grafana sets it.
func chartQueries(t *testing.T) []query {
	t.Helper()
	dir := filepath.Join(repoRoot, "charts", "trainjob-operator", "monitoring")
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "alerts.yaml"))
	if err == nil {
		err = yaml.Unmarshal(data, &rules)
	}
	if err != nil {
		t.Fatalf("monitoring/alerts.yaml: %v", err)
	}
	var qs []query
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			qs = append(qs, query{from: "alert " + r.Alert, expr: r.Expr})
		}
	}
	var dashboard struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr, RefID string }
		}
	}
	data, err = os.ReadFile(filepath.Join(dir, "dashboard.json"))
	if err == nil {
		err = json.Unmarshal(data, &dashboard)
	}
	if err != nil {
		t.Fatalf("monitoring/dashboard.json: %v", err)
	}
	rateInterval := (4 * dev.PrometheusInterval).String()
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			qs = append(qs, query{from: fmt.Sprintf("panel %q %s", p.Title, target.RefID), expr: strings.ReplaceAll(target.Expr, "$__rate_interval", rateInterval), dashboard: true})
		}
	}
	if len(qs) < 20 {
		t.Fatalf("%d queries in the chart: are the files read right?", len(qs))
	}
	return qs
}

// everyQueryHasData holds each alert and panel of the chart to what
// Prometheus scraped during the test: the expression parses, every series
// it selects exists, and a panel's query returns data over the test.
func everyQueryHasData(t *testing.T) {
	start, end := started, time.Now()
	for _, q := range chartQueries(t) {
		var ast any
		if err := prometheusAPI("parse_query", url.Values{"query": {q.expr}}, &ast); err != nil {
			t.Errorf("%s does not parse: %v\n%s", q.from, err, q.expr)
			continue
		}
		for _, sel := range selectors(ast) {
			var series []map[string]string
			params := url.Values{"match[]": {sel}, "start": {unix(start)}, "end": {unix(end)}}
			if err := prometheusAPI("series", params, &series); err != nil {
				t.Errorf("%s: series %s: %v", q.from, sel, err)
			} else if len(series) == 0 {
				t.Errorf("%s selects %s, of which Prometheus scraped no series", q.from, sel)
			}
		}
		if !q.dashboard {
			continue
		}
		var result struct {
			Result []struct {
				Metric map[string]string
				Values [][2]any
			}
		}
		params := url.Values{"query": {q.expr}, "start": {unix(start)}, "end": {unix(end)}, "step": {rangeStep.String()}}
		if err := prometheusAPI("query_range", params, &result); err != nil {
			t.Errorf("%s: %v\n%s", q.from, err, q.expr)
			continue
		}
		points := 0
		for _, r := range result.Result {
			for _, v := range r.Values {
				if f, err := strconv.ParseFloat(fmt.Sprint(v[1]), 64); err == nil && !math.IsNaN(f) {
					points++
				}
			}
		}
		if points == 0 {
			t.Errorf("%s returns no data over the test (%d series):\n%s", q.from, len(result.Result), q.expr)
		}
	}
	// The rules Prometheus evaluates are the chart's alerts, each with the
	// test's `for`, and evaluate.
	var rules struct {
		Groups []struct {
			Rules []struct {
				Name, Health, LastError string
				Duration                float64
			}
		}
	}
	if err := prometheusAPI("rules", nil, &rules); err != nil {
		t.Fatal(err)
	}
	var evaluated, alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			evaluated = append(evaluated, r.Name)
			if r.Health != "ok" {
				t.Errorf("rule %s: health %s: %s", r.Name, r.Health, r.LastError)
			}
			if r.Duration != ruleFor.Seconds() {
				t.Errorf("rule %s: for %vs, want the test's %s", r.Name, r.Duration, ruleFor)
			}
		}
	}
	for _, q := range chartQueries(t) {
		if name, ok := strings.CutPrefix(q.from, "alert "); ok {
			alerts = append(alerts, name)
		}
	}
	slices.Sort(evaluated)
	slices.Sort(alerts)
	if !slices.Equal(evaluated, alerts) {
		t.Errorf("Prometheus evaluates %v, want the chart's alerts %v", evaluated, alerts)
	}
}

// selectors lists the series selectors of a query, from the syntax tree
// Prometheus' /api/v1/parse_query gives.
func selectors(node any) []string {
	var out []string
	switch n := node.(type) {
	case map[string]any:
		if t := n["type"]; t == "vectorSelector" || t == "matrixSelector" {
			var ms []string
			matchers, _ := n["matchers"].([]any)
			for _, m := range matchers {
				m, _ := m.(map[string]any)
				ms = append(ms, fmt.Sprintf("%s%s%s", m["name"], m["type"], strconv.Quote(fmt.Sprint(m["value"]))))
			}
			return []string{"{" + strings.Join(ms, ", ") + "}"}
		}
		for _, v := range n {
			out = append(out, selectors(v)...)
		}
	case []any:
		for _, v := range n {
			out = append(out, selectors(v)...)
		}
	}
	return out
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// hasSamples reports whether an instant query returns a sample now.
func hasSamples(expr string) error {
	var result struct{ Result []any }
	if err := prometheusAPI("query", url.Values{"query": {expr}}, &result); err != nil {
		return err
	}
	if len(result.Result) == 0 {
		return fmt.Errorf("%s: no sample", expr)
	}
	return nil
}

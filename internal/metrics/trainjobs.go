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

package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// States are the words of status.state, in the order a TrainJob goes
// through them; each has a trainjob_trainjobs series, 0 when no TrainJob is
// in it, so that alerts and dashboards see the series before the first one
// is.
var States = []string{"Created", "Running", "Suspending", "Suspended", "Complete", "Failed"}

// TrainJob is what the TrainJobs collector reads of one TrainJob.
type TrainJob struct {
	// State is the TrainJob's status.state, one of States.
	State string
	// Reason is the reason of the condition behind the state (Created=False,
	// Complete, Failed), "" if none. The caller bounds it to a known set.
	Reason string
	// Since is when the TrainJob entered its state, as its status records
	// it; zero if it does not yet (the controller has not seen the change).
	Since time.Time
	// Namespace and Name name it in its progress series.
	Namespace, Name string
	// Progress is its trainer's last progress report while it runs, nil
	// if it finished or never reported.
	Progress *Progress
}

// Progress is a running TrainJob's last progress report.
type Progress struct {
	// Percent and RemainingSeconds are nil when the report left them out.
	Percent, RemainingSeconds *int32
	// Reported is the report's lastUpdatedTime.
	Reported time.Time
}

var (
	// TimeToRunning is how long TrainJobs took from creation to every Pod
	// of their trainer step running, observed by the controller.
	TimeToRunning = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace,
		Name:      "time_to_running_seconds",
		Help:      "Seconds from a TrainJob's creation to the reconcile that first saw every Pod of its trainer step running (or succeeded), observed once per TrainJob by the leading manager.",
		Buckets:   []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	})

	// DeadlineDelay is how late TrainJobs were failed for their active
	// deadline, observed by the controller.
	DeadlineDelay = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace,
		Name:      "deadline_enforcement_delay_seconds",
		Help:      "Seconds from a TrainJob's active deadline (startTime + activeDeadlineSeconds) to the status write that failed it with reason DeadlineExceeded, observed once per TrainJob.",
		Buckets:   []float64{1, 2, 5, 10, 30, 60, 120, 300},
	})

	// TrainJobs is the process's trainjob_trainjobs,
	// trainjob_oldest_in_state_seconds and progress series, which read the
	// TrainJobs from the source internal/manager gives it.
	TrainJobs = NewTrainJobCollector(clock.RealClock{})
)

// TrainJobCollector exports, at scrape time, the number of TrainJobs by
// state and reason and how long the oldest has been in each, by the
// transition times their status records, and one series per running
// TrainJob that reported its progress (percent done, seconds left, when it
// last reported), which goes when it finishes or is deleted. It reads the
// TrainJobs from the manager's cache, once this replica leads (Lead): the
// others' series would count every TrainJob again.
type TrainJobCollector struct {
	clock                        clock.PassiveClock
	count, oldest                *prometheus.Desc
	percent, remaining, reported *prometheus.Desc

	mu      sync.Mutex
	list    func(context.Context) ([]TrainJob, error)
	leading bool
}

// progressLabels name a TrainJob's progress series.
var progressLabels = []string{"namespace", "name"}

// NewTrainJobCollector returns a collector that reads the time from c.
func NewTrainJobCollector(c clock.PassiveClock) *TrainJobCollector {
	return &TrainJobCollector{
		clock: c,
		count: prometheus.NewDesc(namespace+"_trainjobs",
			"TrainJobs by status.state and the reason of the condition behind it (Created=False, Complete, Failed).", []string{"state", "reason"}, nil),
		oldest: prometheus.NewDesc(namespace+"_oldest_in_state_seconds",
			"Seconds the TrainJob longest in each state (and reason) has been in it, from the transition time its status records; 0 when none is.", []string{"state", "reason"}, nil),
		percent: prometheus.NewDesc(namespace+"_progress_percent",
			"Percent of training done, as a running TrainJob's trainer last reported it (status.trainerStatus.progressPercentage).", progressLabels, nil),
		remaining: prometheus.NewDesc(namespace+"_estimated_remaining_seconds",
			"Seconds of training left, as a running TrainJob's trainer last reported it (status.trainerStatus.estimatedRemainingSeconds).", progressLabels, nil),
		reported: prometheus.NewDesc(namespace+"_progress_last_report_timestamp_seconds",
			"When a running TrainJob's trainer last reported its progress (status.trainerStatus.lastUpdatedTime), in Unix seconds.", progressLabels, nil),
	}
}

// SetSource sets where the collector reads the TrainJobs from. Until it is
// set, and until Lead, the collector exports nothing.
func (c *TrainJobCollector) SetSource(list func(context.Context) ([]TrainJob, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = list
}

// Lead says that this replica leads: the collector exports its series.
func (c *TrainJobCollector) Lead() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leading = true
}

// Describe implements prometheus.Collector.
func (c *TrainJobCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.oldest
	ch <- c.percent
	ch <- c.remaining
	ch <- c.reported
}

// Collect implements prometheus.Collector.
func (c *TrainJobCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	list, leading := c.list, c.leading
	c.mu.Unlock()
	if list == nil || !leading {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tjs, err := list(ctx)
	if err != nil {
		return // the cache is not started yet: no series rather than wrong ones
	}
	now := c.clock.Now()
	type key struct{ state, reason string }
	counts := map[key]int{}
	oldest := map[key]time.Duration{}
	for _, s := range States {
		counts[key{s, ""}] = 0
		oldest[key{s, ""}] = 0
	}
	for _, tj := range tjs {
		k := key{tj.State, tj.Reason}
		counts[k]++
		var age time.Duration
		if !tj.Since.IsZero() {
			age = max(0, now.Sub(tj.Since))
		}
		oldest[k] = max(oldest[k], age)
		if p := tj.Progress; p != nil {
			c.collectProgress(ch, tj.Namespace, tj.Name, p)
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n), k.state, k.reason)
	}
	for k, d := range oldest {
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, d.Seconds(), k.state, k.reason)
	}
}

// collectProgress exports a running TrainJob's last progress report.
func (c *TrainJobCollector) collectProgress(ch chan<- prometheus.Metric, ns, name string, p *Progress) {
	if p.Percent != nil {
		ch <- prometheus.MustNewConstMetric(c.percent, prometheus.GaugeValue, float64(*p.Percent), ns, name)
	}
	if p.RemainingSeconds != nil {
		ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(*p.RemainingSeconds), ns, name)
	}
	ch <- prometheus.MustNewConstMetric(c.reported, prometheus.GaugeValue, float64(p.Reported.Unix()), ns, name)
}

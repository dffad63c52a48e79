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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// States are the words of status.state, in the order a TrainJob goes
// through them; each has a trainjob_trainjobs series, 0 when no TrainJob is
// in it, so that alerts and dashboards see the series before the first one
// is.
var States = []string{"Created", "Running", "Suspending", "Suspended", "Complete", "Failed"}

// TrainJob is what the TrainJobs collector reads of one TrainJob.
type TrainJob struct {
	UID types.UID
	// State is the TrainJob's status.state, one of States.
	State string
	// Reason is the reason of the condition behind the state (Created=False,
	// Complete, Failed), "" if none. The caller bounds it to a known set.
	Reason string
	// Created is the TrainJob's creation time; Started when its Jobs were
	// created (status.startTime), zero until then.
	Created, Started time.Time
	// DeadlineDue is when its active deadline fell due and DeadlineEnforced
	// when it was failed for it: both zero unless it failed with reason
	// DeadlineExceeded.
	DeadlineDue, DeadlineEnforced time.Time
}

var (
	// TimeToRunning is how long TrainJobs took from creation to their
	// Jobs being created.
	TimeToRunning = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace,
		Name:      "time_to_running_seconds",
		Help:      "Seconds from a TrainJob's creation to its Jobs' creation (status.startTime), to the second, observed once per TrainJob by the leading manager.",
		Buckets:   []float64{1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
	})

	// DeadlineDelay is how late TrainJobs were failed for their active
	// deadline.
	DeadlineDelay = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace,
		Name:      "deadline_enforcement_delay_seconds",
		Help:      "Seconds from a TrainJob's active deadline (startTime + activeDeadlineSeconds) to its Failed=True DeadlineExceeded condition, to the second, observed once per TrainJob by the leading manager.",
		Buckets:   []float64{1, 2, 5, 10, 30, 60, 120, 300},
	})

	// TrainJobs is the process's trainjob_trainjobs and
	// trainjob_oldest_in_state_seconds, which read the TrainJobs from the
	// source internal/manager gives it.
	TrainJobs = NewTrainJobCollector(clock.RealClock{}, TimeToRunning, DeadlineDelay)
)

// TrainJobCollector exports, at scrape time, the number of TrainJobs by
// state and reason and how long the oldest has been in each, and
// observes TimeToRunning and DeadlineDelay once per TrainJob. It reads the
// TrainJobs from the manager's cache, once this replica leads (Lead): the
// others' series would count every TrainJob again.
type TrainJobCollector struct {
	clock                        clock.PassiveClock
	timeToRunning, deadlineDelay prometheus.Observer
	count, oldest                *prometheus.Desc

	mu   sync.Mutex
	list func(context.Context) ([]TrainJob, error)
	// since is when each TrainJob was first seen in its current state and
	// reason.
	since map[types.UID]stateSince
	// started and enforced hold the TrainJobs already observed in the
	// histograms.
	started, enforced sets.Set[types.UID]
	// baseline is when this replica began to lead, zero until then: what
	// happened before it another replica, or an earlier process, may have
	// observed.
	baseline time.Time
}

type stateSince struct {
	state, reason string
	since         time.Time
}

// NewTrainJobCollector returns a collector that observes the times to
// running and the deadline delays in the given observers.
func NewTrainJobCollector(c clock.PassiveClock, timeToRunning, deadlineDelay prometheus.Observer) *TrainJobCollector {
	return &TrainJobCollector{
		clock: c, timeToRunning: timeToRunning, deadlineDelay: deadlineDelay,
		count: prometheus.NewDesc(namespace+"_trainjobs",
			"TrainJobs by status.state and the reason of the condition behind it (Created=False, Complete, Failed).", []string{"state", "reason"}, nil),
		oldest: prometheus.NewDesc(namespace+"_oldest_in_state_seconds",
			"Seconds the TrainJob longest in each state (and reason) has been in it, as the leading manager saw it; 0 when none is.", []string{"state", "reason"}, nil),
		since:    map[types.UID]stateSince{},
		started:  sets.New[types.UID](),
		enforced: sets.New[types.UID](),
	}
}

// SetSource sets where the collector reads the TrainJobs from. Until it is
// set, and until Lead, the collector exports nothing.
func (c *TrainJobCollector) SetSource(list func(context.Context) ([]TrainJob, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = list
}

// Lead says that this replica leads since at: the collector exports its
// series, and observes what happens from then on.
func (c *TrainJobCollector) Lead(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// API times are to the second.
	c.baseline = at.Truncate(time.Second)
}

// Describe implements prometheus.Collector.
func (c *TrainJobCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.count
	ch <- c.oldest
}

// Collect implements prometheus.Collector.
func (c *TrainJobCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.list == nil || c.baseline.IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tjs, err := c.list(ctx)
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
	seen := sets.New[types.UID]()
	for _, tj := range tjs {
		seen.Insert(tj.UID)
		k := key{tj.State, tj.Reason}
		counts[k]++
		s, ok := c.since[tj.UID]
		if !ok || s.state != tj.State || s.reason != tj.Reason {
			s = stateSince{tj.State, tj.Reason, now}
			c.since[tj.UID] = s
		}
		oldest[k] = max(oldest[k], now.Sub(s.since))
		c.observe(tj)
	}
	for uid := range c.since {
		if !seen.Has(uid) {
			delete(c.since, uid)
		}
	}
	c.started = c.started.Intersection(seen)
	c.enforced = c.enforced.Intersection(seen)
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n), k.state, k.reason)
	}
	for k, d := range oldest {
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, d.Seconds(), k.state, k.reason)
	}
}

// observe puts tj's time to running and deadline delay in the histograms
// the first time it is seen with them, if they happened after the baseline.
func (c *TrainJobCollector) observe(tj TrainJob) {
	if !tj.Started.IsZero() && !c.started.Has(tj.UID) {
		c.started.Insert(tj.UID)
		if !tj.Started.Before(c.baseline) {
			c.timeToRunning.Observe(max(0, tj.Started.Sub(tj.Created).Seconds()))
		}
	}
	if !tj.DeadlineEnforced.IsZero() && !c.enforced.Has(tj.UID) {
		c.enforced.Insert(tj.UID)
		if !tj.DeadlineEnforced.Before(c.baseline) {
			c.deadlineDelay.Observe(max(0, tj.DeadlineEnforced.Sub(tj.DeadlineDue).Seconds()))
		}
	}
}

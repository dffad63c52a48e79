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

// Package metrics holds the product's Prometheus metrics. Labels are
// bounded: the only per-object series (remaining active deadline) is
// computed at scrape time from due times the controllers keep, and is gone as
// soon as its TrainJob stops running or is deleted.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const namespace = "trainjob"

var (
	// TTLDeletions counts TrainJobs deleted by the TTL-after-finished and
	// retention rules, by the name of the rule (lifecycle.Policy*).
	TTLDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "ttl_deletions_total",
		Help:      "TrainJobs deleted because their TTL or a retention policy expired, by policy (ttlSecondsAfterFinished, afterFinished, afterFailed, afterSuspended).",
	}, []string{"policy"})

	// TTLDeletionLatency is how late deletions were: time of the delete call
	// minus the time the TrainJob became eligible for deletion.
	TTLDeletionLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace,
		Name:      "ttl_deletion_latency_seconds",
		Help:      "Seconds from the moment a TrainJob became eligible for deletion (finish + TTL, or a retention policy) to its delete request.",
		Buckets:   []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
	})

	// DeadlineExceeded counts TrainJobs failed for running past
	// spec.activeDeadlineSeconds.
	DeadlineExceeded = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "deadline_exceeded_total",
		Help:      "TrainJobs failed with reason DeadlineExceeded.",
	})

	// Finished counts TrainJobs that finished, by outcome (Complete, Failed)
	// and the reason of the condition.
	Finished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "finished_total",
		Help:      "TrainJobs that finished, by outcome (Complete or Failed) and reason.",
	}, []string{"outcome", "reason"})

	// Restarts counts the restarts the runtimes' failure policies made, by
	// action (RestartJobSet, RestartJobSetAndIgnoreMaxRestarts).
	Restarts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "restarts_total",
		Help:      "Restarts of a TrainJob's Jobs made by its runtime's failurePolicy, by action (RestartJobSet, RestartJobSetAndIgnoreMaxRestarts).",
	}, []string{"action"})
)

// DueTimes keeps one due time per TrainJob and exports them at scrape time.
type DueTimes struct {
	mu    sync.Mutex
	due   map[types.NamespacedName]time.Time
	descs []*prometheus.Desc
	// collect turns the due times into metrics.
	collect func(d *DueTimes, now time.Time, ch chan<- prometheus.Metric)
	clock   clock.PassiveClock
}

// Set records the due time of a TrainJob.
func (d *DueTimes) Set(key types.NamespacedName, due time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.due[key] = due
}

// Delete forgets a TrainJob.
func (d *DueTimes) Delete(key types.NamespacedName) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.due, key)
}

// Len is the number of TrainJobs kept.
func (d *DueTimes) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.due)
}

// Describe implements prometheus.Collector.
func (d *DueTimes) Describe(ch chan<- *prometheus.Desc) {
	for _, desc := range d.descs {
		ch <- desc
	}
}

// Collect implements prometheus.Collector.
func (d *DueTimes) Collect(ch chan<- prometheus.Metric) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.collect(d, d.clock.Now(), ch)
}

// NewPendingDeletions returns the collector of trainjob_ttl_pending_deletions,
// the number of finished (or suspended) TrainJobs waiting for their TTL or
// retention period to expire, and of trainjob_ttl_deletion_overdue_seconds,
// how long past its due time the most overdue of them is: a deletion that
// keeps failing shows there before it shows in the latency histogram, which
// sees only deletions made.
func NewPendingDeletions(c clock.PassiveClock) *DueTimes {
	return &DueTimes{
		due:   map[types.NamespacedName]time.Time{},
		clock: c,
		descs: []*prometheus.Desc{
			prometheus.NewDesc(namespace+"_ttl_pending_deletions",
				"TrainJobs waiting for their TTL or retention period to expire.", nil, nil),
			prometheus.NewDesc(namespace+"_ttl_deletion_overdue_seconds",
				"Seconds the most overdue TrainJob waiting for deletion is past its TTL or retention period; 0 when none is.", nil, nil),
		},
		collect: func(d *DueTimes, now time.Time, ch chan<- prometheus.Metric) {
			var overdue time.Duration
			for _, due := range d.due {
				overdue = max(overdue, now.Sub(due))
			}
			ch <- prometheus.MustNewConstMetric(d.descs[0], prometheus.GaugeValue, float64(len(d.due)))
			ch <- prometheus.MustNewConstMetric(d.descs[1], prometheus.GaugeValue, overdue.Seconds())
		},
	}
}

// NewDeadlineRemaining returns the collector of
// trainjob_active_deadline_remaining_seconds: for each running TrainJob with
// an active deadline, the seconds left until it (negative once overdue, until
// the controller fails the TrainJob).
func NewDeadlineRemaining(c clock.PassiveClock) *DueTimes {
	return &DueTimes{
		due:   map[types.NamespacedName]time.Time{},
		clock: c,
		descs: []*prometheus.Desc{prometheus.NewDesc(namespace+"_active_deadline_remaining_seconds",
			"Seconds until a running TrainJob reaches spec.activeDeadlineSeconds.", []string{"namespace", "name"}, nil)},
		collect: func(d *DueTimes, now time.Time, ch chan<- prometheus.Metric) {
			for key, due := range d.due {
				ch <- prometheus.MustNewConstMetric(d.descs[0], prometheus.GaugeValue, due.Sub(now).Seconds(), key.Namespace, key.Name)
			}
		},
	}
}

var (
	// PendingDeletions is the process's trainjob_ttl_pending_deletions.
	PendingDeletions = NewPendingDeletions(clock.RealClock{})
	// DeadlineRemaining is the process's
	// trainjob_active_deadline_remaining_seconds.
	DeadlineRemaining = NewDeadlineRemaining(clock.RealClock{})

	registerOnce sync.Once
)

// Register adds the metrics to controller-runtime's registry, once.
func Register() {
	registerOnce.Do(func() {
		crmetrics.Registry.MustRegister(TTLDeletions, TTLDeletionLatency, DeadlineExceeded, Finished, Restarts, PendingDeletions, DeadlineRemaining, APIRequests,
			TimeToRunning, DeadlineDelay, TrainJobs, StatusRequests, StatusReports, StatusWrites)
	})
}

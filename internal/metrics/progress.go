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
)

// Progress is a TrainJob's last progress report, as the progress
// collector reads it.
type Progress struct {
	Namespace, Name string
	// Percent and RemainingSeconds are nil when the report left them out.
	Percent, RemainingSeconds *int32
	// Reported is the report's lastUpdatedTime.
	Reported time.Time
}

// ProgressCollector exports, at scrape time, one series per running
// TrainJob that reported its progress: percent done, seconds left and
// when it last reported. They are read from the manager's cache, so a
// TrainJob's series go when it finishes or is deleted. Only the leading
// replica exports them (Lead), as each replica's cache holds every
// TrainJob.
type ProgressCollector struct {
	percent, remaining, reported *prometheus.Desc

	mu   sync.Mutex
	list func(context.Context) ([]Progress, error)
	lead bool
}

// TrainJobProgress is the process's progress collector.
var TrainJobProgress = NewProgressCollector()

// NewProgressCollector returns a collector with no source.
func NewProgressCollector() *ProgressCollector {
	labels := []string{"namespace", "name"}
	return &ProgressCollector{
		percent: prometheus.NewDesc(namespace+"_progress_percent",
			"Percent of training done, as a running TrainJob's trainer last reported it (status.trainerStatus.progressPercentage).", labels, nil),
		remaining: prometheus.NewDesc(namespace+"_estimated_remaining_seconds",
			"Seconds of training left, as a running TrainJob's trainer last reported it (status.trainerStatus.estimatedRemainingSeconds).", labels, nil),
		reported: prometheus.NewDesc(namespace+"_progress_last_report_timestamp_seconds",
			"When a running TrainJob's trainer last reported its progress (status.trainerStatus.lastUpdatedTime), in Unix seconds.", labels, nil),
	}
}

// SetSource sets where the collector reads the reports from.
func (c *ProgressCollector) SetSource(list func(context.Context) ([]Progress, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = list
}

// Lead says that this replica leads: it exports the series from then on.
func (c *ProgressCollector) Lead() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lead = true
}

// Describe implements prometheus.Collector.
func (c *ProgressCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.percent
	ch <- c.remaining
	ch <- c.reported
}

// Collect implements prometheus.Collector.
func (c *ProgressCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	list, lead := c.list, c.lead
	c.mu.Unlock()
	if list == nil || !lead {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reports, err := list(ctx)
	if err != nil {
		return
	}
	for _, r := range reports {
		if r.Percent != nil {
			ch <- prometheus.MustNewConstMetric(c.percent, prometheus.GaugeValue, float64(*r.Percent), r.Namespace, r.Name)
		}
		if r.RemainingSeconds != nil {
			ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(*r.RemainingSeconds), r.Namespace, r.Name)
		}
		ch <- prometheus.MustNewConstMetric(c.reported, prometheus.GaugeValue, float64(r.Reported.Unix()), r.Namespace, r.Name)
	}
}

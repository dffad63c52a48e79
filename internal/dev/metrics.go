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

package dev

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics are the metric families a component exposes, by name.
type Metrics map[string]*dto.MetricFamily

// Scrape reads the Prometheus text exposition of a /metrics endpoint of the
// local cluster, within timeout. HTTPS endpoints (kube-controller-manager's)
// are read without verifying their self-signed certificate.
func Scrape(ctx context.Context, url string, timeout time.Duration) (Metrics, error) {
	return ScrapeWith(ctx, &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the local cluster's self-signed component
	}}, url)
}

// ScrapeWith is Scrape with the client given: the API server's /metrics
// needs its credentials.
func ScrapeWith(ctx context.Context, c *http.Client, url string) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return families, nil
}

// Sum adds the values of the samples of name whose labels include match
// (nil: every sample). name may be a histogram's or a summary's _sum or
// _count.
func (m Metrics) Sum(name string, match map[string]string) float64 {
	var total float64
	m.each(name, func(labels map[string]string, v float64) {
		for k, want := range match {
			if labels[k] != want {
				return
			}
		}
		total += v
	})
	return total
}

// By sums the samples of name by the values of the given labels, joined
// with a space.
func (m Metrics) By(name string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	m.each(name, func(ls map[string]string, v float64) {
		key := make([]string, len(labels))
		for i, l := range labels {
			key[i] = ls[l]
		}
		out[strings.Join(key, " ")] += v
	})
	return out
}

// each calls fn with the labels and value of every sample of name.
func (m Metrics) each(name string, fn func(map[string]string, float64)) {
	family, value := m[name], sampleValue
	if family == nil {
		for _, suffix := range []string{"_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && m[base] != nil {
				family, value = m[base], aggregate(suffix)
			}
		}
	}
	if family == nil {
		return
	}
	for _, metric := range family.GetMetric() {
		labels := map[string]string{}
		for _, l := range metric.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		fn(labels, value(metric))
	}
}

// sampleValue is the value of a counter, gauge or untyped sample.
func sampleValue(metric *dto.Metric) float64 {
	switch {
	case metric.Counter != nil:
		return metric.GetCounter().GetValue()
	case metric.Gauge != nil:
		return metric.GetGauge().GetValue()
	}
	return metric.GetUntyped().GetValue()
}

// aggregate reads the _sum or _count of a histogram or summary sample.
func aggregate(suffix string) func(*dto.Metric) float64 {
	return func(metric *dto.Metric) float64 {
		switch {
		case metric.Histogram != nil && suffix == "_sum":
			return metric.GetHistogram().GetSampleSum()
		case metric.Histogram != nil:
			return float64(metric.GetHistogram().GetSampleCount())
		case metric.Summary != nil && suffix == "_sum":
			return metric.GetSummary().GetSampleSum()
		case metric.Summary != nil:
			return float64(metric.GetSummary().GetSampleCount())
		}
		return 0
	}
}

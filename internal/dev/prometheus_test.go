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
	"net/url"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// Prometheus scrapes the manager as the chart's ServiceMonitor does, and
// the API server, with the token and CA given, and loads the chart's rules.
func TestPrometheusConfiguration(t *testing.T) {
	o := Options{Root: "/repo"}
	data := prometheusConfigFile(o, "/w/token", 4242, &url.URL{Scheme: "https", Host: "127.0.0.1:6443"}, "/w/ca.crt")
	type scrape struct {
		JobName       string `json:"job_name"`
		Scheme        string
		MetricsPath   string `json:"metrics_path"`
		HonorLabels   bool   `json:"honor_labels"`
		Authorization struct {
			CredentialsFile string `json:"credentials_file"`
		}
		TLSConfig struct {
			CAFile             string `json:"ca_file"`
			InsecureSkipVerify bool   `json:"insecure_skip_verify"`
		} `json:"tls_config"`
		StaticConfigs []struct {
			Targets []string
			Labels  map[string]string
		} `json:"static_configs"`
	}
	var cfg struct {
		Global        map[string]string
		RuleFiles     []string `json:"rule_files"`
		ScrapeConfigs []scrape `json:"scrape_configs"`
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if diff := cmp.Diff([]string{"/repo/" + PrometheusRulesFile}, cfg.RuleFiles); diff != "" {
		t.Errorf("rule files (-want +got):\n%s", diff)
	}
	o.PrometheusRules = "/tmp/rules.yaml"
	if err := yaml.Unmarshal(prometheusConfigFile(o, "/w/token", 4242, &url.URL{Scheme: "https", Host: "127.0.0.1:6443"}, "/w/ca.crt"), &cfg); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/tmp/rules.yaml"}, cfg.RuleFiles); diff != "" {
		t.Errorf("rule files given PrometheusRules (-want +got):\n%s", diff)
	}
	if cfg.Global["scrape_interval"] != "5s" {
		t.Errorf("scrape interval %q, want 5s", cfg.Global["scrape_interval"])
	}
	i := slices.IndexFunc(cfg.ScrapeConfigs, func(s scrape) bool { return s.JobName == PrometheusManagerJob })
	j := slices.IndexFunc(cfg.ScrapeConfigs, func(s scrape) bool { return s.JobName == PrometheusAPIServerJob })
	if i < 0 || j < 0 {
		t.Fatalf("jobs %+v: want %s and %s", cfg.ScrapeConfigs, PrometheusManagerJob, PrometheusAPIServerJob)
	}
	m, a := cfg.ScrapeConfigs[i], cfg.ScrapeConfigs[j]
	checks := map[string][2]any{
		"manager scheme":      {m.Scheme, "https"},
		"manager path":        {m.MetricsPath, "/metrics"},
		"manager honorLabels": {m.HonorLabels, true},
		"manager token":       {m.Authorization.CredentialsFile, "/w/token"},
		"manager target":      {m.StaticConfigs[0].Targets[0], "127.0.0.1:4242"},
		"manager namespace":   {m.StaticConfigs[0].Labels["namespace"], systemNamespace},
		"apiserver scheme":    {a.Scheme, "https"},
		"apiserver token":     {a.Authorization.CredentialsFile, "/w/token"},
		"apiserver CA":        {a.TLSConfig.CAFile, "/w/ca.crt"},
		"apiserver target":    {a.StaticConfigs[0].Targets[0], "127.0.0.1:6443"},
	}
	for what, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s: %v, want %v", what, c[0], c[1])
		}
	}
}

// With Prometheus the manager serves its metrics over HTTPS, the flags of
// the caller kept; without, as they are.
func TestManagerArgs(t *testing.T) {
	o := Options{ManagerArgs: []string{"--zap-log-level=2"}}
	if diff := cmp.Diff([]string{"--zap-log-level=2"}, o.managerArgs()); diff != "" {
		t.Errorf("without Prometheus (-want +got):\n%s", diff)
	}
	o.Prometheus = true
	if diff := cmp.Diff([]string{"--zap-log-level=2", "--metrics-insecure=false"}, o.managerArgs()); diff != "" {
		t.Errorf("with Prometheus (-want +got):\n%s", diff)
	}
	if len(o.ManagerArgs) != 1 {
		t.Errorf("ManagerArgs changed: %v", o.ManagerArgs)
	}
}

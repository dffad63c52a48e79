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

package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

// monitoringValues turn on every monitoring piece of the chart.
var monitoringValues = []string{
	"--set", "metrics.serviceMonitor.enabled=true",
	"--set", "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
	"--set", "metrics.prometheusRule.enabled=true",
	"--set", "metrics.dashboard.enabled=true",
}

// The chart's monitoring is off by default; on, the ServiceMonitor scrapes
// the manager's metrics port as the manager serves it (HTTPS, /metrics, a
// token), as the job the alerts and the dashboard select and the local
// cluster's Prometheus scrapes; the PrometheusRule and the dashboard are
// monitoring/'s files as they are.
func TestChartMonitoring(t *testing.T) {
	for _, u := range helmTemplate(t, "trainjob-system") {
		switch u.GetKind() {
		case "ServiceMonitor", "PrometheusRule":
			t.Errorf("%s rendered with the default values", objectKey(u))
		}
		switch u.GetName() {
		case "trainjob-operator-dashboard", "trainjob-operator-metrics", "trainjob-operator-metrics-scraper", "trainjob-operator-metrics-scraper-token":
			t.Errorf("%s rendered with the default values", objectKey(u))
		}
	}

	helm(t, append([]string{"lint", "--strict", chartDir()}, monitoringValues...)...)
	objs := helmTemplate(t, "ml-platform", monitoringValues...)

	deploy := find(objs, "Deployment", "trainjob-operator")
	svc := find(objs, "Service", dev.PrometheusManagerJob)
	sm := find(objs, "ServiceMonitor", "trainjob-operator")
	scraper := find(objs, "ServiceAccount", "trainjob-operator-metrics-scraper")
	token := find(objs, "Secret", "trainjob-operator-metrics-scraper-token")
	if deploy == nil || svc == nil || sm == nil || scraper == nil || token == nil {
		t.Fatalf("Deployment %v, Service %s %v, ServiceMonitor %v, the scraper's ServiceAccount %v and token %v: want all",
			deploy != nil, dev.PrometheusManagerJob, svc != nil, sm != nil, scraper != nil, token != nil)
	}
	cfg := managerConfig(t, objs)
	checks := map[string][2]any{
		"the manager's port named metrics":    {fmt.Sprint(nested(deploy, "spec", "template", "spec", "containers", 0, "ports", 1, "containerPort")), "8443"},
		"its metrics bind address":            {cfg.Metrics.BindAddress, ":8443"},
		"secure serving":                      {*cfg.Metrics.SecureServing, true},
		"the Service's target port":           {nested(svc, "spec", "ports", 0, "targetPort"), nested(deploy, "spec", "template", "spec", "containers", 0, "ports", 1, "name")},
		"the Service selects the manager":     {nested(svc, "spec", "selector", "app.kubernetes.io/name"), nested(deploy, "spec", "selector", "matchLabels", "app.kubernetes.io/name")},
		"the ServiceMonitor selects it":       {nested(sm, "spec", "selector", "matchLabels", "app.kubernetes.io/component"), nested(svc, "metadata", "labels", "app.kubernetes.io/component")},
		"its port":                            {nested(sm, "spec", "endpoints", 0, "port"), nested(svc, "spec", "ports", 0, "name")},
		"its scheme":                          {nested(sm, "spec", "endpoints", 0, "scheme"), "https"},
		"its path":                            {nested(sm, "spec", "endpoints", 0, "path"), "/metrics"},
		"its authorization type":              {nested(sm, "spec", "endpoints", 0, "authorization", "type"), "Bearer"},
		"its credentials' Secret":             {nested(sm, "spec", "endpoints", 0, "authorization", "credentials", "name"), token.GetName()},
		"its credentials' key":                {nested(sm, "spec", "endpoints", 0, "authorization", "credentials", "key"), corev1.ServiceAccountTokenKey},
		"no deprecated bearerTokenFile":       {nested(sm, "spec", "endpoints", 0, "bearerTokenFile"), nil},
		"the Secret beside the monitor":       {token.GetNamespace(), sm.GetNamespace()},
		"the Secret a token":                  {nested(token, "type"), string(corev1.SecretTypeServiceAccountToken)},
		"the token's ServiceAccount":          {token.GetAnnotations()[corev1.ServiceAccountNameKey], scraper.GetName()},
		"the ServiceAccount's namespace":      {scraper.GetNamespace(), sm.GetNamespace()},
		"its honorLabels":                     {nested(sm, "spec", "endpoints", 0, "honorLabels"), true},
		"its labels for Prometheus":           {nested(sm, "metadata", "labels", "release"), "kube-prometheus-stack"},
		"its namespace":                       {sm.GetNamespace(), "ml-platform"},
		"the scraper's role":                  {nested(find(objs, "ClusterRoleBinding", "trainjob-operator-metrics-scraper"), "roleRef", "name"), "trainjob-operator-metrics-reader"},
		"the scraper bound":                   {nested(find(objs, "ClusterRoleBinding", "trainjob-operator-metrics-scraper"), "subjects", 0, "name"), scraper.GetName()},
		"the scraper bound, its namespace":    {nested(find(objs, "ClusterRoleBinding", "trainjob-operator-metrics-scraper"), "subjects", 0, "namespace"), scraper.GetNamespace()},
		"the ServiceAccount dev scrapes as":   {dev.PrometheusScraper, scraper.GetName()},
		"the Secret dev reads its token from": {dev.PrometheusScraperToken, token.GetName()},
		"the reader role may GET /metrics":    {nested(find(objs, "ClusterRole", "trainjob-operator-metrics-reader"), "rules", 0, "nonResourceURLs", 0), "/metrics"},
		"the dashboard's sidecar label":       {nested(find(objs, "ConfigMap", "trainjob-operator-dashboard"), "metadata", "labels", "grafana_dashboard"), "1"},
		"the PrometheusRule's namespace":      {find(objs, "PrometheusRule", "trainjob-operator").GetNamespace(), "ml-platform"},
		"the job the alerts are written for":  {dev.PrometheusManagerJob, "trainjob-operator-metrics"},
	}
	for what, c := range checks {
		if fmt.Sprint(c[0]) != fmt.Sprint(c[1]) {
			t.Errorf("%s: %v, want %v", what, c[0], c[1])
		}
	}

	var rules map[string]any
	readMonitoringFile(t, "alerts.yaml", func(b []byte, v any) error { return yaml.Unmarshal(b, v) }, &rules)
	if diff := cmp.Diff(rules["groups"], nested(find(objs, "PrometheusRule", "trainjob-operator"), "spec", "groups")); diff != "" {
		t.Errorf("the PrometheusRule's groups differ from monitoring/alerts.yaml (-file +chart):\n%s", diff)
	}
	var dashboard, rendered map[string]any
	readMonitoringFile(t, "dashboard.json", json.Unmarshal, &dashboard)
	text, _ := nested(find(objs, "ConfigMap", "trainjob-operator-dashboard"), "data", "trainjob-operator.json").(string)
	if err := json.Unmarshal([]byte(text), &rendered); err != nil {
		t.Fatalf("the dashboard's ConfigMap: %v", err)
	}
	if diff := cmp.Diff(dashboard, rendered); diff != "" {
		t.Errorf("the dashboard's ConfigMap differs from monitoring/dashboard.json (-file +chart):\n%s", diff)
	}

	if out, err := helmTemplateErr("--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.enabled=false"); err == nil {
		t.Errorf("a ServiceMonitor without metrics rendered:\n%s", out)
	}
}

func readMonitoringFile(t *testing.T, name string, unmarshal func([]byte, any) error, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(chartDir(), "monitoring", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := unmarshal(data, into); err != nil {
		t.Fatalf("monitoring/%s: %v", name, err)
	}
}

// helmTemplateErr renders the chart, returning Helm's error rather than
// failing.
func helmTemplateErr(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(repoRoot, "bin", "helm"), append([]string{"template", "trainjob-operator", chartDir(), "--namespace", "trainjob-system"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

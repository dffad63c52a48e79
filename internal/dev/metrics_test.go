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
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const exposition = `# HELP controller_runtime_reconcile_total Total number of reconciliations per controller
# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="trainjob-controller",result="success"} 7
controller_runtime_reconcile_total{controller="trainjob-controller",result="error"} 2
controller_runtime_reconcile_total{controller="other",result="success"} 100
# TYPE workqueue_work_duration_seconds histogram
workqueue_work_duration_seconds_bucket{name="a",le="1"} 3
workqueue_work_duration_seconds_bucket{name="a",le="+Inf"} 4
workqueue_work_duration_seconds_sum{name="a"} 2.5
workqueue_work_duration_seconds_count{name="a"} 4
# TYPE leader_election_master_status gauge
leader_election_master_status{name="trainjob-operator"} 1
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="h",method="GET"} 5
rest_client_requests_total{code="409",host="h",method="PUT"} 1
rest_client_requests_total{code="200",host="h",method="PUT"} 3
`

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(exposition))
	}))
	defer srv.Close()
	m, err := Scrape(context.Background(), srv.URL, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]float64{
		"reconciles of one controller": m.Sum("controller_runtime_reconcile_total", map[string]string{"controller": "trainjob-controller"}),
		"every reconcile":              m.Sum("controller_runtime_reconcile_total", nil),
		"a histogram's _sum":           m.Sum("workqueue_work_duration_seconds_sum", map[string]string{"name": "a"}),
		"a histogram's _count":         m.Sum("workqueue_work_duration_seconds_count", nil),
		"a gauge":                      m.Sum("leader_election_master_status", nil),
		"a metric not exposed":         m.Sum("nothing_total", nil),
	}
	want := map[string]float64{
		"reconciles of one controller": 9, "every reconcile": 109, "a histogram's _sum": 2.5,
		"a histogram's _count": 4, "a gauge": 1, "a metric not exposed": 0,
	}
	if diff := cmp.Diff(want, sums); diff != "" {
		t.Errorf("sums (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"GET 200": 5, "PUT 409": 1, "PUT 200": 3}, m.By("rest_client_requests_total", "method", "code")); diff != "" {
		t.Errorf("by method and code (-want +got):\n%s", diff)
	}
}

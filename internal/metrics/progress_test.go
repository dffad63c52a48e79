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
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// A TrainJob's progress series are there while its source gives its
// progress, and gone once it does not (finished or deleted); only a
// leader exports.
func TestProgressSeries(t *testing.T) {
	c := NewTrainJobCollector(clock.RealClock{})
	tjs := []TrainJob{
		{State: "Running", Namespace: "ns", Name: "a", Progress: &Progress{Percent: ptr.To[int32](45), RemainingSeconds: ptr.To[int32](600), Reported: time.Unix(1700000000, 0)}},
		{State: "Running", Namespace: "ns", Name: "b", Progress: &Progress{Reported: time.Unix(1700000100, 0)}},
		{State: "Running", Namespace: "ns", Name: "silent"},
	}
	c.SetSource(func(context.Context) ([]TrainJob, error) { return tjs, nil })
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("%d series before leading, want 0", n)
	}
	c.Lead()
	want := `
# HELP trainjob_estimated_remaining_seconds Seconds of training left, as a running TrainJob's trainer last reported it (status.trainerStatus.estimatedRemainingSeconds).
# TYPE trainjob_estimated_remaining_seconds gauge
trainjob_estimated_remaining_seconds{name="a",namespace="ns"} 600
# HELP trainjob_progress_last_report_timestamp_seconds When a running TrainJob's trainer last reported its progress (status.trainerStatus.lastUpdatedTime), in Unix seconds.
# TYPE trainjob_progress_last_report_timestamp_seconds gauge
trainjob_progress_last_report_timestamp_seconds{name="a",namespace="ns"} 1.7e+09
trainjob_progress_last_report_timestamp_seconds{name="b",namespace="ns"} 1.7000001e+09
# HELP trainjob_progress_percent Percent of training done, as a running TrainJob's trainer last reported it (status.trainerStatus.progressPercentage).
# TYPE trainjob_progress_percent gauge
trainjob_progress_percent{name="a",namespace="ns"} 45
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), progressSeries...); err != nil {
		t.Error(err)
	}
	tjs = tjs[1:]
	if n := testutil.CollectAndCount(c, "trainjob_progress_percent"); n != 0 {
		t.Errorf("%d progress series once a's is gone from the source, want 0", n)
	}
}

var progressSeries = []string{"trainjob_progress_percent", "trainjob_estimated_remaining_seconds", "trainjob_progress_last_report_timestamp_seconds"}

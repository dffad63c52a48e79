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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestTrainJobCollector(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	toRunning := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "to_running", Buckets: []float64{5, 30}})
	delay := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "delay", Buckets: []float64{1, 10}})
	c := NewTrainJobCollector(clk, toRunning, delay)

	// Nothing before a source is set.
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("without a source: %d series, want 0", n)
	}
	var tjs []TrainJob
	c.SetSource(func(context.Context) ([]TrainJob, error) { return tjs, nil })
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("not leading: %d series, want 0", n)
	}

	c.Lead(start.Add(-20 * time.Second))
	tjs = []TrainJob{
		// Started before this replica led: another replica's to observe.
		{UID: "old", State: "Running", Created: start.Add(-time.Minute), Started: start.Add(-50 * time.Second)},
		{UID: "refused", State: "Created", Reason: "JobRefused", Created: start},
	}
	want := `
# HELP trainjob_oldest_in_state_seconds Seconds the TrainJob longest in each state (and reason) has been in it, as the leading manager saw it; 0 when none is.
# TYPE trainjob_oldest_in_state_seconds gauge
trainjob_oldest_in_state_seconds{reason="",state="Complete"} 0
trainjob_oldest_in_state_seconds{reason="",state="Created"} 0
trainjob_oldest_in_state_seconds{reason="",state="Failed"} 0
trainjob_oldest_in_state_seconds{reason="",state="Running"} 0
trainjob_oldest_in_state_seconds{reason="",state="Suspended"} 0
trainjob_oldest_in_state_seconds{reason="",state="Suspending"} 0
trainjob_oldest_in_state_seconds{reason="JobRefused",state="Created"} 0
# HELP trainjob_trainjobs TrainJobs by status.state and the reason of the condition behind it (Created=False, Complete, Failed).
# TYPE trainjob_trainjobs gauge
trainjob_trainjobs{reason="",state="Complete"} 0
trainjob_trainjobs{reason="",state="Created"} 0
trainjob_trainjobs{reason="",state="Failed"} 0
trainjob_trainjobs{reason="",state="Running"} 1
trainjob_trainjobs{reason="",state="Suspended"} 0
trainjob_trainjobs{reason="",state="Suspending"} 0
trainjob_trainjobs{reason="JobRefused",state="Created"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	clk.SetTime(start.Add(90 * time.Second))
	tjs = []TrainJob{
		{UID: "old", State: "Suspending", Created: start.Add(-time.Minute), Started: start.Add(-50 * time.Second)},
		{UID: "refused", State: "Created", Reason: "JobRefused", Created: start},
		{UID: "new", State: "Running", Created: start.Add(10 * time.Second), Started: start.Add(22 * time.Second)},
		{
			UID: "late", State: "Failed", Reason: "DeadlineExceeded", Created: start, Started: start.Add(3 * time.Second),
			DeadlineDue: start.Add(63 * time.Second), DeadlineEnforced: start.Add(65 * time.Second),
		},
	}
	want = `
# HELP trainjob_oldest_in_state_seconds Seconds the TrainJob longest in each state (and reason) has been in it, as the leading manager saw it; 0 when none is.
# TYPE trainjob_oldest_in_state_seconds gauge
trainjob_oldest_in_state_seconds{reason="",state="Complete"} 0
trainjob_oldest_in_state_seconds{reason="",state="Created"} 0
trainjob_oldest_in_state_seconds{reason="",state="Failed"} 0
trainjob_oldest_in_state_seconds{reason="",state="Running"} 0
trainjob_oldest_in_state_seconds{reason="",state="Suspended"} 0
trainjob_oldest_in_state_seconds{reason="",state="Suspending"} 0
trainjob_oldest_in_state_seconds{reason="DeadlineExceeded",state="Failed"} 0
trainjob_oldest_in_state_seconds{reason="JobRefused",state="Created"} 90
# HELP trainjob_trainjobs TrainJobs by status.state and the reason of the condition behind it (Created=False, Complete, Failed).
# TYPE trainjob_trainjobs gauge
trainjob_trainjobs{reason="",state="Complete"} 0
trainjob_trainjobs{reason="",state="Created"} 0
trainjob_trainjobs{reason="",state="Failed"} 0
trainjob_trainjobs{reason="",state="Running"} 1
trainjob_trainjobs{reason="",state="Suspended"} 0
trainjob_trainjobs{reason="",state="Suspending"} 1
trainjob_trainjobs{reason="DeadlineExceeded",state="Failed"} 1
trainjob_trainjobs{reason="JobRefused",state="Created"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// Once each: "new" 12s, "late" 3s to running; "late" 2s late; "old" not.
	for range 2 {
		testutil.CollectAndCount(c)
	}
	wantHistograms := `
# HELP delay 
# TYPE delay histogram
delay_bucket{le="1"} 0
delay_bucket{le="10"} 1
delay_bucket{le="+Inf"} 1
delay_sum 2
delay_count 1
# HELP to_running 
# TYPE to_running histogram
to_running_bucket{le="5"} 1
to_running_bucket{le="30"} 2
to_running_bucket{le="+Inf"} 2
to_running_sum 15
to_running_count 2
`
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(toRunning, delay)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantHistograms)); err != nil {
		t.Error(err)
	}

	// A TrainJob gone is forgotten: one of the same UID is new.
	tjs = nil
	testutil.CollectAndCount(c)
	if len(c.since) != 0 || c.started.Len() != 0 || c.enforced.Len() != 0 {
		t.Errorf("after every TrainJob went: %d states, %d started, %d enforced kept, want none", len(c.since), c.started.Len(), c.enforced.Len())
	}
}

func TestPendingDeletionsOverdue(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d := NewPendingDeletions(clocktesting.NewFakePassiveClock(now))
	want := func(pending int, overdue string) string {
		return `
# HELP trainjob_ttl_deletion_overdue_seconds Seconds the most overdue TrainJob waiting for deletion is past its TTL or retention period; 0 when none is.
# TYPE trainjob_ttl_deletion_overdue_seconds gauge
trainjob_ttl_deletion_overdue_seconds ` + overdue + `
# HELP trainjob_ttl_pending_deletions TrainJobs waiting for their TTL or retention period to expire.
# TYPE trainjob_ttl_pending_deletions gauge
trainjob_ttl_pending_deletions ` + string(rune('0'+pending)) + `
`
	}
	if err := testutil.CollectAndCompare(d, strings.NewReader(want(0, "0"))); err != nil {
		t.Error(err)
	}
	d.Set(types.NamespacedName{Namespace: "ns", Name: "future"}, now.Add(time.Minute))
	if err := testutil.CollectAndCompare(d, strings.NewReader(want(1, "0"))); err != nil {
		t.Error(err)
	}
	d.Set(types.NamespacedName{Namespace: "ns", Name: "late"}, now.Add(-40*time.Second))
	d.Set(types.NamespacedName{Namespace: "ns", Name: "later"}, now.Add(-90*time.Second))
	if err := testutil.CollectAndCompare(d, strings.NewReader(want(3, "90"))); err != nil {
		t.Error(err)
	}
}

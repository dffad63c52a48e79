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
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestTrainJobCollector(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	c := NewTrainJobCollector(clk)

	// Nothing before a source is set.
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("without a source: %d series, want 0", n)
	}
	var tjs []TrainJob
	c.SetSource(func(context.Context) ([]TrainJob, error) { return tjs, nil })
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Fatalf("not leading: %d series, want 0", n)
	}

	c.Lead()
	tjs = []TrainJob{
		{State: "Running", Since: start.Add(-50 * time.Second)},
		{State: "Running", Since: start.Add(-20 * time.Second)},
		{State: "Created", Reason: "JobRefused", Since: start.Add(-90 * time.Second)},
		// Suspending, the controller not having recorded it yet.
		{State: "Suspending"},
		// A transition time ahead of the clock (skew) counts as none.
		{State: "Failed", Reason: "DeadlineExceeded", Since: start.Add(3 * time.Second)},
	}
	want := `
# HELP trainjob_oldest_in_state_seconds Seconds the TrainJob longest in each state (and reason) has been in it, from the transition time its status records; 0 when none is.
# TYPE trainjob_oldest_in_state_seconds gauge
trainjob_oldest_in_state_seconds{reason="",state="Complete"} 0
trainjob_oldest_in_state_seconds{reason="",state="Created"} 0
trainjob_oldest_in_state_seconds{reason="",state="Failed"} 0
trainjob_oldest_in_state_seconds{reason="",state="Running"} 50
trainjob_oldest_in_state_seconds{reason="",state="Suspended"} 0
trainjob_oldest_in_state_seconds{reason="",state="Suspending"} 0
trainjob_oldest_in_state_seconds{reason="DeadlineExceeded",state="Failed"} 0
trainjob_oldest_in_state_seconds{reason="JobRefused",state="Created"} 90
# HELP trainjob_trainjobs TrainJobs by status.state and the reason of the condition behind it (Created=False, Complete, Failed).
# TYPE trainjob_trainjobs gauge
trainjob_trainjobs{reason="",state="Complete"} 0
trainjob_trainjobs{reason="",state="Created"} 0
trainjob_trainjobs{reason="",state="Failed"} 0
trainjob_trainjobs{reason="",state="Running"} 2
trainjob_trainjobs{reason="",state="Suspended"} 0
trainjob_trainjobs{reason="",state="Suspending"} 1
trainjob_trainjobs{reason="DeadlineExceeded",state="Failed"} 1
trainjob_trainjobs{reason="JobRefused",state="Created"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// The ages follow the clock, not when the collector first saw them: a
	// manager that starts leading late reports them as old as they are.
	clk.SetTime(start.Add(time.Minute))
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP trainjob_oldest_in_state_seconds Seconds the TrainJob longest in each state (and reason) has been in it, from the transition time its status records; 0 when none is.
# TYPE trainjob_oldest_in_state_seconds gauge
trainjob_oldest_in_state_seconds{reason="",state="Complete"} 0
trainjob_oldest_in_state_seconds{reason="",state="Created"} 0
trainjob_oldest_in_state_seconds{reason="",state="Failed"} 0
trainjob_oldest_in_state_seconds{reason="",state="Running"} 110
trainjob_oldest_in_state_seconds{reason="",state="Suspended"} 0
trainjob_oldest_in_state_seconds{reason="",state="Suspending"} 0
trainjob_oldest_in_state_seconds{reason="DeadlineExceeded",state="Failed"} 57
trainjob_oldest_in_state_seconds{reason="JobRefused",state="Created"} 150
`), "trainjob_oldest_in_state_seconds"); err != nil {
		t.Error(err)
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

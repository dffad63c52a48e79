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

package statusserver

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// recordingClient records the status patches it is given; the API
// server's side of them is tested in test/integration.
type recordingClient struct {
	client.Client
	mu      sync.Mutex
	patches []map[string]any
}

func (c *recordingClient) Status() client.SubResourceWriter { return recordingStatus{c} }

type recordingStatus struct{ c *recordingClient }

func (s recordingStatus) Patch(_ context.Context, _ client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	data, err := patch.Data(nil)
	if err != nil {
		return err
	}
	var p map[string]any
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.patches = append(s.c.patches, p)
	return nil
}

func (recordingStatus) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	panic("not used")
}
func (recordingStatus) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	panic("not used")
}
func (recordingStatus) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	panic("not used")
}

func (c *recordingClient) progress() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []any
	for _, p := range c.patches {
		out = append(out, p["status"].(map[string]any)["trainerStatus"].(map[string]any)["progressPercentage"])
	}
	return out
}

func report(p int32) *trainer.TrainerStatus {
	return &trainer.TrainerStatus{ProgressPercentage: ptr.To(p), LastUpdatedTime: metav1.NewTime(now)}
}

// Reports every second for a minute, from 64 Pods, become one write per
// interval: the first at once, then the newest at each interval's end.
func TestWriterCoalesces(t *testing.T) {
	clk := clocktesting.NewFakeClock(now)
	c := &recordingClient{}
	w := NewWriter(c, clk, 5*time.Second)
	key := types.NamespacedName{Namespace: "ns", Name: "tj"}
	ctx := context.Background()
	for sec := range 60 {
		for range 64 {
			if err := w.Submit(ctx, key, "uid-1", report(int32(sec))); err != nil {
				t.Fatal(err)
			}
		}
		clk.Step(time.Second)
	}
	clk.Step(5 * time.Second) // the last interval's write
	got := c.progress()
	// Second 0 at once, then the newest of each 5 s: 4, 9, ..., 59.
	want := []any{0.0}
	for p := 4; p < 60; p += 5 {
		want = append(want, float64(p))
	}
	if len(got) != len(want) {
		t.Fatalf("%d writes for 3,840 reports in 60 s, want %d (one per 5 s): %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("write %d has progress %v, want %v (the newest report)", i, got[i], want[i])
		}
	}
	// Quiet for an interval: the next report is written at once.
	clk.Step(10 * time.Second)
	if err := w.Submit(ctx, key, "uid-1", report(100)); err != nil {
		t.Fatal(err)
	}
	if got := c.progress(); got[len(got)-1] != 100.0 {
		t.Errorf("after a quiet interval the report waits; writes %v", got)
	}
	w.Forget()
	clk.Step(10 * time.Second)
	w.Forget()
	if n := len(w.pending); n != 0 {
		t.Errorf("%d TrainJobs remembered after they stopped reporting, want 0", n)
	}
}

// A patch replaces trainerStatus whole, and names the UID it was accepted
// for.
func TestStatusPatch(t *testing.T) {
	patch, err := statusPatch("uid-1", &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](3), LastUpdatedTime: metav1.NewTime(now)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"uid":"uid-1"},"status":{"trainerStatus":{"estimatedRemainingSeconds":null,"lastUpdatedTime":"2026-11-27T12:00:00Z","metrics":null,"progressPercentage":3}}}`
	if string(patch) != want {
		t.Errorf("statusPatch() = %s\nwant %s", patch, want)
	}
}

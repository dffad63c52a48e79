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
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
)

// The writer patches trainerStatus alone.
// +kubebuilder:rbac:groups=trainer.kubeflow.org,resources=trainjobs/status,verbs=patch

// FieldManager is who the status server's writes are recorded as.
const FieldManager = "trainjob-operator-status-server"

// A Writer writes the reports of each TrainJob into its
// status.trainerStatus, at most once per interval per TrainJob: the first
// report after a quiet interval is written at once, and those that arrive
// sooner wait for the interval to end, when the newest of them is written
// and the others are dropped. So a TrainJob whose Pods report every second
// costs one write per interval, whatever their number, and one that never
// reports costs none.
type Writer struct {
	client   client.Client
	clock    clock.WithDelayedExecution
	interval time.Duration

	mu      sync.Mutex
	pending map[types.NamespacedName]*entry
}

// entry is one TrainJob's reports.
type entry struct {
	uid types.UID
	// next is the newest report not yet written, nil if none.
	next *trainer.TrainerStatus
	// last is when the last write began; flushing says a write is due
	// at last+interval.
	last     time.Time
	flushing bool
	// writing serializes the writes of the TrainJob, so that an older
	// report never lands after a newer one.
	writing sync.Mutex
}

// NewWriter returns a Writer that writes through c.
func NewWriter(c client.Client, clk clock.WithDelayedExecution, interval time.Duration) *Writer {
	return &Writer{client: c, clock: clk, interval: interval, pending: map[types.NamespacedName]*entry{}}
}

// Submit takes a report for the TrainJob key whose UID is uid. It writes
// the report at once, and returns the write's error, if the TrainJob had
// no write in the last interval; else it keeps the report for the write at
// the interval's end and returns nil.
func (w *Writer) Submit(ctx context.Context, key types.NamespacedName, uid types.UID, s *trainer.TrainerStatus) error {
	now := w.clock.Now()
	w.mu.Lock()
	e := w.pending[key]
	if e == nil || e.uid != uid {
		e = &entry{uid: uid}
		w.pending[key] = e
	}
	if !e.flushing && now.Sub(e.last) >= w.interval {
		e.last = now
		e.next = nil
		w.mu.Unlock()
		return w.write(ctx, key, e, s)
	}
	if e.next != nil {
		metrics.StatusReports.WithLabelValues(metrics.ReportCoalesced).Inc()
	}
	e.next = s
	if !e.flushing {
		e.flushing = true
		due := e.last.Add(w.interval)
		w.clock.AfterFunc(due.Sub(now), func() { w.flush(key, e, due) })
	}
	w.mu.Unlock()
	return nil
}

// flush writes the newest report of e that waits, at due.
func (w *Writer) flush(key types.NamespacedName, e *entry, due time.Time) {
	w.mu.Lock()
	s := e.next
	e.next, e.flushing = nil, false
	e.last = due
	w.mu.Unlock()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.write(ctx, key, e, s); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && !apierrors.IsInvalid(err) {
		ctrl.Log.WithName("status-server").Error(err, "Writing a TrainJob's trainerStatus", "trainJob", key)
	}
}

// write patches s into the TrainJob's status. The patch names the UID the
// report was accepted for: the API server refuses it if the TrainJob was
// deleted and created again since.
func (w *Writer) write(ctx context.Context, key types.NamespacedName, e *entry, s *trainer.TrainerStatus) error {
	e.writing.Lock()
	defer e.writing.Unlock()
	patch, err := statusPatch(e.uid, s)
	if err != nil {
		return err
	}
	tj := &trainer.TrainJob{}
	tj.Namespace, tj.Name = key.Namespace, key.Name
	err = w.client.Status().Patch(ctx, tj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager))
	if err != nil {
		metrics.StatusWrites.WithLabelValues(metrics.WriteFailed).Inc()
		return err
	}
	metrics.StatusWrites.WithLabelValues(metrics.WriteSucceeded).Inc()
	metrics.StatusReports.WithLabelValues(metrics.ReportWritten).Inc()
	return nil
}

// statusPatch is a JSON merge patch that replaces status.trainerStatus
// with s as a whole: a field the report leaves out is removed, as Kubeflow
// Trainer's server-side apply of the report removes it.
func statusPatch(uid types.UID, s *trainer.TrainerStatus) ([]byte, error) {
	ts := map[string]any{"progressPercentage": nil, "estimatedRemainingSeconds": nil, "metrics": nil, "lastUpdatedTime": nil}
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &ts); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"status":   map[string]any{"trainerStatus": ts},
	})
}

// Forget drops what is remembered of TrainJobs that have had no report
// for an interval and have no write waiting, to keep memory to the
// TrainJobs that report.
func (w *Writer) Forget() {
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, e := range w.pending {
		if !e.flushing && now.Sub(e.last) >= w.interval {
			delete(w.pending, key)
		}
	}
}

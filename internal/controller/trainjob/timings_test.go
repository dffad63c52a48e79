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

package trainjob

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// samples is what a histogram holds: how many observations, their sum.
type samples struct {
	Count uint64
	Sum   float64
}

func histogramOf(t *testing.T, h prometheus.Histogram) samples {
	t.Helper()
	var pb dto.Metric
	if err := h.Write(&pb); err != nil {
		t.Fatal(err)
	}
	return samples{pb.GetHistogram().GetSampleCount(), pb.GetHistogram().GetSampleSum()}
}

// withHistograms gives the fixture's reconciler, and one made as a
// restarted manager would, histograms of their own.
func (f *fixture) withHistograms() (toRunning, delay prometheus.Histogram) {
	toRunning = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "to_running"})
	delay = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "delay"})
	f.r.timings = newTimings(toRunning, delay)
	return toRunning, delay
}

// restart replaces the reconciler with a new one, as a restarted manager
// has, observing into the same histograms.
func (f *fixture) restart(toRunning, delay prometheus.Histogram) {
	f.r = NewReconciler(f.client, f.client, f.recorder, WithClock(f.clock), WithDeadlines(f.deadlines), WithHistograms(toRunning, delay))
}

// A deadline's delay is observed once, by the reconcile that fails the
// TrainJob, as the time from the deadline to that reconcile: not again by
// later reconciles, nor by a manager started afterwards.
func TestDeadlineDelayObservedOnce(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().Torch()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(now.Add(-67 * time.Second)).Deadline(60).JobsStatus(nodeStep).Obj()
	// Its Pods pending: it never ran.
	child := utiltesting.WrapJob(childJob(t, tj, spec, 0)).Active(1).Obj()
	child.Status.Ready = ptr.To[int32](0)
	f := newFixture(t, nil, tj, child, spec.ClusterRuntime("torch-distributed"))
	toRunning, delay := f.withHistograms()

	for range 3 {
		if err := f.reconcile(t, "tj"); err != nil {
			t.Fatal(err)
		}
		f.clock.Step(time.Second)
	}
	f.restart(toRunning, delay)
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatal(err)
	}
	if got := f.trainJob(t, "tj").FinishedCondition(); got == nil || got.Reason != trainer.TrainJobDeadlineExceededReason {
		t.Fatalf("finished: %+v, want Failed DeadlineExceeded", got)
	}
	if diff := cmp.Diff(samples{1, 7}, histogramOf(t, delay)); diff != "" {
		t.Errorf("deadline delay (-want +got):\n%s", diff)
	}
	if got := histogramOf(t, toRunning); got.Count != 0 {
		t.Errorf("time to running observed %d times, want none: the Pods never all ran", got.Count)
	}
}

// A TrainJob failed for another reason, or finishing in time, has no
// deadline delay.
func TestDeadlineDelayOnlyForDeadlines(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().Torch()
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(now.Add(-30 * time.Second)).Deadline(60).JobsStatus(nodeStep).Obj()
	child := utiltesting.WrapJob(childJob(t, tj, spec, 0)).Failed("BackoffLimitExceeded", now).Obj()
	f := newFixture(t, nil, tj, child, spec.ClusterRuntime("torch-distributed"))
	_, delay := f.withHistograms()
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatal(err)
	}
	if got := f.trainJob(t, "tj").FinishedCondition(); got == nil || got.Reason != trainer.TrainJobJobFailedReason {
		t.Fatalf("finished: %+v, want Failed by its Job", got)
	}
	if got := histogramOf(t, delay); got.Count != 0 {
		t.Errorf("deadline delay observed %+v, want nothing", got)
	}
}

// The time to running is observed once, by the reconcile that first sees
// every Pod of the trainer step running, from the TrainJob's creation: not
// again when Pods stop and run again, or succeed, in the same manager, nor
// by a restarted manager that finds the TrainJob complete.
func TestTimeToRunningObservedOnce(t *testing.T) {
	spec := utiltesting.MakeRuntimeSpec().Torch()
	w := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").StartTime(now.Add(-10 * time.Second)).JobsStatus(nodeStep)
	w.CreationTimestamp = metav1.NewTime(now.Add(-12 * time.Second))
	tj := w.Obj()
	child := childJob(t, tj, spec, 0)
	pods := ptr.Deref(child.Spec.Parallelism, 1)
	f := newFixture(t, nil, tj, utiltesting.WrapJob(child).Active(pods).Obj(), spec.ClusterRuntime("torch-distributed"))
	toRunning, delay := f.withHistograms()
	setReady := func(ready int32) {
		t.Helper()
		var job batchv1.Job
		if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(child), &job); err != nil {
			t.Fatal(err)
		}
		job.Status.Ready = ptr.To(ready)
		if err := f.client.Status().Update(context.Background(), &job); err != nil {
			t.Fatal(err)
		}
	}

	// The Job's Pods are pending: not running yet.
	setReady(0)
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatal(err)
	}
	if got := histogramOf(t, toRunning); got.Count != 0 {
		t.Fatalf("observed %+v before the Pods ran", got)
	}
	f.clock.Step(3 * time.Second)
	setReady(pods)
	for range 2 {
		if err := f.reconcile(t, "tj"); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(samples{1, 15}, histogramOf(t, toRunning)); diff != "" {
		t.Errorf("time to running (-want +got):\n%s", diff)
	}

	// A Pod replaced: not ready, then ready again.
	f.clock.Step(time.Minute)
	setReady(pods - 1)
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatal(err)
	}
	if st := f.trainJob(t, "tj").Status.JobsStatus[0]; st.Ready != 0 {
		t.Fatalf("jobsStatus %+v: want the Job not ready", st)
	}
	setReady(pods)
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatal(err)
	}
	// Replaced again, and the Job succeeds before it is ready: the write
	// that completes the TrainJob records its Pods succeeded.
	setReady(pods - 1)
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(child), &job); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Status().Update(context.Background(), utiltesting.WrapJob(&job).Succeeded(f.clock.Now()).Obj()); err != nil {
		t.Fatal(err)
	}
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatal(err)
	}
	if got := f.trainJob(t, "tj").FinishedCondition(); got == nil || got.Type != trainer.TrainJobComplete {
		t.Fatalf("finished: %+v, want Complete", got)
	}
	// A restarted manager finds it complete.
	f.restart(toRunning, delay)
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(samples{1, 15}, histogramOf(t, toRunning)); diff != "" {
		t.Errorf("time to running after Pods ran again, completed and a restart (-want +got):\n%s", diff)
	}
	if n := len(f.r.timings.running); n != 0 {
		t.Errorf("%d TrainJobs remembered once every one finished, want none", n)
	}
}

func TestTrainerRunning(t *testing.T) {
	for name, tc := range map[string]struct {
		steps []trainer.JobStatus
		want  bool
	}{
		"no Jobs":          {},
		"trainer ready":    {steps: []trainer.JobStatus{{Name: "node", Replicas: 2, Ready: 2, Trainer: true}}, want: true},
		"one of two ready": {steps: []trainer.JobStatus{{Name: "node", Replicas: 2, Ready: 1, Trainer: true}}},
		"ready or succeeded": {
			steps: []trainer.JobStatus{{Name: "node", Replicas: 2, Ready: 1, Succeeded: 1, Trainer: true}}, want: true,
		},
		"trainer still waiting": {
			steps: []trainer.JobStatus{{Name: "init", Replicas: 1, Ready: 1}, {Name: "node", Replicas: 1, Trainer: true, Waiting: true}},
		},
		"only the trainer counts": {
			steps: []trainer.JobStatus{{Name: "init", Replicas: 1, Succeeded: 1}, {Name: "node", Replicas: 1, Ready: 1, Trainer: true}, {Name: "sidecar", Replicas: 1}},
			want:  true,
		},
		"no trainer step: every step": {
			steps: []trainer.JobStatus{{Name: "a", Replicas: 1, Ready: 1}, {Name: "b", Replicas: 1}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := trainerRunning(&trainer.TrainJobStatus{JobsStatus: tc.steps}); got != tc.want {
				t.Errorf("trainerRunning = %t, want %t", got, tc.want)
			}
		})
	}
}

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

package faults

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// What a TrainJob of the workload does.
const (
	finishes  = "finishes"  // runs a few seconds and completes; TTL
	overruns  = "overruns"  // would run ten minutes; deadline, then TTL
	suspended = "suspended" // suspended and resumed by the test, completes; TTL
)

// plan is one TrainJob of the workload and what must happen to it.
type plan struct {
	name     string
	kind     string
	run      time.Duration // how long its Pods run
	ttl      int32
	deadline int64
}

func workload(n int) []plan {
	var ps []plan
	for i := range n {
		p := plan{name: fmt.Sprintf("tj-%04d", i), ttl: int32(3 + i%8)}
		switch i % 3 {
		case 0:
			p.kind, p.run = finishes, time.Duration(2+i%5)*time.Second
		case 1:
			p.kind, p.run, p.deadline, p.ttl = overruns, 10*time.Minute, int64(4+i%9), 3
		case 2:
			p.kind, p.run = suspended, 15*time.Second
		}
		ps = append(ps, p)
	}
	return ps
}

func (p plan) trainJob(ns string) *trainer.TrainJob {
	w := utiltesting.MakeTrainJob(p.name, ns).Command("torchrun", "train.py").
		Annotation("pod-complete.stage.kwok.x-k8s.io/delay", p.run.String()).TTL(p.ttl)
	if p.deadline > 0 {
		w.Deadline(p.deadline)
	}
	return w.Obj()
}

// disruption is a fault the churn runs under. It runs until ctx ends and
// says what it did.
type disruption func(ctx context.Context, t *testing.T) string

// The manager is SIGKILLed every few seconds while TrainJobs go through their
// lives (TTLs, deadlines, suspend and resume). Counted: deletions before
// finish+TTL, TrainJobs never deleted, deadlines never or early enforced,
// objects left behind. All must be 0.
func TestManagerKilledRepeatedly(t *testing.T) {
	killEvery := time.Duration(envInt("FAULTS_KILL_EVERY_SECONDS", 5)) * time.Second
	runChurn(t, envInt("FAULTS_TRAINJOBS", 60), func(ctx context.Context, t *testing.T) string {
		kills := 0
		for {
			select {
			case <-ctx.Done():
				if kills == 0 {
					t.Error("the manager was never killed: the run proves nothing")
				}
				return fmt.Sprintf("manager SIGKILLed %d times (every %s, down 1s each)", kills, killEvery)
			case <-time.After(killEvery):
			}
			if err := dev.KillManager(devOpts); err != nil {
				t.Errorf("killing the manager: %v", err)
				return "killing failed"
			}
			kills++
			time.Sleep(time.Second)
			if err := dev.RestartManager(context.Background(), devOpts); err != nil {
				t.Errorf("restarting the manager: %v", err)
				return "restarting failed"
			}
		}
	})
}

// kube-apiserver is stopped for 30s in the middle of the same workload, and
// started again: the same counts must be 0.
func TestAPIServerStopped(t *testing.T) {
	down := time.Duration(envInt("FAULTS_APISERVER_DOWN_SECONDS", 30)) * time.Second
	runChurn(t, envInt("FAULTS_TRAINJOBS", 60), func(ctx context.Context, t *testing.T) string {
		select {
		case <-ctx.Done():
			t.Error("the run ended before kube-apiserver was stopped")
			return "nothing"
		case <-time.After(8 * time.Second):
		}
		start, err := dev.StopAPIServer(devOpts)
		if err != nil {
			t.Errorf("stopping kube-apiserver: %v", err)
			return "stopping failed"
		}
		stopped := time.Now()
		time.Sleep(down)
		if err := start(); err != nil {
			t.Errorf("starting kube-apiserver: %v", err)
			return "starting failed"
		}
		return fmt.Sprintf("kube-apiserver stopped for %s, from 8s into the run", time.Since(stopped).Round(time.Second))
	})
}

// runChurn runs n TrainJobs through their lives under disrupt, and counts.
func runChurn(t *testing.T, n int, disrupt disruption) {
	ns := cluster.NewNamespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := record(ctx, t, ns)
	creations := watchJobCreations(ctx, t, ns)
	plans := workload(n)
	byName := map[string]plan{}
	for _, p := range plans {
		byName[p.name] = p
	}

	start := time.Now()
	for _, p := range plans {
		if err := cluster.Client.Create(ctx, p.trainJob(ns)); err != nil {
			t.Fatalf("creating %s: %v", p.name, err)
		}
	}
	t.Logf("created %d TrainJobs in %s", n, time.Since(start).Round(time.Millisecond))

	faultCtx, stopFault := context.WithCancel(ctx)
	faultDone := make(chan string, 1)
	go func() { faultDone <- disrupt(faultCtx, t) }()

	// Suspend the 'suspended' ones once they run, resume them 3s later.
	suspendedAt := map[string]time.Time{}
	resumed := map[string]bool{}
	deadline := time.Now().Add(time.Duration(n)*300*time.Millisecond + 3*time.Minute)
	for time.Now().Before(deadline) {
		snap := rec.snapshot()
		gone := 0
		for _, h := range snap {
			if !h.deletedAt.IsZero() {
				gone++
				continue
			}
			p := byName[h.last.Name]
			if p.kind != suspended || resumed[p.name] || h.last.FinishedCondition() != nil {
				continue
			}
			at, done := suspendedAt[p.name]
			// The webhook refuses writes while the manager is down: a
			// refused suspend or resume is tried again on the next pass.
			switch {
			case !done && h.last.Status.StartTime != nil:
				if cluster.SetSuspend(ctx, ns, p.name, true) == nil {
					suspendedAt[p.name] = time.Now()
				}
			case done && time.Since(at) > 3*time.Second:
				resumed[p.name] = cluster.SetSuspend(ctx, ns, p.name, false) == nil
			}
		}
		if gone == n {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	stopFault()
	fault := <-faultDone
	if err := dev.RestartManager(ctx, devOpts); err != nil {
		t.Fatalf("restarting the manager for the end of the run: %v", err)
	}
	elapsed := time.Since(start)

	// Count.
	var early, neverDeleted, deadlineMissed, deadlineEarly []string
	cycles := 0
	var ttlLate, requestLate, deadlineLate []time.Duration
	for _, h := range rec.snapshot() {
		p := byName[h.last.Name]
		done := h.last.FinishedCondition()
		if h.deletedAt.IsZero() {
			neverDeleted = append(neverDeleted, p.name)
			continue
		}
		if done == nil {
			early = append(early, p.name+" (deleted unfinished)")
			continue
		}
		due := done.LastTransitionTime.Add(time.Duration(p.ttl) * time.Second)
		if dt := h.last.DeletionTimestamp; dt == nil || dt.Time.Before(due) {
			early = append(early, fmt.Sprintf("%s (delete requested %v, due %s)", p.name, dt, due.Format(time.RFC3339)))
		} else {
			ttlLate = append(ttlLate, h.deletedAt.Sub(due))
			requestLate = append(requestLate, dt.Sub(due))
		}
		switch p.kind {
		case overruns:
			if done.Reason != trainer.TrainJobDeadlineExceededReason {
				deadlineMissed = append(deadlineMissed, fmt.Sprintf("%s (%s)", p.name, done.Reason))
				continue
			}
			due := h.last.Status.StartTime.Add(time.Duration(p.deadline) * time.Second)
			if done.LastTransitionTime.Time.Before(due) {
				deadlineEarly = append(deadlineEarly, p.name)
			}
			deadlineLate = append(deadlineLate, done.LastTransitionTime.Sub(due))
		case suspended:
			if resumed[p.name] {
				cycles++
			}
		}
	}
	leftovers := audit(ctx, t, ns)
	rerun, jobs := creations.twice()

	t.Logf("faults: %d TrainJobs (%d finish, %d overrun a deadline, %d to suspend and resume) in %s; %s",
		n, count(plans, finishes), count(plans, overruns), count(plans, suspended), elapsed.Round(time.Second), fault)
	t.Logf("suspend/resume cycles done: %d of %d", cycles, count(plans, suspended))
	t.Logf("deleted before finish+TTL: %d", len(early))
	t.Logf("never deleted: %d", len(neverDeleted))
	t.Logf("deadlines never enforced: %d; enforced early: %d", len(deadlineMissed), len(deadlineEarly))
	t.Logf("lateness of TTL delete requests (deletionTimestamp - due, 1s resolution): %s", percentiles(requestLate))
	t.Logf("lateness of TTL deletions, children first (gone from the watch - due): %s", percentiles(ttlLate))
	t.Logf("lateness of deadlines (Failed time - due, 1s resolution): %s", percentiles(deadlineLate))
	t.Logf("child Jobs created twice (work re-run): %d of %d", len(rerun), jobs)
	t.Logf("audit: %d objects left behind", len(leftovers))
	for what, names := range map[string][]string{
		"deleted before their time": early, "never deleted": neverDeleted, "deadline not enforced": deadlineMissed,
		"deadline enforced early": deadlineEarly, "left behind": leftovers, "child Jobs created twice": rerun,
	} {
		if len(names) > 0 {
			t.Errorf("%s: %v", what, names)
		}
	}
}

func count(ps []plan, kind string) int {
	return len(slices.DeleteFunc(slices.Clone(ps), func(p plan) bool { return p.kind != kind }))
}

// audit lists what is left in ns once every TrainJob is gone: child Jobs,
// Pods and Services, and anything held by the tracking finalizer.
func audit(ctx context.Context, t *testing.T, ns string) []string {
	t.Helper()
	var left []string
	var tjs trainer.TrainJobList
	var jobs batchv1.JobList
	var pods corev1.PodList
	var svcs corev1.ServiceList
	// Give foreground deletions a moment to finish.
	for range 60 {
		left = left[:0]
		for _, l := range []client.ObjectList{&tjs, &jobs, &pods, &svcs} {
			if err := cluster.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range tjs.Items {
			left = append(left, "TrainJob "+o.Name)
		}
		for _, o := range jobs.Items {
			what := "Job " + o.Name
			if slices.Contains(o.Finalizers, trainer.JobTrackingFinalizer) {
				what += " (held by " + trainer.JobTrackingFinalizer + ")"
			}
			left = append(left, what)
		}
		for _, o := range pods.Items {
			left = append(left, "Pod "+o.Name)
		}
		for _, o := range svcs.Items {
			left = append(left, "Service "+o.Name)
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(time.Second)
	}
	return left
}

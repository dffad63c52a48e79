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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

// timings observes, from the status writes that record them, how long a
// TrainJob took to run and how late its active deadline was enforced:
// once per TrainJob each.
//
// The deadline's delay is observed by the write that fails the TrainJob
// with DeadlineExceeded. That write is made once, whichever process makes
// it (it is an update of the version the decision was made on), so the
// delay is observed once across restarts and leader changes; a deadline
// that fell while no manager ran is enforced, and observed, by the next
// leader, late by the downtime.
//
// The time to running is observed by the write that first records every
// Pod of the trainer step running. What came before is not in the status,
// so this process remembers which TrainJobs it observed: Pods that stop and
// run again (a suspension, a Pod replaced) do not count again. A restarted
// manager has forgotten: a TrainJob whose Pods stop and run again under it
// is observed a second time, and one whose Pods came up while no manager
// ran is observed when the next leader first records it, later by the
// downtime. A TrainJob restarted by its failure policy is not observed
// again.
type timings struct {
	toRunning, deadlineDelay prometheus.Observer

	mu sync.Mutex
	// running are the unfinished TrainJobs whose time to running was
	// observed.
	running map[types.NamespacedName]types.UID
}

func newTimings(toRunning, deadlineDelay prometheus.Observer) *timings {
	return &timings{toRunning: toRunning, deadlineDelay: deadlineDelay, running: map[types.NamespacedName]types.UID{}}
}

// observe records what the status write from old to cur, made at now,
// shows for the first time.
func (t *timings) observe(old, cur *trainer.TrainJob, now time.Time) {
	if c := finishedBy(old, cur); c != nil && c.Reason == trainer.TrainJobDeadlineExceededReason {
		// The deadline the write enforced is the one old ran under.
		if due, ok := lifecycle.ActiveDeadline(old); ok {
			t.deadlineDelay.Observe(max(0, now.Sub(due).Seconds()))
		}
	}
	key := types.NamespacedName{Namespace: cur.Namespace, Name: cur.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	seen, finished := t.running[key] == cur.UID, cur.FinishedCondition() != nil
	if finished {
		// A finished TrainJob's Pods do not run again: nothing more to
		// remember of it.
		delete(t.running, key)
	}
	if seen || cur.Status.Restarts > 0 || trainerRunning(&old.Status) || !trainerRunning(&cur.Status) {
		return
	}
	if !finished {
		t.running[key] = cur.UID
	}
	t.toRunning.Observe(max(0, now.Sub(cur.CreationTimestamp.Time).Seconds()))
}

// forget drops a TrainJob that is gone.
func (t *timings) forget(key types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.running, key)
}

// trainerRunning reports whether status says every Job of the trainer step
// (of every step, if none is the trainer's) has its Pods running or
// succeeded: the Kubeflow SDK's rule for a running TrainJob, by the
// counts of jobsStatus.
func trainerRunning(status *trainer.TrainJobStatus) bool {
	trainerStep := false
	for _, js := range status.JobsStatus {
		trainerStep = trainerStep || js.Trainer
	}
	n := 0
	for _, js := range status.JobsStatus {
		if trainerStep && !js.Trainer {
			continue
		}
		if js.Waiting || js.Ready+js.Succeeded < js.Replicas {
			return false
		}
		n++
	}
	return n > 0
}

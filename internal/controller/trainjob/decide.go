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
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// decision is what a reconcile decides from what it observed: the status
// the TrainJob should have, and what to do. decide and settle make it
// without reading or writing anything.
type decision struct {
	// next is the TrainJob with its status as decided.
	next *trainer.TrainJob
	// deleting is set when the TrainJob is being deleted: its children's
	// outcomes no longer matter, and they are all released.
	deleting bool
	// finished is set when the TrainJob has finished, as stored or by
	// this decision.
	finished bool
	// children are the TrainJob's Jobs: those observed, then those the
	// create phase created.
	children []child
	// create is what the create phase is to do; nil once the TrainJob has
	// finished or while it is being deleted.
	create *creation
	// deadline is when the active deadline falls, zero if none runs.
	deadline time.Time
	// retryAfter is set when the TrainJob waits on something no watch
	// event reports.
	retryAfter time.Duration
	// restart is set when the failure policy restarts the TrainJob's Jobs:
	// the event that says why. Every child observed is then of the attempt
	// before, to delete once the restart is stored.
	restart *restartEvent
	// previous are the children of the attempt before a restart decided
	// here.
	previous []*batchv1.Job
	// earlier are the Jobs of earlier restart attempts observed, still
	// being deleted.
	earlier []*batchv1.Job
	// createdBefore is how many Jobs the stored status says were created.
	createdBefore int32
}

// createdMessage is the message of the event of Jobs created, "" unless
// the status decided says more Jobs were created than the status stored:
// by this reconcile, or by one whose status write failed.
func (d *decision) createdMessage() string {
	if d.create == nil || createdJobs(&d.next.Status) <= d.createdBefore {
		return ""
	}
	return createdMessage(d.next, d.create.waitingFor)
}

// running reports whether the TrainJob runs: it neither finished nor is
// being deleted.
func (d *decision) running() bool { return !d.finished && !d.deleting }

// decide records in the TrainJob's status the outcome of every child that
// finished or went away, decides whether the TrainJob finished, and, while
// it runs, what to create.
func decide(tj *trainer.TrainJob, obs *observed, now metav1.Time) *decision {
	d := &decision{next: tj.DeepCopy(), deleting: tj.DeletionTimestamp != nil, children: obs.children, earlier: obs.previous,
		createdBefore: createdJobs(&tj.Status)}
	if d.deleting {
		return d
	}
	d.finished = tj.FinishedCondition() != nil
	failures := append(recordOutcomes(&d.next.Status, obs.children, d.finished), recordVanished(&d.next.Status, obs.vanished, now.Time)...)
	var fail *failure
	if len(failures) > 0 {
		fail = &failures[0].failure
	}
	if !d.finished {
		// startTime first: the failure policy and the deadline read it.
		settleStart(d.next, now)
	}
	if !d.finished && len(failures) > 0 && d.next.Status.FailurePolicy != nil {
		fail, d.restart = applyFailurePolicy(d.next, failures, now)
	}
	if !d.finished {
		if fail == nil {
			// A deadline that passed while nothing looked (the manager
			// down) fails the TrainJob before anything more is created.
			fail, d.deadline = activeDeadline(d.next, now.Time)
		}
		d.finished = decideFinished(d.next, fail, now)
	}
	if d.restart != nil {
		// Every child observed is of the attempt before now.
		d.previous, d.children = jobsOf(d.children), nil
	}
	if d.running() {
		d.create = planCreation(d.next, obs, d.restart != nil)
	}
	return d
}

// settle completes the decision with what the create phase did: the Created
// condition, the Suspended condition, when the active deadline falls, and
// the counts of jobsStatus. It returns the creation errors worth retrying.
func (d *decision) settle(now metav1.Time) error {
	if d.deleting {
		return nil
	}
	var err error
	if d.running() {
		d.children = append(d.children[:len(d.children):len(d.children)], d.create.created...)
		d.retryAfter, err = settleCreated(d.next, d.create, now)
		decideSuspend(d.next, d.children, append(slices.Clip(d.earlier), d.previous...), now)
		// decide failed the TrainJob if its deadline had passed.
		_, d.deadline = activeDeadline(d.next, now.Time)
	}
	updateJobsStatus(&d.next.Status, d.children)
	return err
}

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

package cli

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

// state is a TrainJob's state in a word (lifecycle.State), with the reason
// when it says more. A TrainJob MultiKueue dispatched has the state of its
// copy on the worker cluster, whose status Kueue mirrors.
func state(tj *trainer.TrainJob) string {
	if lifecycle.ManagedElsewhere(tj) && !lifecycle.DispatchedByMultiKueue(tj) {
		return "ManagedElsewhere"
	}
	if c := tj.FinishedCondition(); c != nil && c.Type == trainer.TrainJobFailed {
		return "Failed (" + c.Reason + ")"
	}
	if tj.DeletionTimestamp != nil && tj.FinishedCondition() == nil {
		return "Deleting"
	}
	s := lifecycle.State(tj)
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobCreated); s == trainer.TrainJobStateCreated && c != nil && c.Status == metav1.ConditionFalse {
		return s + " (" + c.Reason + ")"
	}
	return s
}

// deadlineIn says when the active deadline falls.
func deadlineIn(tj *trainer.TrainJob, now time.Time) string {
	due, ok := lifecycle.ActiveDeadline(tj)
	if !ok {
		if lifecycle.DeadlinePaused(tj) {
			return "paused"
		}
		return "-"
	}
	return until(due, now)
}

// deletedIn says when the TrainJob is deleted, and by which rule.
func deletedIn(tj *trainer.TrainJob, retention *configv1alpha1.TrainJobRetentionPolicy, now time.Time) string {
	exp := lifecycle.ExpiryOf(tj, retention)
	if exp == nil {
		return "-"
	}
	return fmt.Sprintf("%s (%s)", until(exp.At, now), exp.Policy)
}

// until is how long until t, or "now" once it passed.
func until(t, now time.Time) string {
	if !t.After(now) {
		return "now"
	}
	return duration.HumanDuration(t.Sub(now))
}

// ago is how long ago t was, or "-" for no time.
func ago(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

// progress is how far along the trainer last reported it was, "-" if it
// has not said.
func progress(tj *trainer.TrainJob) string {
	if s := tj.Status.TrainerStatus; s != nil && s.ProgressPercentage != nil {
		return fmt.Sprintf("%d%%", *s.ProgressPercentage)
	}
	return "-"
}

// eta is how long the trainer last said it had left, counted down from
// when it said so; "-" once the TrainJob finished, or if it has not said.
func eta(tj *trainer.TrainJob, now time.Time) string {
	s := tj.Status.TrainerStatus
	if s == nil || s.EstimatedRemainingSeconds == nil || tj.FinishedCondition() != nil {
		return "-"
	}
	left := time.Duration(*s.EstimatedRemainingSeconds)*time.Second - now.Sub(s.LastUpdatedTime.Time)
	return duration.HumanDuration(max(0, left))
}

// nodes is the number of trainer nodes the TrainJob asks for, or "-" when
// it takes the runtime's.
func nodes(tj *trainer.TrainJob) string {
	if t := tj.Spec.Trainer; t != nil && t.NumNodes != nil {
		return fmt.Sprint(*t.NumNodes)
	}
	return "-"
}

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

package lifecycle

import (
	"math"
	"time"

	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// ActiveDeadline returns when a running TrainJob reaches its active deadline
// (KEP-2899, with KEP-2322's rule for suspended Jobs): status.startTime,
// which is reset on every resume, plus spec.activeDeadlineSeconds. It is
// false when the deadline does not run here: none set, not started,
// suspended, finished, beyond any clock, or managed by another controller.
func ActiveDeadline(tj *trainer.TrainJob) (time.Time, bool) {
	ads := tj.Spec.ActiveDeadlineSeconds
	if ads == nil || tj.Status.StartTime == nil || ptr.Deref(tj.Spec.Suspend, false) || tj.FinishedCondition() != nil || ManagedElsewhere(tj) {
		return time.Time{}, false
	}
	return deadlineOf(tj.Status.StartTime.Time, *ads)
}

// DeadlinePaused reports whether a TrainJob has an active deadline that
// does not run because it is suspended: it counts from zero again when the
// TrainJob is resumed.
func DeadlinePaused(tj *trainer.TrainJob) bool {
	return tj.Spec.ActiveDeadlineSeconds != nil && ptr.Deref(tj.Spec.Suspend, false) && tj.FinishedCondition() == nil && !ManagedElsewhere(tj)
}

// maxDeadlineSeconds is the largest deadline a time.Duration holds.
const maxDeadlineSeconds = math.MaxInt64 / int64(time.Second)

// deadlineOf returns start + seconds, and false if that is not representable.
func deadlineOf(start time.Time, seconds int64) (time.Time, bool) {
	if seconds > maxDeadlineSeconds {
		return time.Time{}, false
	}
	due := start.Add(time.Duration(seconds) * time.Second)
	if due.Before(start) {
		return time.Time{}, false
	}
	return due, true
}

package trainjob

import (
	"fmt"
	"math"
	"time"

	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// activeDeadline enforces spec.activeDeadlineSeconds (KEP-2899, with
// KEP-2322's rule for suspended Jobs). The deadline counts from
// status.startTime, which is reset on every resume; a suspended TrainJob has
// none. It returns the failure once the deadline has passed, and otherwise
// when it falls (the zero time if there is no deadline to wait for).
func activeDeadline(tj *trainer.TrainJob, now time.Time) (*failure, time.Time) {
	due, ok := ActiveDeadline(tj)
	if !ok {
		return nil, time.Time{}
	}
	if now.Before(due) {
		return nil, due
	}
	return &failure{
		reason: trainer.TrainJobDeadlineExceededReason,
		message: fmt.Sprintf("The TrainJob was active longer than its activeDeadlineSeconds (%ds since %s)",
			*tj.Spec.ActiveDeadlineSeconds, tj.Status.StartTime.UTC().Format(time.RFC3339)),
	}, due
}

// ActiveDeadline returns when a running TrainJob reaches its active
// deadline, and false if the deadline does not run: none set, not started,
// suspended, finished, or beyond any clock.
func ActiveDeadline(tj *trainer.TrainJob) (time.Time, bool) {
	ads := tj.Spec.ActiveDeadlineSeconds
	if ads == nil || tj.Status.StartTime == nil || ptr.Deref(tj.Spec.Suspend, false) || tj.FinishedCondition() != nil {
		return time.Time{}, false
	}
	return deadlineOf(tj.Status.StartTime.Time, *ads)
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

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
	"fmt"
	"time"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// TTLAfterFinished is the expiry set by spec.ttlSecondsAfterFinished
// (KEP-592, KEP-2899): the finish time, which is the lastTransitionTime of
// the Complete or Failed condition, plus the TTL. It is nil for a TrainJob
// that has not finished or has no TTL. ExpiryOf says whether it applies.
func TTLAfterFinished(tj *trainer.TrainJob) *Expiry {
	ttl := tj.Spec.TTLSecondsAfterFinished
	done := tj.FinishedCondition()
	if ttl == nil || done == nil {
		return nil
	}
	d := time.Duration(*ttl) * time.Second
	return &Expiry{
		Since:  done.LastTransitionTime.Time,
		At:     done.LastTransitionTime.Add(d),
		Policy: PolicyTTL,
		Reason: fmt.Sprintf("%s and its ttlSecondsAfterFinished of %ds expired", describe(done), *ttl),
	}
}

// JobsExpiry is when the Jobs of a finished TrainJob are deleted, as a
// JobSet's are by its ttlSecondsAfterFinished: the finish time plus the
// runtime template's ttlSecondsAfterFinished, pinned in
// status.jobsTTLSecondsAfterFinished. False for a TrainJob that has not
// finished, whose runtime sets none, or that another controller runs.
func JobsExpiry(tj *trainer.TrainJob) (time.Time, bool) {
	ttl := tj.Status.JobsTTLSecondsAfterFinished
	done := tj.FinishedCondition()
	if ttl == nil || done == nil || ManagedElsewhere(tj) {
		return time.Time{}, false
	}
	return done.LastTransitionTime.Add(time.Duration(*ttl) * time.Second), true
}

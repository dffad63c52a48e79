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
	"fmt"
	"time"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

// activeDeadline enforces spec.activeDeadlineSeconds when
// lifecycle.ActiveDeadline says it falls. It returns the failure once the deadline has passed, and otherwise
// when it falls (the zero time if there is no deadline to wait for).
func activeDeadline(tj *trainer.TrainJob, now time.Time) (*failure, time.Time) {
	due, ok := lifecycle.ActiveDeadline(tj)
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

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
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// State is a TrainJob's state in one word, as status.state stores it for
// kubectl's State column and trainctl shows it: Complete or Failed once
// finished; Suspended once suspended with no Pod left, Suspending until
// then; Running once Jobs of it were created (a replicated Job in
// jobsStatus waits no more, or a restart replaces them) and none is
// refused; Created before, or while one cannot be created (Created=False
// says why).
func State(tj *trainer.TrainJob) string {
	if c := tj.FinishedCondition(); c != nil {
		if c.Type == trainer.TrainJobFailed {
			return trainer.TrainJobStateFailed
		}
		return trainer.TrainJobStateComplete
	}
	if ptr.Deref(tj.Spec.Suspend, false) {
		if meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobSuspended) {
			return trainer.TrainJobStateSuspended
		}
		return trainer.TrainJobStateSuspending
	}
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobCreated); c != nil {
		// True: set by versions before, once the Jobs existed.
		if c.Status == metav1.ConditionTrue {
			return trainer.TrainJobStateRunning
		}
		return trainer.TrainJobStateCreated
	}
	if tj.Status.Restarts > 0 || slices.ContainsFunc(tj.Status.JobsStatus, func(js trainer.JobStatus) bool { return !js.Waiting }) {
		return trainer.TrainJobStateRunning
	}
	return trainer.TrainJobStateCreated
}

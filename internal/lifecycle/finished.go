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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// IsFinished reports whether the TrainJob is Complete or Failed, and when it
// became so: the lastTransitionTime of that condition, from which its TTL
// and retention count. Both conditions are terminal.
func IsFinished(tj *trainer.TrainJob) (bool, metav1.Time) {
	if c := tj.FinishedCondition(); c != nil {
		return true, c.LastTransitionTime
	}
	return false, metav1.Time{}
}

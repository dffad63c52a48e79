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

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// conditionOrder is the order conditions are kept in. The State printer
// column shows the first condition that is True, so the most telling state
// comes first.
var conditionOrder = []string{
	trainer.TrainJobFailed,
	trainer.TrainJobComplete,
	trainer.TrainJobSuspended,
	trainer.TrainJobCreated,
}

// setCondition sets a condition of tj with meta.SetStatusCondition, for the
// generation of tj it was decided on, and keeps conditions in
// conditionOrder. The transition time, now by the controller's clock,
// changes only when the status does.
func setCondition(tj *trainer.TrainJob, c metav1.Condition, now metav1.Time) {
	c.ObservedGeneration, c.LastTransitionTime = tj.Generation, now
	if !meta.SetStatusCondition(&tj.Status.Conditions, c) {
		return
	}
	slices.SortStableFunc(tj.Status.Conditions, func(a, b metav1.Condition) int {
		return rank(a.Type) - rank(b.Type)
	})
}

func rank(t string) int {
	if i := slices.Index(conditionOrder, t); i >= 0 {
		return i
	}
	return len(conditionOrder)
}

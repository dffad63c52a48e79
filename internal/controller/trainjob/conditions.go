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

// setCondition sets a condition, keeping conditions in conditionOrder. The
// transition time changes only when the status does.
func setCondition(conds *[]metav1.Condition, c metav1.Condition, now metav1.Time) {
	if i := slices.IndexFunc(*conds, func(e metav1.Condition) bool { return e.Type == c.Type }); i >= 0 {
		old := &(*conds)[i]
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.ObservedGeneration == c.ObservedGeneration {
			return
		}
		if old.Status != c.Status {
			old.LastTransitionTime = now
		}
		old.Status, old.Reason, old.Message, old.ObservedGeneration = c.Status, c.Reason, c.Message, c.ObservedGeneration
	} else {
		c.LastTransitionTime = now
		*conds = append(*conds, c)
	}
	slices.SortStableFunc(*conds, func(a, b metav1.Condition) int {
		return rank(a.Type) - rank(b.Type)
	})
}

func rank(t string) int {
	if i := slices.Index(conditionOrder, t); i >= 0 {
		return i
	}
	return len(conditionOrder)
}

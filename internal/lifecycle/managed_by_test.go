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
	"testing"

	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestManagedBy(t *testing.T) {
	cases := map[string]struct {
		managedBy        *string
		wantElsewhere    bool
		wantKnownManager bool
	}{
		"unset: this controller":   {wantKnownManager: true},
		"this controller":          {managedBy: ptr.To(trainer.DefaultManagedBy), wantKnownManager: true},
		"MultiKueue":               {managedBy: ptr.To(MultiKueue), wantElsewhere: true, wantKnownManager: true},
		"a typo: no one runs it":   {managedBy: ptr.To("trainer.kubeflow.org/trainjob-controler"), wantElsewhere: true},
		"another controller named": {managedBy: ptr.To("example.com/scheduler"), wantElsewhere: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj := utiltesting.MakeTrainJob("tj", "ns").Obj()
			tj.Spec.ManagedBy = tc.managedBy
			if got := ManagedElsewhere(tj); got != tc.wantElsewhere {
				t.Errorf("ManagedElsewhere = %v, want %v", got, tc.wantElsewhere)
			}
			if tc.managedBy != nil {
				if got := KnownManager(*tc.managedBy); got != tc.wantKnownManager {
					t.Errorf("KnownManager = %v, want %v", got, tc.wantKnownManager)
				}
			}
		})
	}
}

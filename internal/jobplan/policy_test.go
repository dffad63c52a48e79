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

package jobplan

import (
	"testing"

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestPolicyOf(t *testing.T) {
	cases := map[string]struct {
		spec *utiltesting.RuntimeSpecWrapper
		want string
	}{
		"torch":                {spec: utiltesting.MakeRuntimeSpec().Torch(), want: "torch"},
		"numNodes only: plain": {spec: utiltesting.MakeRuntimeSpec().NumNodes(2), want: "plain"},
		"no mlPolicy: plain":   {spec: utiltesting.MakeRuntimeSpec(), want: "plain"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := policyOf(tc.spec.Obj()).Name(); got != tc.want {
				t.Errorf("policy %q, want %q", got, tc.want)
			}
		})
	}
}

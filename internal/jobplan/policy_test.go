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
	"slices"
	"testing"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// frameworkPlugin is an ML framework's plugin.
type frameworkPlugin interface {
	Plugin
	selected(spec *trainer.TrainingRuntimeSpec) bool
}

// Each framework's plugin acts on the runtimes that select it, and none on
// a runtime that selects no framework.
func TestFrameworkSelected(t *testing.T) {
	cases := map[string]struct {
		spec *trainer.TrainingRuntimeSpec
		want []string
	}{
		"torch":         {spec: utiltesting.MakeRuntimeSpec().Torch().Obj(), want: []string{"torch"}},
		"mpi":           {spec: &trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{MPI: &trainer.MPIMLPolicySource{}}}, want: []string{"mpi"}},
		"jax":           {spec: &trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{JAX: &trainer.JAXMLPolicySource{}}}, want: []string{"jax"}},
		"xgboost":       {spec: &trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{XGBoost: &trainer.XGBoostMLPolicySource{}}}, want: []string{"xgboost"}},
		"flux":          {spec: &trainer.TrainingRuntimeSpec{MLPolicy: &trainer.MLPolicy{Flux: &trainer.FluxMLPolicySource{}}}, want: []string{"flux"}},
		"numNodes only": {spec: utiltesting.MakeRuntimeSpec().NumNodes(2).Obj()},
		"no mlPolicy":   {spec: utiltesting.MakeRuntimeSpec().Obj()},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, p := range plugins {
				if f, ok := p.(frameworkPlugin); ok && f.selected(tc.spec) {
					got = append(got, f.Name())
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("plugins %q act, want %q", got, tc.want)
			}
		})
	}
}

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

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// Only changes to the Pods' scheduling directives leave a Job as
// Kubernetes lets an existing Job change.
func TestChangedBeyondSchedulingDirectives(t *testing.T) {
	rt := clusterRuntime(utiltesting.MakeRuntimeSpec().Torch())
	build := func(patch *trainer.RuntimePatch) *Plan {
		t.Helper()
		tj := utiltesting.MakeTrainJob("tj", "ns").NumNodes(2).Obj()
		if patch != nil {
			tj.Spec.RuntimePatches = []trainer.RuntimePatch{*patch}
		}
		plan, err := Build(tj, rt)
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}
	nodeAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
	}}}
	podAffinity := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: corev1.LabelHostname}}}}
	cases := map[string]struct {
		patch trainer.RuntimePatch
		want  []string
	}{
		"a flavor: labels, annotations, node selector, tolerations, scheduling gates": {
			patch: podPatch(trainer.KueueManager, "node",
				&trainer.PatchMetadata{Labels: map[string]string{"l": "1"}, Annotations: map[string]string{"a": "1"}},
				&trainer.PodSpecPatch{
					NodeSelector:    map[string]string{"pool": "a"},
					Tolerations:     []corev1.Toleration{{Key: "pool", Operator: corev1.TolerationOpExists}},
					SchedulingGates: []corev1.PodSchedulingGate{{Name: "gate"}},
				}),
		},
		"node affinity": {
			patch: podPatch("m", "node", nil, &trainer.PodSpecPatch{Affinity: nodeAffinity}),
		},
		"Pod anti-affinity": {
			patch: podPatch("m", "node", nil, &trainer.PodSpecPatch{Affinity: podAffinity}),
			want:  []string{"tj-node-0"},
		},
		"a service account": {
			patch: podPatch("m", "node", nil, &trainer.PodSpecPatch{ServiceAccountName: ptr.To("sa")}),
			want:  []string{"tj-node-0"},
		},
	}
	prev := build(nil)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ChangedBeyondSchedulingDirectives(prev, build(&tc.patch))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("changed Jobs (-want +got):\n%s", diff)
			}
		})
	}
}

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

package webhook

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestDefaulterKeepsFieldsOfOurs(t *testing.T) {
	stored := utiltesting.MakeTrainJob("tj", "ns").TTL(600).Obj()
	stored.Spec.Labels = map[string]string{"team": "a"}
	stored.Spec.Annotations = map[string]string{"note": "a"}
	stored.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{{
		TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
		Spec:       &trainer.PodTemplateSpecOverride{NodeSelector: map[string]string{"pool": "a"}},
	}}
	// What a client built on Kubeflow's types sends back: the same
	// TrainJob, suspended, without the fields Kubeflow does not have.
	kubeflowTyped := func() *trainer.TrainJob {
		tj := stored.DeepCopy()
		tj.Spec.Suspend = ptr.To(true)
		tj.Spec.TTLSecondsAfterFinished, tj.Spec.Labels, tj.Spec.Annotations = nil, nil, nil
		tj.Spec.PodTemplateOverrides = nil
		return tj
	}
	cases := map[string]struct {
		op           admissionv1.Operation
		fieldManager string
		update       *trainer.TrainJob
		want         *trainer.TrainJob
	}{
		"an update without a field manager keeps them": {
			op: admissionv1.Update, update: kubeflowTyped(),
			want: func() *trainer.TrainJob {
				tj := stored.DeepCopy()
				tj.Spec.Suspend = ptr.To(true)
				return tj
			}(),
		},
		"kubectl removes them on purpose": {
			op: admissionv1.Update, fieldManager: "kubectl-edit", update: kubeflowTyped(), want: kubeflowTyped(),
		},
		"a changed value is the client's": {
			op: admissionv1.Update, update: utiltesting.MakeTrainJob("tj", "ns").TTL(60).Obj(),
			want: func() *trainer.TrainJob {
				tj := utiltesting.MakeTrainJob("tj", "ns").TTL(60).Obj()
				tj.Spec.Labels, tj.Spec.Annotations = stored.Spec.Labels, stored.Spec.Annotations
				tj.Spec.PodTemplateOverrides = stored.Spec.PodTemplateOverrides
				return tj
			}(),
		},
		"a creation is left alone": {
			op: admissionv1.Create, update: kubeflowTyped(), want: kubeflowTyped(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old, err := json.Marshal(stored)
			if err != nil {
				t.Fatal(err)
			}
			opts, err := json.Marshal(metav1.UpdateOptions{FieldManager: tc.fieldManager})
			if err != nil {
				t.Fatal(err)
			}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: tc.op, Name: "tj", Namespace: "ns",
				OldObject: runtime.RawExtension{Raw: old}, Options: runtime.RawExtension{Raw: opts},
			}}
			if tc.op == admissionv1.Create {
				req.OldObject.Raw = nil
			}
			got := tc.update.DeepCopy()
			if err := NewTrainJobDefaulter(testingclock.NewFakePassiveClock(time.Now())).Default(admission.NewContextWithRequest(context.Background(), req), got); err != nil {
				t.Fatalf("Default: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("TrainJob after the webhook (-want +got):\n%s", diff)
			}
		})
	}
}

// Each runtime patch records when it was last written, as Kubeflow v2.3's
// webhook does.
func TestDefaulterStampsRuntimePatches(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now := metav1.NewTime(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	patch := func(manager string, at *metav1.Time, pool string) trainer.RuntimePatch {
		p := flavorPatch(manager, map[string]string{"pool": pool})
		p.Time = at
		return p
	}
	cases := map[string]struct {
		old        []trainer.RuntimePatch
		patches    []trainer.RuntimePatch
		want       []trainer.RuntimePatch
		withoutOld bool
	}{
		"created without a time: now": {
			withoutOld: true,
			patches:    []trainer.RuntimePatch{patch("example.com/a", nil, "a")},
			want:       []trainer.RuntimePatch{patch("example.com/a", &now, "a")},
		},
		"created with a time: kept": {
			withoutOld: true,
			patches:    []trainer.RuntimePatch{patch("example.com/a", &then, "a")},
			want:       []trainer.RuntimePatch{patch("example.com/a", &then, "a")},
		},
		"unchanged, sent back without its time: the old time": {
			old:     []trainer.RuntimePatch{patch("example.com/a", &then, "a")},
			patches: []trainer.RuntimePatch{patch("example.com/a", nil, "a")},
			want:    []trainer.RuntimePatch{patch("example.com/a", &then, "a")},
		},
		"changed, with the old time: now": {
			old:     []trainer.RuntimePatch{patch("example.com/a", &then, "a")},
			patches: []trainer.RuntimePatch{patch("example.com/a", &then, "b")},
			want:    []trainer.RuntimePatch{patch("example.com/a", &now, "b")},
		},
		"a second manager's patch added: only it is now": {
			old:     []trainer.RuntimePatch{patch("example.com/a", &then, "a")},
			patches: []trainer.RuntimePatch{patch("example.com/a", &then, "a"), patch(trainer.KueueManager, nil, "b")},
			want:    []trainer.RuntimePatch{patch("example.com/a", &then, "a"), patch(trainer.KueueManager, &now, "b")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Name: "tj", Namespace: "ns"}}
			if !tc.withoutOld {
				old := utiltesting.MakeTrainJob("tj", "ns").Obj()
				old.Spec.RuntimePatches = tc.old
				raw, err := json.Marshal(old)
				if err != nil {
					t.Fatal(err)
				}
				req.Operation, req.OldObject.Raw = admissionv1.Update, raw
			}
			got := utiltesting.MakeTrainJob("tj", "ns").Obj()
			got.Spec.RuntimePatches = tc.patches
			if err := NewTrainJobDefaulter(testingclock.NewFakePassiveClock(now.Time)).Default(admission.NewContextWithRequest(context.Background(), req), got); err != nil {
				t.Fatalf("Default: %v", err)
			}
			if diff := cmp.Diff(tc.want, got.Spec.RuntimePatches); diff != "" {
				t.Errorf("runtime patches after the webhook (-want +got):\n%s", diff)
			}
		})
	}
}

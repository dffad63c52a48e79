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

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestFieldKeeper(t *testing.T) {
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
			if err := (FieldKeeper{}).Default(admission.NewContextWithRequest(context.Background(), req), got); err != nil {
				t.Fatalf("Default: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("TrainJob after the webhook (-want +got):\n%s", diff)
			}
		})
	}
}

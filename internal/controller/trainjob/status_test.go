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
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// Conditions say which generation they were decided on, keep the state
// first, and change their transition time only when their status changes.
func TestSetCondition(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", testNS).Obj()
	tj.Generation = 3
	setCondition(tj, metav1.Condition{Type: trainer.TrainJobCreated, Status: metav1.ConditionTrue, Reason: "A"}, metav1.NewTime(earlier))
	setCondition(tj, metav1.Condition{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: "B"}, metav1.NewTime(earlier))
	tj.Generation = 4
	setCondition(tj, metav1.Condition{Type: trainer.TrainJobCreated, Status: metav1.ConditionTrue, Reason: "C", Message: "m"}, metav1.NewTime(now))
	want := []metav1.Condition{
		{Type: trainer.TrainJobFailed, Status: metav1.ConditionTrue, Reason: "B", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(earlier)},
		{Type: trainer.TrainJobCreated, Status: metav1.ConditionTrue, Reason: "C", Message: "m", ObservedGeneration: 4, LastTransitionTime: metav1.NewTime(earlier)},
	}
	if diff := cmp.Diff(want, tj.Status.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
}

// The event of Jobs created is recorded once the status that tells it is
// stored, even if the write of the reconcile that created them conflicted.
func TestCreatedEventSurvivesAConflict(t *testing.T) {
	conflicts := 1
	f := newFixture(t, &interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(trainer.GroupVersion.WithResource("trainjobs").GroupResource(), obj.GetName(), errors.New("the object has been modified"))
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}, utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj(), utiltesting.MakeRuntimeSpec().Torch().ClusterRuntime("torch-distributed"))
	for range 2 {
		if _, err := f.reconcileResult(t, "tj"); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
	}
	if got := f.trainJob(t, "tj").Status.State; got != trainer.TrainJobStateRunning {
		t.Fatalf("state %q, want Running", got)
	}
	if diff := cmp.Diff([]string{"Normal Created Created 1 Jobs from ClusterTrainingRuntime torch-distributed"}, f.events()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

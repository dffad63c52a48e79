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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

var now = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func complete(at time.Time) metav1.Condition {
	return metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: trainer.TrainJobJobsCompletedReason, LastTransitionTime: metav1.NewTime(at)}
}

func TestExpiryOf(t *testing.T) {
	done := utiltesting.MakeTrainJob("tj", "ns").Condition(complete(now))
	everything := &configv1alpha1.TrainJobRetentionPolicy{
		AfterFinished:  &metav1.Duration{Duration: time.Hour},
		AfterSuspended: &metav1.Duration{Duration: time.Hour},
	}
	cases := map[string]struct {
		trainJob   *trainer.TrainJob
		wantAt     time.Time
		wantPolicy string
	}{
		"own TTL": {
			trainJob: done.Clone().TTL(60).Obj(), wantAt: now.Add(time.Minute), wantPolicy: PolicyTTL,
		},
		"retention": {
			trainJob: done.Clone().Obj(), wantAt: now.Add(time.Hour), wantPolicy: PolicyAfterFinished,
		},
		"dispatched by MultiKueue: its TTL holds on the manager cluster": {
			trainJob: done.Clone().TTL(60).ManagedBy(MultiKueue).Obj(), wantAt: now.Add(time.Minute), wantPolicy: PolicyTTL,
		},
		"dispatched by MultiKueue: retention holds on the manager cluster": {
			trainJob: done.Clone().ManagedBy(MultiKueue).Obj(), wantAt: now.Add(time.Hour), wantPolicy: PolicyAfterFinished,
		},
		"managed by another controller: never deleted here": {
			trainJob: done.Clone().TTL(0).ManagedBy("example.com/other").Obj(),
		},
		"being deleted: no second deletion": {
			trainJob: func() *trainer.TrainJob {
				tj := done.Clone().TTL(0).Obj()
				tj.DeletionTimestamp = ptr.To(metav1.NewTime(now))
				return tj
			}(),
		},
		"not finished, not suspended": {
			trainJob: utiltesting.MakeTrainJob("tj", "ns").StartTime(now).Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			exp := ExpiryOf(tc.trainJob, everything)
			if tc.wantAt.IsZero() {
				if exp != nil {
					t.Errorf("expiry %+v, want none", exp)
				}
				return
			}
			if exp == nil || !exp.At.Equal(tc.wantAt) || exp.Policy != tc.wantPolicy {
				t.Errorf("expiry %+v, want at %s by %s", exp, tc.wantAt, tc.wantPolicy)
			}
		})
	}
}

func TestExpiryNeverOverflows(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", "ns").Condition(complete(time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC))).Obj()
	exp := ExpiryOf(tj, &configv1alpha1.TrainJobRetentionPolicy{AfterFinished: &metav1.Duration{Duration: time.Duration(1<<63 - 1)}})
	if exp == nil || exp.At.Before(exp.Since) {
		t.Errorf("expiry %+v is before its start: the addition overflowed", exp)
	}
}

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

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The expiry of any finish time, TTL and retention period never panics,
// never comes before the time it counts from, and is exactly the TTL (or
// period) after it whenever that is representable.
func FuzzExpiry(f *testing.F) {
	f.Add(int64(1767225600), int32(60), int64(time.Hour), int64(0), true, true)
	f.Add(int64(0), int32(0), int64(0), int64(0), false, false)
	f.Add(int64(253402300799), int32(2147483647), int64(9223372036854775807), int64(-1), true, false)
	f.Add(int64(-62135596800), int32(-5), int64(-9223372036854775808), int64(1), false, true)
	f.Fuzz(func(t *testing.T, finishUnix int64, ttl int32, afterFinished, afterFailed int64, withTTL, failedJob bool) {
		at := time.Unix(finishUnix, 0).UTC()
		c := metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "r", LastTransitionTime: metav1.NewTime(at)}
		if failedJob {
			c.Type = trainer.TrainJobFailed
		}
		w := utiltesting.MakeTrainJob("tj", "ns").Condition(c)
		if withTTL {
			w.TTL(ttl)
		}
		policy := &configv1alpha1.TrainJobRetentionPolicy{
			AfterFinished: &metav1.Duration{Duration: time.Duration(afterFinished)},
			AfterFailed:   &metav1.Duration{Duration: time.Duration(afterFailed)},
		}
		exp := ExpiryOf(w.Obj(), policy)
		if exp == nil {
			t.Fatal("a finished TrainJob under an afterFinished policy has no expiry")
		}
		if !exp.Since.Equal(at) {
			t.Fatalf("expiry counts from %s, want the finish time %s", exp.Since, at)
		}
		var want time.Duration
		switch {
		case withTTL:
			want = time.Duration(ttl) * time.Second
		case failedJob:
			want = time.Duration(afterFailed)
		default:
			want = time.Duration(afterFinished)
		}
		if want < 0 {
			return // refused by the API and by the configuration's validation
		}
		if exp.At.Before(exp.Since) {
			t.Fatalf("expiry %s is before the finish %s: an early delete", exp.At, exp.Since)
		}
		if !exp.At.Equal(at.Add(want)) {
			t.Fatalf("expiry %s, want %v after the finish %s", exp.At, want, at)
		}
	})
}

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
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// Values of Expiry.Policy, and of the policy label of the deletion metrics:
// which rule deletes a TrainJob.
const (
	PolicyTTL            = "ttlSecondsAfterFinished"
	PolicyAfterFinished  = "afterFinished"
	PolicyAfterFailed    = "afterFailed"
	PolicyAfterSuspended = "afterSuspended"
)

// Expiry is when a TrainJob becomes eligible for deletion, and why.
type Expiry struct {
	// Since is when the state that started the clock began: the finish
	// time, or when the TrainJob was last suspended.
	Since time.Time
	// At is Since plus the retention period.
	At time.Time
	// Policy names the rule, as in the metrics' policy label.
	Policy string
	// Reason says in words why the TrainJob is deleted.
	Reason string
}

// ExpiryOf returns when tj is to be deleted, or nil if it is not: the
// TrainJob's own TTL if it finished and has one, else the retention policy.
// A TrainJob being deleted already, or managed by another controller than
// this one or MultiKueue (DispatchedByMultiKueue), has none: it is never
// deleted here.
func ExpiryOf(tj *trainer.TrainJob, retention *configv1alpha1.TrainJobRetentionPolicy) *Expiry {
	if tj.DeletionTimestamp != nil || (ManagedElsewhere(tj) && !DispatchedByMultiKueue(tj)) {
		return nil
	}
	if e := TTLAfterFinished(tj); e != nil {
		return e
	}
	return retained(tj, retention)
}

func describe(c *metav1.Condition) string {
	return fmt.Sprintf("it finished (%s, %s) at %s", c.Type, c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339))
}

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

package manager

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
)

// metricReasons are the condition reasons trainjob_trainjobs keeps; any
// other (a TrainJob another controller manages may have any) is "Other",
// so the label stays bounded.
var metricReasons = sets.New(
	trainer.TrainJobRuntimeNotFoundReason, trainer.TrainJobInvalidRuntimeReason, trainer.TrainJobNameTakenReason,
	trainer.TrainJobJobRefusedReason, trainer.TrainJobRuntimeChangedReason, trainer.TrainJobPodGroupUnavailableReason,
	trainer.TrainJobJobsCompletedReason, trainer.TrainJobJobFailedReason, trainer.TrainJobJobDeletedReason,
	trainer.TrainJobDeadlineExceededReason, trainer.TrainJobFailJobSetReason, trainer.TrainJobReachedMaxRestartsReason,
)

// setupMetrics points the TrainJobs collector at the manager's cache, read
// once this replica leads, and gives the counters whose labels are known
// beforehand a series at 0, so that rates and alerts see them before the
// first event.
func setupMetrics(mgr ctrl.Manager) error {
	cache := mgr.GetCache()
	metrics.TrainJobs.SetSource(func(ctx context.Context) ([]metrics.TrainJob, error) {
		var list trainer.TrainJobList
		// Read only: no copy of the cache's objects.
		if err := cache.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		out := make([]metrics.TrainJob, len(list.Items))
		for i := range list.Items {
			out[i] = metricsView(&list.Items[i])
		}
		return out, nil
	})
	// Started only on the leader, when it is elected.
	lead := manager.RunnableFunc(func(ctx context.Context) error {
		metrics.TrainJobs.Lead()
		<-ctx.Done()
		return nil
	})
	if err := mgr.Add(lead); err != nil {
		return err
	}
	for _, p := range []string{lifecycle.PolicyTTL, lifecycle.PolicyAfterFinished, lifecycle.PolicyAfterFailed, lifecycle.PolicyAfterSuspended} {
		metrics.TTLDeletions.WithLabelValues(p)
	}
	for _, a := range []trainer.FailurePolicyAction{trainer.RestartJobSet, trainer.RestartJobSetAndIgnoreMaxRestarts} {
		metrics.Restarts.WithLabelValues(string(a))
	}
	return nil
}

// metricsView is what the TrainJobs collector reads of tj: its progress
// while it runs, if its trainer reported any, and its state, the
// reason behind it, and since when it is in it by its status: the
// transition time of the condition that says the state, the start time of
// a running TrainJob (its Jobs' creation or its last resume), the creation
// of one not yet started.
func metricsView(tj *trainer.TrainJob) metrics.TrainJob {
	v := metrics.TrainJob{State: lifecycle.State(tj), Namespace: tj.Namespace, Name: tj.Name}
	if s := tj.Status.TrainerStatus; s != nil && tj.FinishedCondition() == nil {
		v.Progress = &metrics.Progress{Percent: s.ProgressPercentage, RemainingSeconds: s.EstimatedRemainingSeconds, Reported: s.LastUpdatedTime.Time}
	}
	var c *metav1.Condition
	switch v.State {
	case trainer.TrainJobStateCreated:
		v.Since = tj.CreationTimestamp.Time
		if c = meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobCreated); c != nil && c.Status != metav1.ConditionFalse {
			c = nil
		}
	case trainer.TrainJobStateRunning:
		v.Since = tj.CreationTimestamp.Time
		if tj.Status.StartTime != nil {
			v.Since = tj.Status.StartTime.Time
		}
	case trainer.TrainJobStateSuspending, trainer.TrainJobStateSuspended:
		// Suspended=False Suspending, or True: the condition's time once
		// the controller recorded the suspension; until then, none.
		if s := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended); s != nil && s.Reason != trainer.TrainJobResumedReason {
			v.Since = s.LastTransitionTime.Time
		}
	case trainer.TrainJobStateComplete, trainer.TrainJobStateFailed:
		c = tj.FinishedCondition()
	}
	if c != nil {
		v.Reason, v.Since = c.Reason, c.LastTransitionTime.Time
	}
	if v.Reason != "" && !metricReasons.Has(v.Reason) {
		v.Reason = "Other"
	}
	return v
}

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

package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// A child Job deleted by hand (kubectl delete job, background propagation)
// at every stage of a TrainJob's life: the TrainJob's outcome is still
// right and nothing is run again.
func TestChildJobDeletedAtEveryStage(t *testing.T) {
	ns := cluster.NewNamespace(t)
	ctx := context.Background()
	// Two steps: a short non-trainer step "prep" (2s) and the trainer
	// "node" (15s). A TrainJob's own run-time annotation overrides both.
	prep := utiltesting.MakeReplicatedJob("prep").PodAnnotation("pod-complete.stage.kwok.x-k8s.io/delay", "2s")
	node := utiltesting.MakeReplicatedJob("node").Trainer().PodAnnotation("pod-complete.stage.kwok.x-k8s.io/delay", "15s")
	spec := utiltesting.MakeRuntimeSpec().Torch().ReplicatedJobs(prep.Obj(), node.Obj())
	if err := cluster.Client.Create(ctx, spec.Runtime("two-steps", ns)); err != nil {
		t.Fatal(err)
	}
	make := func(name string, run time.Duration) *utiltesting.TrainJobWrapper {
		w := utiltesting.MakeTrainJob(name, ns).RuntimeRef(trainer.TrainingRuntimeKind, "two-steps")
		if run > 0 {
			w.Annotation("pod-complete.stage.kwok.x-k8s.io/delay", run.String())
		}
		return w
	}
	cases := []struct {
		stage      string
		trainJob   *trainer.TrainJob
		ready      func(*trainer.TrainJob, *batchv1.Job) bool // when to delete
		deleteJob  string
		wantReason string // the TrainJob's final condition reason
	}{
		{
			stage:    "suspended (Jobs exist, no Pod)",
			trainJob: make("suspended", 5*time.Second).Suspend(true).Obj(),
			ready: func(tj *trainer.TrainJob, _ *batchv1.Job) bool {
				return meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobSuspended)
			},
			deleteJob:  "suspended-node-0",
			wantReason: trainer.TrainJobJobDeletedReason,
		},
		{
			stage:      "running",
			trainJob:   make("running", time.Minute).Obj(),
			ready:      func(_ *trainer.TrainJob, j *batchv1.Job) bool { return j.Status.Active > 0 },
			deleteJob:  "running-node-0",
			wantReason: trainer.TrainJobJobDeletedReason,
		},
		{
			stage:    "a non-trainer step finished",
			trainJob: make("step-done", 0).Obj(), // the runtime's: prep 2s, node 15s
			ready: func(tj *trainer.TrainJob, j *batchv1.Job) bool {
				return j.Status.Succeeded > 0 && tj.FinishedCondition() == nil
			},
			deleteJob:  "step-done-prep-0",
			wantReason: trainer.TrainJobJobsCompletedReason,
		},
		{
			stage:      "the TrainJob completed",
			trainJob:   make("completed", 2*time.Second).Obj(),
			ready:      func(tj *trainer.TrainJob, _ *batchv1.Job) bool { return tj.FinishedCondition() != nil },
			deleteJob:  "completed-node-0",
			wantReason: trainer.TrainJobJobsCompletedReason,
		},
		{
			stage:      "the TrainJob failed",
			trainJob:   make("failed", time.Minute).Annotation("pod-fail.stage.trainjob-operator.dev/delay", "2s").Obj(),
			ready:      func(tj *trainer.TrainJob, _ *batchv1.Job) bool { return tj.FinishedCondition() != nil },
			deleteJob:  "failed-node-0",
			wantReason: trainer.TrainJobJobFailedReason,
		},
	}
	for _, tc := range cases {
		t.Run(tc.stage, func(t *testing.T) {
			if tc.stage == "the TrainJob failed" {
				// Fail at the first failed Pod.
				tc.trainJob.Spec.RuntimeRef.Name = "two-steps-no-retries"
				noRetries := spec.Runtime("two-steps-no-retries", ns)
				for i := range noRetries.Spec.Template.Spec.ReplicatedJobs {
					noRetries.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.BackoffLimit = ptr.To[int32](0)
				}
				if err := cluster.Client.Create(ctx, noRetries); err != nil {
					t.Fatal(err)
				}
			}
			if err := cluster.Client.Create(ctx, tc.trainJob); err != nil {
				t.Fatal(err)
			}
			key := client.ObjectKey{Namespace: ns, Name: tc.deleteJob}
			var uid string
			cluster.EventuallyWithin(t, 2*time.Minute, fmt.Sprintf("%s to reach the stage: %s", tc.trainJob.Name, tc.stage), func() error {
				var tj trainer.TrainJob
				var job batchv1.Job
				if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(tc.trainJob), &tj); err != nil {
					return err
				}
				if err := cluster.Client.Get(ctx, key, &job); err != nil {
					return err
				}
				if !tc.ready(&tj, &job) {
					return fmt.Errorf("not yet: %+v", tj.Status.Conditions)
				}
				uid = string(job.UID)
				return nil
			})
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.deleteJob}}
			if err := cluster.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
				t.Fatalf("deleting %s: %v", tc.deleteJob, err)
			}

			var final *metav1.Condition
			cluster.EventuallyWithin(t, 2*time.Minute, tc.trainJob.Name+" to finish", func() error {
				var tj trainer.TrainJob
				if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(tc.trainJob), &tj); err != nil {
					return err
				}
				if final = tj.FinishedCondition(); final == nil {
					return fmt.Errorf("not finished: %+v", tj.Status.Conditions)
				}
				return nil
			})
			if final.Reason != tc.wantReason {
				t.Errorf("finished %s (%s: %s), want reason %s", final.Type, final.Reason, final.Message, tc.wantReason)
			}
			// Nothing is run again: the deleted Job stays gone (a Job of the
			// same name would be a re-run), and no Pod of it runs.
			for range 20 {
				var cur batchv1.Job
				err := cluster.Client.Get(ctx, key, &cur)
				if err == nil && string(cur.UID) != uid {
					t.Fatalf("%s was created again", tc.deleteJob)
				}
				if err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
				time.Sleep(100 * time.Millisecond)
			}
			var pods corev1.PodList
			if err := cluster.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": tc.deleteJob}); err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				if p.Labels["batch.kubernetes.io/controller-uid"] != uid {
					t.Errorf("Pod %s belongs to a new Job of the deleted one's name: a re-run", p.Name)
				}
			}
		})
	}
	// Audit: once the TrainJobs are deleted, nothing stays behind.
	var tjs trainer.TrainJobList
	if err := cluster.Client.List(ctx, &tjs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range tjs.Items {
		if err := cluster.Client.Delete(ctx, &tjs.Items[i], client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	if left := audit(ctx, t, ns); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

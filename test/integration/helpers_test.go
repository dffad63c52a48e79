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

package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func getJob(ns, name string) (*batchv1.Job, error) {
	var job batchv1.Job
	err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &job)
	return &job, err
}

// waitJob waits for a child Job to exist and returns it.
func waitJob(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	cluster.Eventually(t, "Job "+name+" to be created", func() (err error) {
		job, err = getJob(ns, name)
		return err
	})
	return job
}

// waitRunning waits until the TrainJob's status.state is Running: its Jobs
// were created. It returns the TrainJob.
func waitRunning(t *testing.T, ns, name string) *trainer.TrainJob {
	t.Helper()
	const state = trainer.TrainJobStateRunning
	var tj *trainer.TrainJob
	cluster.Eventually(t, fmt.Sprintf("TrainJob %s to be %s", name, state), func() (err error) {
		if tj, err = cluster.GetTrainJob(ns, name); err != nil {
			return err
		}
		if tj.Status.State != state {
			return fmt.Errorf("state %q; conditions: %+v", tj.Status.State, tj.Status.Conditions)
		}
		return nil
	})
	return tj
}

// setJobStatus changes a child Job's status as the Job controller would.
func setJobStatus(t *testing.T, ns, name string, change func(*utiltesting.JobWrapper)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job, err := getJob(ns, name)
		if err != nil {
			return err
		}
		w := utiltesting.WrapJob(job)
		change(w)
		return cluster.Client.Status().Update(context.Background(), w.Obj())
	})
	if err != nil {
		t.Fatalf("updating status of Job %s: %v", name, err)
	}
}

// updateTrainJob changes a TrainJob's spec, retrying on conflicts.
func updateTrainJob(t *testing.T, ns, name string, change func(*trainer.TrainJob)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		tj, err := cluster.GetTrainJob(ns, name)
		if err != nil {
			return err
		}
		change(tj)
		return cluster.Client.Update(context.Background(), tj)
	})
	if err != nil {
		t.Fatalf("updating TrainJob %s: %v", name, err)
	}
}

func hasTrackingFinalizer(job *batchv1.Job) bool {
	return slices.Contains(job.Finalizers, trainer.JobTrackingFinalizer)
}

// waitReleased waits until a child Job no longer has the tracking
// finalizer (or is gone).
func waitReleased(t *testing.T, ns, name string) {
	t.Helper()
	cluster.Eventually(t, "Job "+name+" to lose the tracking finalizer", func() error {
		job, err := getJob(ns, name)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err == nil && hasTrackingFinalizer(job) {
			return fmt.Errorf("finalizers: %v", job.Finalizers)
		}
		return nil
	})
}

func envOf(job *batchv1.Job) map[string]string {
	out := map[string]string{}
	for _, c := range job.Spec.Template.Spec.Containers {
		if c.Name != trainer.TrainerContainerName {
			continue
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				out[e.Name] = "fieldRef:" + e.ValueFrom.FieldRef.FieldPath
			} else {
				out[e.Name] = e.Value
			}
		}
	}
	return out
}

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

package framework

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// GetTrainJob reads a TrainJob.
func (c *Cluster) GetTrainJob(ns, name string) (*trainer.TrainJob, error) {
	var tj trainer.TrainJob
	err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &tj)
	return &tj, err
}

// WaitCondition waits until the TrainJob's condition condType has status
// and reason, and returns the TrainJob.
func (c *Cluster) WaitCondition(t testing.TB, ns, name, condType string, status metav1.ConditionStatus, reason string) *trainer.TrainJob {
	t.Helper()
	var tj *trainer.TrainJob
	c.Eventually(t, fmt.Sprintf("TrainJob %s to be %s=%s (%s)", name, condType, status, reason), func() (err error) {
		if tj, err = c.GetTrainJob(ns, name); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(tj.Status.Conditions, condType)
		if cond == nil {
			return fmt.Errorf("no %s condition; conditions: %+v", condType, tj.Status.Conditions)
		}
		if cond.Status != status || cond.Reason != reason {
			return fmt.Errorf("condition is %s (%s): %s; conditions: %+v", cond.Status, cond.Reason, cond.Message, tj.Status.Conditions)
		}
		return nil
	})
	return tj
}

// SetSuspend sets the TrainJob's spec.suspend with a merge patch.
func (c *Cluster) SetSuspend(ctx context.Context, ns, name string, suspend bool) error {
	patch := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend)
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return c.Client.Patch(ctx, tj, client.RawPatch(types.MergePatchType, patch))
}

// PatchSuspend is SetSuspend, failing the test if the API server refuses
// the patch.
func (c *Cluster) PatchSuspend(t testing.TB, ns, name string, suspend bool) {
	t.Helper()
	if err := c.SetSuspend(context.Background(), ns, name, suspend); err != nil {
		t.Fatalf("setting suspend=%t: %v", suspend, err)
	}
}

// pods lists the Pods of the TrainJob, terminated or not.
func (c *Cluster) pods(ns, name string) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := c.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{trainer.TrainJobNameLabel: name})
	return list.Items, err
}

// ActivePods returns the TrainJob's Pods that are not terminated.
func (c *Cluster) ActivePods(t testing.TB, ns, name string) []corev1.Pod {
	t.Helper()
	pods, err := c.pods(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(pods, func(p corev1.Pod) bool {
		return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
	})
}

// WaitPodsRunning waits until n Pods of the TrainJob run, and returns them.
func (c *Cluster) WaitPodsRunning(t testing.TB, ns, name string, n int) []corev1.Pod {
	t.Helper()
	var running []corev1.Pod
	c.Eventually(t, fmt.Sprintf("%d Pods of %s to run", n, name), func() error {
		running = slices.DeleteFunc(c.ActivePods(t, ns, name), func(p corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning })
		if len(running) != n {
			return fmt.Errorf("%d running", len(running))
		}
		return nil
	})
	return running
}

// WaitNoPods waits up to d until no Pod of the TrainJob is pending or
// running.
func (c *Cluster) WaitNoPods(t testing.TB, d time.Duration, ns, name string) {
	t.Helper()
	c.EventuallyWithin(t, d, "every Pod of "+name+" to be gone", func() error {
		pods, err := c.pods(ns, name)
		if err != nil {
			return err
		}
		var active []string
		for _, p := range pods {
			if p.Status.Phase == corev1.PodPending || p.Status.Phase == corev1.PodRunning {
				active = append(active, p.Name)
			}
		}
		if len(active) > 0 {
			return fmt.Errorf("active: %v", active)
		}
		return nil
	})
}

// JobsOf returns the TrainJob's Jobs by name.
func (c *Cluster) JobsOf(t testing.TB, ns, name string) map[string]batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := c.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{trainer.TrainJobNameLabel: name}); err != nil {
		t.Fatal(err)
	}
	jobs := map[string]batchv1.Job{}
	for _, j := range list.Items {
		jobs[j.Name] = j
	}
	return jobs
}

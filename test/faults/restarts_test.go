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
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// TrainJobs whose Pods fail in their first three restart attempts restart
// three times under their failure policy, while the manager is SIGKILLed
// every two seconds: each completes with exactly three restarts (none made
// twice, none lost), no Job is created twice in one attempt, and the Jobs
// of earlier attempts go.
func TestManagerKilledMidRestart(t *testing.T) {
	ns := cluster.NewNamespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	created := watchJobCreations(ctx, t, ns)

	node := utiltesting.MakeReplicatedJob("node").Trainer().BackoffLimit(0).RestartPolicy(corev1.RestartPolicyNever)
	spec := utiltesting.MakeRuntimeSpec().Torch().ReplicatedJobs(node.Obj()).FailurePolicy(trainer.FailurePolicy{MaxRestarts: 5})
	if err := cluster.Client.Create(ctx, spec.Runtime("restarting", ns)); err != nil {
		t.Fatal(err)
	}
	n := envInt("FAULTS_RESTART_TRAINJOBS", 20)
	const failingAttempts = 3
	for i := range n {
		tj := utiltesting.MakeTrainJob(fmt.Sprintf("tj-%03d", i), ns).RuntimeRef(trainer.TrainingRuntimeKind, "restarting").
			NumNodes(2).Command("torchrun", "train.py").
			Annotation("pod-complete.stage.kwok.x-k8s.io/delay", "2s").
			Annotation("pod-fail.stage.trainjob-operator.dev/delay", fmt.Sprintf("%dms", 1000+200*(i%10))).
			Annotation("pod-fail.stage.trainjob-operator.dev/attempts", strconv.Itoa(failingAttempts)).Obj()
		if err := cluster.Client.Create(ctx, tj); err != nil {
			t.Fatal(err)
		}
	}

	var kills atomic.Int32
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
			if err := dev.KillManager(devOpts); err != nil {
				t.Errorf("killing the manager: %v", err)
				return
			}
			kills.Add(1)
			time.Sleep(500 * time.Millisecond)
			if err := dev.RestartManager(context.Background(), devOpts); err != nil {
				t.Errorf("restarting the manager: %v", err)
				return
			}
		}
	}()

	var list trainer.TrainJobList
	cluster.EventuallyWithin(t, 4*time.Minute, fmt.Sprintf("all %d TrainJobs to finish", n), func() error {
		if err := cluster.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		left := 0
		for i := range list.Items {
			if list.Items[i].FinishedCondition() == nil {
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d of %d not finished", left, len(list.Items))
		}
		return nil
	})
	cancel()
	<-killed
	t.Logf("manager SIGKILLed %d times while %d TrainJobs restarted", kills.Load(), n)
	if kills.Load() == 0 {
		t.Error("the manager was never killed: the run proves nothing")
	}
	for _, tj := range list.Items {
		if !meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobComplete) || tj.Status.Restarts != failingAttempts || tj.Status.RestartsCountTowardsMax != failingAttempts {
			t.Errorf("TrainJob %s: conditions %+v, restarts %d (%d counted); want Complete after exactly %d restarts",
				tj.Name, tj.Status.Conditions, tj.Status.Restarts, tj.Status.RestartsCountTowardsMax, failingAttempts)
		}
	}
	twice, keys := created.twice()
	if len(twice) > 0 {
		t.Errorf("Jobs created twice in one restart attempt: %v", twice)
	}
	if want := n * (failingAttempts + 1); keys != want {
		t.Errorf("%d Jobs created over all attempts, want %d (one per TrainJob per attempt)", keys, want)
	}
	var jobs batchv1.JobList
	if err := cluster.Client.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.Labels[trainer.JobSetRestartAttemptLabel] != strconv.Itoa(failingAttempts) {
			cluster.EventuallyWithin(t, time.Minute, "Job "+j.Name+" of an earlier attempt to go", func() error {
				var live batchv1.Job
				if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(&j), &live); err == nil && live.UID == j.UID {
					return fmt.Errorf("still there, attempt %s", live.Labels[trainer.JobSetRestartAttemptLabel])
				}
				return nil
			})
		}
	}
}

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
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// runtimeChanges are what may happen to a runtime while TrainJobs run on
// it.
var runtimeChanges = map[string]func(t *testing.T, f *fixture){
	"deleted": func(t *testing.T, f *fixture) {
		t.Helper()
		rt := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch-distributed"}}
		if err := f.client.Delete(context.Background(), rt); err != nil {
			t.Fatal(err)
		}
	},
	"edited: another node count, subdomain, success policy and node selector": func(t *testing.T, f *fixture) {
		t.Helper()
		var rt trainer.ClusterTrainingRuntime
		if err := f.client.Get(context.Background(), client.ObjectKey{Name: "torch-distributed"}, &rt); err != nil {
			t.Fatal(err)
		}
		rt.Spec.MLPolicy.NumNodes = ptr.To[int32](5)
		rt.Spec.Template.Spec.Network = &trainer.Network{Subdomain: "elsewhere"}
		rt.Spec.Template.Spec.SuccessPolicy = &trainer.SuccessPolicy{Operator: trainer.OperatorAny}
		for i := range rt.Spec.Template.Spec.ReplicatedJobs {
			rt.Spec.Template.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "new"}
		}
		if err := f.client.Update(context.Background(), &rt); err != nil {
			t.Fatal(err)
		}
	},
}

// snapshot reads the snapshot of TrainJob tj as the fixture's API server
// holds it; nil if there is none.
func (f *fixture) snapshot(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	var cm corev1.ConfigMap
	err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "tj" + snapshotSuffix}, &cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return &cm
}

// setJob changes a Job as the Job controller would.
func (f *fixture) setJob(t *testing.T, name string, change func(*utiltesting.JobWrapper) *utiltesting.JobWrapper) {
	t.Helper()
	var job batchv1.Job
	if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: name}, &job); err != nil {
		t.Fatal(err)
	}
	if err := f.client.Status().Update(context.Background(), change(utiltesting.WrapJob(&job)).Obj()); err != nil {
		t.Fatal(err)
	}
}

// A TrainJob that creates every Job at once, without restarts, never reads
// its runtime again: it pays nothing for a snapshot.
func TestNoSnapshotForATrainJobCreatedAtOnce(t *testing.T) {
	f := newFixture(t, nil, utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").NumNodes(2).Obj(),
		utiltesting.MakeRuntimeSpec().Torch().ClusterRuntime("torch-distributed"))
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if len(f.jobs(t)) != 1 {
		t.Fatalf("Jobs %v, want tj-node-0", jobStates(f.jobs(t)))
	}
	if cm := f.snapshot(t); cm != nil {
		t.Errorf("snapshot %s made for a TrainJob that reads its runtime only once", cm.Name)
	}
}

// A staged TrainJob creates its later stages as its runtime was when its
// first stage was created, whatever happened to the runtime since.
func TestLaterStagesComeFromTheSnapshot(t *testing.T) {
	for change, apply := range runtimeChanges {
		t.Run(change, func(t *testing.T) {
			workers := utiltesting.MakeReplicatedJob("node").Trainer().Obj()
			workers.DependsOn = []trainer.DependsOn{{Name: "init", Status: trainer.DependsOnComplete}}
			staged := utiltesting.MakeRuntimeSpec().Torch().NumNodes(2).ReplicatedJobs(utiltesting.MakeReplicatedJob("init").Obj(), workers)
			f := newFixture(t, nil, utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj(), staged.ClusterRuntime("torch-distributed"))
			if err := f.reconcile(t, "tj"); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if f.snapshot(t) == nil {
				t.Error("no snapshot made with the first stage")
			}
			want := childJob(t, f.trainJob(t, "tj"), staged, 1)

			apply(t, f)
			f.setJob(t, "tj-init-0", func(w *utiltesting.JobWrapper) *utiltesting.JobWrapper { return w.Succeeded(now) })
			if err := f.reconcile(t, "tj"); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			tj := f.trainJob(t, "tj")
			if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobCreated); c != nil {
				t.Errorf("Created %+v: the stage waits for the runtime", c)
			}
			var got batchv1.Job
			if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "tj-node-0"}, &got); err != nil {
				t.Fatalf("the second stage was not created: %v (Jobs %v, status %+v)", err, jobStates(f.jobs(t)), tj.Status)
			}
			if diff := cmp.Diff(want.Spec.Template.Spec, got.Spec.Template.Spec); diff != "" {
				t.Errorf("Pods of the second stage (-as the runtime was +made):\n%s", diff)
			}
			if *got.Spec.Parallelism != 2 {
				t.Errorf("parallelism %d, want the 2 nodes it started with", *got.Spec.Parallelism)
			}
		})
	}
}

// A TrainJob with restarts left restarts on its runtime as it was: the new
// attempt's Jobs are the first attempt's, whatever happened to the runtime.
func TestRestartComesFromTheSnapshot(t *testing.T) {
	for change, apply := range runtimeChanges {
		t.Run(change, func(t *testing.T) {
			spec := utiltesting.MakeRuntimeSpec().Torch()
			spec.Template.Spec.FailurePolicy = &trainer.FailurePolicy{MaxRestarts: 1}
			f := newFixture(t, nil, utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").NumNodes(2).Obj(), spec.ClusterRuntime("torch-distributed"))
			if err := f.reconcile(t, "tj"); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if f.snapshot(t) == nil {
				t.Error("no snapshot made for a TrainJob that can restart")
			}
			want := childJob(t, f.trainJob(t, "tj"), spec, 0)

			apply(t, f)
			f.setJob(t, "tj-node-0", func(w *utiltesting.JobWrapper) *utiltesting.JobWrapper {
				return w.Failed("BackoffLimitExceeded", now)
			})
			// The restart, the old Job's deletion, the new Job.
			for range 3 {
				if err := f.reconcile(t, "tj"); err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
				f.clock.Step(time.Second)
			}
			tj := f.trainJob(t, "tj")
			if tj.Status.Restarts != 1 || tj.FinishedCondition() != nil || len(tj.Status.Conditions) > 0 {
				t.Fatalf("restarts %d, conditions %+v: want one restart and running", tj.Status.Restarts, tj.Status.Conditions)
			}
			var got batchv1.Job
			if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "tj-node-0"}, &got); err != nil {
				t.Fatalf("the new attempt's Job: %v", err)
			}
			if got.Labels[trainer.JobSetRestartAttemptLabel] != "1" {
				t.Fatalf("Job of restart attempt %q, want 1", got.Labels[trainer.JobSetRestartAttemptLabel])
			}
			if diff := cmp.Diff(want.Spec.Template.Spec, got.Spec.Template.Spec); diff != "" {
				t.Errorf("Pods of the new attempt (-the first attempt's +made):\n%s", diff)
			}
			if *got.Spec.Parallelism != 2 {
				t.Errorf("parallelism %d, want the 2 nodes it started with", *got.Spec.Parallelism)
			}
		})
	}
}

// zonePatch is Kueue's runtime patch admitting a TrainJob on the flavor of
// zone.
func zonePatch(zone string) []trainer.RuntimePatch {
	return []trainer.RuntimePatch{{Manager: trainer.KueueManager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
		Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
			Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
				Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"zone": zone}},
			}}},
		}}}},
	}}}
}

// A TrainJob queued in Kueue is resumed with the scheduling directives its
// runtime had when its Jobs were made and those of the patch that admits
// it, whatever happened to the runtime meanwhile: created suspended, or
// admitted before this controller first saw it, then preempted and
// admitted again on another flavor.
func TestResumeComesFromTheSnapshot(t *testing.T) {
	queued := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Label(trainer.KueueQueueNameLabel, "q")
	for start, tj := range map[string]*trainer.TrainJob{
		"created suspended": queued.Clone().Suspend(true).Obj(),
		"admitted before its first reconcile": func() *trainer.TrainJob {
			tj := queued.Clone().Obj()
			tj.Spec.RuntimePatches = zonePatch("a")
			return tj
		}(),
	} {
		for change, apply := range runtimeChanges {
			t.Run(start+", runtime "+change, func(t *testing.T) {
				spec := utiltesting.MakeRuntimeSpec().Torch()
				f := newFixture(t, nil, tj.DeepCopy(), spec.ClusterRuntime("torch-distributed"))
				if err := f.reconcile(t, "tj"); err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
				if f.snapshot(t) == nil {
					t.Error("no snapshot made for a TrainJob queued in Kueue")
				}
				// Preempted: suspended, Kueue's patch emptied, its Pods gone.
				cur := f.trainJob(t, "tj")
				cur.Spec.Suspend, cur.Spec.RuntimePatches = ptr.To(true), []trainer.RuntimePatch{{Manager: trainer.KueueManager}}
				if err := f.client.Update(context.Background(), cur); err != nil {
					t.Fatal(err)
				}
				if err := f.reconcile(t, "tj"); err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
				f.setJob(t, "tj-node-0", func(w *utiltesting.JobWrapper) *utiltesting.JobWrapper { return w.SuspendedByController(now) })
				apply(t, f)
				// Admitted again, on zone b.
				cur = f.trainJob(t, "tj")
				cur.Spec.Suspend, cur.Spec.RuntimePatches = ptr.To(false), zonePatch("b")
				if err := f.client.Update(context.Background(), cur); err != nil {
					t.Fatal(err)
				}
				if err := f.reconcile(t, "tj"); err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
				var job batchv1.Job
				if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "tj-node-0"}, &job); err != nil {
					t.Fatal(err)
				}
				if ptr.Deref(job.Spec.Suspend, false) || !maps.Equal(job.Spec.Template.Spec.NodeSelector, map[string]string{"zone": "b"}) {
					t.Errorf("Job suspended %t, node selector %v: want it resumed on zone b, with the runtime's directives as they were", ptr.Deref(job.Spec.Suspend, false), job.Spec.Template.Spec.NodeSelector)
				}
			})
		}
	}
}

// A snapshot Kubeflow Trainer v2.3 wrote (the whole runtime object, its
// metadata and managed fields) is read as this controller's own.
func TestKubeflowSnapshotIsRead(t *testing.T) {
	tj := utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "tj-runtime-snapshot", Namespace: testNS,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))}},
		Data: map[string]string{"runtime": `apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  creationTimestamp: "2026-03-01T09:00:00Z"
  generation: 3
  labels:
    trainer.kubeflow.org/framework: torch
  managedFields:
  - apiVersion: trainer.kubeflow.org/v1alpha1
    fieldsType: FieldsV1
    manager: kubectl-client-side-apply
    operation: Update
  name: torch-distributed
  resourceVersion: "1234"
  uid: 0b5c7a4e-1111-2222-3333-444455556666
spec:
  mlPolicy:
    numNodes: 3
    torch: {}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: trainer
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime
`},
	}
	f := newFixture(t, nil, tj, cm)
	rt, err := f.r.readSnapshot(context.Background(), tj)
	if err != nil || rt == nil {
		t.Fatalf("readSnapshot = %v, %v", rt, err)
	}
	if rt.Kind != trainer.ClusterTrainingRuntimeKind || rt.Name != "torch-distributed" || rt.Generation != 3 || *rt.Spec.MLPolicy.NumNodes != 3 {
		t.Errorf("snapshot read as %s %s (generation %d), %+v", rt.Kind, rt.Name, rt.Generation, rt.Spec.MLPolicy)
	}

	// One of another TrainJob of the name is not this one's.
	other := utiltesting.MakeTrainJob("tj", testNS).UID("uid-2").Obj()
	if rt, err := f.r.readSnapshot(context.Background(), other); rt != nil || err != nil {
		t.Errorf("readSnapshot of another TrainJob of the name = %v, %v; want none", rt, err)
	}
}

// A TrainJob whose first Jobs were all refused takes its runtime as it is
// when they are made at last: the policies pinned by the refused pass give
// way to those of the runtime the snapshot then holds, so a later stage is
// not taken for a runtime changed under it.
func TestPinnedAnewUntilTheFirstJobsExist(t *testing.T) {
	workers := utiltesting.MakeReplicatedJob("node").Trainer().Obj()
	workers.DependsOn = []trainer.DependsOn{{Name: "init", Status: trainer.DependsOnComplete}}
	staged := utiltesting.MakeRuntimeSpec().Torch().ReplicatedJobs(utiltesting.MakeReplicatedJob("init").Obj(), workers)
	refuse := true
	f := newFixture(t, &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*batchv1.Job); ok && refuse {
			return apierrors.NewForbidden(batchv1.Resource("jobs"), obj.GetName(), errors.New("exceeded quota: count/jobs.batch"))
		}
		return c.Create(ctx, obj, opts...)
	}}, utiltesting.MakeTrainJob("tj", testNS).UID("uid-1").Obj(), staged.ClusterRuntime("torch-distributed"))
	if err := f.reconcile(t, "tj"); err == nil {
		t.Fatal("Reconcile: no error for a refused Job")
	}
	if len(f.jobs(t)) != 0 {
		t.Fatalf("Jobs %v made while the quota refuses them", jobStates(f.jobs(t)))
	}
	// The runtime changes before any Job could be made.
	var rt trainer.ClusterTrainingRuntime
	if err := f.client.Get(context.Background(), client.ObjectKey{Name: "torch-distributed"}, &rt); err != nil {
		t.Fatal(err)
	}
	rt.Spec.Template.Spec.Network = &trainer.Network{Subdomain: "elsewhere"}
	if err := f.client.Update(context.Background(), &rt); err != nil {
		t.Fatal(err)
	}
	refuse = false
	f.clock.Step(time.Minute)
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	f.setJob(t, "tj-init-0", func(w *utiltesting.JobWrapper) *utiltesting.JobWrapper { return w.Succeeded(now) })
	if err := f.reconcile(t, "tj"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	tj := f.trainJob(t, "tj")
	if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobCreated); c != nil {
		t.Errorf("Created %+v: the second stage is held back", c)
	}
	if tj.Status.Network == nil || tj.Status.Network.Subdomain != "elsewhere" {
		t.Errorf("network pinned %+v, want the runtime's as the first Jobs were made", tj.Status.Network)
	}
	var node batchv1.Job
	if err := f.client.Get(context.Background(), client.ObjectKey{Namespace: testNS, Name: "tj-node-0"}, &node); err != nil {
		t.Errorf("the second stage: %v", err)
	} else if node.Spec.Template.Spec.Subdomain != "elsewhere" {
		t.Errorf("second stage's subdomain %q, want elsewhere", node.Spec.Template.Spec.Subdomain)
	}
}

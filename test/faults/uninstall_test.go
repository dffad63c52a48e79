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
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/cli"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The product is uninstalled while TrainJobs run, with `trainctl uninstall`:
// in the good order (the manager still runs, the CRDs are installed) and in
// the bad one (the manager stopped and the CRDs deleted first, which deletes
// every TrainJob and strands their Jobs behind the tracking finalizer, their
// Pods running). Counted afterwards: Jobs, Pods and Services of the
// TrainJobs, and tracking finalizers in the whole cluster. All must be 0.
func TestUninstallMidRun(t *testing.T) {
	n := envInt("FAULTS_UNINSTALL_TRAINJOBS", envInt("FAULTS_TRAINJOBS", 60)/2)
	const podsPerTrainJob = 2

	t.Run("the manager runs, the CRDs are installed", func(t *testing.T) {
		ns := cluster.NewNamespace(t)
		startLongTrainJobs(t, ns, n, podsPerTrainJob)
		t.Logf("before: %s", countStranded(t, ns))
		took := runUninstall(t)
		assertNothingStranded(t, ns, took)
	})

	t.Run("the manager is stopped and the CRDs deleted first", func(t *testing.T) {
		ns := cluster.NewNamespace(t)
		startLongTrainJobs(t, ns, n, podsPerTrainJob)
		t.Cleanup(func() { restoreInstallation(t) })

		if err := dev.KillManager(devOpts); err != nil {
			t.Fatalf("stopping the manager: %v", err)
		}
		start := time.Now()
		cluster.MustKubectl(t, "delete", "-k", filepath.Join(devOpts.Root, "config", "crd"), "--wait", "--timeout", "2m")
		t.Logf("manager stopped, CRDs deleted (every TrainJob with them) in %s", time.Since(start).Round(100*time.Millisecond))
		// What the bad order leaves: give the garbage collector time to do
		// all it would.
		const strandedFor = 15 * time.Second
		time.Sleep(strandedFor)
		before := countStranded(t, ns)
		t.Logf("before, %s after the CRDs were deleted: %s", strandedFor, before)
		if before.finalizers == 0 || before.running == 0 {
			t.Errorf("nothing was stranded (%s): the scenario proves nothing", before)
		}

		took := runUninstall(t)
		assertNothingStranded(t, ns, took)
	})
}

// startLongTrainJobs creates n TrainJobs whose Pods run ten minutes, and
// waits until all their Pods run.
func startLongTrainJobs(t *testing.T, ns string, n, podsPerTrainJob int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		tj := utiltesting.MakeTrainJob(fmt.Sprintf("tj-%02d", i), ns).NumNodes(int32(podsPerTrainJob)).
			Command("torchrun", "train.py").Annotation("pod-complete.stage.kwok.x-k8s.io/delay", "10m").Obj()
		if err := cluster.Client.Create(ctx, tj); err != nil {
			t.Fatalf("creating %s: %v", tj.Name, err)
		}
	}
	start := time.Now()
	want := n * podsPerTrainJob
	cluster.EventuallyWithin(t, 2*time.Minute, fmt.Sprintf("%d Pods of %d TrainJobs to run", want, n), func() error {
		var pods corev1.PodList
		if err := cluster.Client.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{trainer.TrainJobNameLabel}); err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if running < want {
			return fmt.Errorf("%d of %d Pods run", running, want)
		}
		return nil
	})
	t.Logf("%d TrainJobs created, their %d Pods running in %s", n, want, time.Since(start).Round(100*time.Millisecond))
}

// stranded is what a namespace holds of TrainJobs, and the tracking finalizers
// of the whole cluster.
type stranded struct {
	trainJobs  string // a count, or why there is none
	jobs       int
	deleting   int // Jobs being deleted
	finalizers int // Jobs of the cluster with the tracking finalizer
	pods       int
	running    int // Pods running
	services   int
}

func (l stranded) String() string {
	return fmt.Sprintf("%s TrainJobs, %d Jobs (%d being deleted), %d tracking finalizers in the cluster, %d Pods (%d running), %d Services",
		l.trainJobs, l.jobs, l.deleting, l.finalizers, l.pods, l.running, l.services)
}

func countStranded(t *testing.T, ns string) stranded {
	t.Helper()
	ctx := context.Background()
	var l stranded
	var tjs trainer.TrainJobList
	if err := cluster.Client.List(ctx, &tjs, client.InNamespace(ns)); err != nil {
		l.trainJobs = "no CRD, no"
	} else {
		l.trainJobs = fmt.Sprint(len(tjs.Items))
	}
	var jobs, all batchv1.JobList
	var pods corev1.PodList
	var svcs corev1.ServiceList
	for _, lst := range []client.ObjectList{&jobs, &pods, &svcs} {
		if err := cluster.Client.List(ctx, lst, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cluster.Client.List(ctx, &all); err != nil {
		t.Fatal(err)
	}
	l.jobs, l.pods, l.services = len(jobs.Items), len(pods.Items), len(svcs.Items)
	for _, j := range jobs.Items {
		if j.DeletionTimestamp != nil {
			l.deleting++
		}
	}
	for _, j := range all.Items {
		if slices.Contains(j.Finalizers, trainer.JobTrackingFinalizer) {
			l.finalizers++
		}
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			l.running++
		}
	}
	return l
}

// runUninstall runs `trainctl uninstall` as a user would, and says how long it
// took.
func runUninstall(t *testing.T) time.Duration {
	t.Helper()
	var out bytes.Buffer
	cmd := cli.NewCommand(&out, &out)
	cmd.SetArgs([]string{"uninstall", "--kubeconfig", devOpts.Kubeconfig(), "--timeout", "3m"})
	start := time.Now()
	err := cmd.ExecuteContext(context.Background())
	took := time.Since(start)
	t.Logf("trainctl uninstall, in %s:\n%s", took.Round(100*time.Millisecond), strings.TrimRight(out.String(), "\n"))
	if err != nil {
		t.Fatalf("trainctl uninstall: %v", err)
	}
	return took
}

// assertNothingStranded counts what the uninstall left: it must be nothing.
func assertNothingStranded(t *testing.T, ns string, took time.Duration) {
	t.Helper()
	after := countStranded(t, ns)
	t.Logf("after trainctl uninstall (%s): %s", took.Round(100*time.Millisecond), after)
	if after.trainJobs != "0" && after.trainJobs != "no CRD, no" {
		t.Errorf("TrainJobs left: %s", after.trainJobs)
	}
	if after.jobs+after.finalizers+after.pods+after.services > 0 {
		t.Errorf("left behind: %s", after)
	}
}

// restoreInstallation puts back what the bad order removed, as the suite's
// cluster had it: the CRDs, the runtimes and the manager.
func restoreInstallation(t *testing.T) {
	t.Helper()
	start := time.Now()
	cluster.MustKubectl(t, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(devOpts.Root, "config", "crd"))
	// kubectl wait fails, rather than waits, while a CRD has no condition yet.
	cluster.EventuallyWithin(t, time.Minute, "the CRDs to be established", func() error {
		out, err := cluster.Kubectl("wait", "--for", "condition=Established", "--timeout", "10s",
			"crd/trainjobs.trainer.kubeflow.org", "crd/trainingruntimes.trainer.kubeflow.org", "crd/clustertrainingruntimes.trainer.kubeflow.org")
		if err != nil {
			return fmt.Errorf("kubectl wait: %w\n%s", err, out)
		}
		return nil
	})
	cluster.MustKubectl(t, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(devOpts.Root, "config", "runtimes"))
	if err := dev.RestartManager(context.Background(), devOpts); err != nil {
		t.Fatalf("restarting the manager: %v", err)
	}
	// The tests after this one need it all: a TrainJob must pass the
	// webhook, run and complete.
	ctx := context.Background()
	tj := utiltesting.MakeTrainJob("after-restore", cluster.NewNamespace(t)).Command("torchrun", "train.py").
		Annotation("pod-complete.stage.kwok.x-k8s.io/delay", "1s").Obj()
	if err := cluster.Client.Create(ctx, tj); err != nil {
		t.Fatalf("creating a TrainJob after the restore: %v", err)
	}
	cluster.EventuallyWithin(t, time.Minute, "a TrainJob to complete after the restore", func() error {
		var cur trainer.TrainJob
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(tj), &cur); err != nil {
			return err
		}
		if c := cur.FinishedCondition(); c == nil || c.Type != trainer.TrainJobComplete {
			return fmt.Errorf("not complete: %+v", cur.Status.Conditions)
		}
		return nil
	})
	if err := cluster.Client.Delete(ctx, tj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	t.Logf("CRDs, runtimes and the manager restored, and a TrainJob ran on them, in %s", time.Since(start).Round(100*time.Millisecond))
}

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
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// earlierVersion is the commit of this repository that
// TestUpgradeFromEarlierVersion upgrades from. No version has been released
// yet: this is the first commit a user could install (config/default with
// the manager's Deployment, the README's "Deploying"), so every change made
// to api/ and config/crd/ since then is in the upgrade: status fields added
// (successPolicy, network, failurePolicy, a Job's waiting), spec fields
// that were opaque and refused now typed (runtimePatches, initializer,
// Kubeflow's overrides), new validation rules, a Failed reason renamed.
// Once a version is released, its tag goes here.
const earlierVersion = "40078129f86ac86678482c6ceb48ab849c4a02ec"

// An installation of an earlier version of this product (its CRDs, its
// runtime, its manager built from that commit), with TrainJobs it ran to
// each state (complete, failed, running, suspended), upgraded as
// docs/install.md says: the current CRDs and runtimes applied over the
// earlier ones, the current manager in place of the earlier one. The stored
// objects read the same under the current CRDs, and the current manager
// carries on with each where the earlier one left it: it adopts the Jobs
// the earlier one created rather than making new ones, completes the
// running TrainJob when its Job succeeds, resumes the suspended one, keeps
// the finished ones finished, and deletes one at the TTL it is given.
func TestUpgradeFromEarlierVersion(t *testing.T) {
	start := time.Now()
	tree := checkout(t, earlierVersion)
	oldManager := filepath.Join(t.TempDir(), "manager")
	build := exec.Command("go", "build", "-o", oldManager, "./cmd/manager")
	build.Dir = tree
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the manager of %s: %v\n%s", earlierVersion, err, out)
	}
	t.Logf("the manager of %.7s built in %s", earlierVersion, time.Since(start).Round(100*time.Millisecond))

	// An API server with the earlier version's CRDs and runtime.
	srv := startOtherAPIServer(t, filepath.Join(tree, "config", "crd", "bases"))
	cfg, cl, kc := srv.Config, srv.Client, srv.Kubeconfig
	// The suite's helpers (waitJob, setJobStatus, ...) act on this API
	// server until the test ends.
	suiteClient := cluster.Client
	cluster.Client = cl
	t.Cleanup(func() { cluster.Client = suiteClient })
	ctx := context.Background()
	srv.MustKubectl(t, "apply", "--server-side", "-k", filepath.Join(tree, "config", "runtimes"))
	const ns = "team-a"
	srv.MustKubectl(t, "create", "namespace", ns)

	// The earlier manager runs four TrainJobs, written as that version's
	// users wrote them, to four states.
	healthPort, err := dev.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	stopOld := utiltesting.StartProcess(t, "the manager of "+earlierVersion[:7], utiltesting.ReadyzURL(healthPort), timeout, oldManager,
		"--kubeconfig", kc, "--webhook=false", "--leader-elect=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", healthPort))
	var manifest strings.Builder
	for _, name := range []string{"done", "failed", "running", "suspended"} {
		fmt.Fprintf(&manifest, `---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: %s
spec:
  runtimeRef:
    name: torch-distributed
  suspend: %t
  ttlSecondsAfterFinished: 3600
  trainer:
    numNodes: 2
    command: [torchrun, train.py]
`, name, name == "suspended")
	}
	manifestPath := filepath.Join(t.TempDir(), "trainjobs.yaml")
	if err := os.WriteFile(manifestPath, []byte(manifest.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.MustKubectl(t, "apply", "-n", ns, "-f", manifestPath)
	now := time.Now()
	for _, name := range []string{"done", "failed", "running", "suspended"} {
		waitJob(t, ns, name+"-node-0")
	}
	setJobStatus(t, ns, "done-node-0", func(w *utiltesting.JobWrapper) { w.Succeeded(now) })
	setJobStatus(t, ns, "failed-node-0", func(w *utiltesting.JobWrapper) { w.Failed("BackoffLimitExceeded", now) })
	setJobStatus(t, ns, "running-node-0", func(w *utiltesting.JobWrapper) { w.Active(2) })
	// The reasons the earlier version gave.
	cluster.WaitCondition(t, ns, "done", trainer.TrainJobComplete, metav1.ConditionTrue, "AllJobsCompleted")
	cluster.WaitCondition(t, ns, "failed", trainer.TrainJobFailed, metav1.ConditionTrue, "JobFailed")
	cluster.WaitCondition(t, ns, "suspended", trainer.TrainJobSuspended, metav1.ConditionTrue, "Suspended")
	waitReleased(t, ns, "done-node-0")
	waitReleased(t, ns, "failed-node-0")
	cluster.Eventually(t, "the running TrainJob's Job to be seen active", func() error {
		tj, err := cluster.GetTrainJob(ns, "running")
		if err != nil {
			return err
		}
		if len(tj.Status.JobsStatus) != 1 || tj.Status.JobsStatus[0].Active != 1 || tj.Status.StartTime == nil {
			return fmt.Errorf("status: %+v", tj.Status)
		}
		return nil
	})
	stopOld()

	// As stored by the earlier version, read through its CRDs.
	stored := readStored(t, ctx, cl, ns)
	jobUIDs := map[string]types.UID{}
	for _, name := range []string{"done", "failed", "running", "suspended"} {
		job, err := getJob(ns, name+"-node-0")
		if err != nil {
			t.Fatal(err)
		}
		jobUIDs[job.Name] = job.UID
	}

	// The upgrade: the current CRDs, then the current runtimes, then the
	// current manager.
	srv.MustKubectl(t, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(repoRoot, "config", "crd"))
	srv.MustKubectl(t, "wait", "--for", "condition=Established", "--timeout", "30s", "crd", "--all")
	// The same objects, read through the current CRDs (pruning and
	// defaulting apply on read), and decoded into the current API types.
	if diff := cmp.Diff(stored, readStored(t, ctx, cl, ns)); diff != "" {
		t.Errorf("the stored objects read differently through the current CRDs (-before +after):\n%s", diff)
	}
	var tjs trainer.TrainJobList
	if err := cl.List(ctx, &tjs, client.InNamespace(ns)); err != nil {
		t.Fatalf("the stored TrainJobs do not decode: %v", err)
	}
	var runtimes trainer.ClusterTrainingRuntimeList
	if err := cl.List(ctx, &runtimes); err != nil || len(runtimes.Items) == 0 {
		t.Fatalf("the stored runtimes do not decode: %v (%d)", err, len(runtimes.Items))
	}
	srv.MustKubectl(t, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(repoRoot, "config", "runtimes"))
	startManagerAt(t, cfg)

	// The running TrainJob completes on the Job the earlier version made.
	setJobStatus(t, ns, "running-node-0", func(w *utiltesting.JobWrapper) { w.Succeeded(time.Now()) })
	cluster.WaitCondition(t, ns, "running", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	waitReleased(t, ns, "running-node-0")
	// The suspended one resumes its Job.
	updateTrainJob(t, ns, "suspended", func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(false) })
	cluster.WaitCondition(t, ns, "suspended", trainer.TrainJobSuspended, metav1.ConditionFalse, trainer.TrainJobResumedReason)
	cluster.Eventually(t, "the suspended TrainJob's Job to be resumed", func() error {
		job, err := getJob(ns, "suspended-node-0")
		if err != nil {
			return err
		}
		if ptr.Deref(job.Spec.Suspend, false) {
			return errors.New("still suspended")
		}
		return nil
	})
	// Every Job is the one the earlier version made: none replaced, none
	// added.
	var jobs batchv1.JobList
	if err := cl.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	got := map[string]types.UID{}
	for _, j := range jobs.Items {
		got[j.Name] = j.UID
	}
	if diff := cmp.Diff(jobUIDs, got); diff != "" {
		t.Errorf("the Jobs after the upgrade are not those the earlier version made (-before +after, by UID):\n%s", diff)
	}
	// The finished ones stay as they finished.
	for name, reason := range map[string]string{"done": "AllJobsCompleted", "failed": "JobFailed"} {
		tj, err := cluster.GetTrainJob(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if c := tj.FinishedCondition(); c == nil || c.Reason != reason {
			t.Errorf("TrainJob %s finished with %+v after the upgrade, want reason %s as the earlier version recorded", name, c, reason)
		}
	}
	// A finished TrainJob's TTL, changed through the current CRD, deletes
	// it: its finish time, recorded by the earlier version, is read.
	updateTrainJob(t, ns, "done", func(tj *trainer.TrainJob) { tj.Spec.TTLSecondsAfterFinished = ptr.To[int32](1) })
	cluster.Eventually(t, "the TTL to delete TrainJob done", func() error {
		tj, err := cluster.GetTrainJob(ns, "done")
		if apierrors.IsNotFound(err) || err == nil && tj.DeletionTimestamp != nil {
			return nil // deleted (this API server has no garbage collector to finish it)
		}
		return fmt.Errorf("not deleted (err %w)", err)
	})
	t.Logf("upgraded from %.7s in %s", earlierVersion, time.Since(start).Round(100*time.Millisecond))
}

// readStored reads the TrainJobs of ns and the ClusterTrainingRuntimes as
// the API server serves them, by name, without their metadata.
func readStored(t *testing.T, ctx context.Context, cl client.Client, ns string) map[string]any {
	t.Helper()
	out := map[string]any{}
	for kind, opts := range map[string][]client.ListOption{
		trainer.TrainJobKind:               {client.InNamespace(ns)},
		trainer.ClusterTrainingRuntimeKind: nil,
	} {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(trainer.GroupVersion.WithKind(kind + "List"))
		if err := cl.List(ctx, l, opts...); err != nil {
			t.Fatal(err)
		}
		for _, item := range l.Items {
			delete(item.Object, "metadata")
			out[kind+" "+item.GetName()] = item.Object
		}
	}
	return out
}

// checkout writes the tree of commit of this repository into a directory
// of the test's and returns it.
func checkout(t *testing.T, commit string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("git", "-C", repoRoot, "archive", "--format=tar", commit)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	extractErr := extract(tar.NewReader(stdout), dir)
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("git archive %s: %v: %s (the test needs the repository's history: git fetch --unshallow)", commit, err, stderr.String())
	}
	if extractErr != nil {
		t.Fatal(extractErr)
	}
	return dir
}

// extract writes the directories and regular files of an archive under dir.
func extract(r *tar.Reader, dir string) error {
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, dir+string(os.PathSeparator)) {
			return fmt.Errorf("archive entry %q outside the tree", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, r) //nolint:gosec // this repository's own tree
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
	}
}

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

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
)

// schedulerPluginsVersion is the release of the Kubernetes scheduler-plugins
// whose PodGroup CRD the gang tests install.
const schedulerPluginsVersion = "v0.34.7"

// coschedulingCRD is the path of the scheduler-plugins' PodGroup CRD, from
// the Go module of the release.
func coschedulingCRD(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "sigs.k8s.io/scheduler-plugins@"+schedulerPluginsVersion)
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("downloading the scheduler-plugins module: %v\n%s", err, out)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(mod.Dir, "manifests", "coscheduling", "crd.yaml")
}

func podGroup(ns, name string) (*unstructured.Unstructured, error) {
	pg := &unstructured.Unstructured{}
	pg.SetGroupVersionKind(jobplan.CoschedulingPodGroup)
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pg)
	return pg, err
}

// A runtime with podGroupPolicy coscheduling. Without the PodGroup CRD the
// TrainJob waits, saying why, with no Job made. Once the CRD is installed
// it starts: its PodGroup, the TrainJob's, counts its nodes and their
// requests, and every Pod names it. A TrainJob's PodGroup follows a runtime
// changed while it is suspended, by its resume.
func TestCoschedulingPodGroup(t *testing.T) {
	ns := newNamespace(t)
	applyYAML(t, ns, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: torch-gang
spec:
  mlPolicy:
    numNodes: 1
    torch: {}
  podGroupPolicy:
    coscheduling:
      scheduleTimeoutSeconds: 30
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
                metadata:
                  annotations: {%s: 5s}
                spec:
                  containers:
                    - name: node
                      image: pytorch/pytorch
                      resources:
                        requests: {cpu: "1", memory: 1Gi}
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: gang
spec:
  runtimeRef:
    kind: TrainingRuntime
    name: torch-gang
  trainer:
    numNodes: 3
    command: [torchrun, train.py]
`, runFor))

	eventually(t, "the TrainJob to say the PodGroup CRD is missing", func() error {
		tj, err := getTrainJob(ns, "gang")
		if err != nil {
			return err
		}
		c := condition(tj, trainer.TrainJobCreated)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != trainer.TrainJobPodGroupUnavailableReason || !strings.Contains(c.Message, "PodGroup of scheduling.x-k8s.io/v1alpha1") {
			return fmt.Errorf("Created: %+v", c)
		}
		return nil
	})
	if jobs := jobsOf(t, ns, "gang"); len(jobs) > 0 {
		t.Errorf("%d Jobs made without their PodGroup", len(jobs))
	}
	var events corev1.EventList
	if err := k8s.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		found = found || e.Type == corev1.EventTypeWarning && e.Reason == trainer.TrainJobPodGroupUnavailableReason
	}
	if !found {
		t.Error("no Warning event PodGroupUnavailable")
	}

	crd := coschedulingCRD(t)
	if out, err := kubectl("apply", "--server-side", "-f", crd); err != nil {
		t.Fatalf("installing the PodGroup CRD: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = kubectl("delete", "--ignore-not-found", "-f", crd) })
	if out, err := kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/podgroups.scheduling.x-k8s.io"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	running := waitRunning(t, ns, "gang", 3)
	pg, err := podGroup(ns, "gang")
	if err != nil {
		t.Fatalf("the PodGroup: %v", err)
	}
	spec, _, _ := unstructured.NestedMap(pg.Object, "spec")
	wantSpec := map[string]any{"minMember": int64(3), "scheduleTimeoutSeconds": int64(30), "minResources": map[string]any{"cpu": "3", "memory": "3Gi"}}
	if fmt.Sprint(spec) != fmt.Sprint(wantSpec) {
		t.Errorf("PodGroup spec %v, want %v", spec, wantSpec)
	}
	tj, err := getTrainJob(ns, "gang")
	if err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(pg, tj) {
		t.Errorf("PodGroup owners %v, want the TrainJob", pg.GetOwnerReferences())
	}
	for _, p := range running {
		if p.Labels["scheduling.x-k8s.io/pod-group"] != "gang" {
			t.Errorf("Pod %s labels %v, want scheduling.x-k8s.io/pod-group=gang", p.Name, p.Labels)
		}
	}
	waitCondition(t, ns, "gang", trainer.TrainJobComplete, trainer.TrainJobJobsCompletedReason)

	// Suspended, then resumed after the runtime changed.
	create(t, trainJob("later", ns, 5*time.Second).RuntimeRef(trainer.TrainingRuntimeKind, "torch-gang").NumNodes(2).Suspend(true).Obj())
	eventually(t, "the suspended TrainJob's Jobs and PodGroup to be made", func() error {
		if len(jobsOf(t, ns, "later")) != 1 {
			return fmt.Errorf("no Job yet")
		}
		_, err := podGroup(ns, "later")
		return err
	})
	if out, err := kubectl("patch", "-n", ns, "trainingruntime", "torch-gang", "--type=merge", "-p", `{"spec":{"podGroupPolicy":{"coscheduling":{"scheduleTimeoutSeconds":90}}}}`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	patchSuspend(t, ns, "later", false)
	eventually(t, "the PodGroup to follow the runtime on resume", func() error {
		pg, err := podGroup(ns, "later")
		if err != nil {
			return err
		}
		if v, _, _ := unstructured.NestedInt64(pg.Object, "spec", "scheduleTimeoutSeconds"); v != 90 {
			return fmt.Errorf("scheduleTimeoutSeconds %d", v)
		}
		return nil
	})
	waitCondition(t, ns, "later", trainer.TrainJobComplete, trainer.TrainJobJobsCompletedReason)
}

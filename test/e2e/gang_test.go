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
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
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

// installPodGroupCRD installs the scheduler-plugins' PodGroup CRD, and
// waits until it is served.
func installPodGroupCRD(t *testing.T) {
	t.Helper()
	if out, err := kubectl("apply", "--server-side", "-f", coschedulingCRD(t)); err != nil {
		t.Fatalf("installing the PodGroup CRD: %v\n%s", err, out)
	}
	if out, err := kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/podgroups.scheduling.x-k8s.io"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
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
	// Without the CRD first, whatever ran before.
	if out, err := kubectl("delete", "--ignore-not-found", "--wait", "crd", "podgroups.scheduling.x-k8s.io"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
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

	installPodGroupCRD(t)

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

// startCoscheduler runs the coscheduling scheduler (bin/coscheduler) beside
// the cluster's kube-scheduler, as the scheduler named
// scheduler-plugins-scheduler, until the test ends.
func startCoscheduler(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: %s
profiles:
  - schedulerName: scheduler-plugins-scheduler
    plugins:
      multiPoint:
        enabled:
          - name: Coscheduling
      queueSort:
        enabled:
          - name: Coscheduling
        disabled:
          - name: "*"
    pluginConfig:
      - name: Coscheduling
        args:
          permitWaitingTimeSeconds: 10
`, devOpts.Kubeconfig())), 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := dev.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "coscheduler.log"))
	if err != nil {
		t.Fatal(err)
	}
	// The plugin retries a gang on Pod and PodGroup events (in a full
	// install, the scheduler-plugins controller's updates of the
	// PodGroup's status, which does not run here); room that appears is
	// seen when the scheduler next retries its unschedulable Pods, every 5
	// minutes by default, 10 seconds here.
	cmd := exec.Command(filepath.Join(repoRoot, "bin", "coscheduler"), "--config", config, "--secure-port", strconv.Itoa(port),
		"--pod-max-in-unschedulable-pods-duration", "10s", "-v", "2")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the coscheduling scheduler (make coscheduler builds it): %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			data, _ := os.ReadFile(logFile.Name())
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			t.Logf("coscheduler log (last lines):\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
}

// The gang scheduled whole by the real coscheduling scheduler: a TrainJob
// of 3 nodes, on a pool with room for 2 Pods, binds none (a scheduler
// without gangs would bind 2 and leave the third waiting, holding their
// GPUs); once room for the third appears, all 3 bind and it runs to
// Complete.
func TestGangScheduledWhole(t *testing.T) {
	installPodGroupCRD(t)
	startCoscheduler(t)
	ns := newNamespace(t)
	// The pool: nodes that only this test's Pods tolerate, one slot each.
	slot := corev1.ResourceName("example.com/gang-slot")
	addNode := func(name string) {
		node := dev.SimulatedNode(name, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("10"), slot: resource.MustParse("1")})
		node.Labels["pool"] = "gang"
		node.Spec.Taints = []corev1.Taint{{Key: "pool", Value: "gang", Effect: corev1.TaintEffectNoSchedule}}
		create(t, node)
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	}
	addNode(ns + "-a")
	addNode(ns + "-b")

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
      scheduleTimeoutSeconds: 60
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
                  schedulerName: scheduler-plugins-scheduler
                  nodeSelector: {pool: gang}
                  tolerations: [{key: pool, operator: Equal, value: gang, effect: NoSchedule}]
                  containers:
                    - name: node
                      image: pytorch/pytorch
                      resources:
                        limits: {%s: 1}
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
`, runFor, slot))

	bound := func() (int, error) {
		var list corev1.PodList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{trainer.TrainJobNameLabel: "gang"}); err != nil {
			return 0, err
		}
		n := 0
		for _, p := range list.Items {
			if p.Spec.NodeName != "" {
				n++
			}
		}
		if len(list.Items) != 3 {
			return n, fmt.Errorf("%d Pods, want 3", len(list.Items))
		}
		return n, nil
	}
	eventually(t, "the 3 Pods to be made", func() error { _, err := bound(); return err })
	consistently(t, 15*time.Second, "no Pod of the gang to bind while only 2 fit", func() error {
		n, err := bound()
		if err == nil && n > 0 {
			return fmt.Errorf("%d Pods bound", n)
		}
		return err
	})
	addNode(ns + "-c")
	eventually(t, "the whole gang to bind once 3 fit", func() error {
		n, err := bound()
		if err == nil && n != 3 {
			return fmt.Errorf("%d Pods bound", n)
		}
		return err
	})
	waitCondition(t, ns, "gang", trainer.TrainJobComplete, trainer.TrainJobJobsCompletedReason)
}

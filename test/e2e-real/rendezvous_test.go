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

package e2ereal

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

// podSubnet is where the real node's Pods get their addresses.
var _, podSubnet, _ = net.ParseCIDR(dev.RealSubnet)

// TestRendezvous runs a two-node TrainJob of Kubeflow's torch-distributed
// runtime, unchanged, on the real node, naming the rendezvous image and
// its command: each Pod gets an address on the Pods' network; this machine
// reaches rank 0 there; rank 1 resolves PET_MASTER_ADDR, rank 0's name
// under the TrainJob's headless Service, through the cluster's DNS and
// connects to it over TCP; both check the sum rank 0 gathers; the
// TrainJob completes.
func TestRendezvous(t *testing.T) {
	ns := newNamespace(t)
	const name = "rendezvous"
	start := time.Now()
	cluster.CreateYAML(t, `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  runtimeRef: {name: torch-distributed, kind: ClusterTrainingRuntime, apiGroup: trainer.kubeflow.org}
  trainer:
    image: %[3]s
    command: [/rendezvous]
    numNodes: 2
    env: [{name: RENDEZVOUS_HOST_CHECK, value: "1"}]
`, name, ns, rendezvousImage)

	running := cluster.WaitPodsRunning(t, ns, name, 2)
	progress(t, "2 Pods running after %s", time.Since(start).Round(time.Millisecond))
	var rank0 *corev1.Pod
	for i := range running {
		p := &running[i]
		if p.Spec.NodeName != dev.RealNodeName {
			t.Errorf("Pod %s runs on %q, want the real node %s", p.Name, p.Spec.NodeName, dev.RealNodeName)
		}
		ip := net.ParseIP(p.Status.PodIP)
		if ip == nil || !podSubnet.Contains(ip) {
			t.Errorf("Pod %s has address %q, want one in %s", p.Name, p.Status.PodIP, podSubnet)
		}
		if p.Spec.Hostname == name+"-node-0-0" {
			rank0 = p
		}
	}
	if rank0 == nil || t.Failed() {
		t.Fatalf("no Pod with hostname %s-node-0-0 among the running ones, or they are not on the real node", name)
	}

	// This machine reaches rank 0 at its Pod's address; rank 0 answers
	// the other ranks only once it has.
	addr := net.JoinHostPort(rank0.Status.PodIP, "29500")
	cluster.Eventually(t, "this machine to reach rank 0 at "+addr, func() error {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintln(c, "host e2e"); err != nil {
			return err
		}
		answer, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || strings.TrimSpace(answer) != "ok" {
			return fmt.Errorf("rank 0 answered %q: %w", answer, err)
		}
		return nil
	})
	progress(t, "reached rank 0 at %s from this machine", addr)

	// Rank 0 reports its progress from the real node, through the status
	// server's name (resolved to this machine by the cluster's DNS) and
	// TLS: trainctl get shows it move, 50 % then 100 %.
	trainctl := func() string {
		out, err := exec.Command(filepath.Join(devOpts.Root, "bin", "trainctl"), "--kubeconfig", devOpts.Kubeconfig(), "-n", ns, "get", name).CombinedOutput()
		if err != nil {
			t.Fatalf("trainctl get: %v\n%s", err, out)
		}
		return string(out)
	}
	for _, want := range []string{"50%", "100%"} {
		cluster.Eventually(t, "trainctl get to show "+want, func() error {
			if out := trainctl(); !strings.Contains(out, " "+want+" ") {
				return fmt.Errorf("%s", out)
			}
			return nil
		})
		progress(t, "trainctl get shows %s", want)
	}
	cluster.WaitCondition(t, ns, name, trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	progress(t, "Complete after %s", time.Since(start).Round(time.Millisecond))

	// The last report stays once the TrainJob finished.
	tj, err := cluster.GetTrainJob(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if s := tj.Status.TrainerStatus; s == nil || s.ProgressPercentage == nil || *s.ProgressPercentage != 100 ||
		len(s.Metrics) != 1 || s.Metrics[0] != (trainer.Metric{Name: "ranks", Value: "2"}) {
		t.Errorf("trainerStatus = %+v, want rank 0's last report: 100%%, ranks=2", s)
	}

	// trainctl logs prints every node's, in rank order, as the SDK's
	// get_job_logs gives them; --step node-1 one node's.
	out, err := exec.Command(filepath.Join(devOpts.Root, "bin", "trainctl"), "--kubeconfig", devOpts.Kubeconfig(), "-n", ns, "logs", name).CombinedOutput()
	if err != nil {
		t.Fatalf("trainctl logs: %v\n%s", err, out)
	}
	progress(t, "trainctl logs %s:\n%s", name, out)
	if i0, i1 := strings.Index(string(out), "[node-0] rendezvous: rank 0 of 2"), strings.Index(string(out), "[node-1] rendezvous: rank 1 of 2"); i0 < 0 || i1 < i0 {
		t.Errorf("trainctl logs does not print node 0's then node 1's lines:\n%s", out)
	}
	out, err = exec.Command(filepath.Join(devOpts.Root, "bin", "trainctl"), "--kubeconfig", devOpts.Kubeconfig(), "-n", ns, "logs", name, "--step", "node-1").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "rendezvous: rank 1 of 2") || strings.Contains(string(out), "rank 0 of 2") {
		t.Errorf("trainctl logs --step node-1: %v\n%s", err, out)
	}

	// What each rank printed, through the API server and the kubelet.
	master := fmt.Sprintf("%s-node-0-0.%s:29500", name, name)
	for index, want := range map[string][]string{
		"0": {"rank 0 of 2", "the host reached rank 0", "rank 1 joined from", "the 2 ranks sum to 1", "reported progress 50%", "reported progress 100%", "rendezvous: OK"},
		"1": {"rank 1 of 2", "master " + master, "connected to " + master, "the 2 ranks sum to 1", "rendezvous: OK"},
	} {
		logs := cluster.MustKubectl(t, "logs", "-n", ns, "-l", "jobset.sigs.k8s.io/jobset-name="+name+",batch.kubernetes.io/job-completion-index="+index)
		for _, w := range want {
			if !strings.Contains(logs, w) {
				t.Errorf("rank %s's log lacks %q:\n%s", index, w, logs)
			}
		}
	}
}

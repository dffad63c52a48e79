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
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

// A trainer Pod reports its progress as the Kubeflow SDK does (see
// framework.Reporter). The report shows in status, in trainctl get and
// describe, in kubectl get -o wide and in the manager's metrics; once the
// TrainJob finishes, it stays in status and the metric goes.
func TestProgressReportedByAPodShowsEverywhere(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.Create(t, trainJob("progress", ns, 30*time.Second).NumNodes(2).Obj())
	pods := cluster.WaitPodsRunning(t, ns, "progress", 2)
	// The Pod's URL names the manager's Service; on this machine the
	// manager serves at localhost, the name its certificate is made for.
	local, err := dev.StatusServerURL(devOpts)
	if err != nil {
		t.Fatal(err)
	}
	r := cluster.NewReporter(t, &pods[0], local)
	if want := trainer.StatusServerPath(ns, "progress"); !strings.HasSuffix(r.URL, want) {
		t.Fatalf("the Pod reports to %s, want its TrainJob's endpoint %s", r.URL, want)
	}
	r.Report(t, 45, 600, trainer.Metric{Name: "loss", Value: "0.2347"})

	tj, err := cluster.GetTrainJob(ns, "progress")
	if err != nil {
		t.Fatal(err)
	}
	if s := tj.Status.TrainerStatus; s == nil || s.ProgressPercentage == nil || *s.ProgressPercentage != 45 || len(s.Metrics) != 1 || s.Metrics[0].Value != "0.2347" {
		t.Fatalf("trainerStatus = %+v, want the report", s)
	}
	trainctl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(devOpts.Root, "bin", "trainctl"), append([]string{"--kubeconfig", devOpts.Kubeconfig(), "-n", ns}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("trainctl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := trainctl("get", "progress"); !strings.Contains(out, "PROGRESS") || !strings.Contains(out, "45%") {
		t.Errorf("trainctl get does not show the progress:\n%s", out)
	}
	if out := trainctl("describe", "progress"); !strings.Contains(out, "loss = 0.2347") {
		t.Errorf("trainctl describe does not show the metric:\n%s", out)
	}
	if out := cluster.MustKubectl(t, "get", "trainjobs", "-n", ns, "-o", "wide"); !strings.Contains(out, "PROGRESS") || !strings.Contains(out, " 45 ") {
		t.Errorf("kubectl get -o wide does not show the progress:\n%s", out)
	}
	series := fmt.Sprintf(`trainjob_progress_percent{name="progress",namespace=%q} 45`, ns)
	cluster.Eventually(t, "the progress in the manager's metrics", func() error {
		if !strings.Contains(managerMetrics(t), series) {
			return fmt.Errorf("no %s", series)
		}
		return nil
	})

	cluster.WaitCondition(t, ns, "progress", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	if tj, err = cluster.GetTrainJob(ns, "progress"); err != nil || tj.Status.TrainerStatus == nil || *tj.Status.TrainerStatus.ProgressPercentage != 45 {
		t.Errorf("after the finish, trainerStatus = %+v (%v), want the last report kept", tj.Status.TrainerStatus, err)
	}
	if strings.Contains(managerMetrics(t), fmt.Sprintf(`trainjob_progress_percent{name="progress",namespace=%q}`, ns)) {
		t.Error("the finished TrainJob still has a progress series")
	}
}

// managerMetrics reads the manager's metrics, which the dev cluster serves
// over plain HTTP on 127.0.0.1.
func managerMetrics(t *testing.T) string {
	t.Helper()
	_, port, err := dev.Manager(devOpts)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

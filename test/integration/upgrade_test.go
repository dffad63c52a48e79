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
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/cli"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The releases a cluster that runs Kubeflow Trainer has: Kubeflow
// Trainer's CRDs and runtimes, JobSet's CRD.
const (
	kubeflowTrainerModule = "github.com/kubeflow/trainer/v2@v2.3.0"
	jobSetModule          = "sigs.k8s.io/jobset@v0.12.0"
)

// moduleDir downloads a module to the Go module cache and returns its
// directory.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	dir, err := dev.ModuleDir(context.Background(), t.TempDir(), module)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

var jobSetGVK = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}

// A cluster that runs Kubeflow Trainer v2.3 (its CRDs and runtimes, JobSet's
// CRD, TrainJobs in each state Kubeflow leaves them) switches to
// trainjob-operator. trainctl upgrade-check says, before the switch, what
// will happen to each; after the switch (our CRDs applied over Kubeflow's,
// the manager started), it happens.
func TestUpgradeFromKubeflowTrainer(t *testing.T) {
	kubeflow := moduleDir(t, kubeflowTrainerModule)
	jobSet := moduleDir(t, jobSetModule)
	crds := filepath.Join(kubeflow, "manifests", "base", "crds")
	srv := startOtherAPIServer(t,
		filepath.Join(crds, "trainer.kubeflow.org_trainjobs.yaml"),
		filepath.Join(crds, "trainer.kubeflow.org_trainingruntimes.yaml"),
		filepath.Join(crds, "trainer.kubeflow.org_clustertrainingruntimes.yaml"),
		filepath.Join(jobSet, "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml"),
	)
	cfg, cl, kc := srv.Config, srv.Client, srv.Kubeconfig
	kubectlHere := func(args ...string) string {
		t.Helper()
		return srv.MustKubectl(t, args...)
	}
	ctx := context.Background()

	// Kubeflow's runtimes, as Kubeflow ships them, and one Kubeflow takes
	// that cannot run here: two replicas of the trainer step.
	kubectlHere("apply", "--server-side", "-f", filepath.Join(kubeflow, "manifests", "base", "runtimes", "torch_distributed.yaml"))
	ns := "kubeflow-users"
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	twoTrainers := &trainer.TrainingRuntime{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "two-trainers"},
		Spec: trainer.TrainingRuntimeSpec{Template: trainer.JobSetTemplateSpec{Spec: trainer.JobSetSpec{ReplicatedJobs: []trainer.ReplicatedJob{{
			Name: "node", Replicas: 2,
			Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "node", Image: "busybox"}},
			}}}},
		}}}}},
	}
	if err := cl.Create(ctx, twoTrainers); err != nil {
		t.Fatal(err)
	}

	newTrainJob := func(name string) *utiltesting.TrainJobWrapper {
		return utiltesting.MakeTrainJob(name, ns).RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed")
	}
	create := func(obj client.Object) {
		t.Helper()
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	// Finished under Kubeflow, its JobSet left.
	done := newTrainJob("done").Obj()
	create(done)
	meta.SetStatusCondition(&done.Status.Conditions, metav1.Condition{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue, Reason: "JobsCompleted", Message: "done"})
	if err := cl.Status().Update(ctx, done); err != nil {
		t.Fatal(err)
	}
	// Running under Kubeflow: its JobSet, the JobSet's Job and Service.
	running := newTrainJob("running").Obj()
	create(running)
	for _, tj := range []*trainer.TrainJob{done, running} {
		js := &unstructured.Unstructured{}
		js.SetGroupVersionKind(jobSetGVK)
		js.SetNamespace(ns)
		js.SetName(tj.Name)
		js.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))})
		js.Object["spec"] = map[string]any{"replicatedJobs": []any{map[string]any{"name": "node", "replicas": int64(1), "template": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "node", "image": "pytorch/pytorch"}}}}}}}}}
		create(js)
		if tj == running {
			owner := []metav1.OwnerReference{*metav1.NewControllerRef(js, jobSetGVK)}
			create(&batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "running-node-0", OwnerReferences: owner},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "node", Image: "pytorch/pytorch"}},
				}}},
			})
			create(&corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "running", OwnerReferences: owner},
				Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"jobset.sigs.k8s.io/jobset-name": "running"}},
			})
		}
	}
	// Not started yet: created now, one queued (suspended).
	create(newTrainJob("fresh").NumNodes(2).Obj())
	create(newTrainJob("queued").Suspend(true).Obj())
	create(newTrainJob("multikueue").ManagedBy(lifecycle.MultiKueue).Obj())
	create(utiltesting.MakeTrainJob("no-runtime", ns).RuntimeRef(trainer.ClusterTrainingRuntimeKind, "torch-distributed-v1").Obj())
	create(utiltesting.MakeTrainJob("on-two-trainers", ns).RuntimeRef(trainer.TrainingRuntimeKind, "two-trainers").Obj())

	// Kubeflow Trainer's webhook configurations, last: they fail closed,
	// and no webhook server answers here.
	kubeflowWebhooks := filepath.Join(t.TempDir(), "webhooks.yaml")
	if err := os.WriteFile(kubeflowWebhooks, []byte(kubectlHere("kustomize", filepath.Join(kubeflow, "manifests", "base", "webhook"))), 0o644); err != nil {
		t.Fatal(err)
	}
	kubectlHere("apply", "-f", kubeflowWebhooks)

	// Before the switch.
	var out bytes.Buffer
	check := cli.NewCommand(&out, &out)
	check.SetArgs([]string{"upgrade-check", "--kubeconfig", kc})
	err := check.Execute()
	t.Logf("trainctl upgrade-check:\n%s", out.String())
	if err == nil || !strings.Contains(err.Error(), "cannot run") {
		t.Errorf("upgrade-check returned %v, want an error: some cannot run", err)
	}
	want := map[string][]string{
		"ClusterTrainingRuntime - torch-distributed":                      {"runs"},
		"TrainingRuntime " + ns + " two-trainers":                         {"cannot run", "the trainer step must have exactly 1 replica"},
		"TrainJob " + ns + " done":                                        {"kept", "finished, with no ttlSecondsAfterFinished", "retention policy", "its JobSet goes with it"},
		"TrainJob " + ns + " running":                                     {"waits", "its JobSet running runs it", "Job running-node-0 of JobSet running", "Service running of JobSet running", "NameTaken"},
		"TrainJob " + ns + " fresh":                                       {"runs", "its Job (2 Pods) is created"},
		"TrainJob " + ns + " queued":                                      {"runs", "suspended"},
		"TrainJob " + ns + " multikueue":                                  {"left alone", "managed by kueue.x-k8s.io/multikueue"},
		"TrainJob " + ns + " no-runtime":                                  {"cannot run", "ClusterTrainingRuntime torch-distributed-v1 not found", "RuntimeNotFound"},
		"TrainJob " + ns + " on-two-trainers":                             {"cannot run", "InvalidRuntime"},
		"ValidatingWebhookConfiguration - validator.trainer.kubeflow.org": {"remove", "fail closed"},
		"MutatingWebhookConfiguration - defaulter.trainer.kubeflow.org":   {"remove", "fail closed"},
	}
	lines := strings.Split(out.String(), "\n")
	for row, phrases := range want {
		fields := strings.Fields(row)
		found := false
		for _, line := range lines {
			lf := strings.Fields(line)
			if len(lf) < 3 || lf[0] != fields[0] || lf[1] != fields[1] || lf[2] != fields[2] {
				continue
			}
			found = true
			for _, p := range phrases {
				if !strings.Contains(line, p) {
					t.Errorf("%s: %q lacks %q", row, line, p)
				}
			}
		}
		if !found {
			t.Errorf("no line for %s", row)
		}
	}
	if !strings.Contains(out.String(), "Nothing was changed.") {
		t.Error("no summary line")
	}

	// The switch: Kubeflow Trainer's webhooks gone, our CRDs over
	// Kubeflow's, then the manager.
	kubectlHere("delete", "-f", kubeflowWebhooks)
	kubectlHere("apply", "--server-side", "--force-conflicts", "-k", filepath.Join(repoRoot, "config", "crd"))
	startManagerAt(t, cfg)

	createdReason := func(name string) (string, error) {
		var tj trainer.TrainJob
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tj); err != nil {
			return "", err
		}
		if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobCreated); c != nil && c.Status == metav1.ConditionFalse {
			return c.Reason, nil
		}
		return "", nil
	}
	ownJob := func(name, job string) (*batchv1.Job, error) {
		var j batchv1.Job
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, &j); err != nil {
			return nil, err
		}
		var tj trainer.TrainJob
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tj); err != nil {
			return nil, err
		}
		if !metav1.IsControlledBy(&j, &tj) {
			return nil, fmt.Errorf("Job %s is not TrainJob %s's", job, name)
		}
		return &j, nil
	}
	for name, reason := range map[string]string{
		"running":         trainer.TrainJobNameTakenReason,
		"no-runtime":      trainer.TrainJobRuntimeNotFoundReason,
		"on-two-trainers": trainer.TrainJobInvalidRuntimeReason,
	} {
		utiltesting.Eventually(t, timeout, interval, name+" to say why it does not start", func() error {
			got, err := createdReason(name)
			if err == nil && got != reason {
				err = fmt.Errorf("Created=False reason %q, want %s", got, reason)
			}
			return err
		})
	}
	utiltesting.Eventually(t, timeout, interval, "fresh's Job, and queued's suspended", func() error {
		if _, err := ownJob("fresh", "fresh-node-0"); err != nil {
			return err
		}
		j, err := ownJob("queued", "queued-node-0")
		if err == nil && !ptr.Deref(j.Spec.Suspend, false) {
			err = fmt.Errorf("queued's Job is not suspended")
		}
		return err
	})
	utiltesting.Consistently(t, consistently, interval, "done and multikueue to stay without Jobs", func() error {
		for _, job := range []string{"done-node-0", "multikueue-node-0"} {
			err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: job}, &batchv1.Job{})
			if err == nil {
				return fmt.Errorf("Job %s was created", job)
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		var j batchv1.Job
		if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "running-node-0"}, &j); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(&j); ref == nil || ref.Kind != "JobSet" {
			return fmt.Errorf("the JobSet's Job was taken over: %v", ref)
		}
		return nil
	})
}

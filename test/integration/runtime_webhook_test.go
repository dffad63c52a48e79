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
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/webhook"
)

// createRuntime creates the runtime of manifest with kubectl create, as a
// user would, deleting it when the test ends, and returns kubectl's output
// (warnings included) and error.
func createRuntime(t *testing.T, ns, manifest string) (string, error) {
	t.Helper()
	objs := decodeObjects(t, manifest)
	if len(objs) != 1 {
		t.Fatalf("the manifest holds %d objects, want 1", len(objs))
	}
	u := objs[0]
	if u.GetKind() == trainer.TrainingRuntimeKind {
		u.SetNamespace(ns)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), &u) })
	data, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "runtime.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return cluster.Kubectl("create", "-f", file)
}

// runtimeManifest is a runtime of kind and name whose spec is spec, a YAML
// block indented by two spaces.
func runtimeManifest(kind, name, labels, spec string) string {
	return "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: " + kind + "\nmetadata:\n  name: " + name +
		"\n  labels: {" + labels + "}\nspec:\n" + spec
}

// torchSpec is a torch runtime's spec whose trainer step has replicas
// Jobs and Pods running container.
func torchSpec(replicas, container string) string {
	return `  mlPolicy: {torch: {}}
  template:
    spec:
      replicatedJobs:
        - name: node
          replicas: ` + replicas + `
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers: [{name: ` + container + `, image: busybox}]
`
}

// A runtime no TrainJob could run on is refused when it is created, with a
// message naming the field, and is not stored: before the runtime webhook,
// it was stored, and every TrainJob on it refused.
func TestRuntimeWebhookRefusesBrokenRuntimes(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cases := map[string]struct {
		manifest string
		want     []string
	}{
		"ClusterTrainingRuntime whose trainer step has two Jobs": {
			manifest: runtimeManifest(trainer.ClusterTrainingRuntimeKind, "it-two-trainers", "", torchSpec("2", "node")),
			want: []string{`The ClusterTrainingRuntime "it-two-trainers" is invalid`,
				"spec.template.spec.replicatedJobs[0].replicas: Invalid value: 2: a replicated Job labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer must have exactly 1 replica"},
		},
		"TrainingRuntime whose trainer step has no node container": {
			manifest: runtimeManifest(trainer.TrainingRuntimeKind, "no-node", "", torchSpec("1", "main")),
			want: []string{`The TrainingRuntime "no-node" is invalid`,
				`spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: Required value: a replicated Job labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer needs a container named "node"`},
		},
		"TrainingRuntime injecting the torch environment into a container it lacks": {
			manifest: runtimeManifest(trainer.TrainingRuntimeKind, "no-sidecar", "", strings.Replace(torchSpec("1", "node"),
				"mlPolicy: {torch: {}}", "mlPolicy: {torch: {envInjection: {targets: [{jobName: node, containerNames: [sidecar]}]}}}", 1)),
			want: []string{`The TrainingRuntime "no-sidecar" is invalid`,
				`spec.mlPolicy.torch.envInjection.targets[0].containerNames[0]: Not found: "container \"sidecar\" of replicated Job \"node\""`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := createRuntime(t, ns, tc.manifest)
			if err == nil {
				t.Fatalf("created, want refused:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the error does not say %q:\n%s", w, out)
				}
			}
			u := decodeObjects(t, tc.manifest)[0]
			if u.GetKind() == trainer.TrainingRuntimeKind {
				u.SetNamespace(ns)
			}
			if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(&u), &u); !apierrors.IsNotFound(err) {
				t.Errorf("the refused runtime is stored (get: %v)", err)
			}
		})
	}
}

// An update is checked as a creation is. One that changes only metadata,
// or finishes the deletion of a runtime, is not sent to the webhook at all
// (its matchConditions), so that a runtime stored broken (before the
// webhook, or labelled out of it) can still be relabelled and deleted,
// even while the manager is down.
func TestRuntimeWebhookUpdates(t *testing.T) {
	ctx := context.Background()
	get := func(t *testing.T, name string) *trainer.ClusterTrainingRuntime {
		t.Helper()
		var rt trainer.ClusterTrainingRuntime
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: name}, &rt); err != nil {
			t.Fatal(err)
		}
		return &rt
	}
	relabel := func(t *testing.T, name, key, value string) error {
		t.Helper()
		rt := get(t, name)
		patch := client.MergeFrom(rt.DeepCopy())
		rt.Labels[key] = value
		return cluster.Client.Patch(ctx, rt, patch)
	}

	if out, err := createRuntime(t, "", runtimeManifest(trainer.ClusterTrainingRuntimeKind, "it-update", "", torchSpec("1", "node"))); err != nil {
		t.Fatalf("creating a valid runtime: %v\n%s", err, out)
	}
	rt := get(t, "it-update")
	rt.Spec.Template.Spec.ReplicatedJobs[0].Replicas = 2
	if err := cluster.Client.Update(ctx, rt); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.template.spec.replicatedJobs[0].replicas") {
		t.Errorf("update to two trainer Jobs: error %v, want Invalid naming spec.template.spec.replicatedJobs[0].replicas", err)
	}

	// Stored broken: labelled out of the webhook, as Kubeflow's runtimes
	// can be, and held by a finalizer.
	broken := runtimeManifest(trainer.ClusterTrainingRuntimeKind, "it-stored-broken", webhook.WebhookValidationLabel+": disabled", torchSpec("2", "node"))
	broken = strings.Replace(broken, "\nspec:\n", "\n  finalizers: [example.com/hold]\nspec:\n", 1)
	if out, err := createRuntime(t, "", broken); err != nil {
		t.Fatalf("a runtime labelled %s=disabled was refused: %v\n%s", webhook.WebhookValidationLabel, err, out)
	}
	if err := relabel(t, "it-stored-broken", webhook.WebhookValidationLabel, "enabled"); err != nil {
		t.Fatalf("relabelling a runtime stored broken into the webhook's reach: %v", err)
	}
	rt = get(t, "it-stored-broken")
	rt.Labels["team"] = "a"
	if err := cluster.Client.Update(ctx, rt); err != nil {
		t.Errorf("a whole update of a runtime stored broken that changes only its labels: %v", err)
	}
	rt = get(t, "it-stored-broken")
	rt.Spec.Template.Spec.ReplicatedJobs[0].Replicas = 3
	if err := cluster.Client.Update(ctx, rt); !apierrors.IsInvalid(err) {
		t.Errorf("a change of its spec: error %v, want Invalid", err)
	}

	// Without the manager, the webhook fails closed on what it is sent.
	stopSuiteManager(t)
	rt = get(t, "it-stored-broken")
	rt.Spec.Template.Spec.ReplicatedJobs[0].Replicas = 1
	if err := cluster.Client.Update(ctx, rt); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("a change of spec with the manager down: error %v, want the webhook not answering", err)
	}
	if err := relabel(t, "it-stored-broken", "team", "b"); err != nil {
		t.Errorf("relabelling with the manager down: %v", err)
	}
	if err := cluster.Client.Delete(ctx, get(t, "it-stored-broken")); err != nil {
		t.Fatal(err)
	}
	rt = get(t, "it-stored-broken")
	rt.Finalizers = nil
	if err := cluster.Client.Update(ctx, rt); err != nil {
		t.Fatalf("removing the finalizer of a runtime being deleted, with the manager down: %v", err)
	}
	cluster.Eventually(t, "the runtime is gone", func() error {
		err := cluster.Client.Get(ctx, client.ObjectKey{Name: "it-stored-broken"}, &trainer.ClusterTrainingRuntime{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// A ClusterTrainingRuntime labelled deprecated is accepted, with Kubeflow
// Trainer v2.3's warning.
func TestRuntimeWebhookWarnsOfDeprecatedRuntime(t *testing.T) {
	out, err := createRuntime(t, "", runtimeManifest(trainer.ClusterTrainingRuntimeKind, "it-old-torch", webhook.SupportLabel+": deprecated", torchSpec("1", "node")))
	if err != nil {
		t.Fatalf("refused: %v\n%s", err, out)
	}
	want := `Warning: ClusterTrainingRuntime "it-old-torch" is deprecated (trainer.kubeflow.org/support=deprecated): a future release of Kubeflow Trainer will remove it; see the runtime deprecation policy: ` +
		webhook.RuntimeDeprecationPolicyURL
	if !strings.Contains(out, want) {
		t.Errorf("kubectl create said:\n%s\nwant the warning:\n%s", out, want)
	}
}

// Kubeflow Trainer v2.3's own runtimes (its manifests/base/runtimes), the
// Kubeflow YAML of the compat directory and the runtimes this project
// ships are accepted by the webhook, without warnings. They are created
// under names of their own, without the label that would keep them from
// the webhook (Kubeflow's data-cache runtime carries it).
func TestRuntimeWebhookAcceptsKubeflowRuntimes(t *testing.T) {
	ns := cluster.NewNamespace(t)
	var files []string
	for _, dir := range []string{
		filepath.Join(moduleDir(t, kubeflowTrainerModule), "manifests", "base", "runtimes"),
		compatDir(t),
		filepath.Join(repoRoot, "config", "runtimes"),
	} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && filepath.Ext(path) == ".yaml" && d.Name() != "kustomization.yaml" {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var runtimes int
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range decodeObjects(t, string(data)) {
			if u.GetKind() != trainer.ClusterTrainingRuntimeKind && u.GetKind() != trainer.TrainingRuntimeKind {
				continue
			}
			runtimes++
			t.Run(filepath.Base(f)+"/"+u.GetName(), func(t *testing.T) {
				unstructured.RemoveNestedField(u.Object, "metadata", "labels", webhook.WebhookValidationLabel)
				u.SetName("it-" + u.GetName())
				manifest, err := yaml.Marshal(u.Object)
				if err != nil {
					t.Fatal(err)
				}
				out, err := createRuntime(t, ns, string(manifest))
				if err != nil || strings.Contains(out, "Warning:") {
					t.Errorf("kubectl create: %v\n%s", err, out)
				}
			})
		}
	}
	if runtimes < 15 {
		t.Errorf("%d runtimes found in %d files, want Kubeflow's, the compat directory's and config/runtimes' (15 or more)", runtimes, len(files))
	}
}

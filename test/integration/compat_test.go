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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/config"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// compatDir holds Kubeflow Trainer YAML that must apply and run unchanged.
func compatDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("COMPAT_DIR")
	if dir == "" {
		dir = filepath.Join(repoRoot, "..", "shared", "compat")
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("compat YAML directory %s: %v (set COMPAT_DIR)", dir, err)
	}
	return dir
}

func TestKubeflowYAMLAppliesAndRuns(t *testing.T) {
	dir := compatDir(t)
	ns := cluster.NewNamespace(t)
	runtimeFile := filepath.Join(dir, "kubeflow-torch-distributed-runtime.yaml")
	trainJobFile := filepath.Join(dir, "kubeflow-multi-node-trainjob.yaml")

	for _, f := range []string{runtimeFile, trainJobFile} {
		if out, err := cluster.Kubectl("apply", "--dry-run=server", "-n", ns, "-f", f); err != nil {
			t.Fatalf("kubectl apply --dry-run=server -f %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
	for _, f := range []string{runtimeFile, trainJobFile} {
		if out, err := cluster.Kubectl("apply", "--server-side", "-n", ns, "-f", f); err != nil {
			t.Fatalf("kubectl apply --server-side -f %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
	t.Cleanup(func() {
		_ = cluster.Client.Delete(context.Background(), &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch-distributed"}})
	})

	// It means what it means under Kubeflow: 3 torchrun nodes of the
	// runtime's image, rank from the completion index, rendezvous on node 0.
	job := waitJob(t, ns, "multi-node-example-node-0")
	if got := ptr.Deref(job.Spec.Completions, 0); got != 3 {
		t.Errorf("completions = %d, want 3", got)
	}
	c := job.Spec.Template.Spec.Containers[0]
	if c.Image != "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime" || len(c.Command) < 4 || c.Command[0] != "torchrun" {
		t.Errorf("container = image %q command %q, want the runtime's image running torchrun", c.Image, c.Command)
	}
	wantEnv := map[string]string{
		"KUBEFLOW_TRAINER_SERVER_URL":     fmt.Sprintf("https://trainjob-operator-webhook.trainjob-system.svc:%d%s", statusServerPort, trainer.StatusServerPath(ns, "multi-node-example")),
		"KUBEFLOW_TRAINER_SERVER_CA_CERT": "/var/run/secrets/kubeflow/trainer/ca.crt",
		"KUBEFLOW_TRAINER_SERVER_TOKEN":   "/var/run/secrets/kubeflow/trainer/token",
		"PET_NNODES":                      "3",
		"PET_NPROC_PER_NODE":              "1",
		"PET_NODE_RANK":                   "fieldRef:metadata.annotations['batch.kubernetes.io/job-completion-index']",
		"PET_MASTER_ADDR":                 "multi-node-example-node-0-0.multi-node-example",
		"PET_MASTER_PORT":                 "29500",
	}
	if diff := cmp.Diff(wantEnv, envOf(job)); diff != "" {
		t.Errorf("trainer env (-want +got):\n%s", diff)
	}
	if got := job.Spec.Template.Labels[trainer.JobSetNameLabel]; got != "multi-node-example" {
		t.Errorf("Pods are not selectable as in Kubeflow's docs: %s=%q", trainer.JobSetNameLabel, got)
	}

	waitRunning(t, ns, "multi-node-example")
	out, err := cluster.Kubectl("get", "trainjob", "-n", ns, "multi-node-example")
	if err != nil {
		t.Fatalf("kubectl get trainjob: %v\n%s", err, out)
	}
	for _, col := range []string{"STATE", "RUNTIME", "NODES", "AGE", "Running", "torch-distributed"} {
		if !strings.Contains(out, col) {
			t.Errorf("kubectl get trainjob output lacks %q:\n%s", col, out)
		}
	}
}

// Fields of Kubeflow Trainer this controller does not implement, and values
// that make no sense, are refused by the API server with a message that
// names the field: never accepted and silently mis-run.
func TestSchemaRejectsWhatItCannotRun(t *testing.T) {
	ns := cluster.NewNamespace(t)
	trainJob := func(spec string) string {
		return "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata:\n  name: bad\n  namespace: " + ns +
			"\nspec:\n  runtimeRef:\n    name: torch-distributed\n" + spec
	}
	runtime := func(spec string) string {
		return "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata:\n  name: bad\nspec:\n" + spec
	}
	nodeJob := "  template:\n    spec:\n      replicatedJobs:\n      - name: node\n        template:\n          spec:\n" +
		"            template:\n              spec:\n                containers:\n                - name: node\n                  image: busybox\n"

	cases := map[string]struct {
		manifest string
		want     []string
	}{
		"initializer storageUri not a URI": {
			manifest: trainJob("  initializer:\n    dataset:\n      storageUri: tatsu-lab/alpaca\n"),
			want:     []string{"spec.initializer.dataset.storageUri", "must be a valid URI"},
		},
		"a runtime patch that renames a Job": {
			manifest: trainJob("  runtimePatches:\n  - manager: example.com/me\n    trainingRuntimeSpec:\n      template:\n        spec:\n" +
				"          replicatedJobs:\n          - name: node\n            template:\n              metadata:\n                name: other\n"),
			want: []string{"spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0].template.metadata", "labels and annotations only"},
		},
		"podTemplateOverrides without a target": {
			manifest: trainJob("  podTemplateOverrides:\n  - targetJobs: []\n    spec:\n      nodeSelector:\n        a: b\n"),
			want:     []string{"spec.podTemplateOverrides[0].targetJobs", "should have at least 1 items"},
		},
		"a command argument over Kubeflow's 1 MiB": {
			manifest: trainJob("  trainer:\n    command:\n    - '" + strings.Repeat("x", 1048577) + "'\n"),
			want:     []string{"spec.trainer.command[0]", "may not be more than 1048576"},
		},
		"zero deadline": {
			manifest: trainJob("  activeDeadlineSeconds: 0\n"),
			want:     []string{"spec.activeDeadlineSeconds", "greater than or equal to 1"},
		},
		"negative TTL": {
			manifest: trainJob("  ttlSecondsAfterFinished: -1\n"),
			want:     []string{"spec.ttlSecondsAfterFinished", "greater than or equal to 0"},
		},
		"zero nodes": {
			manifest: trainJob("  trainer:\n    numNodes: 0\n"),
			want:     []string{"spec.trainer.numNodes", "greater than or equal to 1"},
		},
		"numProcPerNode word": {
			manifest: trainJob("  trainer:\n    numProcPerNode: auto\n"),
			want:     []string{"spec.trainer.numProcPerNode", "must be of type integer"},
		},
		"unknown runtime kind": {
			manifest: trainJob("    kind: JobSetRuntime\n"),
			want:     []string{"spec.runtimeRef.kind", "Unsupported value"},
		},
		"managedBy not a path": {
			manifest: trainJob("  managedBy: me\n"),
			want:     []string{"spec.managedBy", "domain-prefixed path"},
		},
		"upper-case name": {
			manifest: strings.Replace(trainJob(""), "name: bad", "name: Bad", 1),
			want:     []string{"metadata.name", "RFC 1035"},
		},
		"Flux with no process per node": {
			manifest: runtime("  mlPolicy:\n    flux:\n      numProcPerNode: 0\n" + nodeJob),
			want:     []string{"spec.mlPolicy.flux.numProcPerNode", "must be >= 1"},
		},
		"two ML policies": {
			manifest: runtime("  mlPolicy:\n    jax: {}\n    xgboost: {}\n" + nodeJob),
			want:     []string{"spec.mlPolicy", "only one of the policies"},
		},
		"elastic torch": {
			manifest: runtime("  mlPolicy:\n    torch:\n      elasticPolicy:\n        maxNodes: 4\n" + nodeJob),
			want:     []string{"spec.mlPolicy.torch.elasticPolicy", "not supported"},
		},
		"two gang schedulers": {
			manifest: runtime("  podGroupPolicy:\n    coscheduling: {}\n    volcano: {}\n" + nodeJob),
			want:     []string{"spec.podGroupPolicy", "only one of coscheduling and volcano"},
		},
		"dependsOn on the first replicated Job": {
			manifest: runtime(nodeJob + "        dependsOn:\n        - name: init\n          status: Complete\n"),
			want:     []string{"spec.template.spec.replicatedJobs", "the first replicated Job cannot have dependsOn"},
		},
		"a network subdomain that is not a DNS label": {
			manifest: runtime(nodeJob + "      network:\n        subdomain: Shared_Ring\n"),
			want:     []string{"spec.template.spec.network.subdomain", "should match"},
		},
		"JobSet failurePolicy restarting one Job (alpha in JobSet)": {
			manifest: runtime(nodeJob + "      failurePolicy:\n        maxRestarts: 3\n        rules:\n        - action: RestartJob\n"),
			want:     []string{"spec.template.spec.failurePolicy.rules", "RestartJob and RestartJobAndIgnoreMaxRestarts", "not supported"},
		},
		"JobSet failurePolicy restarting in place (alpha in JobSet)": {
			manifest: runtime(nodeJob + "      failurePolicy:\n        restartStrategy: InPlaceRestart\n"),
			want:     []string{"spec.template.spec.failurePolicy.restartStrategy", "InPlaceRestart", "not supported"},
		},
		"Job-level TTL in a runtime": {
			manifest: runtime(strings.Replace(nodeJob, "          spec:\n", "          spec:\n            ttlSecondsAfterFinished: 10\n", 1)),
			want:     []string{"spec.template.spec.replicatedJobs[0].template.spec.ttlSecondsAfterFinished", "behind the TrainJob's back"},
		},
		"a volume claim template without storage": {
			manifest: runtime(strings.Replace(nodeJob, "  template:\n    spec:\n", "  template:\n    spec:\n      volumeClaimPolicies:\n      - templates:\n        - metadata:\n            name: data\n", 1)),
			want:     []string{"spec.template.spec.volumeClaimPolicies[0].templates", "must request storage"},
		},
		"a group name that is not a DNS label": {
			manifest: runtime(strings.Replace(nodeJob, "      - name: node\n", "      - name: node\n        groupName: Workers\n", 1)),
			want:     []string{"spec.template.spec.replicatedJobs[0].groupName", "should match"},
		},
		"Job-level deadline in a runtime": {
			manifest: runtime(strings.Replace(nodeJob, "          spec:\n", "          spec:\n            activeDeadlineSeconds: 10\n", 1)),
			want:     []string{"spec.template.spec.replicatedJobs[0].template.spec.activeDeadlineSeconds", "behind the TrainJob's back"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var obj unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(tc.manifest), &obj.Object); err != nil {
				t.Fatalf("test manifest: %v\n%s", err, tc.manifest)
			}
			err := cluster.Client.Create(context.Background(), &obj, client.DryRunAll)
			if err == nil {
				t.Fatalf("the API server accepted:\n%s", tc.manifest)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// The manifests the project ships apply to the API server as they are.
func TestShippedManifestsApply(t *testing.T) {
	ns := cluster.NewNamespace(t)
	ensureNamespaces(t, "trainjob-system")
	for _, dir := range []string{"config/crd", "config/rbac", "config/runtimes", "config/default"} {
		if out, err := cluster.Kubectl("apply", "--server-side", "--dry-run=server", "-k", filepath.Join(repoRoot, dir)); err != nil {
			t.Errorf("kubectl apply -k %s: %v\n%s", dir, err, out)
		}
	}
	// The Kueue samples need Kueue's CRDs: the Kueue e2e suite applies them.
	samples, err := filepath.Glob(filepath.Join(repoRoot, "config", "samples", "*.yaml"))
	gang, gangErr := filepath.Glob(filepath.Join(repoRoot, "config", "samples", "gang", "*.yaml"))
	samples = append(samples, gang...)
	if err = errors.Join(err, gangErr); err != nil || len(gang) == 0 || len(samples) == len(gang) {
		t.Fatalf("no samples found (err %v)", err)
	}
	for _, f := range samples {
		if out, err := cluster.Kubectl("apply", "--dry-run=server", "-n", ns, "-f", f); err != nil {
			t.Errorf("kubectl apply -f %s: %v\n%s", filepath.Base(f), err, out)
		}
	}
}

// What the controller reads only when it creates the Jobs, or what makes no
// sense once a TrainJob finished, cannot be changed afterwards: refused by
// the CRD schema itself, so without the webhook too (which does not check
// any of it).
// A runtime exported from a cluster running Kubeflow Trainer carries the
// defaults JobSet's CRD writes, groupName default among them: it applies.
func TestRuntimeWithJobSetDefaultsApplies(t *testing.T) {
	manifest := "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\nmetadata:\n  name: exported\nspec:\n" +
		"  template:\n    spec:\n      replicatedJobs:\n      - name: node\n        groupName: default\n        replicas: 1\n        template:\n" +
		"          spec:\n            template:\n              spec:\n                containers:\n                - name: node\n                  image: busybox\n"
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Create(context.Background(), &obj, client.DryRunAll); err != nil {
		t.Errorf("the API server refused a runtime with groupName: default: %v", err)
	}
}

func TestSchemaRefusesChangesItWouldIgnore(t *testing.T) {
	ns := cluster.NewNamespace(t)
	// Managed by MultiKueue, so that no controller here writes to them.
	plain := utiltesting.MakeTrainJob("plain", ns).ManagedBy(lifecycle.MultiKueue).Label("team", "a")
	plain.Spec.Labels = map[string]string{"team": "a"}
	withTrainer := utiltesting.MakeTrainJob("with-trainer", ns).ManagedBy(lifecycle.MultiKueue).NumNodes(2)
	withTrainer.Spec.Annotations = map[string]string{"note": "a"}
	// queued waits suspended, as Kueue keeps a TrainJob until it admits
	// it; stopping is suspended but its Jobs still have active Pods.
	nodePatch := func(sa string, nodeSelector map[string]string) []trainer.RuntimePatch {
		return []trainer.RuntimePatch{{Manager: trainer.KueueManager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
				Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
					Spec: &trainer.PodSpecPatch{ServiceAccountName: ptr.To(sa), NodeSelector: nodeSelector},
				}}},
			}}}},
		}}}
	}
	queued := utiltesting.MakeTrainJob("queued", ns).ManagedBy(lifecycle.MultiKueue).Suspend(true)
	queued.Spec.RuntimePatches = nodePatch("trainer", nil)
	stopping := utiltesting.MakeTrainJob("stopping", ns).ManagedBy(lifecycle.MultiKueue).Suspend(true)
	for _, tj := range []*trainer.TrainJob{plain.Obj(), withTrainer.Obj(), queued.Obj(), stopping.Obj()} {
		cluster.Create(t, tj)
	}
	active, err := cluster.GetTrainJob(ns, "stopping")
	if err != nil {
		t.Fatal(err)
	}
	active.Status.JobsStatus = []trainer.JobStatus{{Name: "node", Replicas: 1, Active: 1}}
	if err := cluster.Client.Status().Update(context.Background(), active); err != nil {
		t.Fatalf("recording that stopping's Jobs are active: %v", err)
	}
	// plain finished; suspending it must be refused.
	done, err := cluster.GetTrainJob(ns, "plain")
	if err != nil {
		t.Fatal(err)
	}
	done.Status.Conditions = []metav1.Condition{{Type: trainer.TrainJobComplete, Status: metav1.ConditionTrue,
		Reason: trainer.TrainJobJobsCompletedReason, Message: "done", LastTransitionTime: metav1.Now()}}
	if err := cluster.Client.Status().Update(context.Background(), done); err != nil {
		t.Fatalf("recording that plain finished: %v", err)
	}

	cases := map[string]struct {
		name   string
		change func(*trainer.TrainJob)
		want   []string // refused with these; accepted when empty
	}{
		"add trainer": {
			name:   "plain",
			change: func(tj *trainer.TrainJob) { tj.Spec.Trainer = &trainer.Trainer{NumNodes: ptr.To[int32](4)} },
			want:   []string{"spec.trainer", "cannot be added or removed"},
		},
		"remove trainer": {
			name:   "with-trainer",
			change: func(tj *trainer.TrainJob) { tj.Spec.Trainer = nil },
			want:   []string{"spec.trainer", "cannot be added or removed"},
		},
		"change labels": {
			name:   "plain",
			change: func(tj *trainer.TrainJob) { tj.Spec.Labels["team"] = "b" },
			want:   []string{"spec.labels", "labels are immutable", "when they are created"},
		},
		"remove labels": {
			name:   "plain",
			change: func(tj *trainer.TrainJob) { tj.Spec.Labels = nil },
			want:   []string{"spec.labels", "labels are immutable"},
		},
		"add annotations": {
			name:   "plain",
			change: func(tj *trainer.TrainJob) { tj.Spec.Annotations = map[string]string{"note": "b"} },
			want:   []string{"spec.annotations", "annotations are immutable"},
		},
		"change annotations": {
			name:   "with-trainer",
			change: func(tj *trainer.TrainJob) { tj.Spec.Annotations["note"] = "b" },
			want:   []string{"spec.annotations", "annotations are immutable"},
		},
		"change the TrainJob's own labels": {
			name:   "plain",
			change: func(tj *trainer.TrainJob) { tj.Labels["team"] = "b" },
		},
		"suspend a finished TrainJob": {
			name:   "plain",
			change: func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(true) },
			want:   []string{"spec.suspend: Forbidden: the TrainJob finished (it is Complete or Failed); a finished TrainJob cannot be suspended"},
		},
		"change the TTL of a finished TrainJob": {
			name:   "plain",
			change: func(tj *trainer.TrainJob) { tj.Spec.TTLSecondsAfterFinished = ptr.To[int32](3600) },
		},
		"suspend a TrainJob that has not finished": {
			name:   "with-trainer",
			change: func(tj *trainer.TrainJob) { tj.Spec.Suspend = ptr.To(true) },
		},
		"change the trainer's image": {
			name:   "with-trainer",
			change: func(tj *trainer.TrainJob) { tj.Spec.Trainer.Image = ptr.To("other:1") },
			want:   []string{"spec.trainer: Invalid value", "trainer is immutable"},
		},
		"change the trainer's resources": {
			name: "with-trainer",
			change: func(tj *trainer.TrainJob) {
				tj.Spec.Trainer.ResourcesPerNode = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
			},
			want: []string{"trainer is immutable"},
		},
		"patch a running TrainJob": {
			name:   "with-trainer",
			change: func(tj *trainer.TrainJob) { tj.Spec.RuntimePatches = nodePatch("trainer", nil) },
			want:   []string{"spec.runtimePatches: Forbidden: runtimePatches can change only while the TrainJob is suspended"},
		},
		"patch and resume in one update, as Kueue admits": {
			name: "queued",
			change: func(tj *trainer.TrainJob) {
				tj.Spec.RuntimePatches = nodePatch("trainer", map[string]string{"flavor": "spot"})
				tj.Spec.Suspend = ptr.To(false)
			},
		},
		"suspend and patch in one update": {
			name: "with-trainer",
			change: func(tj *trainer.TrainJob) {
				tj.Spec.RuntimePatches = nodePatch("trainer", nil)
				tj.Spec.Suspend = ptr.To(true)
			},
		},
		"patch a suspended TrainJob whose Jobs still have active Pods": {
			name:   "stopping",
			change: func(tj *trainer.TrainJob) { tj.Spec.RuntimePatches = nodePatch("trainer", nil) },
			want:   []string{"spec: Forbidden: runtimePatches, podTemplateOverrides and podSpecOverrides cannot change while Jobs of the TrainJob have active Pods"},
		},
		"override a suspended TrainJob whose Jobs still have active Pods": {
			name: "stopping",
			change: func(tj *trainer.TrainJob) {
				tj.Spec.PodTemplateOverrides = []trainer.PodTemplateOverride{{
					TargetJobs: []trainer.PodTemplateOverrideTargetJob{{Name: "node"}},
					Spec:       &trainer.PodTemplateSpecOverride{NodeSelector: map[string]string{"a": "b"}},
				}}
			},
			want: []string{"spec: Forbidden: runtimePatches, podTemplateOverrides and podSpecOverrides cannot change while Jobs of the TrainJob have active Pods"},
		},
		"change an immutable field of a patch": {
			name:   "queued",
			change: func(tj *trainer.TrainJob) { tj.Spec.RuntimePatches = nodePatch("other", nil) },
			want:   []string{"serviceAccountName", "serviceAccountName is immutable"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tj, err := cluster.GetTrainJob(ns, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(tj)
			// As kubectl does, the client names its field manager: an
			// update from one that does not keeps the fields of ours it
			// leaves out (TestFieldsOfOursSurviveKubeflowTypedUpdates).
			err = cluster.Client.Update(context.Background(), tj, client.DryRunAll, client.FieldOwner("kubectl-edit"))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused, want accepted: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want refused with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// The configuration shipped with the Deployment deletes nothing: retention
// is opt-in (KEP-1618).
func TestShippedConfigurationKeepsEverything(t *testing.T) {
	cfg, err := config.Load(filepath.Join(repoRoot, "config", "manager", "config.yaml"))
	if err != nil {
		t.Fatalf("loading the shipped configuration: %v", err)
	}
	if p := cfg.ObjectRetentionPolicies; p != nil && p.TrainJobs != nil {
		if diff := cmp.Diff(&configv1alpha1.TrainJobRetentionPolicy{}, p.TrainJobs); diff != "" {
			t.Errorf("the shipped configuration has retention policies (-want +got):\n%s", diff)
		}
	}
}

// A client built on Kubeflow Trainer's Go types (Kueue admits and stops
// TrainJobs that way) writes the whole TrainJob back without the fields
// this project adds: the webhook keeps them. A client that names its field
// manager, as kubectl always does, removes them on purpose.
func TestFieldsOfOursSurviveKubeflowTypedUpdates(t *testing.T) {
	ns := cluster.NewNamespace(t)
	tj := utiltesting.MakeTrainJob("kept", ns).ManagedBy(lifecycle.MultiKueue).TTL(600).Obj()
	tj.Spec.Labels = map[string]string{"team": "a"}
	cluster.Create(t, tj)

	// The update a Kubeflow-typed client sends: suspended, and without
	// spec.ttlSecondsAfterFinished and spec.labels, which its types lack.
	kubeflowTyped := func() *unstructured.Unstructured {
		t.Helper()
		var u unstructured.Unstructured
		u.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "kept"}, &u); err != nil {
			t.Fatal(err)
		}
		unstructured.RemoveNestedField(u.Object, "spec", "ttlSecondsAfterFinished")
		unstructured.RemoveNestedField(u.Object, "spec", "labels")
		if err := unstructured.SetNestedField(u.Object, true, "spec", "suspend"); err != nil {
			t.Fatal(err)
		}
		return &u
	}
	if err := cluster.Client.Update(context.Background(), kubeflowTyped()); err != nil {
		t.Fatalf("update without the fields, and without a field manager: %v", err)
	}
	got, err := cluster.GetTrainJob(ns, "kept")
	if err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(got.Spec.Suspend, false) || ptr.Deref(got.Spec.TTLSecondsAfterFinished, 0) != 600 || got.Spec.Labels["team"] != "a" {
		t.Errorf("after the update: suspend %v, ttlSecondsAfterFinished %v, labels %v; want suspended, with the TTL and labels kept",
			got.Spec.Suspend, got.Spec.TTLSecondsAfterFinished, got.Spec.Labels)
	}

	// kubectl edit names its field manager: the removal is meant. (The
	// labels are immutable, so only the TTL goes.)
	u := kubeflowTyped()
	unstructured.SetNestedStringMap(u.Object, map[string]string{"team": "a"}, "spec", "labels") //nolint:errcheck // a map of strings always sets
	if err := cluster.Client.Update(context.Background(), u, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatalf("update by kubectl-edit: %v", err)
	}
	if got, err = cluster.GetTrainJob(ns, "kept"); err != nil {
		t.Fatal(err)
	}
	if got.Spec.TTLSecondsAfterFinished != nil {
		t.Errorf("ttlSecondsAfterFinished = %d after kubectl removed it, want none", *got.Spec.TTLSecondsAfterFinished)
	}
}

// The status Kueue's MultiKueue mirrors onto the manager cluster's
// TrainJob is a worker's copy's, written back through Kubeflow Trainer's
// Go types: jobsStatus without the fields this project adds (replicas,
// trainer, waiting, the recorded replicas). The schema takes it, as
// Kubeflow's does.
func TestStatusMirroredThroughKubeflowTypesIsAccepted(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.Create(t, utiltesting.MakeTrainJob("mirrored", ns).ManagedBy(lifecycle.MultiKueue).Obj())
	var u unstructured.Unstructured
	u.SetGroupVersionKind(trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "mirrored"}, &u); err != nil {
		t.Fatal(err)
	}
	status := map[string]any{
		"conditions": []any{map[string]any{
			"type": "Complete", "status": "True", "reason": "AllJobsCompleted", "message": "done",
			"lastTransitionTime": "2026-12-05T00:37:48Z", "observedGeneration": int64(3),
		}},
		"jobsStatus": []any{map[string]any{"name": "node", "ready": int64(0), "succeeded": int64(1), "failed": int64(0), "active": int64(0), "suspended": int64(0)}},
	}
	if err := unstructured.SetNestedField(u.Object, status, "status"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Status().Update(context.Background(), &u); err != nil {
		t.Fatalf("the status as Kueue mirrors it: %v", err)
	}
	got, err := cluster.GetTrainJob(ns, "mirrored")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.JobsStatus) != 1 || got.Status.JobsStatus[0].Succeeded != 1 || got.FinishedCondition() == nil {
		t.Errorf("status stored: %+v", got.Status)
	}
}

// Each runtime patch records when it was last written, as under Kubeflow
// v2.3: at creation, and whenever its content changes; an update that
// leaves it as it was keeps the time, even one that sends it back without.
func TestRuntimePatchesRecordWhenWritten(t *testing.T) {
	ns := cluster.NewNamespace(t)
	patch := func(pool string) []trainer.RuntimePatch {
		return []trainer.RuntimePatch{{Manager: trainer.KueueManager, TrainingRuntimeSpec: &trainer.TrainingRuntimeSpecPatch{
			Template: &trainer.JobSetTemplatePatch{Spec: &trainer.JobSetSpecPatch{ReplicatedJobs: []trainer.ReplicatedJobPatch{{
				Name: "node", Template: &trainer.JobTemplatePatch{Spec: &trainer.JobSpecPatch{Template: &trainer.PodTemplatePatch{
					Spec: &trainer.PodSpecPatch{NodeSelector: map[string]string{"pool": pool}},
				}}},
			}}}},
		}}}
	}
	// Managed by MultiKueue, so that no controller here writes to it.
	tj := utiltesting.MakeTrainJob("stamped", ns).ManagedBy(lifecycle.MultiKueue).Suspend(true).Obj()
	tj.Spec.RuntimePatches = patch("a")
	before := time.Now().Truncate(time.Second)
	cluster.Create(t, tj)
	update := func(change func(*trainer.TrainJob)) *metav1.Time {
		t.Helper()
		if change != nil {
			got, err := cluster.GetTrainJob(ns, "stamped")
			if err != nil {
				t.Fatal(err)
			}
			change(got)
			if err := cluster.Client.Update(context.Background(), got); err != nil {
				t.Fatal(err)
			}
		}
		got, err := cluster.GetTrainJob(ns, "stamped")
		if err != nil {
			t.Fatal(err)
		}
		return got.Spec.RuntimePatches[0].Time
	}
	created := update(nil)
	if created == nil || created.Time.Before(before) {
		t.Fatalf("time at creation %v, want the creation's (after %v)", created, before)
	}
	// The times have a resolution of a second.
	time.Sleep(1100 * time.Millisecond)
	if got := update(func(tj *trainer.TrainJob) { tj.Spec.TTLSecondsAfterFinished = ptr.To[int32](60) }); !got.Equal(created) {
		t.Errorf("time after an update that leaves the patch alone %v, want %v", got, created)
	}
	if got := update(func(tj *trainer.TrainJob) { tj.Spec.RuntimePatches[0].Time = nil }); !got.Equal(created) {
		t.Errorf("time after an update that sends the patch back without it %v, want %v", got, created)
	}
	if got := update(func(tj *trainer.TrainJob) { tj.Spec.RuntimePatches = patch("b") }); got == nil || !got.After(created.Time) {
		t.Errorf("time after the patch changed %v, want later than %v", got, created)
	}
}

// What Kubeflow Trainer v2.3's runtime-patches example exercises, in a
// TrainJob of our own: a platform team's patch adds labels and annotations
// to the Jobs and places the Pods (service account, node selector,
// toleration); the trainer's resourcesPerNode merges into the runtime's and
// decides the processes per node.
func TestKubeflowRuntimePatchesExample(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.Create(t, utiltesting.MakeRuntimeSpec().Torch().Runtime("torch-distributed", ns))
	manifest := `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: patched-example
spec:
  runtimeRef:
    kind: TrainingRuntime
    name: torch-distributed
  trainer:
    numNodes: 2
    command: [torchrun, train.py]
    env:
    - name: CUSTOM_VAR
      value: custom-value
    resourcesPerNode:
      requests: {cpu: "2", memory: 4Gi}
      limits: {cpu: "4", memory: 8Gi}
  runtimePatches:
  - manager: example.io/platform-team
    trainingRuntimeSpec:
      template:
        metadata:
          labels: {team: ml-platform}
          annotations: {prometheus.io/scrape: "true"}
        spec:
          replicatedJobs:
          - name: node
            template:
              spec:
                template:
                  spec:
                    serviceAccountName: training-sa
                    nodeSelector: {node-type: training}
                    tolerations:
                    - {key: training-workload, operator: Equal, value: "true", effect: NoSchedule}
`
	f := filepath.Join(t.TempDir(), "trainjob.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := cluster.Kubectl("apply", "--server-side", "-n", ns, "-f", f); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	job := waitJob(t, ns, "patched-example-node-0")
	if job.Labels["team"] != "ml-platform" || job.Annotations["prometheus.io/scrape"] != "true" {
		t.Errorf("Job labels %v, annotations %v: want the patch's", job.Labels, job.Annotations)
	}
	pod := job.Spec.Template.Spec
	if pod.ServiceAccountName != "training-sa" || pod.NodeSelector["node-type"] != "training" ||
		len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "training-workload" {
		t.Errorf("Pod spec: serviceAccountName %q, nodeSelector %v, tolerations %v; want the patch's", pod.ServiceAccountName, pod.NodeSelector, pod.Tolerations)
	}
	res := pod.Containers[0].Resources
	if res.Requests.Cpu().String() != "2" || res.Limits.Cpu().String() != "4" || res.Limits.Memory().String() != "8Gi" {
		t.Errorf("resources = %v, want the TrainJob's resourcesPerNode", res)
	}
	if env := envOf(job); env["PET_NPROC_PER_NODE"] != "2" || env["CUSTOM_VAR"] != "custom-value" || env["PET_NNODES"] != "2" {
		t.Errorf("env %v: want 2 processes per node (the CPU request), and the TrainJob's variable", env)
	}
}

// A client that reads a TrainJob into Go types and writes it back whole, as
// Kueue does at admission, re-formats the quantities of resourcesPerNode
// (0.5 comes back as 500m). spec.trainer is immutable: the rewrite, the same
// values, must not be refused as a change.
func TestWholeUpdateWithReformattedQuantities(t *testing.T) {
	ns := cluster.NewNamespace(t)
	manifest := `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: quantities
  labels: {kueue.x-k8s.io/queue-name: q}
spec:
  managedBy: kueue.x-k8s.io/multikueue
  suspend: true
  runtimeRef: {name: torch-distributed}
  trainer:
    resourcesPerNode:
      requests: {cpu: "0.5", memory: 1.5Gi}
`
	f := filepath.Join(t.TempDir(), "trainjob.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := cluster.Kubectl("apply", "--server-side", "-n", ns, "-f", f); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	tj, err := cluster.GetTrainJob(ns, "quantities")
	if err != nil {
		t.Fatal(err)
	}
	tj.Spec.Suspend = ptr.To(false)
	if err := cluster.Client.Update(context.Background(), tj); err != nil {
		t.Errorf("a whole update with the same resources, re-formatted by Go types, was refused: %v", err)
	}
}

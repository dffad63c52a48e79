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

package webhook

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// runtimeSpec decodes a runtime's spec written as in a manifest.
func runtimeSpec(t *testing.T, manifest string) trainer.TrainingRuntimeSpec {
	t.Helper()
	var spec trainer.TrainingRuntimeSpec
	if err := yaml.UnmarshalStrict([]byte(manifest), &spec); err != nil {
		t.Fatalf("decoding the runtime spec: %v", err)
	}
	return spec
}

// causes are the fields and error types of an Invalid error, as the API
// server reports them, "<field>: <type>".
func causes(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var status *apierrors.StatusError
	if !errors.As(err, &status) || !apierrors.IsInvalid(err) {
		t.Fatalf("error %v is not an Invalid status error", err)
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		out = append(out, c.Field+": "+string(c.Type))
	}
	return out
}

const (
	// trainerStep is a trainer step for torch: the replicated Job labelled
	// trainer with a container named node.
	trainerStep = `
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
                    image: pytorch/pytorch:2.13.0
`
	// initializers are Kubeflow's dataset and model initializer steps.
	initializers = `
      - name: dataset-initializer
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer
          spec:
            template:
              spec:
                containers:
                  - name: dataset-initializer
                    image: ghcr.io/kubeflow/trainer/dataset-initializer
      - name: model-initializer
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: model-initializer
          spec:
            template:
              spec:
                containers:
                  - name: model-initializer
                    image: ghcr.io/kubeflow/trainer/model-initializer
`
	// torch is a torch runtime of one trainer step.
	torch = "mlPolicy: {torch: {}}\ntemplate:\n  spec:\n    replicatedJobs:" + trainerStep
	// torchWithInitializers is a torch runtime with Kubeflow's initializers.
	torchWithInitializers = "mlPolicy: {torch: {}}\ntemplate:\n  spec:\n    replicatedJobs:" + initializers + trainerStep
)

// withReplicas gives replicated Job rjob of spec replicas Jobs.
func withReplicas(spec, rjob string, replicas int) string {
	return strings.Replace(spec, "- name: "+rjob+"\n", fmt.Sprintf("- name: %s\n        replicas: %d\n", rjob, replicas), 1)
}

func TestValidateRuntime(t *testing.T) {
	cases := map[string]struct {
		spec string
		// wantErrs are the refused fields and their error types.
		wantErrs []string
	}{
		"torch with a trainer step": {
			spec: torch,
		},
		"torch with initializers": {
			spec: torchWithInitializers,
		},
		"trainer step of two replicas: refused once, by Kubeflow's rule and the plan's alike": {
			spec:     withReplicas(torch, "node", 2),
			wantErrs: []string{"spec.template.spec.replicatedJobs[0].replicas: FieldValueInvalid"},
		},
		"initializer of two replicas": {
			spec:     withReplicas(torchWithInitializers, "model-initializer", 2),
			wantErrs: []string{"spec.template.spec.replicatedJobs[1].replicas: FieldValueInvalid"},
		},
		"initializer step without its container (Kubeflow's rule)": {
			spec: strings.Replace(torchWithInitializers,
				"- name: dataset-initializer\n                    image", "- name: download\n                    image", 1),
			wantErrs: []string{"spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: FieldValueRequired"},
		},
		"plain trainer step without a node container (Kubeflow's rule; the plan needs none)": {
			spec:     strings.Replace("template:\n  spec:\n    replicatedJobs:"+trainerStep, "- name: node\n                    image", "- name: main\n                    image", 1),
			wantErrs: []string{"spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: FieldValueRequired"},
		},
		"torch without a trainer step": {
			spec: strings.NewReplacer("trainer.kubeflow.org/trainjob-ancestor-step: trainer", "app: train", "- name: node\n        template", "- name: worker\n        template").
				Replace(torch),
			wantErrs: []string{"spec.template.spec.replicatedJobs: FieldValueRequired"},
		},
		"two trainer steps": {
			spec:     torch + strings.Replace(trainerStep, "- name: node\n", "- name: other\n", 1),
			wantErrs: []string{"spec.template.spec.replicatedJobs[1].template.metadata.labels: FieldValueInvalid", "spec.template.spec.replicatedJobs: FieldValueRequired"},
		},
		"envInjection naming a container the replicated Job lacks": {
			spec: `
mlPolicy:
  torch:
    envInjection:
      targets: [{jobName: node, containerNames: [sidecar]}]
template:
  spec:
    replicatedJobs:` + trainerStep,
			wantErrs: []string{"spec.mlPolicy.torch.envInjection.targets[0].containerNames[0]: FieldValueNotFound"},
		},
		"mpi launcher without workers": {
			spec: `
mlPolicy:
  numNodes: 2
  mpi: {mpiImplementation: OpenMPI}
template:
  spec:
    replicatedJobs:
      - name: launcher
        template:
          metadata:
            labels:
              trainer.kubeflow.org/trainjob-ancestor-step: trainer
          spec:
            template:
              spec:
                containers: [{name: node, image: mpioperator/mpi-pi}]
`,
			wantErrs: []string{"spec.template.spec.replicatedJobs: FieldValueRequired"},
		},
		"dependsOn a replicated Job listed after it": {
			spec: "template:\n  spec:\n    replicatedJobs:" + trainerStep + `
      - name: prepare
        dependsOn: [{name: report, status: Complete}]
        template:
          spec:
            template:
              spec:
                containers: [{name: prepare, image: busybox}]
      - name: report
        template:
          spec:
            template:
              spec:
                containers: [{name: report, image: busybox}]
`,
			wantErrs: []string{"spec.template.spec.replicatedJobs[1].dependsOn[0].name: FieldValueInvalid"},
		},
		"failurePolicy message pattern that is no regular expression": {
			spec:     "template:\n  spec:\n    failurePolicy:\n      maxRestarts: 1\n      rules:\n        - action: FailJobSet\n          onJobFailureMessagePatterns: ['(unclosed']\n    replicatedJobs:" + trainerStep,
			wantErrs: []string{"spec.template.spec.failurePolicy.rules[0].onJobFailureMessagePatterns[0]: FieldValueInvalid"},
		},
		"coordinator Pod beyond the Pods of its Job": {
			spec: "template:\n  spec:\n    coordinator: {replicatedJob: ps, podIndex: 3}\n    replicatedJobs:" + trainerStep + `
      - name: ps
        template:
          spec:
            completions: 2
            parallelism: 2
            template:
              spec:
                containers: [{name: ps, image: busybox}]
`,
			wantErrs: []string{"spec.template.spec.coordinator.podIndex: FieldValueInvalid"},
		},
		"coordinator Pod beyond the runtime's default numNodes: a TrainJob may ask for more nodes": {
			spec: "mlPolicy: {numNodes: 2, torch: {}}\ntemplate:\n  spec:\n    coordinator: {replicatedJob: node, podIndex: 3}\n    replicatedJobs:" + trainerStep,
		},
		"volume claim template no container mounts": {
			spec:     "template:\n  spec:\n    volumeClaimPolicies:\n      - templates:\n          - metadata: {name: data}\n            spec: {resources: {requests: {storage: 1Gi}}}\n    replicatedJobs:" + trainerStep,
			wantErrs: []string{"spec.template.spec.volumeClaimPolicies[0].templates[0].metadata.name: FieldValueInvalid"},
		},
		"volume claim template too long a name for any TrainJob's claim: the TrainJob's error, said of the runtime": {
			spec: strings.ReplaceAll("template:\n  spec:\n    volumeClaimPolicies:\n      - templates:\n          - metadata: {name: NAME}\n            spec: {resources: {requests: {storage: 1Gi}}}\n    replicatedJobs:"+
				strings.Replace(trainerStep, "image: pytorch/pytorch:2.13.0", "image: pytorch/pytorch:2.13.0\n                    volumeMounts: [{name: NAME, mountPath: /data}]", 1),
				"NAME", strings.Repeat("d", 62)),
			wantErrs: []string{"spec: FieldValueInvalid"},
		},
		"no spec at all": {
			spec:     "{}",
			wantErrs: []string{"spec.template.spec.replicatedJobs: FieldValueRequired"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := runtimeSpec(t, tc.spec)
			cluster := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "rt"}, Spec: spec}
			namespaced := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "rt", Namespace: "ns"}, Spec: spec}
			// What the update changes the spec from: another runtime.
			previous := runtimeSpec(t, "template:\n  spec:\n    replicatedJobs:"+strings.Replace(trainerStep, "image: pytorch/pytorch:2.13.0", "image: pytorch/pytorch:2.12.0", 1))
			for verb, validate := range map[string]func() (admission.Warnings, error){
				"create ClusterTrainingRuntime": func() (admission.Warnings, error) {
					return ClusterTrainingRuntimeValidator{}.ValidateCreate(context.Background(), cluster)
				},
				"update ClusterTrainingRuntime": func() (admission.Warnings, error) {
					return ClusterTrainingRuntimeValidator{}.ValidateUpdate(context.Background(), &trainer.ClusterTrainingRuntime{Spec: previous}, cluster)
				},
				"create TrainingRuntime": func() (admission.Warnings, error) {
					return TrainingRuntimeValidator{}.ValidateCreate(context.Background(), namespaced)
				},
				"update TrainingRuntime": func() (admission.Warnings, error) {
					return TrainingRuntimeValidator{}.ValidateUpdate(context.Background(), &trainer.TrainingRuntime{Spec: previous}, namespaced)
				},
			} {
				warnings, err := validate()
				if len(warnings) > 0 {
					t.Errorf("%s: warnings %q, want none", verb, warnings)
				}
				if diff := cmp.Diff(tc.wantErrs, causes(t, err)); diff != "" {
					t.Errorf("%s: refused fields (-want +got):\n%s\nerror: %v", verb, diff, err)
				}
			}
		})
	}
}

// The error is the API server's Invalid for the runtime's kind and name,
// each cause naming the field and saying what is wrong with it.
func TestValidateRuntimeMessage(t *testing.T) {
	rt := &trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "torch", Namespace: "ns"}, Spec: runtimeSpec(t,
		strings.Replace(torch, "- name: node\n                    image", "- name: main\n                    image", 1))}
	_, err := TrainingRuntimeValidator{}.ValidateCreate(context.Background(), rt)
	want := `TrainingRuntime.trainer.kubeflow.org "torch" is invalid: spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers: ` +
		`Required value: a replicated Job labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer needs a container named "node"`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}

// A ClusterTrainingRuntime labelled deprecated is warned about when it is
// created, as Kubeflow Trainer v2.3 does (not on update, nor for a
// TrainingRuntime), and checked all the same.
func TestDeprecatedRuntimeWarning(t *testing.T) {
	good := runtimeSpec(t, torch)
	bad := *good.DeepCopy()
	bad.Template.Spec.ReplicatedJobs[0].Replicas = 3
	deprecated := map[string]string{SupportLabel: SupportDeprecated}
	const warning = `ClusterTrainingRuntime "old-torch" is deprecated (trainer.kubeflow.org/support=deprecated): a future release of Kubeflow Trainer will remove it; ` +
		"see the runtime deprecation policy: https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
	cases := map[string]struct {
		validate     func() (admission.Warnings, error)
		wantWarnings admission.Warnings
		wantErrs     []string
	}{
		"created": {
			validate: func() (admission.Warnings, error) {
				return ClusterTrainingRuntimeValidator{}.ValidateCreate(context.Background(),
					&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "old-torch", Labels: deprecated}, Spec: good})
			},
			wantWarnings: admission.Warnings{warning},
		},
		"created, and broken": {
			validate: func() (admission.Warnings, error) {
				return ClusterTrainingRuntimeValidator{}.ValidateCreate(context.Background(),
					&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "old-torch", Labels: deprecated}, Spec: bad})
			},
			wantWarnings: admission.Warnings{warning},
			wantErrs:     []string{"spec.template.spec.replicatedJobs[0].replicas: FieldValueInvalid"},
		},
		"labelled supported": {
			validate: func() (admission.Warnings, error) {
				return ClusterTrainingRuntimeValidator{}.ValidateCreate(context.Background(),
					&trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "old-torch", Labels: map[string]string{SupportLabel: "supported"}}, Spec: good})
			},
		},
		"updated": {
			validate: func() (admission.Warnings, error) {
				rt := &trainer.ClusterTrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "old-torch", Labels: deprecated}, Spec: good}
				return ClusterTrainingRuntimeValidator{}.ValidateUpdate(context.Background(), rt, rt)
			},
		},
		"a TrainingRuntime": {
			validate: func() (admission.Warnings, error) {
				return TrainingRuntimeValidator{}.ValidateCreate(context.Background(),
					&trainer.TrainingRuntime{ObjectMeta: metav1.ObjectMeta{Name: "old-torch", Namespace: "ns", Labels: deprecated}, Spec: good})
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			warnings, err := tc.validate()
			if diff := cmp.Diff(tc.wantWarnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantErrs, causes(t, err)); diff != "" {
				t.Errorf("refused fields (-want +got):\n%s", diff)
			}
		})
	}
}

// The runtimes the product ships are checked here rather than by the
// webhook, which their label (config/runtimes/kustomization.yaml) keeps
// away from them so that they apply before the manager serves: every one
// must pass it.
func TestShippedRuntimesPass(t *testing.T) {
	root := filepath.Join("..", "..", "config", "runtimes")
	kustomization, err := os.ReadFile(filepath.Join(root, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kustomization), WebhookValidationLabel+": disabled") {
		t.Errorf("config/runtimes does not label its runtimes %s: disabled", WebhookValidationLabel)
	}
	var checked int
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" || d.Name() == "kustomization.yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var rt trainer.ClusterTrainingRuntime
		if err := yaml.UnmarshalStrict(data, &rt); err != nil {
			return err
		}
		warnings, err := ClusterTrainingRuntimeValidator{}.ValidateCreate(context.Background(), &rt)
		if err != nil || len(warnings) > 0 {
			t.Errorf("%s: warnings %q, error %v", path, warnings, err)
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 7 {
		t.Errorf("checked %d runtimes of config/runtimes, want every one (7 or more)", checked)
	}
}

// An update that leaves spec as it was is let through, even of a runtime
// stored broken: it makes nothing worse. Spec as Go types write it back
// (empty objects where the manifest had none) is the same spec.
func TestValidateRuntimeUpdateOfSpec(t *testing.T) {
	broken := withReplicas(torch, "node", 2)
	cases := map[string]struct {
		oldSpec, newSpec string
		wantErrs         []string
	}{
		"labels only, of a runtime stored broken": {
			oldSpec: broken,
			newSpec: broken,
		},
		"written back with empty objects": {
			oldSpec: broken,
			newSpec: strings.Replace(broken, "image: pytorch/pytorch:2.13.0", "image: pytorch/pytorch:2.13.0\n                    resources: {}", 1),
		},
		"spec changed, still broken": {
			oldSpec:  broken,
			newSpec:  strings.Replace(broken, "image: pytorch/pytorch:2.13.0", "image: pytorch/pytorch:2.14.0", 1),
			wantErrs: []string{"spec.template.spec.replicatedJobs[0].replicas: FieldValueInvalid"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			meta := metav1.ObjectMeta{Name: "rt", Namespace: "ns"}
			oldRT := &trainer.TrainingRuntime{ObjectMeta: meta, Spec: runtimeSpec(t, tc.oldSpec)}
			newRT := &trainer.TrainingRuntime{ObjectMeta: meta, Spec: runtimeSpec(t, tc.newSpec)}
			newRT.Labels = map[string]string{"team": "a"}
			_, err := TrainingRuntimeValidator{}.ValidateUpdate(context.Background(), oldRT, newRT)
			if diff := cmp.Diff(tc.wantErrs, causes(t, err)); diff != "" {
				t.Errorf("TrainingRuntime: refused fields (-want +got):\n%s", diff)
			}
			meta.Namespace = ""
			_, err = ClusterTrainingRuntimeValidator{}.ValidateUpdate(context.Background(),
				&trainer.ClusterTrainingRuntime{ObjectMeta: meta, Spec: oldRT.Spec}, &trainer.ClusterTrainingRuntime{ObjectMeta: meta, Spec: newRT.Spec})
			if diff := cmp.Diff(tc.wantErrs, causes(t, err)); diff != "" {
				t.Errorf("ClusterTrainingRuntime: refused fields (-want +got):\n%s", diff)
			}
		})
	}
}

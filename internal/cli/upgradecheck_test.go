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

package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The fields of a stored object that trainjob-operator's API does not have,
// which it drops when it reads the object: at any depth, in lists too; a
// field it has, set or null, is not one of them.
func TestDecodeFindsDroppedFields(t *testing.T) {
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: old
  annotations: {anything: goes}
spec:
  futureField: 1
  mlPolicy:
    numNodes: 2
    torch:
      numProcPerNode: auto
      somethingNew: {a: 1}
  template:
    spec:
      replicatedJobs:
        - name: node
          replicas: 1
          unknownPerJob: true
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: busybox
                      notAContainerField: x
status: {whatever: 1}
`), &obj.Object); err != nil {
		t.Fatal(err)
	}
	var rt trainer.ClusterTrainingRuntime
	dropped, err := decode(&obj, &rt)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"spec.futureField",
		"spec.mlPolicy.torch.somethingNew",
		"spec.template.spec.replicatedJobs[0].template.spec.template.spec.containers[0].notAContainerField",
		"spec.template.spec.replicatedJobs[0].unknownPerJob",
	}
	if diff := cmp.Diff(want, dropped); diff != "" {
		t.Errorf("dropped fields (-want +got):\n%s", diff)
	}
	if rt.Spec.MLPolicy == nil || rt.Spec.MLPolicy.NumNodes == nil || *rt.Spec.MLPolicy.NumNodes != 2 {
		t.Errorf("the fields it has are not read: %+v", rt.Spec.MLPolicy)
	}
}

// A field of the API written with its zero value (maxRestarts: 0, an empty
// map or list, an empty string) is in the API, however the typed object
// would write it back: it is not reported as dropped, and a field the API
// lacks next to it still is.
func TestDecodeKeepsZeroValues(t *testing.T) {
	cases := map[string]struct {
		obj         string
		into        func() runtime.Object
		wantDropped []string
	}{
		"runtime": {
			obj: `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: zero, namespace: ns}
spec:
  mlPolicy: {numNodes: 1}
  template:
    metadata: {labels: {}, annotations: {}}
    spec:
      failurePolicy: {maxRestarts: 0, rules: []}
      network: {subdomain: ""}
      replicatedJobs:
        - name: node
          replicas: 1
          dependsOn: []
          template:
            metadata: {labels: {}}
            spec:
              template:
                metadata: {labels: {}, generateName: x-}
                spec:
                  nodeSelector: {}
                  containers:
                    - name: node
                      image: busybox
                      args: []
                      env: []
                      resources: {limits: {}}
`,
			into: func() runtime.Object { return &trainer.TrainingRuntime{} },
			// generateName is in ObjectMeta, but the CRD keeps only
			// name, namespace, labels, annotations and finalizers of
			// an embedded one.
			wantDropped: []string{"spec.template.spec.replicatedJobs[0].template.spec.template.metadata.generateName"},
		},
		"TrainJob": {
			obj: `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: zero, namespace: ns}
spec:
  runtimeRef: {name: torch-distributed}
  labels: {}
  annotations: {}
  suspend: false
  runtimePatches: []
  trainer: {command: [], args: [], env: [], numNodes: 1, notATrainerField: 0}
`,
			into:        func() runtime.Object { return &trainer.TrainJob{} },
			wantDropped: []string{"spec.trainer.notATrainerField"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var obj unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(tc.obj), &obj.Object); err != nil {
				t.Fatal(err)
			}
			dropped, err := decode(&obj, tc.into())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantDropped, dropped); diff != "" {
				t.Errorf("dropped fields (-want +got):\n%s", diff)
			}
		})
	}
}

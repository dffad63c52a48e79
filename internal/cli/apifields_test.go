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
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The fields the upgrade check takes as trainjob-operator's API, read from
// the Go types, are the fields of the CRDs the API server keeps: the same
// names at every depth of the spec, no more, no fewer.
func TestAPIFieldsAreTheCRDs(t *testing.T) {
	for file, obj := range map[string]any{
		"trainer.kubeflow.org_trainjobs.yaml":               trainer.TrainJob{},
		"trainer.kubeflow.org_trainingruntimes.yaml":        trainer.TrainingRuntime{},
		"trainer.kubeflow.org_clustertrainingruntimes.yaml": trainer.ClusterTrainingRuntime{},
	} {
		t.Run(file, func(t *testing.T) {
			schema := utiltesting.CRDSchema(t, filepath.Join("..", "..", "config", "crd", "bases", file), trainer.GroupVersion.Version)
			spec := schema.Properties["spec"]
			var diffs []string
			compareFields(&spec, jsonFields(reflect.TypeOf(obj))["spec"], "spec", &diffs)
			for _, d := range diffs {
				t.Error(d)
			}
		})
	}
}

// compareFields appends to diffs the paths where s, a CRD schema, and t, a
// Go type, have different fields.
func compareFields(s *apiextensionsv1.JSONSchemaProps, t reflect.Type, path string, diffs *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if opaque(t) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := jsonFields(t)
		names := slices.Sorted(maps.Keys(fields))
		for name := range s.Properties {
			if _, ok := fields[name]; !ok {
				names = append(names, name)
			}
		}
		for _, name := range names {
			prop, inSchema := s.Properties[name]
			ft, inType := fields[name]
			switch {
			case !inSchema:
				*diffs = append(*diffs, path+"."+name+": in the Go type, not in the CRD")
			case !inType:
				*diffs = append(*diffs, path+"."+name+": in the CRD, not in the Go type")
			default:
				compareFields(&prop, ft, path+"."+name, diffs)
			}
		}
	case reflect.Map:
		if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
			*diffs = append(*diffs, path+": a map in the Go type, not in the CRD")
			return
		}
		compareFields(s.AdditionalProperties.Schema, t.Elem(), path+".*", diffs)
	case reflect.Slice, reflect.Array:
		if s.Items == nil || s.Items.Schema == nil {
			*diffs = append(*diffs, path+": a list in the Go type, not in the CRD")
			return
		}
		compareFields(s.Items.Schema, t.Elem(), path+"[]", diffs)
	}
}

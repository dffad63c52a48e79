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

package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// NewNamespace creates a namespace for one test, named NamespacePrefix and
// a random suffix; when the test ends it logs what the namespace holds if
// the test failed (Dump), and deletes it.
func (c *Cluster) NewNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: c.NamespacePrefix}}
	if err := c.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpNamespace(t, ns.Name)
		}
		_ = c.Client.Delete(context.Background(), ns)
	})
	return ns.Name
}

// Create creates obj, and fails the test if the API server refuses it.
func (c *Cluster) Create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := c.Client.Create(context.Background(), obj); err != nil {
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		if kind == "" {
			kind = fmt.Sprintf("%T", obj)
		}
		t.Fatalf("creating %s %s: %v", kind, obj.GetName(), err)
	}
}

// CreateYAML creates the object of a YAML manifest, format formatted with
// args: objects of APIs the product's scheme does not know (Kueue's, a
// scheduler's). It is deleted when the test ends, unless the test failed:
// the dump shows it then.
func (c *Cluster) CreateYAML(t testing.TB, format string, args ...any) *unstructured.Unstructured {
	t.Helper()
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(fmt.Appendf(nil, format, args...), &obj.Object); err != nil {
		t.Fatal(err)
	}
	c.Create(t, &obj)
	t.Cleanup(func() {
		if !t.Failed() {
			_ = c.Client.Delete(context.Background(), &obj)
		}
	})
	return &obj
}

// FromUnstructured decodes a field of an unstructured object (an object of
// an API the product's scheme does not know) into out, through JSON.
func FromUnstructured(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

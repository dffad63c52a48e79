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

package metrics

import (
	"net/http"
	"net/url"
	"testing"
)

func TestRequestVerbResource(t *testing.T) {
	for _, tc := range []struct {
		method, url            string
		wantVerb, wantResource string
	}{
		{"GET", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj", "get", "trainer.kubeflow.org/trainjobs"},
		{"GET", "/apis/trainer.kubeflow.org/v1alpha1/trainjobs?limit=500", "list", "trainer.kubeflow.org/trainjobs"},
		{"GET", "/apis/batch/v1/jobs?watch=true&resourceVersion=5", "watch", "batch/jobs"},
		{"PUT", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj/status", "update", "trainer.kubeflow.org/trainjobs/status"},
		{"PATCH", "/apis/batch/v1/namespaces/ns/jobs/j", "patch", "batch/jobs"},
		{"POST", "/api/v1/namespaces/ns/services", "create", "/services"},
		{"DELETE", "/apis/trainer.kubeflow.org/v1alpha1/namespaces/ns/trainjobs/tj", "delete", "trainer.kubeflow.org/trainjobs"},
		{"DELETE", "/api/v1/namespaces/ns/pods", "deletecollection", "/pods"},
		{"GET", "/api/v1/namespaces/ns", "get", "/namespaces"},
		{"POST", "/apis/authentication.k8s.io/v1/tokenreviews", "create", "authentication.k8s.io/tokenreviews"},
		{"GET", "/version", "get", "other"},
		{"GET", "/api", "get", "other"},
		{"GET", "/api/v1", "get", "other"},
		{"GET", "/apis/batch/v1", "get", "other"},
		{"GET", "/api/v1/namespaces", "list", "/namespaces"},
		{"GET", "/api/v1/pods?watch=1", "watch", "/pods"},
		{"GET", "/api/v1/pods?watch=false", "list", "/pods"},
		{"GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dp", "list", "/pods"},
		{"PUT", "/api/v1/namespaces/ns/finalize", "update", "/namespaces/finalize"},
		{"GET", "/api/v1/watch/namespaces/ns/pods", "watch", "/pods"},
		{"GET", "/api/v1/namespaces/ns/pods/p/log", "get", "/pods/log"},
		{"OPTIONS", "/api/v1/namespaces/ns/pods", "options", "/pods"},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		verb, resource := RequestVerbResource(&http.Request{Method: tc.method, URL: u})
		if verb != tc.wantVerb || resource != tc.wantResource {
			t.Errorf("%s %s = %s %s, want %s %s", tc.method, tc.url, verb, resource, tc.wantVerb, tc.wantResource)
		}
	}
}

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

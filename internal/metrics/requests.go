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
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// APIRequests counts the manager's requests to the API server by verb and
// resource, so what the controllers cost the API server can be read off
// (client-go's own rest_client_requests_total has the HTTP method only).
var APIRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Namespace: namespace,
	Name:      "api_requests_total",
	Help:      "Requests the manager made to the API server, by verb (get, list, watch, create, update, patch, delete) and resource (group/resource[/subresource]).",
}, []string{"verb", "resource"})

// CountRequests wraps a transport of a REST client so each request is
// counted in APIRequests.
func CountRequests(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{rt}
}

type roundTripper struct{ next http.RoundTripper }

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := RequestVerbResource(req)
	APIRequests.WithLabelValues(verb, resource).Inc()
	return r.next.RoundTrip(req)
}

// requestInfo parses request paths as the API server does for authorization.
var requestInfo = &request.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// RequestVerbResource names a request to the API server as RBAC does: the
// verb, and the resource as group/resource[/subresource] ("" for the core
// group). Paths that are not resources give resource "other" and the
// lowercase HTTP method as verb.
func RequestVerbResource(req *http.Request) (verb, resource string) {
	info, err := requestInfo.NewRequestInfo(req)
	if err != nil || !info.IsResourceRequest || info.Resource == "" {
		return strings.ToLower(req.Method), "other"
	}
	resource = info.APIGroup + "/" + info.Resource
	if info.Subresource != "" {
		resource += "/" + info.Subresource
	}
	verb = info.Verb
	if verb == "" { // a method RBAC has no verb for
		verb = strings.ToLower(req.Method)
	}
	return verb, resource
}

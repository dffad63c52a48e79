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

// RequestVerbResource names a request to the API server as RBAC does: the
// verb, and the resource as group/resource[/subresource] ("" for the core
// group). Paths that are not resources give resource "other".
func RequestVerbResource(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api/v1
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:] // apis/<group>/<version>
	default:
		return strings.ToLower(req.Method), "other"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" {
		if len(parts) == 2 {
			parts = []string{"namespaces", parts[1]} // the namespace object itself
		} else {
			parts = parts[2:]
		}
	}
	if len(parts) == 0 {
		return strings.ToLower(req.Method), "other"
	}
	resource = group + "/" + parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(req.Method)
	}
	return verb, resource
}

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

package manager

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The manager's RBAC is least privilege: no wildcard anywhere, no verb on a
// resource beyond what the controllers use, Secrets listed and watched only
// in the manager's own namespace (a ClusterRole may only get and create
// them: the MPI key Secrets, read and made by name), and every update of a
// Secret or a webhook configuration limited to the one object the
// certificate rotator keeps.
func TestRBACIsLeastPrivilege(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "rbac", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no RBAC manifests found (err %v)", err)
	}
	var rules []rbacv1.PolicyRule
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var role rbacv1.ClusterRole // a Role decodes the same
			if err := dec.Decode(&role); err != nil {
				break
			}
			if role.Kind != "ClusterRole" && role.Kind != "Role" {
				continue
			}
			for _, r := range role.Rules {
				for _, field := range [][]string{r.Verbs, r.Resources, r.APIGroups, r.NonResourceURLs} {
					if slices.Contains(field, "*") {
						t.Errorf("%s %s: wildcard in rule %+v", role.Kind, role.Name, r)
					}
				}
				if slices.Contains(r.Resources, "secrets") && role.Kind != "Role" &&
					slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "create" }) {
					t.Errorf("%s %s: access to Secrets beyond get and create outside the manager's namespace: %+v", role.Kind, role.Name, r)
				}
				rules = append(rules, r)
			}
		}
	}

	// What each resource may be done to, at most.
	allowed := map[string][]string{
		// The controllers write TrainJobs through the status subresource
		// only, and delete them.
		"trainer.kubeflow.org/trainjobs": {"get", "list", "watch", "delete"},
		// patch: the status server's writes of trainerStatus alone.
		"trainer.kubeflow.org/trainjobs/status":        {"get", "update", "patch"},
		"trainer.kubeflow.org/trainjobs/finalizers":    {"update"},
		"trainer.kubeflow.org/trainingruntimes":        {"get", "list", "watch"},
		"trainer.kubeflow.org/clustertrainingruntimes": {"get", "list", "watch"},
		// delete: the Jobs of a restart attempt before the current one.
		"batch/jobs": {"get", "list", "watch", "create", "patch", "delete"},
		// The claims of a runtime's volumeClaimPolicies, created and read
		// back by name; the garbage collector deletes them with their
		// TrainJob.
		"/persistentvolumeclaims": {"get", "create"},
		"batch/jobs/status":       {"patch"},
		// The MPI hostfiles, created, read back by name and brought up
		// to date; the status server's CA in each namespace, listed and
		// watched by its one name (a field selector the cache sets).
		"/configmaps": {"get", "list", "watch", "create", "update"},
		// The Pod a progress report's token is bound to, read by name;
		// the failed Pods that decide a Job's failure, listed and
		// watched through a field selector on their phase.
		"/pods": {"get", "list", "watch"},
		// The PodGroups of podGroupPolicy, likewise.
		"scheduling.x-k8s.io/podgroups":   {"get", "create", "update"},
		"scheduling.volcano.sh/podgroups": {"get", "create", "update"},
		// delete: a finished TrainJob's headless Service.
		"/services":                                 {"get", "list", "watch", "create", "delete"},
		"events.k8s.io/events":                      {"create", "patch", "update"},
		"coordination.k8s.io/leases":                {"get", "list", "watch", "create", "update", "patch"},
		"authentication.k8s.io/tokenreviews":        {"create"},
		"authorization.k8s.io/subjectaccessreviews": {"create"},
		// The certificate rotator's caches (in its namespace), and the
		// MPI key Secrets, created and read back by name.
		"/secrets": {"get", "list", "watch", "create"},
		"admissionregistration.k8s.io/validatingwebhookconfigurations": {"get", "list", "watch"},
		"admissionregistration.k8s.io/mutatingwebhookconfigurations":   {"get", "list", "watch"},
		// What else admits Jobs, and the quotas on their number: the
		// TrainJob webhook's informers, which only list and watch.
		"admissionregistration.k8s.io/validatingadmissionpolicies": {"list", "watch"},
		"admissionregistration.k8s.io/mutatingadmissionpolicies":   {"list", "watch"},
		"/resourcequotas": {"list", "watch"},
	}
	// Verbs allowed only on the named objects.
	named := map[string]struct {
		verbs []string
		names []string
	}{
		"/secrets": {[]string{"update"}, []string{"trainjob-operator-webhook-certs"}},
		"admissionregistration.k8s.io/validatingwebhookconfigurations": {[]string{"update"}, []string{"trainjob-operator"}},
		"admissionregistration.k8s.io/mutatingwebhookconfigurations":   {[]string{"update"}, []string{"trainjob-operator"}},
	}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				key := g + "/" + res
				ok, known := allowed[key]
				n, isNamed := named[key]
				if !known && !isNamed {
					t.Errorf("access to %s is not expected: %+v", key, r)
					continue
				}
				for _, v := range r.Verbs {
					switch {
					case isNamed && slices.Contains(n.verbs, v):
						if len(r.ResourceNames) == 0 || slices.ContainsFunc(r.ResourceNames, func(name string) bool { return !slices.Contains(n.names, name) }) {
							t.Errorf("verb %s on %s must be limited to %v, rule names %v", v, key, n.names, r.ResourceNames)
						}
					case !slices.Contains(ok, v):
						t.Errorf("verb %s on %s is more than the controllers need", v, key)
					}
				}
			}
		}
	}
}

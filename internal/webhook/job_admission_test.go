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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	admissionregistrationv1beta1 "k8s.io/api/admissionregistration/v1beta1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// rule is an admission rule on resources of groups for operations.
func rule(groups, resources []string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: ops,
		Rule:       admissionregistrationv1.Rule{APIGroups: groups, APIVersions: []string{"*"}, Resources: resources},
	}
}

var (
	create = admissionregistrationv1.Create
	update = admissionregistrationv1.Update
	batch  = []string{"batch"}
	jobs   = []string{"jobs"}
)

func validatingWebhook(name string, rules ...admissionregistrationv1.RuleWithOperations) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: name + ".example.com", Rules: rules}},
	}
}

func mutatingWebhook(name string, rules ...admissionregistrationv1.RuleWithOperations) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: name + ".example.com", Rules: rules}},
	}
}

func matchJobs(rules ...admissionregistrationv1.RuleWithOperations) *admissionregistrationv1.MatchResources {
	m := &admissionregistrationv1.MatchResources{}
	for _, r := range rules {
		m.ResourceRules = append(m.ResourceRules, admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: r})
	}
	return m
}

func quota(ns string, hard corev1.ResourceList) *corev1.ResourceQuota {
	return &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
}

// The class stands in for Kubernetes' validation of Jobs only: while an
// admission webhook or policy may admit the creation of Jobs, or a quota
// counts the namespace's Jobs, every TrainJob is dry-run. Admission of
// other operations, resources or namespaces leaves it standing in.
func TestValidateCreateDryRunsEachTimeOtherAdmissionMayAnswer(t *testing.T) {
	torch := utiltesting.MakeRuntimeSpec().Torch().ClusterRuntime("torch-distributed")
	cases := map[string]struct {
		admission []client.Object
		wantEach  bool
	}{
		"nothing else": {},
		"this product's own webhooks, on TrainJobs and runtimes": {
			admission: []client.Object{
				validatingWebhook("trainjob-operator", rule([]string{"trainer.kubeflow.org"}, []string{"trainjobs", "trainingruntimes", "clustertrainingruntimes"}, create, update)),
				mutatingWebhook("trainjob-operator", rule([]string{"trainer.kubeflow.org"}, []string{"trainjobs"}, create, update)),
			},
		},
		"a webhook on the updates of Jobs": {admission: []client.Object{validatingWebhook("w", rule(batch, jobs, update))}},
		"a webhook on Jobs' status":        {admission: []client.Object{validatingWebhook("w", rule(batch, []string{"jobs/status"}, create))}},
		"a webhook on CronJobs":            {admission: []client.Object{validatingWebhook("w", rule(batch, []string{"cronjobs"}, create))}},
		"a webhook on cluster-scoped resources only": {admission: []client.Object{validatingWebhook("w", func() admissionregistrationv1.RuleWithOperations {
			r := rule([]string{"*"}, []string{"*"}, create)
			r.Scope = ptr.To(admissionregistrationv1.ClusterScope)
			return r
		}())}},
		"a quota on another namespace's Jobs": {admission: []client.Object{quota("other", corev1.ResourceList{jobsQuota: resource.MustParse("10")})}},
		"a quota on CPU":                      {admission: []client.Object{quota("ns", corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("10")})}},

		"a validating webhook on Jobs (Kueue's vjob.kb.io)": {
			admission: []client.Object{validatingWebhook("kueue", rule(batch, jobs, create, update))}, wantEach: true,
		},
		"a mutating webhook on Jobs (Kueue's mjob.kb.io)": {
			admission: []client.Object{mutatingWebhook("kueue", rule(batch, jobs, create))}, wantEach: true,
		},
		"a webhook on everything (a policy engine's)": {
			admission: []client.Object{validatingWebhook("engine", rule([]string{"*"}, []string{"*/*"}, admissionregistrationv1.OperationAll))}, wantEach: true,
		},
		"a webhook on every resource of batch": {
			admission: []client.Object{mutatingWebhook("w", rule(batch, []string{"*"}, create))}, wantEach: true,
		},
		"a webhook on Jobs and their subresources": {
			admission: []client.Object{mutatingWebhook("w", rule(batch, []string{"jobs/*"}, create))}, wantEach: true,
		},
		"a ValidatingAdmissionPolicy on Jobs": {
			admission: []client.Object{&admissionregistrationv1.ValidatingAdmissionPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: "team-names"},
				Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: matchJobs(
					rule([]string{"apps"}, []string{"deployments"}, create), rule(batch, jobs, create))},
			}},
			wantEach: true,
		},
		"a MutatingAdmissionPolicy on Jobs": {
			admission: []client.Object{&admissionregistrationv1.MutatingAdmissionPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: "labels"},
				Spec:       admissionregistrationv1.MutatingAdmissionPolicySpec{MatchConstraints: matchJobs(rule(batch, jobs, create))},
			}},
			wantEach: true,
		},
		"a ValidatingAdmissionPolicy on Deployments": {
			admission: []client.Object{&admissionregistrationv1.ValidatingAdmissionPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: "replicas"},
				Spec:       admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: matchJobs(rule([]string{"apps"}, []string{"deployments"}, create))},
			}},
		},
		"a quota on the namespace's Jobs": {
			admission: []client.Object{quota("ns", corev1.ResourceList{jobsQuota: resource.MustParse("10")})}, wantEach: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var d dryRuns
			v := validator(t, d.funcs(), append(tc.admission, torch)...)
			now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
			v.classes = newAcceptedClasses(clockFunc(func() time.Time { return now }))
			for _, name := range []string{"run-a1", "run-b2", "run-c3"} {
				if warnings, err := v.ValidateCreate(context.Background(), utiltesting.MakeTrainJob(name, "ns").UID("u-"+name).Obj()); err != nil || len(warnings) > 0 {
					t.Fatalf("ValidateCreate(%s) = %q, %v; want it accepted", name, warnings, err)
				}
			}
			want := []string{"run-a1-node-0"}
			if tc.wantEach {
				want = []string{"run-a1-node-0", "run-b2-node-0", "run-c3-node-0"}
			}
			if diff := cmp.Diff(want, d.take()); diff != "" {
				t.Errorf("Jobs dry-run of 3 TrainJobs of one class (-want +got):\n%s", diff)
			}
		})
	}
}

// Until the webhook has read what else admits Jobs (its informers have not
// synced: the manager just started, or RBAC does not let it list), every
// TrainJob is dry-run.
func TestValidateCreateDryRunsEachTimeUntilAdmissionIsRead(t *testing.T) {
	var d dryRuns
	v := validator(t, d.funcs(), utiltesting.MakeRuntimeSpec().Torch().ClusterRuntime("torch-distributed"))
	synced := false
	v.admission.synced = func() bool { return synced }
	for _, name := range []string{"run-a1", "run-b2", "run-c3"} {
		if name == "run-c3" {
			synced = true
		}
		if _, err := v.ValidateCreate(context.Background(), utiltesting.MakeTrainJob(name, "ns").UID("u-"+name).Obj()); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(d.take(), ","); got != "run-a1-node-0,run-b2-node-0,run-c3-node-0" {
		t.Errorf("dry-ran %s, want each TrainJob's Job (the first acceptance came once synced)", got)
	}
	if _, err := v.ValidateCreate(context.Background(), utiltesting.MakeTrainJob("run-d4", "ns").UID("u").Obj()); err != nil {
		t.Fatal(err)
	}
	if got := d.take(); len(got) > 0 {
		t.Errorf("dry-ran %q once synced, after an acceptance of the class; want none", got)
	}
}

// An admission policy is read at the version the API server serves: the
// beta's are alike, and read the same.
func TestPolicyMayAdmitJobsAtAnyVersion(t *testing.T) {
	beta := &admissionregistrationv1beta1.MutatingAdmissionPolicy{Spec: admissionregistrationv1beta1.MutatingAdmissionPolicySpec{
		MatchConstraints: &admissionregistrationv1beta1.MatchResources{ResourceRules: []admissionregistrationv1beta1.NamedRuleWithOperations{{
			RuleWithOperations: rule(batch, jobs, create),
		}}},
	}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(beta)
	if err != nil {
		t.Fatal(err)
	}
	if !policyMayAdmitJobs(obj) {
		t.Errorf("a v1beta1 MutatingAdmissionPolicy on Jobs: not seen")
	}
	if policyMayAdmitJobs((&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
			"apiGroups": []any{"apps"}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"deployments"},
		}}},
	}}}).Object) {
		t.Errorf("a policy on Deployments: taken for one on Jobs")
	}
	if !policyMayAdmitJobs(map[string]any{"spec": map[string]any{}}) {
		t.Errorf("a policy whose rules cannot be read: taken for one that admits no Job")
	}
}

// A quota is cached with its hard limit on Jobs alone.
func TestStripQuotaKeepsTheQuotaOnJobs(t *testing.T) {
	q := quota("ns", corev1.ResourceList{jobsQuota: resource.MustParse("10"), corev1.ResourceRequestsCPU: resource.MustParse("64")})
	q.UID, q.ResourceVersion = "uid", "7"
	q.Labels = map[string]string{"team": "vision"}
	q.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort}
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{jobsQuota: resource.MustParse("3")}}
	want := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns", UID: "uid", ResourceVersion: "7"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{jobsQuota: resource.MustParse("10")}},
	}
	got, err := stripQuota(q)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cached quota (-want +got):\n%s", diff)
	}
	got, _ = stripQuota(quota("ns", corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("64")}))
	if hard := got.(*corev1.ResourceQuota).Spec.Hard; len(hard) > 0 {
		t.Errorf("cached quota without one on Jobs: hard %v, want none", hard)
	}
}

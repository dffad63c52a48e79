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
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The webhook reads what else may admit Jobs through the manager's cache.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations;validatingadmissionpolicies;mutatingadmissionpolicies,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=list;watch

// jobsQuota is the quota on the number of Jobs of a namespace: the only one
// the creation of a Job counts against.
const jobsQuota corev1.ResourceName = "count/jobs.batch"

// policyKinds are the kinds of admission policy that may admit Jobs, read
// at the version the API server serves.
var policyKinds = []schema.GroupKind{
	{Group: admissionregistrationv1.GroupName, Kind: "ValidatingAdmissionPolicy"},
	{Group: admissionregistrationv1.GroupName, Kind: "MutatingAdmissionPolicy"},
}

// jobAdmission tells whether the API server's answer to the dry-run
// creation of a TrainJob's Jobs depends on their class alone (see jobsClass):
// whether Kubernetes' own validation of Jobs alone may answer it. Other
// admission may look at what a class leaves out (an admission webhook or
// policy at the Jobs' names, labels or the objects of the cluster), or
// answers otherwise as time goes (a quota on the number of Jobs). Built-in
// admission plugins that read other objects than the Job do not refuse
// Jobs by them (Pod Security admission only warns of a Job's Pods, and
// a dry run with warnings is not remembered), but the quota.
type jobAdmission struct {
	reader client.Reader
	// policies are the admission policy kinds the API server serves, each
	// at one version it serves.
	policies []schema.GroupVersionKind
	// synced reports whether reader holds every object of the kinds read.
	synced func() bool
}

// newJobAdmission reads webhook configurations, the policies of v1 and
// quotas through reader, which holds them all.
func newJobAdmission(reader client.Reader) *jobAdmission {
	policies := make([]schema.GroupVersionKind, 0, len(policyKinds))
	for _, gk := range policyKinds {
		policies = append(policies, gk.WithVersion("v1"))
	}
	return &jobAdmission{reader: reader, policies: policies, synced: func() bool { return true }}
}

// watchJobAdmission reads through c, with informers it starts: the webhook
// configurations, the quotas and the admission policies of the kinds the
// API server serves (per mapper; a MutatingAdmissionPolicy is served from
// Kubernetes 1.36 on, or earlier with its beta API on). The informers may
// not have synced when it returns.
func watchJobAdmission(ctx context.Context, c cache.Cache, mapper meta.RESTMapper) (*jobAdmission, error) {
	a := &jobAdmission{reader: c}
	kinds := []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{},
		&admissionregistrationv1.MutatingWebhookConfiguration{},
		&corev1.ResourceQuota{},
	}
	for _, gk := range policyKinds {
		mappings, err := mapper.RESTMappings(gk)
		if meta.IsNoMatchError(err) {
			continue // not served: none can exist
		}
		if err != nil {
			return nil, fmt.Errorf("finding which version of %s the API server serves: %w", gk, err)
		}
		if len(mappings) == 0 {
			continue
		}
		gvk := mappings[0].GroupVersionKind
		a.policies = append(a.policies, gvk)
		policy := &unstructured.Unstructured{}
		policy.SetGroupVersionKind(gvk)
		kinds = append(kinds, policy)
	}
	var informers []cache.Informer
	for _, obj := range kinds {
		i, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, fmt.Errorf("watching %T: %w", obj, err)
		}
		informers = append(informers, i)
	}
	a.synced = func() bool {
		return !slices.ContainsFunc(informers, func(i cache.Informer) bool { return !i.HasSynced() })
	}
	return a, nil
}

// otherAnswer names what, besides Kubernetes' own validation of Jobs, could
// answer the dry-run creation of Jobs in namespace: "" when nothing could.
// Until it has read everything (the manager just started, or RBAC does not
// let it list), anything could.
func (a *jobAdmission) otherAnswer(ctx context.Context, namespace string) string {
	if !a.synced() {
		return "admission not read yet"
	}
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	for _, list := range []client.ObjectList{&validating, &mutating} {
		if err := a.reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Sprintf("admission not read: %v", err)
		}
	}
	type webhook struct {
		kind, config, name string
		rules              []admissionregistrationv1.RuleWithOperations
	}
	var webhooks []webhook
	for _, c := range validating.Items {
		for _, w := range c.Webhooks {
			webhooks = append(webhooks, webhook{"Validating", c.Name, w.Name, w.Rules})
		}
	}
	for _, c := range mutating.Items {
		for _, w := range c.Webhooks {
			webhooks = append(webhooks, webhook{"Mutating", c.Name, w.Name, w.Rules})
		}
	}
	for _, w := range webhooks {
		if mayAdmitJobs(w.rules) {
			return fmt.Sprintf("webhook %s of %sWebhookConfiguration %s", w.name, w.kind, w.config)
		}
	}
	for _, gvk := range a.policies {
		var policies unstructured.UnstructuredList
		policies.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := a.reader.List(ctx, &policies, client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Sprintf("admission not read: %v", err)
		}
		for _, p := range policies.Items {
			if policyMayAdmitJobs(p.Object) {
				return fmt.Sprintf("%s %s", gvk.Kind, p.GetName())
			}
		}
	}
	var quotas corev1.ResourceQuotaList
	if err := a.reader.List(ctx, &quotas, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Sprintf("admission not read: %v", err)
	}
	for _, q := range quotas.Items {
		if _, ok := q.Spec.Hard[jobsQuota]; ok {
			return fmt.Sprintf("ResourceQuota %s", q.Name)
		}
	}
	return ""
}

// policyMayAdmitJobs reports whether the admission policy policy (of any
// kind and version: their matchConstraints are alike) may admit the
// creation of Jobs. Whether a binding puts it to use is not read.
func policyMayAdmitJobs(policy map[string]any) bool {
	rules, found, err := unstructured.NestedSlice(policy, "spec", "matchConstraints", "resourceRules")
	if err != nil || !found {
		return true // read none: assume the worst
	}
	for _, r := range rules {
		m, ok := r.(map[string]any)
		var rule admissionregistrationv1.NamedRuleWithOperations
		if !ok || runtime.DefaultUnstructuredConverter.FromUnstructured(m, &rule) != nil {
			return true
		}
		if mayAdmitJobs([]admissionregistrationv1.RuleWithOperations{rule.RuleWithOperations}) {
			return true
		}
	}
	return false
}

// mayAdmitJobs reports whether rules may match the creation of a Job, at
// any version (a webhook's matchPolicy Equivalent sends it the requests of
// other versions of a resource too), whatever its selectors and match
// conditions say (they may look at what a class leaves out).
func mayAdmitJobs(rules []admissionregistrationv1.RuleWithOperations) bool {
	return slices.ContainsFunc(rules, func(r admissionregistrationv1.RuleWithOperations) bool {
		return (slices.Contains(r.Operations, admissionregistrationv1.Create) || slices.Contains(r.Operations, admissionregistrationv1.OperationAll)) &&
			(slices.Contains(r.APIGroups, "batch") || slices.Contains(r.APIGroups, "*")) &&
			slices.ContainsFunc(r.Resources, func(res string) bool {
				// "jobs", "*", "*/*", "jobs/*": "*" as a subresource
				// matches the resource itself too.
				name, sub, _ := strings.Cut(res, "/")
				return (name == "jobs" || name == "*") && (sub == "" || sub == "*")
			}) &&
			(r.Scope == nil || *r.Scope != admissionregistrationv1.ClusterScope)
	})
}

// JobAdmissionCaches are the cache options the manager needs for the
// TrainJob webhook: a quota is kept with its quota on Jobs alone, what the
// webhook reads of it (a namespace's quota lists tens of resources, with
// their use).
func JobAdmissionCaches() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{&corev1.ResourceQuota{}: {Transform: stripQuota}}
}

// stripQuota keeps of a ResourceQuota its name and its hard limit on Jobs.
func stripQuota(o any) (any, error) {
	q, ok := o.(*corev1.ResourceQuota)
	if !ok {
		return o, nil
	}
	kept := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{
		Name: q.Name, Namespace: q.Namespace, UID: q.UID, ResourceVersion: q.ResourceVersion,
	}}
	kept.TypeMeta = q.TypeMeta
	if jobs, ok := q.Spec.Hard[jobsQuota]; ok {
		kept.Spec.Hard = corev1.ResourceList{jobsQuota: jobs}
	}
	return kept, nil
}

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

package integration

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// warningRecorder keeps the warnings the API server answers a client with.
type warningRecorder struct {
	mu    sync.Mutex
	texts []string
}

func (r *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.texts = append(r.texts, text)
}

// createWarned creates obj and returns the warnings the API server gave
// with its answer, as kubectl prints them ("Warning: ...").
func createWarned(t *testing.T, obj client.Object, opts ...client.CreateOption) ([]string, error) {
	t.Helper()
	rec := &warningRecorder{}
	cfg := rest.CopyConfig(cluster.Config)
	cfg.WarningHandlerWithContext = rec
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme, Mapper: cluster.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Create(context.Background(), obj, opts...)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.texts, err
}

// serveJobAdmission registers, until the test ends, a mutating admission
// webhook on the creation of Jobs in namespace ns, served here: review
// answers each Job, nil to allow it. It returns once the API server calls
// it.
func serveJobAdmission(t *testing.T, ns string, review func(*batchv1.Job) *metav1.Status) {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(webhooks.LocalServingCertDir, "tls.crt"), filepath.Join(webhooks.LocalServingCertDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var ar admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&ar); err != nil || ar.Request == nil {
			http.Error(w, fmt.Sprintf("not an admission review: %v", err), http.StatusBadRequest)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: ar.Request.UID, Allowed: true}
		var job batchv1.Job
		if err := json.Unmarshal(ar.Request.Object.Raw, &job); err != nil {
			resp.Allowed, resp.Result = false, &metav1.Status{Code: http.StatusBadRequest, Message: err.Error()}
		} else if status := review(&job); status != nil {
			resp.Allowed, resp.Result = false, status
		}
		ar.Response, ar.Request = resp, nil
		_ = json.NewEncoder(w).Encode(&ar)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	url := srv.URL + "/jobs"
	config := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "it-jobs-" + ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "jobs.it.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: webhooks.LocalServingCAData},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
			}},
		}},
	}
	cluster.Create(t, config)
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), config) })
	cluster.Eventually(t, "the API server to call the test's Job webhook", func() error {
		probe := utiltesting.MakeJob("probe", ns, "example.com/c").Obj()
		_ = cluster.Client.Create(context.Background(), probe, client.DryRunAll)
		if calls.Load() == 0 {
			return fmt.Errorf("not called yet")
		}
		return nil
	})
}

// ownerMustExist refuses a Job whose controller is a TrainJob that does
// not exist, as Kueue's Job webhook does (mjob.kb.io: it looks up the
// owner of a Job to find the workload it belongs to).
func ownerMustExist(job *batchv1.Job) *metav1.Status {
	owner := metav1.GetControllerOf(job)
	if owner == nil || owner.Kind != trainer.TrainJobKind {
		return nil
	}
	var tj trainer.TrainJob
	err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: job.Namespace, Name: owner.Name}, &tj)
	if err != nil {
		return &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: err.Error()}
	}
	return nil
}

// With admission that refuses a Job whose owner does not exist (Kueue's Job
// webhook), a TrainJob is admitted without a warning: its Jobs are dry-run
// before it exists, and the API server would accept them once it does, as
// it then accepts the Job the controller creates.
func TestDryRunMeetsAdmissionThatLooksUpOwners(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	serveJobAdmission(t, ns, ownerMustExist)
	// The probe: such a Job is refused.
	orphan := utiltesting.MakeJob("orphan", ns, "example.com/c").ControlledByTrainJob("absent", "00000000-0000-4000-8000-000000000001").Obj()
	if err := cluster.Client.Create(context.Background(), orphan, client.DryRunAll); err == nil || !strings.Contains(err.Error(), `"absent" not found`) {
		t.Fatalf("a Job owned by a TrainJob that does not exist: %v, want it refused by the test's webhook", err)
	}

	warnings, err := createWarned(t, trainJobOn("owned", ns).Obj())
	if err != nil || len(warnings) > 0 {
		t.Errorf("creating TrainJob owned: %v, warnings %q; want it created without a warning", err, warnings)
	}
	job := waitJob(t, ns, "owned-node-0")
	if !metav1.IsControlledBy(job, mustTrainJob(t, ns, "owned")) {
		t.Errorf("Job owned-node-0 is not owned by its TrainJob: owners %+v", job.OwnerReferences)
	}
}

// psaWarning is how Pod Security admission's warnings begin.
const psaWarning = `would violate PodSecurity "restricted:latest"`

// In a namespace whose Pod Security level warns of the TrainJob's Pods, the
// API server's warnings on the dry-run Jobs come back on every TrainJob,
// not only on the first of a shape.
func TestDryRunWarningsOnEveryAdmission(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/warn":"restricted"}}}`)
	if err := cluster.Client.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "Pod Security admission to warn of Jobs in "+ns, func() error {
		warnings, err := createWarned(t, utiltesting.MakeJob("probe", ns, "example.com/c").Obj(), client.DryRunAll)
		if err == nil && !containsWarning(warnings, psaWarning) {
			err = fmt.Errorf("no Pod Security warning yet: %q", warnings)
		}
		return err
	})

	// Three TrainJobs of one shape.
	for _, name := range []string{"warn-a1", "warn-b2", "warn-c3"} {
		warnings, err := createWarned(t, trainJobOn(name, ns).Obj())
		if err != nil || !containsWarning(warnings, fmt.Sprintf(`Job %s-node-0 of replicated Job "node" (dry run): %s`, name, psaWarning)) {
			t.Errorf("creating TrainJob %s: %v, warnings %q; want Pod Security admission's warning on its Job", name, err, warnings)
		}
	}
}

func containsWarning(warnings []string, part string) bool {
	for _, w := range warnings {
		if strings.Contains(w, part) {
			return true
		}
	}
	return false
}

// jobsNamed makes, until the test ends, a ValidatingAdmissionPolicy refuse
// the Jobs of namespace ns whose names do not start with prefix, and
// returns once the API server does.
func jobsNamed(t *testing.T, ns, prefix string) {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "it-job-names-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.name.startsWith(%q)", prefix),
				Message:    fmt.Sprintf("Jobs must be named %s*", prefix),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: policy.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		cluster.Create(t, obj)
		t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), obj) })
	}
	cluster.Eventually(t, "the API server to refuse Jobs not named "+prefix+"*", func() error {
		probe := utiltesting.MakeJob("probe", ns, "example.com/c").Obj()
		if err := cluster.Client.Create(context.Background(), probe, client.DryRunAll); err == nil {
			return fmt.Errorf("Job probe accepted")
		} else if !apierrors.IsInvalid(err) {
			return fmt.Errorf("Job probe refused, but not as invalid: %w", err)
		}
		return nil
	})
}

// An admission policy that reads Jobs' names ("Jobs must be named team-*")
// refuses a TrainJob whose Jobs it refuses, though the API server accepted
// a TrainJob of the same shape (team-a, xeam-b) moments before: the shape
// stands in for Kubernetes' own validation of Jobs only, which looks at a
// name's length and kinds of character, not at its letters.
func TestDryRunWithAnAdmissionPolicyOnJobNames(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("team-a", ns).Obj())
	jobsNamed(t, ns, "team-")

	// A dry run of the TrainJob goes through the webhook too: wait until
	// the manager has seen the policy.
	cluster.Eventually(t, "TrainJob xeam-b to be refused at admission", func() error {
		err := cluster.Client.Create(context.Background(), trainJobOn("xeam-b", ns).Obj(), client.DryRunAll)
		if err == nil {
			return fmt.Errorf("accepted: its shape is that of team-a, accepted before the policy")
		}
		return nil
	})
	err := cluster.Client.Create(context.Background(), trainJobOn("xeam-b", ns).Obj())
	for _, want := range []string{
		`TrainJob.trainer.kubeflow.org "xeam-b" is invalid`,
		`the API server refuses the Jobs of replicated Job "node" of TrainingRuntime "torch"`,
		"Jobs must be named team-*",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("creating TrainJob xeam-b: %v, want it refused saying %q", err, want)
		}
	}
	if warnings, err := createWarned(t, trainJobOn("team-c", ns).Obj()); err != nil || len(warnings) > 0 {
		t.Errorf("creating TrainJob team-c: %v, warnings %q; want it created", err, warnings)
	}
}

// With no admission on Jobs but Kubernetes' own, TrainJobs of one shape are
// dry-run once; while a quota counts the namespace's Jobs (it may refuse
// the next one), each is dry-run; once it is gone, the acceptance stands
// again.
func TestShapeStandsInForKubernetesValidationAlone(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	for _, name := range []string{"run-a1", "run-b2", "run-c3"} {
		cluster.Create(t, trainJobOn(name, ns).Obj())
	}
	if got := dryRuns.in(ns); got != 1 {
		t.Errorf("3 TrainJobs of one shape: %d dry runs, want 1", got)
	}

	jobs := corev1.ResourceList{"count/jobs.batch": resource.MustParse("100")}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "jobs", Namespace: ns}, Spec: corev1.ResourceQuotaSpec{Hard: jobs}}
	cluster.Create(t, quota)
	// The suite runs no quota controller: its status, which admission
	// enforces, is written here as that controller would.
	quota.Status = corev1.ResourceQuotaStatus{Hard: jobs, Used: corev1.ResourceList{"count/jobs.batch": resource.MustParse("3")}}
	if err := cluster.Client.Status().Update(context.Background(), quota); err != nil {
		t.Fatalf("writing the quota's status: %v", err)
	}
	// Whether the webhook dry-runs the Jobs of a TrainJob of that shape: a
	// dry-run creation of the TrainJob goes through the webhook too.
	dryRun := func() bool {
		before := dryRuns.in(ns)
		if err := cluster.Client.Create(context.Background(), trainJobOn("run-z9", ns).Obj(), client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		return dryRuns.in(ns) > before
	}
	cluster.Eventually(t, "a TrainJob to be dry-run while the quota counts Jobs", func() error {
		if !dryRun() {
			return fmt.Errorf("admitted without a dry run")
		}
		return nil
	})
	before := dryRuns.in(ns)
	for _, name := range []string{"run-d4", "run-e5"} {
		cluster.Create(t, trainJobOn(name, ns).Obj())
	}
	if got := dryRuns.in(ns) - before; got != 2 {
		t.Errorf("2 more TrainJobs while the quota counts Jobs: %d dry runs, want 2", got)
	}

	if err := cluster.Client.Delete(context.Background(), quota); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "a TrainJob to be admitted without a dry run once the quota is gone", func() error {
		if dryRun() {
			return fmt.Errorf("dry-run")
		}
		return nil
	})
}

// BenchmarkCreateTrainJobsOfOneShape creates TrainJobs of one shape, 16 at
// a time as the bench's burst does, with the controller running: with no
// admission on Jobs but Kubernetes' own, where the shape stands in for the
// dry run of their Jobs, and with a ValidatingAdmissionPolicy on Jobs (not
// bound: it costs the API server nothing), where each TrainJob's Job is
// dry-run. ns/op is the time per TrainJob created; dry-runs/op, the Jobs
// dry-run per TrainJob.
//
//	KUBEBUILDER_ASSETS=$PWD/bin go test ./test/integration/ -run '^$' \
//	  -bench CreateTrainJobsOfOneShape -benchtime 1000x -count 3
func BenchmarkCreateTrainJobsOfOneShape(b *testing.B) {
	for _, tc := range []struct {
		name   string
		policy bool
	}{{"shape-stands-in", false}, {"policy-on-jobs", true}} {
		b.Run(tc.name, func(b *testing.B) {
			ns := cluster.NewNamespace(b)
			torchRuntime(b, ns, utiltesting.MakeRuntimeSpec().Torch())
			if tc.policy {
				policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
					ObjectMeta: metav1.ObjectMeta{Name: "it-bench-" + ns},
					Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
						MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
							RuleWithOperations: admissionregistrationv1.RuleWithOperations{
								Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
								Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
							},
						}}},
						Validations: []admissionregistrationv1.Validation{{Expression: "true"}},
					},
				}
				cluster.Create(b, policy)
				b.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), policy) })
				utiltesting.Eventually(b, timeout, interval, "the webhook to dry-run each TrainJob", func() error {
					before := dryRuns.in(ns)
					for range 2 {
						if err := cluster.Client.Create(context.Background(), trainJobOn("bench-99999", ns).Obj(), client.DryRunAll); err != nil {
							return err
						}
					}
					if dryRuns.in(ns)-before != 2 {
						return fmt.Errorf("not yet")
					}
					return nil
				})
			}
			var next atomic.Int64
			before := dryRuns.in(ns)
			b.SetParallelism(8) // 16 on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					name := fmt.Sprintf("bench-%05d", next.Add(1))
					if err := cluster.Client.Create(context.Background(), trainJobOn(name, ns).Obj()); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(dryRuns.in(ns)-before)/float64(b.N), "dry-runs/op")
		})
	}
}

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
	cfg := rest.CopyConfig(restConfig)
	cfg.WarningHandlerWithContext = rec
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme, Mapper: k8s.RESTMapper()})
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
	create(t, config)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), config) })
	eventually(t, "the API server to call the test's Job webhook", func() error {
		probe := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "c", Image: "example.com/c"}},
			}}},
		}
		_ = k8s.Create(context.Background(), probe, client.DryRunAll)
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
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: job.Namespace, Name: owner.Name}, &tj)
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
	ns := newNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	serveJobAdmission(t, ns, ownerMustExist)
	// The probe: such a Job is refused.
	orphan := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: ns, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: "absent",
			UID: types.UID("00000000-0000-4000-8000-000000000001"), Controller: ptr.To(true),
		}}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "example.com/c"}},
		}}},
	}
	if err := k8s.Create(context.Background(), orphan, client.DryRunAll); err == nil || !strings.Contains(err.Error(), `"absent" not found`) {
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
	ns := newNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	patch := []byte(`{"metadata":{"labels":{"pod-security.kubernetes.io/warn":"restricted"}}}`)
	if err := k8s.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Pod Security admission to warn of Jobs in "+ns, func() error {
		warnings, err := createWarned(t, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "example.com/c"}},
			}}},
		}, client.DryRunAll)
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

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
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	"github.com/trainjob-operator/trainjob-operator/internal/statusserver"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// trainerSA is the ServiceAccount the trainer Pods of these tests run as.
const trainerSA = "trainer"

// reporter posts progress reports to the suite manager's status server as
// a trainer Pod does, trusting envtest's serving CA.
type reporter struct {
	http *http.Client
	base string
}

func newReporter(t *testing.T) *reporter {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(webhooks.LocalServingCAData) {
		t.Fatal("envtest's serving CA does not parse")
	}
	return &reporter{
		http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}},
		base: fmt.Sprintf("https://%s:%d", webhooks.LocalServingHost, statusServerPort),
	}
}

// post sends body for TrainJob ns/name with token (none if empty), and
// returns the HTTP status and the decoded answer's message.
func (r *reporter) post(t *testing.T, ns, name, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.base+trainer.StatusServerPath(ns, name), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", req.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, _ := io.ReadAll(resp.Body)
	var st metav1.Status
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(data, &st); err != nil || st.Kind != "Status" {
			t.Errorf("a %d answer is not a metav1.Status: %s", resp.StatusCode, data)
		}
	}
	return resp.StatusCode, st.Message
}

// trainerPod creates a Pod of the TrainJob's trainer Job, as the Job
// controller (which envtest does not run) would, and returns it.
func trainerPod(t *testing.T, ns, trainJob string) *corev1.Pod {
	t.Helper()
	job := waitJob(t, ns, trainJob+"-node-0")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: trainJob + "-node-0-0-", Namespace: ns,
			Labels:          job.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.ServiceAccountName = trainerSA
	cluster.Create(t, pod)
	return pod
}

// podToken asks the API server for a token of trainerSA bound to pod, with the
// audience of TrainJob ns/audienceOf, as the kubelet asks for the
// projected token of the Pod's volume.
func podToken(t *testing.T, pod *corev1.Pod, audienceOf string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(context.Background(), trainerSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         []string{trainer.StatusTokenAudience(pod.Namespace, audienceOf)},
			ExpirationSeconds: ptr.To[int64](3600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token bound to Pod %s: %v", pod.Name, err)
	}
	return tr.Status.Token
}

func serviceAccount(t *testing.T, ns string) {
	t.Helper()
	cluster.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: trainerSA, Namespace: ns}})
}

// trainerStatusOf reads the TrainJob's trainerStatus as JSON ("null" if
// none).
func trainerStatusOf(t *testing.T, ns, name string) string {
	t.Helper()
	tj, err := cluster.GetTrainJob(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(tj.Status.TrainerStatus)
	return string(data)
}

func TestStatusServerGivesTrainerContainersWhatTheyReportWith(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	cluster.Create(t, trainJobOn("tj", ns).NumNodes(2).Obj())
	job := waitJob(t, ns, "tj-node-0")
	env := envOf(job)
	if got, want := env[jobplan.StatusServerURLEnv], fmt.Sprintf("https://trainjob-operator-webhook.trainjob-system.svc:%d%s", statusServerPort, trainer.StatusServerPath(ns, "tj")); got != want {
		t.Errorf("%s = %q, want %q", jobplan.StatusServerURLEnv, got, want)
	}
	if env[jobplan.StatusServerTokenEnv] != "/var/run/secrets/kubeflow/trainer/token" || env[jobplan.StatusServerCACertEnv] != "/var/run/secrets/kubeflow/trainer/ca.crt" {
		t.Errorf("token and CA paths: %v", env)
	}
	var projected *corev1.ProjectedVolumeSource
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == jobplan.StatusServerVolume {
			projected = v.Projected
		}
	}
	if projected == nil || len(projected.Sources) != 2 || projected.Sources[0].ServiceAccountToken == nil ||
		projected.Sources[0].ServiceAccountToken.Audience != trainer.StatusTokenAudience(ns, "tj") ||
		projected.Sources[1].ConfigMap == nil || projected.Sources[1].ConfigMap.Name != statusserver.CAConfigMap {
		t.Errorf("the token volume is not the TrainJob's: %+v", projected)
	}
	// The CA publisher's copy of the CA, once per namespace.
	var cm corev1.ConfigMap
	cluster.Eventually(t, "the status server's CA in the namespace", func() error {
		return cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: statusserver.CAConfigMap}, &cm)
	})
}

func TestStatusServerWritesProgressAndRefusesWhatItMust(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	serviceAccount(t, ns)
	cluster.Create(t, trainJobOn("a", ns).Obj())
	cluster.Create(t, trainJobOn("b", ns).Obj())
	podA := trainerPod(t, ns, "a")
	trainerPod(t, ns, "b")
	tokenA := podToken(t, podA, "a")
	r := newReporter(t)

	report := `{"trainerStatus":{"progressPercentage":45,"estimatedRemainingSeconds":120,"metrics":[{"name":"loss","value":"0.15"}],"lastUpdatedTime":"2026-11-27T11:59:58Z"}}`
	if code, msg := r.post(t, ns, "a", tokenA, report); code != http.StatusOK {
		t.Fatalf("a's Pod reporting a's progress: %d %s", code, msg)
	}
	// The first report of a TrainJob is written at once.
	want := `{"progressPercentage":45,"estimatedRemainingSeconds":120,"metrics":[{"name":"loss","value":"0.15"}],"lastUpdatedTime":"2026-11-27T11:59:58Z"}`
	if got := trainerStatusOf(t, ns, "a"); got != want {
		t.Errorf("a's trainerStatus = %s, want %s", got, want)
	}

	// Each refusal writes nothing to b, nor changes a beyond its report.
	tokenAForB := podToken(t, podA, "b")
	for _, tc := range []struct {
		what, name, token, body string
		code                    int
	}{
		{"no token", "b", "", report, http.StatusUnauthorized},
		{"a token the API server did not issue", "b", "not-a-token", report, http.StatusUnauthorized},
		{"a's token (a's audience) for b", "b", tokenA, report, http.StatusUnauthorized},
		{"a token of a's Pod with b's audience", "b", tokenAForB, report, http.StatusForbidden},
		{"a's token, expired", "a", resigned(t, tokenA, true), report, http.StatusUnauthorized},
		{"the ServiceAccount's own token, bound to no Pod", "b", unboundToken(t, ns, "b"), report, http.StatusForbidden},
		{"an unknown TrainJob, without a token for it", "nobody", tokenA, report, http.StatusUnauthorized},
		{"an unknown TrainJob, with a token for it", "nobody", podToken(t, podA, "nobody"), report, http.StatusNotFound},
		{"bad JSON", "a", tokenA, `{"trainerStatus":`, http.StatusUnprocessableEntity},
		{"progress over 100", "a", tokenA, `{"trainerStatus":{"progressPercentage":101}}`, http.StatusUnprocessableEntity},
		{"257 metrics", "a", tokenA, `{"trainerStatus":{"metrics":[` + strings.Repeat(`{"name":"m","value":"1"},`, 256) + `{"name":"m","value":"1"}]}}`, http.StatusUnprocessableEntity},
		{"a body over 64 KiB", "a", tokenA, `{"trainerStatus":{"metrics":[{"name":"m","value":"` + strings.Repeat("1", 70000) + `"}]}}`, http.StatusRequestEntityTooLarge},
	} {
		code, msg := r.post(t, ns, tc.name, tc.token, tc.body)
		if code != tc.code || msg == "" {
			t.Errorf("%s: %d %q, want %d with a message", tc.what, code, msg, tc.code)
		}
	}
	// A token of another ServiceAccount than the Pod's cannot be had: the
	// API server refuses to bind it, so the server's own check of the
	// Pod's ServiceAccount is a second line.
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	cluster.Create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns}})
	_, err = cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "other", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:      []string{trainer.StatusTokenAudience(ns, "a")},
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: podA.Name, UID: podA.UID},
		},
	}, metav1.CreateOptions{})
	if err == nil {
		t.Error("the API server bound a token of ServiceAccount other to a Pod running as " + trainerSA)
	}
	// The expired token differs from a's in its lifetime alone: signed
	// again as it was, it is accepted.
	if code, msg := r.post(t, ns, "a", resigned(t, tokenA, false), report); code != http.StatusOK {
		t.Errorf("a's token signed again unchanged: %d %s, want 200 (else the expired one proves nothing)", code, msg)
	}
	if got := trainerStatusOf(t, ns, "b"); got != "null" {
		t.Errorf("b's trainerStatus = %s after refused reports, want none", got)
	}
	if got := trainerStatusOf(t, ns, "a"); got != want {
		t.Errorf("a's trainerStatus = %s after refused reports, want %s", got, want)
	}
}

// unboundToken is a token of trainerSA not bound to any Pod.
func unboundToken(t *testing.T, ns, audienceOf string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), trainerSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{trainer.StatusTokenAudience(ns, audienceOf)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// A TrainJob deleted and created again under the same name refuses the
// first one's tokens, even those the status server accepted before.
func TestStatusServerRefusesTheTokensOfADeletedTrainJob(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	serviceAccount(t, ns)
	cluster.Create(t, trainJobOn("tj", ns).Obj())
	old := podToken(t, trainerPod(t, ns, "tj"), "tj")
	r := newReporter(t)
	if code, msg := r.post(t, ns, "tj", old, `{"trainerStatus":{"progressPercentage":10}}`); code != http.StatusOK {
		t.Fatalf("first report: %d %s", code, msg)
	}
	tj, err := cluster.GetTrainJob(ns, "tj")
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Delete(context.Background(), tj, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	cluster.Eventually(t, "the first TrainJob to go", func() error {
		if _, err := cluster.GetTrainJob(ns, "tj"); err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	cluster.Create(t, trainJobOn("tj", ns).Obj())
	cluster.Eventually(t, "the new TrainJob in the manager's cache", func() error {
		code, msg := r.post(t, ns, "tj", old, `{"trainerStatus":{"progressPercentage":99}}`)
		if code == http.StatusNotFound {
			return fmt.Errorf("%d %s", code, msg)
		}
		if code != http.StatusForbidden && code != http.StatusUnauthorized {
			t.Fatalf("the old TrainJob's token for the new one: %d %s, want 401 or 403", code, msg)
		}
		return nil
	})
	if got := trainerStatusOf(t, ns, "tj"); got != "null" {
		t.Errorf("the new TrainJob's trainerStatus = %s, want none", got)
	}
}

// Reports faster than the write interval are coalesced: the first is
// written at once, the newest at the interval's end, and the ones between
// never.
func TestStatusServerCoalescesReports(t *testing.T) {
	ns := cluster.NewNamespace(t)
	torchRuntime(t, ns, utiltesting.MakeRuntimeSpec().Torch())
	serviceAccount(t, ns)
	cluster.Create(t, trainJobOn("tj", ns).NumNodes(4).Obj())
	r := newReporter(t)
	var tokens []string
	for range 4 {
		tokens = append(tokens, podToken(t, trainerPod(t, ns, "tj"), "tj"))
	}
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: cluster.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := wc.Watch(context.Background(), &trainer.TrainJobList{}, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", "tj")})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	start := time.Now()
	for p := range 20 {
		if code, msg := r.post(t, ns, "tj", tokens[p%4], fmt.Sprintf(`{"trainerStatus":{"progressPercentage":%d}}`, p)); code != http.StatusOK {
			t.Fatalf("report %d: %d %s", p, code, msg)
		}
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Skipf("20 reports took %v, longer than the interval: nothing to coalesce", took)
	}
	var seen []int32
	deadline := time.After(12 * time.Second)
	for len(seen) < 2 {
		select {
		case ev := <-watcher.ResultChan():
			tj, ok := ev.Object.(*trainer.TrainJob)
			if !ok {
				continue
			}
			if s := tj.Status.TrainerStatus; s != nil && s.ProgressPercentage != nil && (len(seen) == 0 || seen[len(seen)-1] != *s.ProgressPercentage) {
				seen = append(seen, *s.ProgressPercentage)
			}
		case <-deadline:
			t.Fatalf("progress written %v within 12 s, want [0 19]", seen)
		}
	}
	if seen[0] != 0 || seen[1] != 19 {
		t.Errorf("progress written %v, want [0 19]: the first at once, then the newest", seen)
	}
}

// resigned is token, a ServiceAccount token of the test API server,
// signed again with the API server's key, with its lifetime moved into the
// past if expire: a token the API server made, but expired (a
// TokenRequest lives at least 10 minutes, too long to wait for). Signed
// again unchanged, it must be as good as token: that proves the signing.
func resigned(t *testing.T, token string, expire bool) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	if expire {
		now := time.Now().Unix()
		claims["iat"], claims["nbf"], claims["exp"] = now-3600, now-3600, now-600
	}
	if payload, err = json.Marshal(claims); err != nil {
		t.Fatal(err)
	}
	signed := parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload)
	keyPEM, err := os.ReadFile(serviceAccountSigningKey)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		t.Fatalf("%s holds no PEM key", serviceAccountSigningKey)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("the signing key is a %T, want ECDSA (ES256)", parsed)
	}
	digest := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

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

package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	"github.com/trainjob-operator/trainjob-operator/internal/statusserver"
)

// Reporter posts a TrainJob's progress as one of its trainer Pods does
// with the Kubeflow SDK: to the URL of its environment, trusting the CA of
// the namespace's ConfigMap, with the token of its volume. kwok runs no
// kubelet to project that token: the Reporter asks the API server for it
// as the kubelet does, with the volume's audience, bound to the Pod.
type Reporter struct {
	// URL is the endpoint; Token the Pod's token.
	URL, Token string
	http       *http.Client
}

// NewReporter returns a Reporter for pod, a Pod of a TrainJob's trainer
// step, that reaches the status server at server instead of the host of
// the Pod's URL (the manager's Service) when server is not empty.
func (c *Cluster) NewReporter(t testing.TB, pod *corev1.Pod, server string) *Reporter {
	t.Helper()
	ctx := context.Background()
	var ca corev1.ConfigMap
	c.Eventually(t, "the status server's CA in namespace "+pod.Namespace, func() error {
		return c.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: statusserver.CAConfigMap}, &ca)
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(ca.Data[statusserver.CAKey])) {
		t.Fatalf("ConfigMap %s/%s holds no PEM certificate", pod.Namespace, statusserver.CAConfigMap)
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	url, token, err := PodReportTarget(ctx, cs, pod, server)
	if err != nil {
		t.Fatal(err)
	}
	return &Reporter{URL: url, Token: token, http: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}}
}

// PodReportTarget returns where a trainer Pod reports its progress and
// with what: the URL of its environment, on server instead of the URL's
// host (the manager's Service) when server is not empty, and the token
// the kubelet would project into its volume, asked for with the volume's
// audience and bound to the Pod. make bench's progress scenario reports
// through it too.
func PodReportTarget(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, server string) (url, token string, err error) {
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == jobplan.StatusServerURLEnv {
			url = e.Value
		}
	}
	var projection *corev1.ServiceAccountTokenProjection
	for _, v := range pod.Spec.Volumes {
		if v.Name == jobplan.StatusServerVolume && v.Projected != nil && len(v.Projected.Sources) > 0 {
			projection = v.Projected.Sources[0].ServiceAccountToken
		}
	}
	_, path, ok := strings.Cut(url, "/apis/")
	if !ok || projection == nil {
		return "", "", fmt.Errorf("pod %s has no %s with an /apis/ path, or no token in volume %s", pod.Name, jobplan.StatusServerURLEnv, jobplan.StatusServerVolume)
	}
	if server != "" {
		url = server + "/apis/" + path
	}
	tr, err := cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         []string{projection.Audience},
			ExpirationSeconds: projection.ExpirationSeconds,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", "", fmt.Errorf("the token of Pod %s's volume: %w", pod.Name, err)
	}
	return url, tr.Status.Token, nil
}

// Report posts an UpdateTrainJobStatusRequest and fails the test unless
// the server accepts it.
func (r *Reporter) Report(t testing.TB, progress, remainingSeconds int32, metrics ...trainer.Metric) {
	t.Helper()
	var ms []string
	for _, m := range metrics {
		ms = append(ms, fmt.Sprintf(`{"name":%q,"value":%q}`, m.Name, m.Value))
	}
	body := fmt.Sprintf(`{"trainerStatus":{"progressPercentage":%d,"estimatedRemainingSeconds":%d,"metrics":[%s],"lastUpdatedTime":%q}}`,
		progress, remainingSeconds, strings.Join(ms, ","), time.Now().UTC().Format(time.RFC3339))
	req, err := http.NewRequest(http.MethodPost, r.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		t.Fatalf("reporting progress to %s: %v", r.URL, err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reporting progress to %s: %d %s", r.URL, resp.StatusCode, answer)
	}
}

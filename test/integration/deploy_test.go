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
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The manager's Deployment, as config/default builds it, passes the
// restricted Pod Security Standard, enforced by the API server's admission.
func TestManagerDeploymentPassesRestricted(t *testing.T) {
	out, err := kubectl(t, "kustomize", filepath.Join(repoRoot, "config", "default"))
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, out)
	}
	var deploy *appsv1.Deployment
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(out), 4096)
	for {
		var d appsv1.Deployment
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if d.Kind == "Deployment" {
			deploy = &d
		}
	}
	if deploy == nil {
		t.Fatal("config/default has no Deployment")
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "restricted-", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: deploy.Spec.Template.Spec.ServiceAccountName}}
	if err := k8s.Create(context.Background(), sa); err != nil {
		t.Fatal(err)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "manager", Labels: deploy.Spec.Template.Labels},
		Spec:       *deploy.Spec.Template.Spec.DeepCopy(),
	}
	if err := k8s.Create(context.Background(), pod, client.DryRunAll); err != nil {
		t.Errorf("the manager's Pod is refused under the restricted standard: %v", err)
	}

	// The same Pod without its hardening is refused: the check is live.
	bare := pod.DeepCopy()
	bare.Spec.SecurityContext = nil
	bare.Spec.Containers[0].SecurityContext = nil
	err = k8s.Create(context.Background(), bare, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("a Pod without hardening was not refused by Pod Security admission (err %v)", err)
	}
}

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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The manager's Deployment, as config/default builds it, passes the
// restricted Pod Security Standard, enforced by the API server's admission.
func TestManagerDeploymentPassesRestricted(t *testing.T) {
	out, err := cluster.Kubectl("kustomize", filepath.Join(repoRoot, "config", "default"))
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
	if err := cluster.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), ns) })
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: deploy.Spec.Template.Spec.ServiceAccountName}}
	if err := cluster.Client.Create(context.Background(), sa); err != nil {
		t.Fatal(err)
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "manager", Labels: deploy.Spec.Template.Labels},
		Spec:       *deploy.Spec.Template.Spec.DeepCopy(),
	}
	if err := cluster.Client.Create(context.Background(), pod, client.DryRunAll); err != nil {
		t.Errorf("the manager's Pod is refused under the restricted standard: %v", err)
	}

	// The same Pod without its hardening is refused: the check is live.
	bare := pod.DeepCopy()
	bare.Spec.SecurityContext = nil
	bare.Spec.Containers[0].SecurityContext = nil
	err = cluster.Client.Create(context.Background(), bare, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Errorf("a Pod without hardening was not refused by Pod Security admission (err %v)", err)
	}
}

// make release's manifests: config/default, with the manager's image by
// digest and every object labelled with the version; they apply.
func TestReleaseManifests(t *testing.T) {
	const (
		version = "v9.8.7"
		repo    = "registry.example.com/team/trainjob-operator"
		digest  = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	)
	dist := utiltesting.WriteRelease(t, repoRoot, version, repo, digest)

	install, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	source, err := cluster.Kubectl("kustomize", filepath.Join(repoRoot, "config", "default"))
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, source)
	}
	released, want := decodeObjects(t, string(install)), decodeObjects(t, source)
	key := objectKey
	// The same objects, but for the version label and the image.
	got, wantObjs := map[string]unstructured.Unstructured{}, map[string]unstructured.Unstructured{}
	for _, u := range released {
		labels := u.GetLabels()
		if v := labels["app.kubernetes.io/version"]; v != version {
			t.Errorf("%s: label app.kubernetes.io/version=%q, want %s", key(u), v, version)
		}
		delete(labels, "app.kubernetes.io/version")
		if len(labels) == 0 {
			labels = nil
		}
		u.SetLabels(labels)
		if u.GetKind() == "Deployment" {
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			manager := containers[0].(map[string]any)
			if image := manager["image"]; image != repo+"@"+digest {
				t.Errorf("the manager's image %v, want %s@%s", image, repo, digest)
			}
			manager["image"] = "trainjob-operator:latest"
			if err := unstructured.SetNestedSlice(u.Object, containers, "spec", "template", "spec", "containers"); err != nil {
				t.Fatal(err)
			}
		}
		got[key(u)] = u
	}
	for _, u := range want {
		wantObjs[key(u)] = u
	}
	if diff := cmp.Diff(wantObjs, got); diff != "" {
		t.Errorf("install.yaml's objects differ from config/default's but for the version and image (-want +got):\n%s", diff)
	}

	// The chart's package: the release's version, its image by digest.
	pkg := filepath.Join(dist, "trainjob-operator-"+strings.TrimPrefix(version, "v")+".tgz")
	chart := decodeObjects(t, helm(t, "template", "trainjob-operator", pkg, "--namespace", "trainjob-system"))
	deploy := find(chart, "Deployment", "trainjob-operator")
	if got := nested(deploy, "spec", "template", "spec", "containers", 0, "image"); got != repo+"@"+digest {
		t.Errorf("the chart's image %v, want %s@%s", got, repo, digest)
	}
	if got := deploy.GetLabels()["app.kubernetes.io/version"]; got != version {
		t.Errorf("the chart's version label %q, want %s", got, version)
	}

	// The Kubeflow SDK's ConfigMap, opt-in, says the release's version, in
	// the release's manifest as in its chart.
	sdk, err := os.ReadFile(filepath.Join(dist, "kubeflow-sdk.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	chartSDK := decodeObjects(t, helm(t, "template", "trainjob-operator", pkg, "--namespace", "trainjob-system",
		"--set", kubeflowSDKValue+".enabled=true", "--show-only", "templates/kubeflow-sdk.yaml"))
	for what, objs := range map[string][]unstructured.Unstructured{"kubeflow-sdk.yaml": decodeObjects(t, string(sdk)), "the chart": chartSDK} {
		if got := nested(find(objs, "ConfigMap", "kubeflow-trainer-public"), "data", "kubeflow_trainer_version"); got != version {
			t.Errorf("%s: kubeflow_trainer_version = %v, want %s", what, got, version)
		}
	}

	ensureNamespaces(t, "trainjob-system", "kubeflow-system")
	for _, f := range []string{"install.yaml", "runtimes.yaml", "kubeflow-sdk.yaml"} {
		if out, err := cluster.Kubectl("apply", "--server-side", "--dry-run=server", "-f", filepath.Join(dist, f)); err != nil {
			t.Errorf("kubectl apply -f %s: %v\n%s", f, err, out)
		}
	}

	// The krew manifest installs this platform's trainctl archive, by its
	// checksum, and the archive holds trainctl of the version.
	platform := runtime.GOOS + "-" + runtime.GOARCH
	archive := filepath.Join(dist, "trainctl-"+version+"-"+platform+".tar.gz")
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	krew, err := os.ReadFile(filepath.Join(dist, "trainjob.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	plugin := decodeObjects(t, string(krew))[0]
	platforms, _, _ := unstructured.NestedSlice(plugin.Object, "spec", "platforms")
	if plugin.GetKind() != "Plugin" || plugin.GetName() != "trainjob" || len(platforms) != 1 {
		t.Fatalf("krew manifest: %s %s with %d platform(s), want Plugin trainjob with this machine's", plugin.GetKind(), plugin.GetName(), len(platforms))
	}
	p := platforms[0].(map[string]any)
	if got, want := p["sha256"], hex.EncodeToString(sum[:]); got != want {
		t.Errorf("krew manifest: sha256 %v, want the archive's %s", got, want)
	}
	if got := p["uri"].(string); !strings.HasSuffix(got, "/"+filepath.Base(archive)) {
		t.Errorf("krew manifest: uri %s, want the archive %s", got, filepath.Base(archive))
	}
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	if out, err := exec.Command(filepath.Join(dir, "trainctl"), "version").CombinedOutput(); err != nil || !strings.Contains(string(out), version) {
		t.Errorf("the archive's trainctl version: %v\n%s; want %s", err, out, version)
	}
}

// decodeObjects decodes the objects of a multi-document YAML manifest.
func decodeObjects(t *testing.T, manifest string) []unstructured.Unstructured {
	t.Helper()
	var objs []unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func objectKey(u unstructured.Unstructured) string {
	return u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
}

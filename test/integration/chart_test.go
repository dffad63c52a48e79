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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/config"
)

// chartDir is the chart, once the suite has found the repository.
func chartDir() string { return filepath.Join(repoRoot, "charts", "trainjob-operator") }

// helm runs bin/helm (hack/build-tools.sh helm builds it).
func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(repoRoot, "bin", "helm"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// helmTemplate renders the chart as release trainjob-operator in ns.
func helmTemplate(t *testing.T, ns string, args ...string) []unstructured.Unstructured {
	t.Helper()
	return decodeObjects(t, helm(t, append([]string{"template", "trainjob-operator", chartDir(), "--namespace", ns, "--include-crds"}, args...)...))
}

// chartLabels are the labels the chart adds to every object.
var chartLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version"}

// comparable is u without what the chart adds or renders differently from
// kustomize and means the same: its labels, the Deployment's annotation
// that rolls it on a configuration change, a namespace on a cluster-scoped
// runtime, and the configuration file's text (compared decoded).
func comparable(t *testing.T, u unstructured.Unstructured) unstructured.Unstructured {
	t.Helper()
	u = *u.DeepCopy()
	labels := u.GetLabels()
	for _, l := range chartLabels {
		delete(labels, l)
	}
	if len(labels) == 0 {
		labels = nil
	}
	u.SetLabels(labels)
	if u.GetKind() == "ClusterTrainingRuntime" {
		u.SetNamespace("")
	}
	if u.GetKind() == "Deployment" {
		annotations, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "annotations")
		delete(annotations, "checksum/config")
		if len(annotations) == 0 {
			unstructured.RemoveNestedField(u.Object, "spec", "template", "metadata", "annotations")
		} else if err := unstructured.SetNestedStringMap(u.Object, annotations, "spec", "template", "metadata", "annotations"); err != nil {
			t.Fatal(err)
		}
	}
	if u.GetKind() == "ConfigMap" && u.GetName() == "trainjob-operator-config" {
		text, _, _ := unstructured.NestedString(u.Object, "data", "config.yaml")
		var decoded map[string]any
		if err := yaml.Unmarshal([]byte(text), &decoded); err != nil {
			t.Fatalf("%s: config.yaml: %v", objectKey(u), err)
		}
		u.Object["data"] = map[string]any{"config.yaml": decoded}
	}
	return u
}

// The chart's objects, rendered with its default values, are
// config/default's (but the Namespace, which Helm leaves to
// --create-namespace), modulo the chart's labels; they apply.
func TestChartMatchesConfigDefault(t *testing.T) {
	helm(t, "lint", "--strict", chartDir())

	source, err := cluster.Kubectl("kustomize", filepath.Join(repoRoot, "config", "default"))
	if err != nil {
		t.Fatalf("kubectl kustomize config/default: %v\n%s", err, source)
	}
	want := map[string]unstructured.Unstructured{}
	for _, u := range decodeObjects(t, source) {
		if u.GetKind() != "Namespace" {
			want[objectKey(comparable(t, u))] = comparable(t, u)
		}
	}
	// config/default's image is trainjob-operator:latest.
	rendered := helmTemplate(t, "trainjob-system", "--set", "image.tag=latest")
	got := map[string]unstructured.Unstructured{}
	for _, u := range rendered {
		// Helm installs crds/ as they are, untemplated.
		for _, l := range chartLabels {
			if u.GetKind() == "CustomResourceDefinition" {
				break
			}
			if _, ok := u.GetLabels()[l]; !ok {
				t.Errorf("%s lacks the label %s", objectKey(u), l)
			}
		}
		got[objectKey(comparable(t, u))] = comparable(t, u)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the chart's objects differ from config/default's (-kustomize +helm):\n%s", diff)
	}

	ensureNamespaces(t, "trainjob-system")
	applyChartDryRun(t, "--include-crds")
}

// ensureNamespaces creates the namespaces that do not exist, for manifests
// that name them.
func ensureNamespaces(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := cluster.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
}

// applyChartDryRun applies the chart, rendered into trainjob-system with
// args, to the API server in a dry run.
func applyChartDryRun(t *testing.T, args ...string) {
	t.Helper()
	manifest := filepath.Join(t.TempDir(), "chart.yaml")
	rendered := helm(t, append([]string{"template", "trainjob-operator", chartDir(), "--namespace", "trainjob-system"}, args...)...)
	if err := os.WriteFile(manifest, []byte(rendered), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cluster.Kubectl("apply", "--server-side", "--dry-run=server", "-f", manifest); err != nil {
		t.Errorf("kubectl apply the chart (%s): %v\n%s", strings.Join(args, " "), err, out)
	}
}

// kubeflowSDKValue is the chart's value that installs config/kubeflow-sdk.
const kubeflowSDKValue = "kubeflowSDK.publicConfigMap"

// The Kubeflow SDK's ConfigMap and the RBAC to read it are the chart's only
// when asked for: then they are config/kubeflow-sdk's, modulo the chart's
// labels (the version both write is the chart's appVersion), and apply;
// the version, the namespace and whether the chart makes it are values.
func TestChartKubeflowSDKConfigMap(t *testing.T) {
	inSDKNamespace := func(u unstructured.Unstructured) bool {
		return u.GetNamespace() == "kubeflow-system" || u.GetKind() == "Namespace" && u.GetName() == "kubeflow-system"
	}
	if objs := helmTemplate(t, "trainjob-system"); slices.ContainsFunc(objs, inSDKNamespace) || find(objs, "ConfigMap", "kubeflow-trainer-public") != nil {
		t.Error("the chart's defaults install the Kubeflow SDK's ConfigMap or objects in kubeflow-system: it is opt-in")
	}

	source, err := cluster.Kubectl("kustomize", filepath.Join(repoRoot, "config", "kubeflow-sdk"))
	if err != nil {
		t.Fatalf("kubectl kustomize config/kubeflow-sdk: %v\n%s", err, source)
	}
	want := map[string]unstructured.Unstructured{}
	for _, u := range decodeObjects(t, source) {
		want[objectKey(u)] = comparable(t, u)
	}
	got := map[string]unstructured.Unstructured{}
	for _, u := range helmTemplate(t, "trainjob-system", "--set", kubeflowSDKValue+".enabled=true") {
		if inSDKNamespace(u) {
			got[objectKey(u)] = comparable(t, u)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the chart's Kubeflow SDK objects differ from config/kubeflow-sdk's (-kustomize +helm):\n%s", diff)
	}
	ensureNamespaces(t, "kubeflow-system")
	applyChartDryRun(t, "--show-only", "templates/kubeflow-sdk.yaml", "--set", kubeflowSDKValue+".enabled=true")

	objs := helmTemplate(t, "trainjob-system", "--set", kubeflowSDKValue+".enabled=true",
		"--set", kubeflowSDKValue+".version=v2.3.0", "--set", kubeflowSDKValue+".namespace=ml-platform",
		"--set", kubeflowSDKValue+".createNamespace=false")
	cm := find(objs, "ConfigMap", "kubeflow-trainer-public")
	if cm == nil {
		t.Fatal("no ConfigMap kubeflow-trainer-public")
	}
	if got := nested(cm, "data", "kubeflow_trainer_version"); got != "v2.3.0" {
		t.Errorf("kubeflow_trainer_version = %v, want the value v2.3.0", got)
	}
	for _, kind := range []string{"ConfigMap", "Role", "RoleBinding"} {
		if u := find(objs, kind, "kubeflow-trainer-public"); u == nil || u.GetNamespace() != "ml-platform" {
			t.Errorf("%s kubeflow-trainer-public is not in the namespace of the value, ml-platform", kind)
		}
	}
	if find(objs, "Namespace", "ml-platform") != nil {
		t.Error("the chart makes the namespace with createNamespace=false")
	}
}

func find(objs []unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	i := slices.IndexFunc(objs, func(u unstructured.Unstructured) bool { return u.GetKind() == kind && u.GetName() == name })
	if i < 0 {
		return nil
	}
	return &objs[i]
}

// managerConfig decodes the manager's configuration file as the manager
// does, and validates it.
func managerConfig(t *testing.T, objs []unstructured.Unstructured) *configv1alpha1.Configuration {
	t.Helper()
	cm := find(objs, "ConfigMap", "trainjob-operator-config")
	if cm == nil {
		t.Fatal("no ConfigMap trainjob-operator-config")
	}
	text, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	cfg, err := config.Decode([]byte(text))
	if err != nil {
		t.Fatalf("the manager refuses its configuration: %v\n%s", err, text)
	}
	configv1alpha1.SetDefaults(cfg)
	if errs := config.Validate(cfg); len(errs) > 0 {
		t.Fatalf("the manager refuses its configuration: %v\n%s", errs.ToAggregate(), text)
	}
	return cfg
}

// What the chart's values change, rendered, and the configuration the
// manager then reads.
func TestChartValues(t *testing.T) {
	t.Run("image by digest, scheduling, resources, replicas, configuration, another namespace", func(t *testing.T) {
		digest := "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		objs := helmTemplate(t, "ml-platform",
			"--set", "image.repository=registry.example.com/trainjob-operator", "--set", "image.digest="+digest,
			"--set", "replicas=3", "--set", "resources.limits.memory=1Gi",
			"--set-json", `nodeSelector={"node-role.kubernetes.io/control-plane":""}`,
			"--set-json", `tolerations=[{"key":"node-role.kubernetes.io/control-plane","operator":"Exists","effect":"NoSchedule"}]`,
			"--set-json", `configuration={"objectRetentionPolicies":{"trainJobs":{"afterFinished":"168h"}},"clientConnection":{"qps":120,"burst":240}}`,
		)
		deploy := find(objs, "Deployment", "trainjob-operator")
		if deploy == nil {
			t.Fatal("no Deployment")
		}
		checks := map[string][2]any{
			"image":        {"registry.example.com/trainjob-operator@" + digest, nested(deploy, "spec", "template", "spec", "containers", 0, "image")},
			"replicas":     {int64(3), nested(deploy, "spec", "replicas")},
			"memory limit": {"1Gi", nested(deploy, "spec", "template", "spec", "containers", 0, "resources", "limits", "memory")},
			"cpu request":  {"100m", nested(deploy, "spec", "template", "spec", "containers", 0, "resources", "requests", "cpu")},
			"nodeSelector": {"", nested(deploy, "spec", "template", "spec", "nodeSelector", "node-role.kubernetes.io/control-plane")},
			"toleration":   {"NoSchedule", nested(deploy, "spec", "template", "spec", "tolerations", 0, "effect")},
			"namespace":    {"ml-platform", deploy.GetNamespace()},
		}
		for what, c := range checks {
			if fmt.Sprint(c[0]) != fmt.Sprint(c[1]) {
				t.Errorf("%s = %v, want %v", what, c[1], c[0])
			}
		}
		for _, u := range objs {
			for _, s := range []any{nested(&u, "subjects", 0, "namespace"), nested(&u, "webhooks", 0, "clientConfig", "service", "namespace")} {
				if s != nil && s != "ml-platform" {
					t.Errorf("%s names namespace %v, want the release's", objectKey(u), s)
				}
			}
		}
		cfg := managerConfig(t, objs)
		if cfg.ObjectRetentionPolicies.TrainJobs.AfterFinished.Duration.String() != "168h0m0s" || *cfg.ClientConnection.QPS != 120 || *cfg.ClientConnection.Burst != 240 {
			t.Errorf("configuration %+v %+v", cfg.ObjectRetentionPolicies.TrainJobs, cfg.ClientConnection)
		}
		if cm := cfg.Webhook.CertManagement; !*cm.Enable || cm.SecretNamespace != "ml-platform" || cm.DNSName != "trainjob-operator-webhook.ml-platform.svc" {
			t.Errorf("certificate management %+v: want the manager's, in the release's namespace", cm)
		}
	})
	t.Run("cert-manager", func(t *testing.T) {
		objs := helmTemplate(t, "trainjob-system", "--set", "webhook.certificates=certManager")
		if find(objs, "Secret", "trainjob-operator-webhook-certs") != nil {
			t.Error("the chart ships the Secret cert-manager writes")
		}
		cert := find(objs, "Certificate", "trainjob-operator-webhook")
		if cert == nil || find(objs, "Issuer", "trainjob-operator-selfsigned") == nil {
			t.Fatal("no Certificate and self-signed Issuer")
		}
		if got := nested(cert, "spec", "dnsNames", 0); got != "trainjob-operator-webhook.trainjob-system.svc" {
			t.Errorf("Certificate for %v", got)
		}
		for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
			w := find(objs, kind, "trainjob-operator")
			if w == nil || w.GetAnnotations()["cert-manager.io/inject-ca-from"] != "trainjob-system/trainjob-operator-webhook" {
				t.Errorf("%s: no CA injection from the Certificate", kind)
			}
		}
		deploy := find(objs, "Deployment", "trainjob-operator")
		if got := nested(deploy, "spec", "template", "spec", "volumes", 1, "secret", "secretName"); got != "trainjob-operator-webhook-certs" {
			t.Errorf("the webhook's certificate volume: %v, want the Secret", got)
		}
		if cfg := managerConfig(t, objs); *cfg.Webhook.CertManagement.Enable {
			t.Error("the manager still makes the certificate cert-manager makes")
		}

		issued := helmTemplate(t, "trainjob-system", "--set", "webhook.certificates=certManager",
			"--set", "webhook.certManager.issuerRef.name=corp-ca", "--set", "webhook.certManager.issuerRef.kind=ClusterIssuer")
		if find(issued, "Issuer", "trainjob-operator-selfsigned") != nil {
			t.Error("a self-signed Issuer beside the one given")
		}
		if got := nested(find(issued, "Certificate", "trainjob-operator-webhook"), "spec", "issuerRef", "name"); got != "corp-ca" {
			t.Errorf("issuerRef %v, want corp-ca", got)
		}
	})
	t.Run("without runtimes, without metrics", func(t *testing.T) {
		objs := helmTemplate(t, "trainjob-system", "--set", "runtimes.install=false", "--set", "metrics.enabled=false")
		if slices.ContainsFunc(objs, func(u unstructured.Unstructured) bool { return u.GetKind() == "ClusterTrainingRuntime" }) {
			t.Error("runtimes installed")
		}
		if cfg := managerConfig(t, objs); cfg.Metrics.BindAddress != "0" {
			t.Errorf("metrics bind address %q, want 0 (off)", cfg.Metrics.BindAddress)
		}
	})
	t.Run("pod labels and annotations beside the chart's", func(t *testing.T) {
		objs := helmTemplate(t, "trainjob-system",
			"--set-json", `podLabels={"app.kubernetes.io/name":"mine","team":"ml"}`,
			"--set-json", `podAnnotations={"checksum/config":"mine","scrape":"yes"}`)
		deploy := find(objs, "Deployment", "trainjob-operator")
		checks := map[string][2]any{
			"selector label": {"trainjob-operator", nested(deploy, "spec", "template", "metadata", "labels", "app.kubernetes.io/name")},
			"team label":     {"ml", nested(deploy, "spec", "template", "metadata", "labels", "team")},
			"annotation":     {"yes", nested(deploy, "spec", "template", "metadata", "annotations", "scrape")},
		}
		for what, c := range checks {
			if fmt.Sprint(c[0]) != fmt.Sprint(c[1]) {
				t.Errorf("%s = %v, want %v", what, c[1], c[0])
			}
		}
		if got := fmt.Sprint(nested(deploy, "spec", "template", "metadata", "annotations", "checksum/config")); len(got) != 64 {
			t.Errorf("checksum/config = %q, want the configuration's sha256", got)
		}
	})
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"a bad certificates value": {[]string{"--set", "webhook.certificates=manual"}, `webhook.certificates "manual": want builtin or certManager`},
		"the webhook's port":       {[]string{"--set", "configuration.webhook.port=9000"}, "configuration.webhook.port is set by the chart"},
		"the certificate's Secret": {[]string{"--set", "configuration.webhook.certManagement.secretName=mine"}, "configuration.webhook.certManagement.secretName is set by the chart"},
		"the probes' address":      {[]string{"--set", "configuration.health.healthProbeBindAddress=:9999"}, "configuration.health.healthProbeBindAddress is set by the chart"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := exec.Command(filepath.Join(repoRoot, "bin", "helm"), append([]string{"template", "x", chartDir()}, tc.args...)...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("helm template %v: %v, want an error with %q\n%s", tc.args, err, tc.want, out)
			}
		})
	}
}

// nested reads a field of u by path (strings for keys, ints for list
// indexes); nil if it is not there.
func nested(u *unstructured.Unstructured, path ...any) any {
	if u == nil {
		return nil
	}
	var cur any = u.Object
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[k]
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			cur = l[k]
		}
	}
	return cur
}

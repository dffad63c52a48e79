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

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/config"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The Helm release the test installs: the name docs/install.md gives it, in
// a namespace of its own.
const (
	helmRelease   = "trainjob-operator"
	helmNamespace = "trainjob-helm"
	// The installations' ServiceAccount, which their RBAC binds.
	managerServiceAccount = "trainjob-operator"
	// The version the kustomize test's release manifests are made for.
	releaseVersion = "v0.0.1-e2e"
)

// An installation of the product on the suite's cluster, one of the ways
// docs/install.md gives.
type installation struct {
	// namespace the manager is installed in.
	namespace string
	// labels every object of the installation carries, and none other.
	labels map[string]string
	// install installs it, and returns once its Deployment is available.
	install func(t *testing.T)
	// uninstall removes it as docs/install.md says, after trainctl
	// uninstall: stopManager stops the manager, which stands for the
	// Deployment's Pods, once they are gone.
	uninstall func(t *testing.T, stopManager func())
	// cleanup removes what a failed test left of it, before the suite's
	// installation comes back: their objects have the same names.
	cleanup func()
}

// The Helm chart installed with helm into the suite's cluster, run, and
// uninstalled as docs/install.md says (trainctl uninstall, helm uninstall,
// the CRDs deleted). See testInstallAndUninstall.
func TestHelmInstallAndUninstall(t *testing.T) {
	helmBin := filepath.Join(devOpts.Root, "bin", "helm")
	if _, err := os.Stat(helmBin); err != nil {
		t.Fatalf("bin/helm is missing: run 'hack/build-tools.sh helm' (make test-e2e does): %v", err)
	}
	helm := func(t *testing.T, args ...string) {
		t.Helper()
		cmd := exec.Command(helmBin, append([]string{"--kubeconfig", devOpts.Kubeconfig()}, args...)...)
		// Helm's own files (repositories, cache) stay out of $HOME.
		home := t.TempDir()
		cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	testInstallAndUninstall(t, installation{
		namespace: helmNamespace,
		labels:    map[string]string{"app.kubernetes.io/instance": helmRelease},
		install: func(t *testing.T) {
			// kwok ends a Pod 5 s after it starts unless annotated: the
			// Deployment's Pods run until the test ends (they are not
			// the manager).
			helm(t, "install", helmRelease, filepath.Join(devOpts.Root, "charts", "trainjob-operator"),
				"--namespace", helmNamespace, "--create-namespace",
				"--set-string", "podAnnotations.pod-complete\\.stage\\.kwok\\.x-k8s\\.io/delay=1h",
				"--wait", "--timeout", "60s")
		},
		uninstall: func(t *testing.T, stopManager func()) {
			helm(t, "uninstall", helmRelease, "--namespace", helmNamespace, "--wait", "--timeout", "60s")
			stopManager()
			cluster.MustKubectl(t, "delete", "-f", filepath.Join(devOpts.Root, "charts", "trainjob-operator", "crds"), "--timeout", "60s")
		},
		cleanup: func() {
			_, _ = cluster.Kubectl("delete", "namespace", helmNamespace, "--ignore-not-found", "--wait=false")
			out, err := exec.Command(helmBin, "--kubeconfig", devOpts.Kubeconfig(), "uninstall", helmRelease, "-n", helmNamespace, "--ignore-not-found").CombinedOutput()
			if err != nil {
				t.Logf("helm uninstall: %v\n%s", err, out)
			}
		},
	})
}

// The release manifests, as make release writes them, applied with kubectl
// into the suite's cluster, run, and uninstalled as docs/install.md says
// (trainctl uninstall, kubectl delete -f dist/install.yaml). See
// testInstallAndUninstall.
//
// make release names the manager's image by the digest make image pushed;
// kwok pulls no image, so the test writes the manifests for a digest no
// registry holds (hack/release.sh takes it from dist/image.digest), and
// TestReleaseManifests checks they are config/default's objects but for it.
func TestKustomizeInstallAndUninstall(t *testing.T) {
	dist := utiltesting.WriteRelease(t, devOpts.Root, releaseVersion, "registry.example.com/trainjob-operator", "sha256:"+strings.Repeat("0", 64))
	installYAML := filepath.Join(dist, "install.yaml")
	testInstallAndUninstall(t, installation{
		namespace: config.Namespace,
		labels:    map[string]string{"app.kubernetes.io/version": releaseVersion},
		install: func(t *testing.T) {
			// A cluster that has never run the product has no namespace
			// of it: the suite's manager kept its configuration there.
			cluster.MustKubectl(t, "delete", "namespace", config.Namespace, "--ignore-not-found", "--timeout", "60s")
			// kwok ends a Pod 5 s after it starts unless annotated: an
			// overlay of install.yaml, as a user makes one, annotates the
			// Deployment's Pods to run until the test ends.
			overlay := t.TempDir()
			data, err := os.ReadFile(installYAML)
			if err != nil {
				t.Fatal(err)
			}
			kustomization := `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - install.yaml
patches:
  - target:
      kind: Deployment
      name: trainjob-operator
    patch: |-
      - op: add
        path: /spec/template/metadata/annotations
        value:
          pod-complete.stage.kwok.x-k8s.io/delay: 1h
`
			for name, content := range map[string][]byte{"install.yaml": data, "kustomization.yaml": []byte(kustomization)} {
				if err := os.WriteFile(filepath.Join(overlay, name), content, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cluster.MustKubectl(t, "apply", "--server-side", "-k", overlay)
			cluster.MustKubectl(t, "-n", config.Namespace, "rollout", "status", "deployment/trainjob-operator", "--timeout", "60s")
		},
		uninstall: func(t *testing.T, stopManager func()) {
			cluster.MustKubectl(t, "delete", "--ignore-not-found", "-f", installYAML, "--timeout", "60s")
			stopManager()
		},
		cleanup: func() {
			// The namespace gone, not deleting, for the suite's
			// installation to make it again.
			if out, err := cluster.Kubectl("delete", "-f", installYAML, "--ignore-not-found", "--timeout", "60s"); err != nil {
				t.Logf("kubectl delete -f install.yaml: %v\n%s", err, out)
			}
		},
	})
}

// testInstallAndUninstall installs the product with inst, runs a TrainJob
// through it, and, with another TrainJob running, uninstalls it as
// docs/install.md says (trainctl uninstall, then inst.uninstall): nothing is
// left held by a finalizer, and the namespaces delete.
//
// What this cluster cannot do, and what the test does in its place:
//   - kwok simulates the Pods of the installation's Deployment: no container
//     runs. The manager runs on this machine as that Pod would: with the
//     configuration the installation made (its ConfigMap), as its
//     ServiceAccount (a token of it from the TokenRequest API, as the
//     kubelet mounts one, so that every request is allowed by the
//     installation's RBAC or refused), its Lease in the installation's
//     namespace.
//   - The API server cannot reach the webhook's Service (no Pod network,
//     no kube-proxy). After the install the test points the two webhook
//     configurations at the manager by URL, https://localhost:<port>, and
//     the manager makes its certificate for localhost instead of the
//     Service's name. These are the only changes to what is installed.
//
// The installation's cluster-wide objects (CRDs, ClusterRoles, webhook
// configurations, runtimes) have the names of the suite's installation,
// which dev.Up applies from config/: one installation per cluster. So the
// test first waits until no TrainJob is left, stops the suite's manager and
// deletes that installation, and afterwards brings it back with dev.Up.
func testInstallAndUninstall(t *testing.T, inst installation) {
	ctx := context.Background()
	start := time.Now()
	replaceSuiteInstallation(t, ctx)
	t.Cleanup(inst.cleanup)
	inst.install(t)
	t.Logf("installed: %s", time.Since(start).Round(100*time.Millisecond))

	// What it installed: the CRDs, the runtimes, a Deployment whose Pods
	// the API server admitted and kwok runs.
	for _, crd := range []string{"trainjobs", "trainingruntimes", "clustertrainingruntimes"} {
		if err := getCRD(ctx, crd); err != nil {
			t.Fatalf("the installation's CRD %s: %v", crd, err)
		}
	}
	var runtime trainer.ClusterTrainingRuntime
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: "torch-distributed"}, &runtime); err != nil {
		t.Fatalf("the installation's runtime torch-distributed: %v", err)
	}
	for k, v := range inst.labels {
		if got := runtime.Labels[k]; got != v {
			t.Errorf("runtime torch-distributed has label %s=%q, want %q: not the installation's", k, got, v)
		}
	}
	var deploy appsv1.Deployment
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: inst.namespace, Name: "trainjob-operator"}, &deploy); err != nil {
		t.Fatal(err)
	}
	if deploy.Status.AvailableReplicas != *deploy.Spec.Replicas {
		t.Errorf("the Deployment has %d available replicas of %d", deploy.Status.AvailableReplicas, *deploy.Spec.Replicas)
	}

	// The webhook, reached by URL; the manager, as the Deployment's Pod.
	webhookPort := freePort(t)
	pointWebhooksAt(t, ctx, inst.namespace, webhookPort)
	configPath := installedConfiguration(t, ctx, inst.namespace)
	kubeconfig := serviceAccountKubeconfig(t, ctx, inst.namespace)
	stopManager := startInstalledManager(t, inst.namespace, configPath, kubeconfig, webhookPort)

	// The manager did, with the installation's RBAC, what it does at start:
	// made the certificate into the installation's Secret, put its CA in
	// both webhook configurations, took the Lease.
	cluster.Eventually(t, "the manager to lead, and its certificate in place", func() error {
		var lease coordinationv1.Lease
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: inst.namespace, Name: configv1alpha1.DefaultLeaderElectionID}, &lease); err != nil {
			return err
		}
		if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
			return errors.New("the Lease has no holder")
		}
		var secret corev1.Secret
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: inst.namespace, Name: configv1alpha1.DefaultWebhookSecretName}, &secret); err != nil {
			return err
		}
		ca := secret.Data["ca.crt"]
		if len(ca) == 0 || len(secret.Data["tls.crt"]) == 0 {
			return errors.New("the installation's certificate Secret is empty")
		}
		for _, cc := range installedWebhooks(t, ctx) {
			if string(cc.CABundle) != string(ca) {
				return errors.New("a webhook's caBundle is not the Secret's CA")
			}
		}
		return nil
	})

	// A TrainJob runs to completion through the installation: both webhooks
	// answer (the mutating one stamps the runtime patch's time, the
	// validating one warns of the short TTL), the controllers create its
	// Jobs, see them complete and delete it at its TTL.
	ns := cluster.NewNamespace(t)
	out := cluster.ApplyYAML(t, ns, `apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: through-the-installation
  annotations:
    `+runFor+`: 2s
spec:
  runtimeRef:
    name: torch-distributed
  ttlSecondsAfterFinished: 5
  trainer:
    numNodes: 2
    command: [torchrun, train.py]
  runtimePatches:
  - manager: e2e.trainjob-operator.dev/install
`)
	if !strings.Contains(out, "Warning: spec.ttlSecondsAfterFinished: 5") {
		t.Errorf("no warning of the validating webhook when creating a TrainJob with a 5s TTL:\n%s", out)
	}
	tj, err := cluster.GetTrainJob(ns, "through-the-installation")
	if err != nil {
		t.Fatal(err)
	}
	if len(tj.Spec.RuntimePatches) != 1 || tj.Spec.RuntimePatches[0].Time == nil {
		t.Errorf("the mutating webhook did not stamp the runtime patch's time: %+v", tj.Spec.RuntimePatches)
	}
	done := cluster.WaitCondition(t, ns, "through-the-installation", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
	waitGoneNotBefore(t, ns, "through-the-installation", done.FinishedCondition().LastTransitionTime.Add(5*time.Second))
	t.Logf("a TrainJob ran to completion and was deleted at its TTL: %s since the start", time.Since(start).Round(100*time.Millisecond))

	// Uninstalled with a TrainJob running, its Jobs held by the tracking
	// finalizer.
	cluster.Create(t, trainJob("running", ns, time.Hour).NumNodes(2).Obj())
	cluster.WaitPodsRunning(t, ns, "running", 2)
	var jobs batchv1.JobList
	if err := cluster.Client.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{trainer.TrainJobNameLabel: "running"}); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) == 0 || !slices.ContainsFunc(jobs.Items, func(j batchv1.Job) bool { return slices.Contains(j.Finalizers, trainer.JobTrackingFinalizer) }) {
		t.Fatalf("the running TrainJob's Jobs carry no %s: the uninstall below would prove nothing", trainer.JobTrackingFinalizer)
	}
	uninstallStart := time.Now()
	trainctl := exec.Command(filepath.Join(devOpts.Root, "bin", "trainctl"), "--kubeconfig", devOpts.Kubeconfig(), "uninstall", "--timeout", "60s")
	if out, err := trainctl.CombinedOutput(); err != nil {
		t.Fatalf("trainctl uninstall: %v\n%s", err, out)
	} else {
		t.Logf("trainctl uninstall:\n%s", out)
	}
	inst.uninstall(t, stopManager)
	t.Logf("trainctl uninstall, then the installation removed: %s", time.Since(uninstallStart).Round(100*time.Millisecond))

	// Nothing is left: no CRD, no object of the installation anywhere, no
	// child Job or Pod, and the namespaces delete.
	for _, crd := range []string{"trainjobs", "trainingruntimes", "clustertrainingruntimes"} {
		if err := getCRD(ctx, crd); !apierrors.IsNotFound(err) {
			t.Errorf("CRD %s: %v, want it gone", crd, err)
		}
	}
	for _, l := range []client.ObjectList{
		&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{},
		&admissionregistrationv1.ValidatingWebhookConfigurationList{}, &admissionregistrationv1.MutatingWebhookConfigurationList{},
		&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ServiceAccountList{}, &corev1.ConfigMapList{}, &corev1.SecretList{},
		&rbacv1.RoleList{}, &rbacv1.RoleBindingList{},
	} {
		if err := cluster.Client.List(ctx, l, client.MatchingLabels(inst.labels)); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(items); n > 0 {
			t.Errorf("the uninstall left %d %T of the installation", n, l)
		}
	}
	cluster.Eventually(t, "no Job or Pod of the TrainJobs to be left", func() error {
		var jobs batchv1.JobList
		var pods corev1.PodList
		for _, l := range []client.ObjectList{&jobs, &pods} {
			if err := cluster.Client.List(ctx, l, client.InNamespace(ns)); err != nil {
				return err
			}
		}
		var left []string
		for _, j := range jobs.Items {
			left = append(left, fmt.Sprintf("Job %s (finalizers %v)", j.Name, j.Finalizers))
		}
		for _, p := range pods.Items {
			left = append(left, fmt.Sprintf("Pod %s (%s, finalizers %v)", p.Name, p.Status.Phase, p.Finalizers))
		}
		if len(left) > 0 {
			return errors.New(strings.Join(left, ", "))
		}
		return nil
	})
	for _, name := range []string{ns, inst.namespace} {
		err := cluster.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if client.IgnoreNotFound(err) != nil {
			t.Fatalf("deleting namespace %s: %v", name, err)
		}
	}
	cluster.Eventually(t, "the namespaces to be deleted", func() error {
		for _, name := range []string{ns, inst.namespace} {
			var got corev1.Namespace
			err := cluster.Client.Get(ctx, client.ObjectKey{Name: name}, &got)
			if err == nil {
				return fmt.Errorf("namespace %s: %s, conditions %+v", name, got.Status.Phase, got.Status.Conditions)
			}
			if !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
	t.Logf("install, a TrainJob through it, uninstall with one running, namespaces deleted: %s", time.Since(start).Round(100*time.Millisecond))
}

// replaceSuiteInstallation makes the cluster as one the chart installs into:
// once no TrainJob or held child Job is left (other tests' namespaces may
// still be deleting), it stops the suite's manager and deletes what dev.Up
// installed from config/ but the manager's Namespace. dev.Up brings them
// back when the test ends.
func replaceSuiteInstallation(t *testing.T, ctx context.Context) {
	t.Helper()
	cluster.Eventually(t, "no TrainJob, nor Job held by the tracking finalizer, in the cluster", func() error {
		var tjs trainer.TrainJobList
		if err := cluster.Client.List(ctx, &tjs); err != nil {
			return err
		}
		var jobs batchv1.JobList
		if err := cluster.Client.List(ctx, &jobs); err != nil {
			return err
		}
		held := slices.DeleteFunc(jobs.Items, func(j batchv1.Job) bool { return !slices.Contains(j.Finalizers, trainer.JobTrackingFinalizer) })
		if len(tjs.Items)+len(held) > 0 {
			return fmt.Errorf("%d TrainJobs, %d held Jobs", len(tjs.Items), len(held))
		}
		return nil
	})
	t.Cleanup(func() {
		start := time.Now()
		if err := dev.Up(context.Background(), devOpts); err != nil {
			t.Fatalf("bringing the suite's installation back: %v", err)
		}
		t.Logf("the suite's installation and manager back in %s", time.Since(start).Round(100*time.Millisecond))
	})
	if err := dev.KillManager(devOpts); err != nil {
		t.Fatalf("stopping the suite's manager: %v", err)
	}
	for _, args := range [][]string{
		{"delete", "--ignore-not-found", "-k", filepath.Join(devOpts.Root, "config", "crd")},
		{"delete", "--ignore-not-found", "-k", filepath.Join(devOpts.Root, "config", "rbac")},
		{"delete", "--ignore-not-found", "validatingwebhookconfiguration,mutatingwebhookconfiguration", configv1alpha1.DefaultWebhookConfigurationName},
	} {
		if out, err := cluster.Kubectl(args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// installedWebhooks returns the client configurations of the webhooks of
// the installation's two webhook configurations.
func installedWebhooks(t *testing.T, ctx context.Context) []*admissionregistrationv1.WebhookClientConfig {
	t.Helper()
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	var m admissionregistrationv1.MutatingWebhookConfiguration
	key := client.ObjectKey{Name: configv1alpha1.DefaultWebhookConfigurationName}
	if err := cluster.Client.Get(ctx, key, &v); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.Get(ctx, key, &m); err != nil {
		t.Fatal(err)
	}
	var out []*admissionregistrationv1.WebhookClientConfig
	for i := range v.Webhooks {
		out = append(out, &v.Webhooks[i].ClientConfig)
	}
	for i := range m.Webhooks {
		out = append(out, &m.Webhooks[i].ClientConfig)
	}
	return out
}

// pointWebhooksAt changes the installation's webhook configurations, which
// call a Service in namespace, to call https://localhost:port at the path
// each names on the Service, which the API server cannot reach here.
// Nothing else of them changes.
func pointWebhooksAt(t *testing.T, ctx context.Context, namespace string, port int) {
	t.Helper()
	key := client.ObjectKey{Name: configv1alpha1.DefaultWebhookConfigurationName}
	toURL := func(cc *admissionregistrationv1.WebhookClientConfig) {
		if cc.Service == nil || cc.Service.Namespace != namespace || cc.Service.Path == nil {
			t.Fatalf("the installation's webhook calls %+v, want a path on a Service in %s", cc.Service, namespace)
		}
		cc.URL = ptr.To(fmt.Sprintf("https://localhost:%d%s", port, *cc.Service.Path))
		cc.Service = nil
	}
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	if err := cluster.Client.Get(ctx, key, &v); err != nil {
		t.Fatal(err)
	}
	for i := range v.Webhooks {
		toURL(&v.Webhooks[i].ClientConfig)
	}
	var m admissionregistrationv1.MutatingWebhookConfiguration
	if err := cluster.Client.Get(ctx, key, &m); err != nil {
		t.Fatal(err)
	}
	for i := range m.Webhooks {
		toURL(&m.Webhooks[i].ClientConfig)
	}
	for _, obj := range []client.Object{&v, &m} {
		if err := cluster.Client.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

// installedConfiguration writes the manager's configuration as the
// installation in namespace made it (its ConfigMap), with the certificate
// made for localhost, the name the API server calls the webhook by here,
// and returns its path.
func installedConfiguration(t *testing.T, ctx context.Context, namespace string) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: config.ConfigMapName}, &cm); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data[config.ConfigMapKey]), &cfg); err != nil {
		t.Fatalf("the installation's configuration: %v", err)
	}
	// Installed in a namespace other than the default, the manager is
	// configured for it.
	ns, set, _ := unstructured.NestedString(cfg, "webhook", "certManagement", "secretNamespace")
	if !set {
		ns = config.Namespace
	}
	if ns != namespace {
		t.Errorf("the installation's configuration has the certificate's Secret in namespace %q, want its own, %s:\n%s", ns, namespace, cm.Data[config.ConfigMapKey])
	}
	if err := unstructured.SetNestedField(cfg, "localhost", "webhook", "certManagement", "dnsName"); err != nil {
		t.Fatal(err)
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return writeTemp(t, string(data))
}

// serviceAccountKubeconfig writes a kubeconfig of the suite's cluster that
// authenticates as the manager's ServiceAccount in namespace, with a token
// of it, and checks the API server sees that identity.
func serviceAccountKubeconfig(t *testing.T, ctx context.Context, namespace string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: managerServiceAccount}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	if err := cluster.Client.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("a token of the installation's ServiceAccount: %v", err)
	}
	kc, err := clientcmd.LoadFromFile(devOpts.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	user := kc.Contexts[kc.CurrentContext].AuthInfo
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}

	restCfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	asSA, err := client.New(restCfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := asSA.Create(ctx, review); err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + namespace + ":" + managerServiceAccount; review.Status.UserInfo.Username != want {
		t.Fatalf("the manager's kubeconfig authenticates as %q, want %q", review.Status.UserInfo.Username, want)
	}
	return path
}

// startInstalledManager runs bin/manager as the installation's Deployment
// in namespace runs it, but on this machine: the installation's
// configuration, the ServiceAccount's kubeconfig, and, for what the Pod has
// from its cluster, flags: ports of
// its own on 127.0.0.1 (the Pod's are 9443, 8443 and 8081 on its own
// address), a certificate directory (the Pod's emptyDir), the Lease's
// namespace (a Pod's is read from its ServiceAccount's mount). It returns
// once the manager is ready; stop stops it, and the test's end does if the
// test does not.
func startInstalledManager(t *testing.T, namespace, configPath, kubeconfig string, webhookPort int) (stop func()) {
	t.Helper()
	healthPort := freePort(t)
	return utiltesting.StartProcess(t, "the installation's manager", utiltesting.ReadyzURL(healthPort), timeout,
		filepath.Join(devOpts.Root, "bin", "manager"),
		"--config", configPath,
		"--kubeconfig", kubeconfig,
		"--webhook-port", strconv.Itoa(webhookPort),
		"--webhook-cert-dir", t.TempDir(),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", healthPort),
		"--leader-election-namespace", namespace,
	)
}

// getCRD reads the CRD of the TrainJob API's resource.
func getCRD(ctx context.Context, resource string) error {
	name := resource + "." + trainer.GroupVersion.Group
	return cluster.Client.Get(ctx, client.ObjectKey{Name: name}, dev.CRD(name))
}

func freePort(t *testing.T) int {
	t.Helper()
	port, err := dev.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// writeTemp writes data to a file of the test's and returns its path.
func writeTemp(t *testing.T, data string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

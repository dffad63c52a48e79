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

package dev

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Kueue (sigs.k8s.io/kueue), with Options.Kueue: the version pinned in
// hack/tools/kueue, built into bin/kueue by `hack/build-tools.sh kueue`,
// runs as a local process beside the manager, with its TrainJob integration
// on. Its CRDs, the JobSet CRD and its webhook manifests are read from that
// version's module in the Go module cache, never copied into this
// repository.
const (
	// KueueNamespace is Kueue's own namespace. Only its certificate's
	// Secret lives there: Kueue runs on this machine.
	KueueNamespace = "kueue-system"
	// kueueSecretName and kueueServiceDNSName are what Kueue's internal
	// certificate management (cert-controller) expects: the Secret it keeps
	// the CA and serving certificate in, and the name the certificate must
	// be valid for (<webhookServiceName>.<namespace>.svc).
	kueueSecretName     = "kueue-webhook-server-cert"
	kueueServiceDNSName = "kueue-webhook-service." + KueueNamespace + ".svc"
	// kueueCAName is the name cert-controller gives its CA, and checks the
	// CA certificate against.
	kueueCAName = "kueue-ca"
	// kueueWebhookConfigurationName prefixes the webhook configurations
	// trainjob-dev registers for Kueue. They must not be named as Kueue's
	// own (kueue-{mutating,validating}-webhook-configuration), which
	// cert-controller patches: see ensureKueueCerts.
	kueueWebhookConfigurationName = "trainjob-dev-kueue"
)

// PoolLabel and ReservedPool: with Kueue, the second half of the simulated
// nodes carry the label PoolLabel=ReservedPool and a NoSchedule taint of the
// same key and value, so that a ResourceFlavor's nodeLabels and tolerations
// (config/samples/kueue) decide visibly where the Pods it admits run.
const (
	PoolLabel    = "trainjob-operator.dev/pool"
	ReservedPool = "reserved"
)

// ReservedTaint is the taint of the reserved nodes.
var ReservedTaint = corev1.Taint{Key: PoolLabel, Value: ReservedPool, Effect: corev1.TaintEffectNoSchedule}

// kueueWebhooks are the webhooks of Kueue's manifests that trainjob-dev
// registers: Kueue's own objects and the TrainJob integration, and with
// Options.KueueJobs kueueJobWebhooks. The others (Pods, JobSets, ...)
// belong to integrations that are off.
var kueueWebhooks = []string{
	"mworkload.kb.io", "vworkload.kb.io",
	"mclusterqueue.kb.io", "vclusterqueue.kb.io",
	"vcohort.kb.io",
	"mresourceflavor.kb.io", "vresourceflavor.kb.io",
	"mtrainjob.kb.io", "vtrainjob.kb.io",
}

// kueueJobWebhooks are the webhooks of Kueue's batch/job integration.
var kueueJobWebhooks = []string{"mjob.kb.io", "vjob.kb.io"}

// kueueFrameworks are the integrations Kueue runs with under o.
func kueueFrameworks(o Options) []string {
	frameworks := []string{"trainer.kubeflow.org/trainjob"}
	if o.KueueJobs {
		frameworks = append(frameworks, "batch/job")
	}
	return frameworks
}

// kueueConversionCRDs are the CRDs Kueue's manifests convert with its
// webhook (config/components/crd/kustomization.yaml), and whose caBundle
// cert-controller keeps.
var kueueConversionCRDs = []string{
	"localqueues.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io", "cohorts.kueue.x-k8s.io",
	"workloads.kueue.x-k8s.io", "multikueueclusters.kueue.x-k8s.io",
}

// kueueConfiguration is Kueue's configuration in the dev cluster (format:
// webhook port, certificate directory, health port, the integrations'
// frameworks as a YAML flow sequence).
//
// The certificate: Kueue v0.19 reads its metrics certificate from the
// fixed path /etc/kueue/metrics/certs whenever internalCertManagement is
// off, metrics off or not, and exits if it is missing. trainjob-dev does not
// write to the host's /etc, and running Kueue in a private mount namespace
// with /etc overlaid needs privileges (root or user namespaces) a developer
// may not have. So internalCertManagement stays on, as in Kueue's own
// manifests, and trainjob-dev hands it a certificate it accepts and keeps:
// see ensureKueueCerts.
//
// VisibilityOnDemand is off: on, it serves an aggregated API with yet
// another certificate at a fixed path (/visibility). Leader election and
// metrics are off; everything else is Kueue's default, including
// waitForPodsReady (on, 30 minutes, not blocking admission) and
// topology-aware scheduling.
const kueueConfiguration = `apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: ` + KueueNamespace + `
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: true
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:%d
integrations:
  frameworks: %s
featureGates:
  VisibilityOnDemand: false
`

// renderKueueConfiguration is Kueue's configuration file under o, serving
// its webhooks on st's ports with the certificates of certDir.
func renderKueueConfiguration(o Options, st *state, certDir string) []byte {
	frameworks, _ := json.Marshal(kueueFrameworks(o)) // a []string always marshals
	config := fmt.Appendf(nil, kueueConfiguration, st.KueueWebhookPort, certDir, st.KueueHealthPort, frameworks)
	if o.KueuePodsReadyTimeout > 0 {
		config = fmt.Appendf(config, "waitForPodsReady:\n  timeout: %s\n  blockAdmission: false\n", o.KueuePodsReadyTimeout)
	}
	if o.MultiKueue {
		config = fmt.Appendf(config, multiKueueConfiguration, MultiKueueGCInterval, o.WorkerLostTimeout)
	}
	return config
}

// KueueLog is the file Kueue logs to.
func (o Options) KueueLog() string {
	o.defaults()
	return filepath.Join(o.WorkDir, "kueue.log")
}

func (o Options) kueueDir() string { return filepath.Join(o.WorkDir, "kueue") }

// kueueModules are the directories, in the Go module cache, of the Kueue
// and JobSet versions hack/tools/kueue pins.
type kueueModules struct{ kueue, jobset string }

func findKueueModules(ctx context.Context, o Options) (kueueModules, error) {
	dir := filepath.Join(o.Root, "hack", "tools", "kueue")
	var mods kueueModules
	var err error
	if mods.kueue, err = ModuleDir(ctx, dir, "sigs.k8s.io/kueue"); err != nil {
		return mods, err
	}
	mods.jobset, err = ModuleDir(ctx, dir, "sigs.k8s.io/jobset")
	return mods, err
}

// ensureKueue installs the JobSet CRD and Kueue's CRDs, starts Kueue unless
// it runs, is ready and has the configuration o asks for, and registers its
// webhooks.
func ensureKueue(ctx context.Context, cl client.Client, o Options, st *state) error {
	mods, err := findKueueModules(ctx, o)
	if err != nil {
		return err
	}
	configPath := filepath.Join(o.kueueDir(), "config.yaml")
	certDir := filepath.Join(o.kueueDir(), "certs")
	current, _ := os.ReadFile(configPath)
	running := ours(o, "kueue", st.KueuePID) && ready(st.KueueHealthPort) == nil &&
		bytes.Equal(current, renderKueueConfiguration(o, st, certDir))
	if !running {
		if ours(o, "kueue", st.KueuePID) {
			if err := stopProcess(st.KueuePID); err != nil {
				return err
			}
			st.KueuePID = 0
		}
		if err := chooseKueuePorts(st); err != nil {
			return err
		}
	}
	caPEM, err := ensureKueueCerts(ctx, cl, certDir)
	if err != nil {
		return err
	}

	// Kueue's TrainJob controller watches JobSets (it computes a TrainJob's
	// PodSets as Kubeflow Trainer's JobSet would have them): without the
	// CRD its caches never sync and Kueue exits after two minutes. The CRD
	// alone is enough; nothing creates JobSets.
	step(o, "installing the JobSet CRD and Kueue's CRDs from %s and %s in %s",
		filepath.Base(mods.jobset), filepath.Base(mods.kueue), filepath.Dir(filepath.Dir(mods.kueue)))
	jobsetCRD := filepath.Join(mods.jobset, "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml")
	crdDir := filepath.Join(o.kueueDir(), "crds")
	if err := renderKueueCRDs(filepath.Join(mods.kueue, "config", "components", "crd", "bases"), crdDir, st.KueueWebhookPort, caPEM); err != nil {
		return err
	}
	for _, f := range []string{jobsetCRD, crdDir} {
		if err := kubectl(ctx, o, "apply", "--server-side", "--force-conflicts", "-f", f); err != nil {
			return err
		}
	}
	// Kueue sets up its indexes at start, and exits if a kind is not served.
	for _, f := range []string{jobsetCRD, crdDir} {
		if err := kubectl(ctx, o, "wait", "--for", "condition=Established", "--timeout", "60s", "-f", f); err != nil {
			return err
		}
	}

	if running {
		step(o, "Kueue is running (pid %d)", st.KueuePID)
	} else {
		if err := os.WriteFile(configPath, renderKueueConfiguration(o, st, certDir), 0o644); err != nil {
			return err
		}
		pid, exited, err := startDetached("Kueue", filepath.Join(o.BinDir, "kueue"),
			[]string{"--config", configPath, "--kubeconfig", o.Kubeconfig()}, o.KueueLog())
		if err != nil {
			return err
		}
		st.KueuePID = pid
		step(o, "started Kueue (pid %d), logging to %s", pid, o.KueueLog())
		if err := waitReady(ctx, "Kueue", func() error { return ready(st.KueueHealthPort) }, o.KueueLog(), exited); err != nil {
			return err
		}
	}
	// Registered once Kueue serves them: they fail closed, and the TrainJob
	// ones see every TrainJob.
	step(o, "registering Kueue's webhooks at https://127.0.0.1:%d", st.KueueWebhookPort)
	webhooks := kueueWebhooks
	if o.KueueJobs {
		webhooks = append(slices.Clone(webhooks), kueueJobWebhooks...)
	}
	return applyKueueWebhooks(ctx, cl, filepath.Join(mods.kueue, "config", "components", "webhook", "manifests.yaml"), webhooks, st.KueueWebhookPort, caPEM)
}

// chooseKueuePorts keeps Kueue's ports that are free and picks others.
func chooseKueuePorts(st *state) error {
	for _, port := range []*int{&st.KueueWebhookPort, &st.KueueHealthPort} {
		if *port != 0 && portFree(*port) {
			continue
		}
		p, err := FreePort()
		if err != nil {
			return err
		}
		*port = p
	}
	return nil
}

// ensureKueueCerts gives Kueue a webhook certificate the API server
// accepts at https://127.0.0.1:<port>, and returns its CA's PEM.
//
// Kueue's internal certificate management (open-policy-agent's
// cert-controller) keeps a CA and a serving certificate in the Secret
// kueue-system/kueue-webhook-server-cert, which must exist, and waits for a
// kubelet to mount that Secret into its certDir. Left to itself, it makes a
// certificate for kueue-webhook-service.kueue-system.svc only, which the API
// server, calling a URL on 127.0.0.1, would reject. So trainjob-dev makes
// the CA and certificate itself, as cert-controller would (an RSA CA named
// kueue-ca; a server certificate for the service's DNS name, here also for
// IP 127.0.0.1), valid for ten years, and puts them both in the Secret and
// in certDir, in place of the kubelet. cert-controller finds them valid,
// serves them, and does not rotate them: it renews a certificate 90 days
// before it expires. It then writes the CA into the caBundle of Kueue's
// conversion CRDs (which renderKueueCRDs points at the same CA) and of the
// webhook configurations named kueue-{mutating,validating}-webhook-
// configuration. Those do not exist here (it logs an error for each and
// goes on): the configurations trainjob-dev registers are named otherwise
// and carry the CA themselves, so that they always trust the certificate
// Kueue serves, which only trainjob-dev writes to certDir. Were
// cert-controller ever to rotate the CA, it would write the new one into the
// Secret and the CRDs, not into certDir.
//
// Verified with Kueue v0.19.2: "no cert refresh needed", webhook server and
// conversion serving the certificate above, ready 2 to 6 s after start
// (cert-controller polls for the CA injection with a backoff of 1, 2, 4 s).
// The other way round the fixed path, a private mount namespace
// (unshare -m) with an overlay on /etc, works too but needs root or
// unprivileged user namespaces, which not every machine allows.
//
// The certificates are made once per cluster and kept in certDir.
func ensureKueueCerts(ctx context.Context, cl client.Client, certDir string) ([]byte, error) {
	files := map[string][]byte{"ca.crt": nil, "ca.key": nil, "tls.crt": nil, "tls.key": nil}
	complete := true
	for name := range files {
		data, err := os.ReadFile(filepath.Join(certDir, name))
		if err != nil {
			complete = false
			break
		}
		files[name] = data
	}
	if !complete {
		var err error
		if files, err = newServingCerts(time.Now(), kueueCAName, "kueue", kueueServiceDNSName); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(certDir, 0o700); err != nil {
			return nil, err
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(certDir, name), data, 0o600); err != nil {
				return nil, err
			}
		}
	}
	if err := ensureNamespace(ctx, cl, KueueNamespace); err != nil {
		return nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: kueueSecretName, Namespace: KueueNamespace}}
	err := cl.Get(ctx, client.ObjectKeyFromObject(secret), secret)
	switch {
	case apierrors.IsNotFound(err):
		secret.Data = files
		err = cl.Create(ctx, secret)
	case err == nil:
		secret.Data = files
		err = cl.Update(ctx, secret)
	}
	if err != nil {
		return nil, fmt.Errorf("writing Kueue's certificate Secret: %w", err)
	}
	return files["ca.crt"], nil
}

// newServingCerts makes a CA named caName (organization org) and a
// certificate it signs for serving HTTPS as dnsName and at 127.0.0.1, both
// valid for ten years, as files named as cert-controller and
// controller-runtime's webhook server read them (ca.crt, ca.key, tls.crt,
// tls.key; PKCS #1 RSA keys).
func newServingCerts(now time.Time, caName, org, dnsName string) (map[string][]byte, error) {
	begin, end := now.Add(-time.Hour), now.Add(10*365*24*time.Hour)
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: caName, Organization: []string{org}},
		DNSNames:              []string{caName},
		NotBefore:             begin,
		NotAfter:              end,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(2),
		Subject:               pkix.Name{CommonName: dnsName},
		DNSNames:              []string{dnsName},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:             begin,
		NotAfter:              end,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, err
	}
	certPEM := func(der []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}) }
	keyPEM := func(k *rsa.PrivateKey) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	}
	return map[string][]byte{
		"ca.crt": certPEM(caDER), "ca.key": keyPEM(caKey),
		"tls.crt": certPEM(der), "tls.key": keyPEM(key),
	}, nil
}

// renderKueueCRDs writes Kueue's CRDs from src into dst, those Kueue
// converts pointed at its webhook on 127.0.0.1:port, as Kueue's manifests
// point them at its Service.
func renderKueueCRDs(src, dst string, port int, caPEM []byte) error {
	files, err := filepath.Glob(filepath.Join(src, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in %s", src)
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d/convert", port)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var crd map[string]any
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		meta, _ := crd["metadata"].(map[string]any)
		if name, _ := meta["name"].(string); slices.Contains(kueueConversionCRDs, name) {
			spec, _ := crd["spec"].(map[string]any)
			if spec == nil {
				return fmt.Errorf("%s: no spec", f)
			}
			spec["conversion"] = map[string]any{
				"strategy": "Webhook",
				"webhook": map[string]any{
					"conversionReviewVersions": []any{"v1"},
					"clientConfig":             map[string]any{"url": url, "caBundle": caPEM},
				},
			}
		}
		out, err := yaml.Marshal(crd)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// applyKueueWebhooks registers the webhooks named from Kueue's manifests,
// called by URL on 127.0.0.1:port and trusting caPEM. Those on TrainJobs
// and Jobs leave out kube-system and Kueue's namespace, as Kueue's
// manifests do.
func applyKueueWebhooks(ctx context.Context, cl client.Client, manifests string, names []string, port int, caPEM []byte) error {
	data, err := os.ReadFile(manifests)
	if err != nil {
		return err
	}
	clientConfig := func(svc *admissionregistrationv1.ServiceReference) admissionregistrationv1.WebhookClientConfig {
		path := "/"
		if svc != nil && svc.Path != nil {
			path = *svc.Path
		}
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, path)
		return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
	}
	namespaces := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", KueueNamespace},
	}}}
	onWorkloads := func(name string) bool {
		return strings.HasSuffix(name, "trainjob.kb.io") || slices.Contains(kueueJobWebhooks, name)
	}
	configs, err := webhookConfigurations(data)
	if err != nil {
		return fmt.Errorf("%s: %w", manifests, err)
	}
	found := 0
	for _, c := range configs {
		for _, w := range webhooksOf(c, func(name string) bool { return slices.Contains(names, name) }) {
			*w.clientConfig = clientConfig(w.clientConfig.Service)
			if onWorkloads(w.name) {
				*w.namespaceSelector = namespaces
			}
			found++
		}
		suffix := "-validating"
		if _, ok := c.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
			suffix = "-mutating"
		}
		c.SetName(kueueWebhookConfigurationName + suffix)
		if err := createOrReplace(ctx, cl, c, nil); err != nil {
			return fmt.Errorf("registering %s: %w", c.GetName(), err)
		}
	}
	if found != len(names) {
		return fmt.Errorf("%s has %d of the %d webhooks %v", manifests, found, len(names), names)
	}
	return nil
}

// createOrReplace creates obj, or replaces the object of its name with it.
// When that object exists, keep, if not nil, is given it first, to carry
// over into obj what is to be kept.
func createOrReplace(ctx context.Context, cl client.Client, obj client.Object, keep func(cur client.Object)) error {
	cur := obj.DeepCopyObject().(client.Object)
	err := cl.Get(ctx, client.ObjectKeyFromObject(obj), cur)
	if apierrors.IsNotFound(err) {
		return cl.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	if keep != nil {
		keep(cur)
	}
	obj.SetResourceVersion(cur.GetResourceVersion())
	return cl.Update(ctx, obj)
}

// kueuesOf lists the live Kueue processes that talk to o's cluster.
func kueuesOf(o Options) []int { return binaryProcessesOf(o, "kueue") }

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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
)

// Kubeflow Trainer and JobSet, the system trainjob-operator replaces, run on
// the dev cluster in the manager's place for make bench's Kubeflow side: the
// versions hack/tools/kubeflow pins, built into BinDir by
// `hack/build-tools.sh kubeflow-trainer jobset` when first needed, as local
// processes with their webhooks called by URL, as the manager's and Kueue's
// are. Their CRDs, webhook manifests and runtimes are read from those
// versions' modules in the Go module cache, never copied into this
// repository.
//
// The swap is whole: the manager is stopped and its webhooks removed,
// Kubeflow's CRDs are applied over this project's (the same names: a
// cluster runs one or the other) and Kubeflow's runtimes over the ones of
// config/runtimes of the same names. Both are applied server-side by the
// field manager `make dev-up` applies this project's with, so applying
// either set again takes back every field of the other: Kubeflow.Stop does,
// and so does `make dev-up` after a run that was cut short (it also stops
// the two controllers and removes their webhooks: removeKubeflow).

// kubeflowWebhookConfigurationName prefixes the webhook configurations
// registered for Kubeflow Trainer and JobSet.
const kubeflowWebhookConfigurationName = "trainjob-dev-kubeflow"

// jobSetCRDName is the JobSet CRD's name.
const jobSetCRDName = "jobsets.jobset.x-k8s.io"

// kubeflowTrainerConfiguration is Kubeflow Trainer's configuration (format:
// webhook port, metrics port, health port, client QPS and burst). Its
// certificate management is off: it would make a certificate for its
// Service's name alone, which the API server, calling 127.0.0.1, refuses.
// Its webhook server reads the one made here from controller-runtime's
// default directory under $TMPDIR (the configuration has no certDir).
// Metrics are served over plain HTTP on the loopback interface, for the
// bench.
const kubeflowTrainerConfiguration = `apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
webhook:
  host: 127.0.0.1
  port: %d
metrics:
  bindAddress: 127.0.0.1:%d
  secureServing: false
health:
  healthProbeBindAddress: 127.0.0.1:%d
leaderElection:
  leaderElect: false
certManagement:
  enable: false
clientConnection:
  qps: %s
  burst: %d
`

// jobSetConfiguration is JobSet's configuration (format: webhook port,
// certificate directory, health port). Its client QPS and burst are given
// by flags. Metrics are off: JobSet serves them over HTTPS behind
// Kubernetes authentication only.
const jobSetConfiguration = `apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:%d
`

// Kubeflow is Kubeflow Trainer and JobSet running on the dev cluster in the
// manager's place, from StartKubeflow until Stop.
type Kubeflow struct {
	o  Options
	cl client.Client
	// TrainerPID and JobSetPID are the two controllers' processes.
	TrainerPID, JobSetPID int
	// TrainerMetricsPort serves Kubeflow Trainer's metrics over plain HTTP
	// on 127.0.0.1.
	TrainerMetricsPort int
	// keepJobSetCRD: the JobSet CRD was installed before (Kueue's), and
	// stays.
	keepJobSetCRD bool
}

// KubeflowLogs are the files Kubeflow Trainer and JobSet log to.
func (o Options) KubeflowLogs() (trainer, jobset string) {
	o.defaults()
	return filepath.Join(o.WorkDir, "kubeflow-trainer.log"), filepath.Join(o.WorkDir, "jobset.log")
}

func (o Options) kubeflowDir() string { return filepath.Join(o.WorkDir, "kubeflow") }

// kubeflowModules are the directories, in the Go module cache, of the
// Kubeflow Trainer and JobSet versions hack/tools/kubeflow pins.
type kubeflowModules struct{ trainer, jobset string }

// StartKubeflow stops the manager, puts Kubeflow's CRDs and runtimes in
// place of this project's, and starts JobSet and Kubeflow Trainer with the
// client QPS and burst given, their webhooks registered once they serve.
// On failure it puts the manager back. Stop does that after a run.
func StartKubeflow(ctx context.Context, o Options, qps float64, burst int) (*Kubeflow, error) {
	o.defaults()
	if err := ensureKubeflowBinaries(ctx, o); err != nil {
		return nil, err
	}
	dir := filepath.Join(o.Root, "hack", "tools", "kubeflow")
	var mods kubeflowModules
	var err error
	if mods.trainer, err = ModuleDir(ctx, dir, "github.com/kubeflow/trainer/v2"); err != nil {
		return nil, err
	}
	if mods.jobset, err = ModuleDir(ctx, dir, "sigs.k8s.io/jobset"); err != nil {
		return nil, err
	}
	cl, err := o.client()
	if err != nil {
		return nil, err
	}
	k := &Kubeflow{o: o, cl: cl}
	err = cl.Get(ctx, client.ObjectKey{Name: jobSetCRDName}, CRD(jobSetCRDName))
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	k.keepJobSetCRD = err == nil
	if err := k.start(ctx, mods, qps, burst); err != nil {
		return nil, errors.Join(err, k.Stop(context.WithoutCancel(ctx)))
	}
	return k, nil
}

// ensureKubeflowBinaries builds Kubeflow Trainer and JobSet into BinDir
// unless both are there.
func ensureKubeflowBinaries(ctx context.Context, o Options) error {
	var missing []string
	for _, name := range []string{"kubeflow-trainer", "jobset"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	step(o, "building %v (hack/build-tools.sh; a few minutes the first time)", missing)
	cmd := exec.CommandContext(ctx, filepath.Join(o.Root, "hack", "build-tools.sh"), missing...)
	cmd.Env = append(os.Environ(), "BIN_DIR="+o.BinDir)
	cmd.Stdout, cmd.Stderr = o.Out, o.Out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building %v: %w", missing, err)
	}
	return nil
}

func (k *Kubeflow) start(ctx context.Context, mods kubeflowModules, qps float64, burst int) error {
	o, cl := k.o, k.cl
	for _, pid := range managersOf(o) {
		step(o, "stopping the manager (pid %d) for Kubeflow Trainer", pid)
		if err := stopProcess(pid); err != nil {
			return err
		}
	}
	if err := deleteOurWebhookConfigurations(ctx, cl); err != nil {
		return err
	}

	step(o, "installing Kubeflow Trainer's CRDs (in place of ours) and JobSet's from %s and %s",
		filepath.Base(mods.trainer), filepath.Base(mods.jobset))
	trainerCRDs := filepath.Join(mods.trainer, "manifests", "base", "crds")
	jobSetCRD := filepath.Join(mods.jobset, "config", "components", "crd", "bases", "jobset.x-k8s.io_jobsets.yaml")
	for _, args := range [][]string{{"-k", trainerCRDs}, {"-f", jobSetCRD}} {
		if err := kubectl(ctx, o, append([]string{"apply", "--server-side", "--force-conflicts"}, args...)...); err != nil {
			return err
		}
	}
	// Kubeflow Trainer and JobSet set up their informers at start, and
	// exit if a kind is not served.
	if err := kubectl(ctx, o, "wait", "--for", "condition=Established", "--timeout", "60s",
		"crd/trainjobs.trainer.kubeflow.org", "crd/trainingruntimes.trainer.kubeflow.org",
		"crd/clustertrainingruntimes.trainer.kubeflow.org", "crd/"+jobSetCRDName); err != nil {
		return err
	}

	if err := os.MkdirAll(k.o.kubeflowDir(), 0o755); err != nil {
		return err
	}
	ca, err := k.certificates()
	if err != nil {
		return err
	}
	trainerLog, jobSetLog := o.KubeflowLogs()

	// JobSet first: Kubeflow Trainer creates JobSets.
	jobSetCerts := filepath.Join(o.kubeflowDir(), "jobset-certs")
	webhookPort, healthPort, err := twoFreePorts()
	if err != nil {
		return err
	}
	configPath := filepath.Join(o.kubeflowDir(), "jobset.yaml")
	if err := os.WriteFile(configPath, fmt.Appendf(nil, jobSetConfiguration, webhookPort, jobSetCerts, healthPort), 0o644); err != nil {
		return err
	}
	pid, exited, err := startDetached("JobSet", filepath.Join(o.BinDir, "jobset"), []string{
		"--config", configPath, "--kubeconfig", o.Kubeconfig(),
		"--kube-api-qps", strconv.FormatFloat(qps, 'f', -1, 64), "--kube-api-burst", strconv.Itoa(burst),
	}, jobSetLog)
	if err != nil {
		return err
	}
	k.JobSetPID = pid
	step(o, "started JobSet (pid %d), logging to %s", pid, jobSetLog)
	if err := waitReady(ctx, "JobSet", func() error { return ready(healthPort) }, jobSetLog, exited); err != nil {
		return err
	}
	if err := k.registerWebhooks(ctx, "jobset", filepath.Join(mods.jobset, "config", "components", "webhook"), webhookPort, ca); err != nil {
		return err
	}

	if webhookPort, healthPort, err = twoFreePorts(); err != nil {
		return err
	}
	if k.TrainerMetricsPort, err = FreePort(); err != nil {
		return err
	}
	configPath = filepath.Join(o.kubeflowDir(), "kubeflow-trainer.yaml")
	config := fmt.Appendf(nil, kubeflowTrainerConfiguration, webhookPort, k.TrainerMetricsPort, healthPort,
		strconv.FormatFloat(qps, 'f', -1, 64), burst)
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		return err
	}
	pid, exited, err = startDetached("Kubeflow Trainer", filepath.Join(o.BinDir, "kubeflow-trainer"),
		[]string{"--config", configPath, "--kubeconfig", o.Kubeconfig()}, trainerLog,
		"TMPDIR="+filepath.Join(o.kubeflowDir(), "trainer-tmp"))
	if err != nil {
		return err
	}
	k.TrainerPID = pid
	step(o, "started Kubeflow Trainer (pid %d), logging to %s", pid, trainerLog)
	if err := waitReady(ctx, "Kubeflow Trainer", func() error { return ready(healthPort) }, trainerLog, exited); err != nil {
		return err
	}
	if err := k.registerWebhooks(ctx, "trainer", filepath.Join(mods.trainer, "manifests", "base", "webhook"), webhookPort, ca); err != nil {
		return err
	}

	// Through Kubeflow Trainer's webhook, which validates them.
	step(o, "installing Kubeflow Trainer's runtimes (in place of ours of the same names)")
	return kubectl(ctx, o, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(mods.trainer, "manifests", "base", "runtimes"))
}

// certificates makes one CA and a serving certificate for 127.0.0.1, and
// puts the certificate where JobSet's webhook server (its certDir) and
// Kubeflow Trainer's (controller-runtime's default directory under its
// TMPDIR) read it. It returns the CA's PEM.
func (k *Kubeflow) certificates() ([]byte, error) {
	files, err := newServingCerts(time.Now(), "trainjob-dev-kubeflow-ca", "trainjob-dev", "localhost")
	if err != nil {
		return nil, err
	}
	for _, dir := range []string{
		filepath.Join(k.o.kubeflowDir(), "jobset-certs"),
		filepath.Join(k.o.kubeflowDir(), "trainer-tmp", "k8s-webhook-server", "serving-certs"),
	} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		for _, name := range []string{"tls.crt", "tls.key"} {
			if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o600); err != nil {
				return nil, err
			}
		}
	}
	return files["ca.crt"], nil
}

// registerWebhooks registers the webhook configurations of the
// kustomization in dir (the manifests as their project installs them),
// named after component and called on 127.0.0.1:port, trusting caPEM.
func (k *Kubeflow) registerWebhooks(ctx context.Context, component, dir string, port int, caPEM []byte) error {
	cmd := exec.CommandContext(ctx, filepath.Join(k.o.BinDir, "kubectl"), "kustomize", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("kubectl kustomize %s: %w\n%s", dir, err, stderr.String())
	}
	configs, err := webhookConfigurations(data, "Service")
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	step(k.o, "registering %s's webhooks at https://127.0.0.1:%d", component, port)
	for _, c := range configs {
		for _, w := range webhooksOf(c, nil) {
			url := fmt.Sprintf("https://127.0.0.1:%d%s", port, w.path())
			*w.clientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}
		}
		c.SetName(kubeflowWebhookConfigurationName + "-" + component + "-" + kindSuffix(c))
		if err := createOrReplace(ctx, k.cl, c, nil); err != nil {
			return fmt.Errorf("registering %s: %w", c.GetName(), err)
		}
	}
	return nil
}

// kindSuffix is "mutating" or "validating", as c is.
func kindSuffix(c client.Object) string {
	if _, ok := c.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
		return "mutating"
	}
	return "validating"
}

// Stop stops Kubeflow Trainer and JobSet, removes their webhooks, puts this
// project's CRDs and runtimes back, removes the JobSet CRD unless it was
// there before, and starts the manager again (with o.ManagerArgs of
// StartKubeflow's options).
func (k *Kubeflow) Stop(ctx context.Context) error {
	o := k.o
	errs := []error{removeKubeflow(ctx, k.cl, o)}
	step(o, "putting back this project's CRDs and runtimes, and the manager")
	for _, dir := range []string{"config/crd", "config/runtimes"} {
		errs = append(errs, kubectl(ctx, o, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(o.Root, dir)))
	}
	if !k.keepJobSetCRD {
		errs = append(errs, client.IgnoreNotFound(k.cl.Delete(ctx, CRD(jobSetCRDName))))
	}
	st, err := loadState(o)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, applyWebhookConfiguration(ctx, k.cl, o, st.WebhookPort), RestartManager(ctx, o))
	return errors.Join(errs...)
}

// removeKubeflow stops Kubeflow Trainer and JobSet and removes their
// webhook configurations, which fail closed on TrainJobs and on the Pods of
// JobSets (the manager's Pods carry JobSet's labels too). Up calls it
// too, for what a bench cut short left.
func removeKubeflow(ctx context.Context, cl client.Client, o Options) error {
	var errs []error
	for _, component := range []string{"jobset", "trainer"} {
		for _, c := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
			c.SetName(kubeflowWebhookConfigurationName + "-" + component + "-" + kindSuffix(c))
			errs = append(errs, client.IgnoreNotFound(cl.Delete(ctx, c)))
		}
	}
	return errors.Join(append(errs, stopKubeflow(o))...)
}

// stopKubeflow stops every Kubeflow Trainer and JobSet process of o's
// cluster.
func stopKubeflow(o Options) error {
	var errs []error
	for _, name := range []string{"kubeflow-trainer", "jobset"} {
		for _, pid := range binaryProcessesOf(o, name) {
			step(o, "stopping %s (pid %d)", name, pid)
			errs = append(errs, stopProcess(pid))
		}
	}
	return errors.Join(errs...)
}

// deleteOurWebhookConfigurations removes the manager's webhook
// configurations: they fail closed, and the manager is not running.
func deleteOurWebhookConfigurations(ctx context.Context, cl client.Client) error {
	for _, c := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		c.SetName(configv1alpha1.DefaultWebhookConfigurationName)
		if err := cl.Delete(ctx, c); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// CRD is the metadata of the CRD named name, for a client whose scheme has
// no CRDs (the project's).
func CRD(name string) *metav1.PartialObjectMetadata {
	crd := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	return crd
}

// twoFreePorts picks a webhook port and a health port.
func twoFreePorts() (webhook, health int, err error) {
	if webhook, err = FreePort(); err != nil {
		return 0, 0, err
	}
	health, err = FreePort()
	return webhook, health, err
}

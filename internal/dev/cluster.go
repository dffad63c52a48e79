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

// Package dev runs the product on a local control plane: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler built from Go
// modules into bin/, with simulated nodes (kwok) and the manager running as
// a local process behind its validating webhook.
package dev

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/config"
	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
)

//go:embed stages.yaml
var stages []byte

//go:embed kwokctl.yaml
var kwokctlConfig []byte

// Options say where the local cluster lives and what it has.
type Options struct {
	// Root is the repository: config/ is read from it.
	Root string
	// BinDir holds the binaries `make tools build` builds. Defaults to
	// Root/bin.
	BinDir string
	// WorkDir holds the cluster's state, kubeconfig, certificates and logs.
	// Defaults to Root/.dev.
	WorkDir string
	// Name of the cluster. Defaults to trainjob-dev.
	Name string
	// Nodes is how many simulated nodes to create. Defaults to 4.
	Nodes int
	// Out receives one line per step.
	Out io.Writer
	// ManagerArgs are added to the manager's command line when Up or
	// RestartManager start it (flags override its configuration file).
	ManagerArgs []string
	// Kueue also runs Kueue, built into BinDir by `hack/build-tools.sh
	// kueue`, with its TrainJob integration on (see kueue.go), and taints
	// half of the nodes (PoolLabel).
	Kueue bool
	// Coscheduler also runs the coscheduling scheduler, built into BinDir
	// by `hack/build-tools.sh coscheduler`, beside kube-scheduler (see
	// coscheduler.go).
	Coscheduler bool
	// Prometheus also runs Prometheus, built into BinDir by
	// `hack/build-tools.sh prometheus`, scraping the manager, whose metrics
	// are then served over HTTPS as in a cluster, and kube-apiserver (see
	// prometheus.go).
	Prometheus bool
	// PrometheusRules is the rule file Prometheus evaluates. Defaults to
	// the chart's (PrometheusRulesFile).
	PrometheusRules string
	// Real also runs a real node (see realnode.go): a kubelet, containerd
	// and runc, CNI and CoreDNS on this machine, as root, built into BinDir
	// by `hack/build-tools.sh real`. Only Pods that select and tolerate it
	// (RealNodeLabel, RealNodeTaint) run there.
	Real bool
	// KueuePodsReadyTimeout is Kueue's waitForPodsReady timeout; Kueue's
	// default (30 minutes) if zero.
	KueuePodsReadyTimeout time.Duration
	// KueueJobs, with Kueue, also turns on its batch/job integration and
	// registers its Job webhooks (mjob.kb.io, vjob.kb.io), as Kueue's own
	// manifests install it: they see every Job created, the child Jobs
	// of TrainJobs and the dry runs of the TrainJob webhook among them.
	KueueJobs bool
	// Configuration is the manager's configuration file. Defaults to
	// DefaultConfiguration.
	Configuration string
	// MultiKueue also brings up the worker clusters MultiKueueWorkers, each
	// with Kueue and the manager, and runs Kueue here (Kueue is implied)
	// with MultiKueue dispatching to them (see multikueue.go).
	MultiKueue bool
	// WorkerLostTimeout is MultiKueue's workerLostTimeout;
	// DefaultWorkerLostTimeout if zero.
	WorkerLostTimeout time.Duration
}

func (o *Options) defaults() {
	if o.BinDir == "" {
		o.BinDir = filepath.Join(o.Root, "bin")
	}
	if o.WorkDir == "" {
		o.WorkDir = filepath.Join(o.Root, ".dev")
	}
	if o.Name == "" {
		o.Name = "trainjob-dev"
	}
	if o.Nodes == 0 {
		o.Nodes = 4
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Configuration == "" {
		o.Configuration = DefaultConfiguration
	}
	if o.MultiKueue {
		o.Kueue = true
		if o.WorkerLostTimeout == 0 {
			o.WorkerLostTimeout = DefaultWorkerLostTimeout
		}
	}
}

// Kubeconfig is where the cluster's kubeconfig is written.
func (o Options) Kubeconfig() string {
	o.defaults()
	return filepath.Join(o.WorkDir, "kubeconfig")
}

// ManagerLog is the file the manager logs to.
func (o Options) ManagerLog() string {
	o.defaults()
	return filepath.Join(o.WorkDir, "manager.log")
}

// state is what Up keeps in WorkDir/state.json, so that running it again,
// or Down, finds what is there.
type state struct {
	WebhookPort int `json:"webhookPort"`
	MetricsPort int `json:"metricsPort"`
	HealthPort  int `json:"healthPort"`
	// StatusPort is the status server's, which trainer Pods report to.
	StatusPort int `json:"statusPort,omitempty"`
	ManagerPID int `json:"managerPID"`
	// Kueue's, with Options.Kueue.
	KueueWebhookPort int `json:"kueueWebhookPort,omitempty"`
	KueueHealthPort  int `json:"kueueHealthPort,omitempty"`
	KueuePID         int `json:"kueuePID,omitempty"`
	// The coscheduling scheduler's, with Options.Coscheduler.
	CoschedulerPort int `json:"coschedulerPort,omitempty"`
	CoschedulerPID  int `json:"coschedulerPID,omitempty"`
}

// Namespace the manager's objects go to.
const systemNamespace = config.Namespace

// DefaultConfiguration is the manager's configuration in the dev cluster.
// It turns on retention, which the shipped configuration leaves off
// (KEP-1618: opt-in), so that trainctl get shows it at work.
const DefaultConfiguration = `apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
webhook:
  certManagement:
    # The name trainer Pods call the status server by, as in a cluster:
    # on the real node it resolves to this machine (see realnode.go).
    dnsName: trainjob-operator-webhook.trainjob-system.svc
    # The API server calls the manager on this machine by this name.
    extraDNSNames: [localhost]
# Retention is off unless configured (config/manager/config.yaml sets none);
# it is on here to show it: see docs/lifecycle.md#retention-policies.
objectRetentionPolicies:
  trainJobs:
    afterFinished: 1h
    afterSuspended: 24h
`

var requiredBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwokctl", "kubectl", "manager"}

// Up starts the cluster and the manager, or finishes starting what is not
// running; running it twice is safe.
func Up(ctx context.Context, o Options) error {
	o.defaults()
	for _, b := range requiredBinaries {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return fmt.Errorf("%s is missing from %s: run 'make tools build' first", b, o.BinDir)
		}
	}
	if o.Kueue {
		if _, err := os.Stat(filepath.Join(o.BinDir, "kueue")); err != nil {
			return fmt.Errorf("kueue is missing from %s: run 'hack/build-tools.sh kueue' first (make dev KUEUE=1 does)", o.BinDir)
		}
	}
	if o.Coscheduler {
		if err := o.needCoscheduler(); err != nil {
			return err
		}
	}
	if o.Prometheus {
		if err := o.needPrometheus(); err != nil {
			return err
		}
	}
	if o.Real {
		if err := o.needReal(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return err
	}
	st, err := loadState(o)
	if err != nil {
		return err
	}
	start := time.Now()
	if o.MultiKueue {
		if err := upWorkers(ctx, o); err != nil {
			return err
		}
	}

	if err := ensureKwokCluster(ctx, o); err != nil {
		return err
	}
	cl, err := o.client()
	if err != nil {
		return err
	}
	if err := ensureNodes(ctx, cl, o); err != nil {
		return err
	}
	if err := removeKubeflow(ctx, cl, o); err != nil {
		return err
	}
	step(o, "installing CRDs, RBAC, runtimes and the manager's configuration")
	if err := ensureNamespace(ctx, cl, systemNamespace); err != nil {
		return err
	}
	for _, dir := range []string{"config/crd", "config/rbac", "config/runtimes"} {
		if err := kubectl(ctx, o, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(o.Root, dir)); err != nil {
			return err
		}
	}
	configPath := filepath.Join(o.WorkDir, "config.yaml")
	if err := os.WriteFile(configPath, []byte(o.Configuration), 0o644); err != nil {
		return err
	}
	if err := applyConfigMap(ctx, cl, o.Configuration); err != nil {
		return err
	}

	if !ours(o, "manager", st.ManagerPID) {
		if err := choosePorts(ctx, &st); err != nil {
			return err
		}
	}
	// The manager makes the webhook's certificate, fills the Secret and the
	// caBundle, and is ready only once it serves with it.
	step(o, "registering the webhooks at https://localhost:%d", st.WebhookPort)
	if err := ensureCertSecret(ctx, cl); err != nil {
		return err
	}
	if err := applyWebhookConfiguration(ctx, cl, o, st.WebhookPort); err != nil {
		return err
	}
	if err := ensureManager(ctx, o, &st, configPath); err != nil {
		return err
	}
	if err := saveState(o, st); err != nil {
		return err
	}
	if o.Kueue {
		err := ensureKueue(ctx, cl, o, &st)
		// Saved even on failure: Down stops the Kueue that started.
		if err := errors.Join(err, saveState(o, st)); err != nil {
			return err
		}
	}
	if o.MultiKueue {
		if err := ensureMultiKueue(ctx, cl, o); err != nil {
			return err
		}
	}
	if o.Coscheduler {
		if err := EnsureCoscheduler(ctx, o); err != nil {
			return err
		}
	}
	if o.Prometheus {
		if err := EnsurePrometheus(ctx, o); err != nil {
			return err
		}
	}
	if o.Real {
		if err := EnsureRealNode(ctx, cl, o); err != nil {
			return err
		}
		if err := publishStatusServer(ctx, cl, st.StatusPort); err != nil {
			return err
		}
		if err := routeRealImages(ctx, cl); err != nil {
			return err
		}
	}
	step(o, "ready in %s: export KUBECONFIG=%s", time.Since(start).Round(100*time.Millisecond), o.Kubeconfig())
	return nil
}

// Down stops the manager and deletes the cluster and its state. It leaves no
// process or port behind.
func Down(ctx context.Context, o Options) error {
	o.defaults()
	// The worker clusters of MultiKueue, if any: they live under WorkDir.
	errs := []error{downWorkers(ctx, o)}
	st, err := loadState(o)
	if err != nil {
		errs = append(errs, err)
	}
	// The manager, and replicas a test started and did not stop: the
	// processes of bin/manager on this cluster (a PID the state recorded
	// may be another program's after a reboot).
	for _, pid := range managersOf(o) {
		if pid == st.ManagerPID {
			step(o, "stopping the manager (pid %d)", pid)
		} else {
			step(o, "stopping a manager replica (pid %d)", pid)
		}
		errs = append(errs, stopProcess(pid))
	}
	// Kueue, recorded or left by an aborted run.
	for _, pid := range kueuesOf(o) {
		step(o, "stopping Kueue (pid %d)", pid)
		errs = append(errs, stopProcess(pid))
	}
	errs = append(errs, stopCoscheduler(o), stopKubeflow(o), stopPrometheus(o), stopRealNode(o))
	if exists, err := kwokClusterExists(ctx, o); err != nil {
		errs = append(errs, err)
	} else if exists {
		step(o, "deleting cluster %s", o.Name)
		errs = append(errs, kwokctl(ctx, o, "delete", "cluster", "--name", o.Name, "--kubeconfig", o.Kubeconfig()))
	}
	// kwokctl signals the components it started and returns. Stop any it
	// does not know of (restarted by StopAPIServer's start, or left by an
	// earlier run it forgot), and wait until all are gone, so their ports are
	// free when Down returns.
	dir := filepath.Join(o.WorkDir, "kwok", "clusters", o.Name)
	for _, pid := range processesUnder(dir) {
		errs = append(errs, stopProcess(pid))
	}
	errs = append(errs, waitNoProcess(ctx, dir, 15*time.Second))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	step(o, "removing %s", o.WorkDir)
	return os.RemoveAll(o.WorkDir)
}

func step(o Options, format string, args ...any) {
	fmt.Fprintf(o.Out, "dev: "+format+"\n", args...)
}

func loadState(o Options) (state, error) {
	var st state
	return st, loadJSON(filepath.Join(o.WorkDir, "state.json"), &st)
}

func saveState(o Options, st state) error {
	return saveJSON(filepath.Join(o.WorkDir, "state.json"), st)
}

// loadJSON decodes the file path into v; a missing file leaves v as it is.
func loadJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// saveJSON writes v to the file path, indented.
func saveJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

func (o Options) client() (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", o.Kubeconfig(), err)
	}
	return client.New(cfg, client.Options{Scheme: scheme.Scheme})
}

// kwokctl runs kwokctl with the cluster's state under WorkDir/kwok.
func kwokctl(ctx context.Context, o Options, args ...string) error {
	return run(ctx, o, filepath.Join(o.BinDir, "kwokctl"), args...)
}

func kubectl(ctx context.Context, o Options, args ...string) error {
	return run(ctx, o, filepath.Join(o.BinDir, "kubectl"), append([]string{"--kubeconfig", o.Kubeconfig()}, args...)...)
}

func run(ctx context.Context, o Options, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+filepath.Join(o.WorkDir, "kwok"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, out.String())
	}
	return nil
}

func kwokClusterExists(ctx context.Context, o Options) (bool, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(o.BinDir, "kwokctl"), "get", "clusters")
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+filepath.Join(o.WorkDir, "kwok"))
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("kwokctl get clusters: %w", err)
	}
	for _, line := range strings.Fields(string(out)) {
		if line == o.Name {
			return true, nil
		}
	}
	return false, nil
}

// ensureKwokCluster creates the cluster, or starts it if it exists.
func ensureKwokCluster(ctx context.Context, o Options) error {
	exists, err := kwokClusterExists(ctx, o)
	if err != nil {
		return err
	}
	if exists {
		step(o, "cluster %s exists; starting whatever of it is stopped", o.Name)
		return kwokctl(ctx, o, "start", "cluster", "--name", o.Name, "--wait", "2m")
	}
	configPath := filepath.Join(o.WorkDir, "kwok.yaml")
	if err := os.WriteFile(configPath, slices.Concat(kwokctlConfig, []byte("---\n"), stages), 0o644); err != nil {
		return err
	}
	step(o, "creating cluster %s: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from %s", o.Name, o.BinDir)
	bin := func(name string) string { return filepath.Join(o.BinDir, name) }
	return kwokctl(ctx, o, "create", "cluster",
		"--name", o.Name,
		"--runtime", "binary",
		"--etcd-binary", bin("etcd"),
		"--kube-apiserver-binary", bin("kube-apiserver"),
		"--kube-controller-manager-binary", bin("kube-controller-manager"),
		"--kube-scheduler-binary", bin("kube-scheduler"),
		"--kwok-controller-binary", bin("kwok"),
		"--kubeconfig", o.Kubeconfig(),
		"--config", configPath,
		// kwok plays every node's kubelet: with the client limits of one
		// process it would be the slowest part of the cluster, which real
		// kubelets, one per node, are not.
		"--disable-qps-limits",
		"--wait", "2m",
	)
}

// NodeCapacity is what each simulated node offers.
var NodeCapacity = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("32"),
	corev1.ResourceMemory: resource.MustParse("256Gi"),
	corev1.ResourcePods:   resource.MustParse("110"),
	"nvidia.com/gpu":      resource.MustParse("8"),
}

// SimulatedNode is a node kwok runs Pods on, offering capacity.
func SimulatedNode(name string, capacity corev1.ResourceList) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name},
		},
		Status: corev1.NodeStatus{Allocatable: capacity, Capacity: capacity},
	}
}

func ensureNodes(ctx context.Context, cl client.Client, o Options) error {
	step(o, "%d simulated nodes, each with %s CPUs, %s memory and %s nvidia.com/gpu",
		o.Nodes, NodeCapacity.Cpu(), NodeCapacity.Memory(), NodeCapacity.Name("nvidia.com/gpu", resource.DecimalSI))
	reserved := 0
	if o.Kueue {
		reserved = o.Nodes / 2
		step(o, "the last %d of them reserved: label %s=%s and taint %s", reserved, PoolLabel, ReservedPool, ReservedTaint.ToString())
	}
	for i := range o.Nodes {
		node := SimulatedNode(fmt.Sprintf("kwok-node-%d", i), NodeCapacity)
		if i >= o.Nodes-reserved {
			node.Labels[PoolLabel] = ReservedPool
			node.Spec.Taints = []corev1.Taint{ReservedTaint}
		}
		err := cl.Create(ctx, node)
		if apierrors.IsAlreadyExists(err) && node.Labels[PoolLabel] != "" {
			err = reserveNode(ctx, cl, node.Name)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", node.Name, err)
		}
	}
	return nil
}

// reserveNode labels and taints an existing node as reserved (a cluster
// first brought up without Kueue).
func reserveNode(ctx context.Context, cl client.Client, name string) error {
	var node corev1.Node
	if err := cl.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
		return err
	}
	tainted := slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return ReservedTaint.MatchTaint(&t) })
	if node.Labels[PoolLabel] == ReservedPool && tainted {
		return nil
	}
	node.Labels[PoolLabel] = ReservedPool
	if !tainted {
		node.Spec.Taints = append(node.Spec.Taints, ReservedTaint)
	}
	return cl.Update(ctx, &node)
}

func ensureNamespace(ctx context.Context, cl client.Client, name string) error {
	err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func applyConfigMap(ctx context.Context, cl client.Client, data string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: config.ConfigMapName, Namespace: systemNamespace},
		Data:       map[string]string{config.ConfigMapKey: data},
	}
	if err := cl.Create(ctx, cm); apierrors.IsAlreadyExists(err) {
		return cl.Update(ctx, cm)
	} else if err != nil {
		return err
	}
	return nil
}

// ensureCertSecret creates the webhook certificate's Secret empty, as
// config/webhook ships it, unless it exists.
func ensureCertSecret(ctx context.Context, cl client.Client) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: configv1alpha1.DefaultWebhookSecretName, Namespace: systemNamespace}}
	if err := cl.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the webhook certificate Secret: %w", err)
	}
	return nil
}

// webhookServes reports whether the API server can call the manager's
// webhooks: a TrainJob created as a dry run gets any answer but "failed
// calling webhook". The manager is ready once its webhook server started,
// but a manager started again may serve, for a moment, a certificate its
// other certificate refresh has just replaced in the caBundle.
func webhookServes(ctx context.Context, cl client.Client) error {
	tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "dev-webhook-probe", Namespace: metav1.NamespaceDefault}}
	if err := cl.Create(ctx, tj, client.DryRunAll); err != nil && strings.Contains(err.Error(), "failed calling webhook") {
		return err
	}
	return nil
}

// applyWebhookConfiguration registers the generated webhook configurations,
// validating and mutating, pointed at the manager on this machine. Their
// caBundle is the manager's to keep: an update leaves it as it is.
func applyWebhookConfiguration(ctx context.Context, cl client.Client, o Options, port int) error {
	data, err := os.ReadFile(filepath.Join(o.Root, "config", "webhook", "manifests.yaml"))
	if err != nil {
		return err
	}
	configs, err := webhookConfigurations(data)
	if err != nil {
		return fmt.Errorf("config/webhook/manifests.yaml: %w", err)
	}
	for _, c := range configs {
		c.SetName(configv1alpha1.DefaultWebhookConfigurationName)
		want := webhooksOf(c, nil)
		for _, w := range want {
			url := fmt.Sprintf("https://localhost:%d%s", port, w.path())
			*w.clientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url}
		}
		keepCABundles := func(cur client.Object) {
			for i, w := range webhooksOf(cur, nil) {
				if i < len(want) {
					want[i].clientConfig.CABundle = w.clientConfig.CABundle
				}
			}
		}
		if err := createOrReplace(ctx, cl, c, keepCABundles); err != nil {
			return err
		}
	}
	return nil
}

func netListen(port int) (net.Listener, error) {
	return net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
}

// FreePort asks the kernel for a free port on the loopback interface.
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := netListen(0)
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		// Nothing holds a port between FreePort and the program that
		// binds it: the kernel may hand the same one out again meanwhile,
		// and two components given it would collide.
		if at, ok := handedOut.ports[port]; ok && time.Since(at) < time.Minute {
			continue
		}
		handedOut.ports[port] = time.Now()
		return port, nil
	}
	return 0, errors.New("no free port that was not handed out in the last minute")
}

// handedOut are the ports FreePort returned, and when.
var handedOut = struct {
	sync.Mutex
	ports map[int]time.Time
}{ports: map[int]time.Time{}}

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
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The real node, with Options.Real: a kubelet (bin/kubelet, built from the
// control plane's k8s.io/kubernetes) running real containers through
// containerd (bin/containerd, its runc shim, and Debian's runc), Pods
// networked by the CNI bridge plugin on a bridge of this machine, and
// cluster names answered by CoreDNS (bin/coredns) listening on the bridge's
// address, which the kubelet gives Pods as their DNS server. All of it runs
// as root, with its state under WorkDir/real, and Down removes every
// process, mount, network device and cgroup it made.
const (
	// RealNodeName is the real node's name.
	RealNodeName = "trainjob-real"
	// RealNodeLabel is the label, with value RealNodeValue, and the key of
	// the taint (NoSchedule) the real node carries: only Pods that select
	// and tolerate it run there, and kwok never takes it over.
	RealNodeLabel = "trainjob-operator.dev/node"
	RealNodeValue = "real"
	// PauseImage is the sandbox image of the real node's containerd,
	// built here from hack/pause: no registry is reachable to pull one.
	PauseImage = "localhost/trainjob-operator/pause:latest"
	// TrainImage is the training image hack/train-image.sh builds (Debian
	// with Python, PyTorch for CPUs, OpenMPI and OpenSSH, mpi4py and
	// XGBoost), under the name it is loaded as.
	TrainImage = "localhost/trainjob-operator/train-cpu:latest"
	// RealImagePrefix begins the name of every image built on this
	// machine for the real node: a Pod that runs one is sent there
	// (realImagesPolicy), as only the real node has them and only it runs
	// them for real.
	RealImagePrefix = "localhost/trainjob-operator/"

	// RealGateway is the address of this machine on the Pods' bridge,
	// which every Pod of the real node reaches: it is also the node's
	// address (the API server reaches the kubelet there) and CoreDNS'.
	// RealSubnet holds the Pods' addresses.
	RealGateway = "10.244.0.1"
	RealSubnet  = "10.244.0.0/24"
	// realBridge is the Pods' bridge.
	realBridge = "trainjob0"
	// realCgroup is the kubelet's cgroup of Pods, in every hierarchy
	// (cgroupfs driver, the default cgroup root).
	realCgroup = "kubepods"
)

// RealNodeTaint keeps Pods that do not tolerate it off the real node.
var RealNodeTaint = corev1.Taint{Key: RealNodeLabel, Value: RealNodeValue, Effect: corev1.TaintEffectNoSchedule}

// kubeletSysctls are the kernel settings the kubelet sets at start
// (protectKernelDefaults false); Down puts back what they were.
var kubeletSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	// The bridge plugin turns on forwarding for a gateway bridge.
	"net/ipv4/ip_forward",
}

// hostDirs are directories outside WorkDir that the real node's
// components make wherever they are told to keep their state: containerd's
// shim sockets, the CNI library's result cache, the kubelet's device
// plugin socket, its links to containers' logs, util-linux's mount table.
// Down removes those that did not exist before the real node first came
// up.
var hostDirs = []string{"/run/containerd", "/var/lib/cni", "/var/lib/kubelet", "/var/log/containers", "/run/mount"}

// realState is what EnsureRealNode keeps in WorkDir/real/state.json.
type realState struct {
	KubeletPort        int `json:"kubeletPort"`
	KubeletHealthzPort int `json:"kubeletHealthzPort"`
	CoreDNSReadyPort   int `json:"corednsReadyPort"`
	// Sysctls are the kernel settings as they were before the real node
	// first came up.
	Sysctls map[string]string `json:"sysctls"`
	// CreatedDirs are the hostDirs that did not exist then.
	CreatedDirs []string `json:"createdDirs,omitempty"`
}

// realBinaries are the real node's tools in BinDir, built by
// `hack/build-tools.sh real`.
var realBinaries = []string{"kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "coredns", "imagebuild",
	"cni/bridge", "cni/host-local", "cni/loopback"}

func (o Options) realDir() string { return filepath.Join(o.WorkDir, "real") }

// KubeletLog is the file the real node's kubelet logs to.
func (o Options) KubeletLog() string { o.defaults(); return filepath.Join(o.WorkDir, "kubelet.log") }

// ContainerdLog is the file the real node's containerd logs to.
func (o Options) ContainerdLog() string {
	o.defaults()
	return filepath.Join(o.WorkDir, "containerd.log")
}

// CoreDNSLog is the file the real node's CoreDNS logs to.
func (o Options) CoreDNSLog() string { o.defaults(); return filepath.Join(o.WorkDir, "coredns.log") }

// ContainerdAddress is the socket of the real node's containerd.
func (o Options) ContainerdAddress() string {
	o.defaults()
	return filepath.Join(o.realDir(), "containerd", "containerd.sock")
}

func (o Options) containerdConfig() string {
	return filepath.Join(o.realDir(), "containerd", "config.toml")
}
func (o Options) kubeletConfig() string { return filepath.Join(o.realDir(), "kubelet", "config.yaml") }
func (o Options) corefile() string      { return filepath.Join(o.realDir(), "coredns", "Corefile") }

// needReal fails, saying what to do, unless the real node can run here.
func (o Options) needReal() error {
	if os.Geteuid() != 0 {
		return errors.New("the real node (REAL=1) runs containers and needs root: run as root")
	}
	for _, b := range realBinaries {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return fmt.Errorf("%s is missing from %s: run 'make real-node' first (make dev REAL=1 does)", b, o.BinDir)
		}
	}
	for _, b := range []string{"runc", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s is not installed: run 'hack/real-node-deps.sh' (make real-node does)", b)
		}
	}
	return nil
}

// realRunning reports whether a process of o's real node runs.
func realRunning(o Options) bool {
	return len(realProcesses(o)) > 0
}

// EnsureRealNode brings the real node up, or what of it is not running,
// and waits until the node is Ready. Running it twice is safe; Down
// removes it.
func EnsureRealNode(ctx context.Context, cl client.Client, o Options) error {
	o.defaults()
	if err := o.needReal(); err != nil {
		return err
	}
	start := time.Now()
	if err := noOtherRealNode(o); err != nil {
		return err
	}
	dir := o.realDir()
	for _, d := range []string{"containerd", "cni/conf", "cni/ipam", "kubelet/root", "kubelet/pods-logs", "coredns", "images"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	st, err := loadRealState(o)
	if err != nil {
		return err
	}
	if st.Sysctls == nil && !realRunning(o) {
		st.Sysctls = map[string]string{}
		for _, k := range kubeletSysctls {
			if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
				st.Sysctls[k] = strings.TrimSpace(string(v))
			}
		}
		for _, d := range hostDirs {
			if _, err := os.Stat(d); errors.Is(err, os.ErrNotExist) {
				st.CreatedDirs = append(st.CreatedDirs, d)
			}
		}
	}
	for _, port := range []*int{&st.KubeletPort, &st.KubeletHealthzPort, &st.CoreDNSReadyPort} {
		if *port == 0 {
			if *port, err = FreePort(); err != nil {
				return err
			}
		}
	}
	if err := saveRealState(o, st); err != nil {
		return err
	}

	step(o, "real node %s: bridge %s at %s for the Pods (%s)", RealNodeName, realBridge, RealGateway, RealSubnet)
	if err := ensureBridge(ctx); err != nil {
		return err
	}
	if err := writeRealConfigs(o, st); err != nil {
		return err
	}
	if err := ensureContainerd(ctx, o); err != nil {
		return err
	}
	if err := loadPauseImage(ctx, o); err != nil {
		return err
	}
	if err := ensureCoreDNS(ctx, o, st); err != nil {
		return err
	}
	if err := ensureKubelet(ctx, cl, o, st); err != nil {
		return err
	}
	step(o, "real node %s is Ready in %s (label %s=%s, taint %s)", RealNodeName, time.Since(start).Round(100*time.Millisecond),
		RealNodeLabel, RealNodeValue, RealNodeTaint.ToString())
	return nil
}

// noOtherRealNode fails if another cluster's real node runs on this
// machine: they would share the bridge, its addresses and the cgroups.
func noOtherRealNode(o Options) error {
	for _, pid := range processesMatching(func(args []string) bool {
		return filepath.Base(args[0]) == "kubelet" && slices.Contains(args, "--hostname-override="+RealNodeName)
	}) {
		if !slices.Contains(realProcesses(o), pid) {
			return fmt.Errorf("another real node's kubelet runs on this machine (pid %d): one real node at a time; stop its cluster first", pid)
		}
	}
	return nil
}

// ensureBridge makes the Pods' bridge with the gateway's address, before
// any Pod, so that CoreDNS and the kubelet can listen there.
func ensureBridge(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", realBridge)); errors.Is(err, os.ErrNotExist) {
		if err := ip(ctx, "link", "add", realBridge, "type", "bridge"); err != nil {
			return err
		}
	}
	out, err := exec.CommandContext(ctx, "ip", "-o", "-4", "addr", "show", "dev", realBridge).Output()
	if err != nil {
		return fmt.Errorf("ip addr show dev %s: %w", realBridge, err)
	}
	if !strings.Contains(string(out), " "+RealGateway+"/") {
		if err := ip(ctx, "addr", "add", RealGateway+"/24", "dev", realBridge); err != nil {
			return err
		}
	}
	return ip(ctx, "link", "set", realBridge, "up")
}

func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// containerdConfiguration is containerd's configuration (version 3, as
// containerd 2 reads it); its arguments are the real node's directory, the
// socket, the CNI plugins' directory and runc.
const containerdConfiguration = `version = 3
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
# Plugins that would reach outside the real node's directory, or that it
# does not use.
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "%[2]s"

[ttrpc]
  address = "%[2]s.ttrpc"

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "%[1]s/containerd/opt"
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "` + PauseImage + `"
  [plugins.'io.containerd.cri.v1.runtime']
    netns_mounts_under_state_dir = true
    # Root here may lack CAP_SYS_RESOURCE (a machine that is itself a
    # container): no container gets an OOM score below containerd's.
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "%[4]s"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["%[3]s"]
      conf_dir = "%[1]s/cni/conf"
      max_conf_num = 1
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`

// cniConfiguration is the Pods' network: the bridge plugin on realBridge,
// addresses from RealSubnet kept by host-local under the real node's
// directory. No masquerade (no iptables rule): Pods reach this machine and
// each other, not the outside.
const cniConfiguration = `{
  "cniVersion": "1.0.0",
  "name": "trainjob-real",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "` + realBridge + `",
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "` + RealSubnet + `", "gateway": "` + RealGateway + `"}]],
        "dataDir": %q
      }
    }
  ]
}
`

// kubeletConfiguration is the kubelet's configuration; its arguments are
// the real node's directory, containerd's socket, the kubelet's port and
// its health port.
const kubeletConfiguration = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These machines run cgroup v1, which kubelet 1.35+ refuses unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%[2]s
imageServiceEndpoint: unix://%[2]s
address: ` + RealGateway + `
port: %[3]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[4]d
# The API server calls the kubelet (logs, exec) without a client
# certificate; the kubelet listens only on the bridge's address.
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
clusterDNS: ["` + RealGateway + `"]
resolvConf: ""
podLogsDir: %[1]s/kubelet/pods-logs
registerWithTaints:
- key: ` + RealNodeLabel + `
  value: ` + RealNodeValue + `
  effect: NoSchedule
failSwapOn: false
# The machine's disk is shared: no image or eviction by disk pressure while
# a test runs.
imageGCHighThresholdPercent: 100
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
serializeImagePulls: false
syncFrequency: 10s
fileCheckFrequency: 10s
nodeStatusReportFrequency: 10s
`

// corednsConfiguration is CoreDNS' Corefile; its arguments are the
// kubeconfig and the ready port.
const corednsConfiguration = `cluster.local in-addr.arpa ip6.arpa {
    bind ` + RealGateway + `
    ready 127.0.0.1:%[2]d
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %[1]q
        pods insecure
        ttl 5
    }
}
`

func writeRealConfigs(o Options, st realState) error {
	runc, err := exec.LookPath("runc")
	if err != nil {
		return err
	}
	dir := o.realDir()
	files := map[string][]byte{
		o.containerdConfig(): fmt.Appendf(nil, containerdConfiguration, dir, o.ContainerdAddress(), filepath.Join(o.BinDir, "cni"), runc),
		filepath.Join(dir, "cni", "conf", "10-trainjob-real.conflist"): fmt.Appendf(nil, cniConfiguration, filepath.Join(dir, "cni", "ipam")),
		o.kubeletConfig(): fmt.Appendf(nil, kubeletConfiguration, dir, o.ContainerdAddress(), st.KubeletPort, st.KubeletHealthzPort),
		o.corefile():      fmt.Appendf(nil, corednsConfiguration, o.Kubeconfig(), st.CoreDNSReadyPort),
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ensureContainerd starts containerd unless it runs, and waits until it
// answers.
func ensureContainerd(ctx context.Context, o Options) error {
	if pids := processesOfBinary(o, "containerd", o.containerdConfig()); len(pids) > 0 {
		step(o, "containerd is running (pid %d)", pids[0])
		return nil
	}
	// The shims containerd starts are found on PATH: bin/'s first.
	env := "PATH=" + o.BinDir + string(os.PathListSeparator) + os.Getenv("PATH")
	pid, exited, err := startDetached("containerd", filepath.Join(o.BinDir, "containerd"), []string{"--config", o.containerdConfig()}, o.ContainerdLog(), env)
	if err != nil {
		return err
	}
	step(o, "started containerd (pid %d), logging to %s", pid, o.ContainerdLog())
	return waitReady(ctx, "containerd", func() error { return ctr(ctx, o, "version") }, o.ContainerdLog(), exited)
}

// ctr runs bin/ctr on the real node's containerd, in the namespace of its
// CRI (k8s.io).
func ctr(ctx context.Context, o Options, args ...string) error {
	return run(ctx, o, filepath.Join(o.BinDir, "ctr"), append([]string{"--address", o.ContainerdAddress(), "--namespace", "k8s.io"}, args...)...)
}

// loadPauseImage builds hack/pause into PauseImage and imports it.
func loadPauseImage(ctx context.Context, o Options) error {
	step(o, "loading %s (hack/pause) into containerd", PauseImage)
	return LoadProgramImage(ctx, o, "./hack/pause", PauseImage)
}

// LoadProgramImage builds the static Go program pkg of the repository (a
// package path relative to o.Root) into an image of one layer named ref
// (repository:tag), with the project's image builder, and imports it into
// the real node's containerd, where Pods run it without pulling
// (imagePullPolicy IfNotPresent or Never).
func LoadProgramImage(ctx context.Context, o Options, pkg, ref string) error {
	o.defaults()
	repo, tag, ok := strings.Cut(ref, ":")
	if !ok || strings.Contains(tag, "/") {
		return fmt.Errorf("image %q: want repository:tag", ref)
	}
	name := filepath.Base(repo)
	dir := filepath.Join(o.realDir(), "images", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(dir, name)
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, pkg)
	build.Dir = o.Root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	archive := filepath.Join(dir, name+".tar")
	if err := run(ctx, o, filepath.Join(o.BinDir, "imagebuild"),
		"--binary", "linux/"+runtime.GOARCH+"="+bin, "--entrypoint", "/"+name, "--title", ref,
		"--version", tag, "--created", "0", "--archive", archive); err != nil {
		return err
	}
	return LoadImageArchive(ctx, o, archive, ref)
}

// LoadImageArchive imports the OCI image archive of the image builder,
// whose layout names the image by its tag, into the real node's
// containerd as ref (repository:tag).
func LoadImageArchive(ctx context.Context, o Options, archive, ref string) error {
	o.defaults()
	repo, _, ok := strings.Cut(ref, ":")
	if !ok {
		return fmt.Errorf("image %q: want repository:tag", ref)
	}
	if !realRunning(o) {
		return fmt.Errorf("no real node runs for %s: run 'make dev-up REAL=1'", o.WorkDir)
	}
	return ctr(ctx, o, "images", "import", "--base-name", repo, archive)
}

// ensureCoreDNS starts CoreDNS unless it runs, and waits until it is
// ready (it has synced with the API server).
func ensureCoreDNS(ctx context.Context, o Options, st realState) error {
	probe := func() error { return httpOK(fmt.Sprintf("http://127.0.0.1:%d/ready", st.CoreDNSReadyPort)) }
	if pids := processesOfBinary(o, "coredns", o.corefile()); len(pids) > 0 {
		if probe() == nil {
			step(o, "CoreDNS is running (pid %d)", pids[0])
			return nil
		}
		if err := stopProcess(pids[0]); err != nil {
			return err
		}
	}
	pid, exited, err := startDetached("CoreDNS", filepath.Join(o.BinDir, "coredns"), []string{"-conf", o.corefile()}, o.CoreDNSLog())
	if err != nil {
		return err
	}
	step(o, "started CoreDNS (pid %d) at %s:53 for cluster.local, logging to %s", pid, RealGateway, o.CoreDNSLog())
	return waitReady(ctx, "CoreDNS", probe, o.CoreDNSLog(), exited)
}

// ensureKubelet starts the kubelet unless it runs, and waits until its
// node is Ready.
func ensureKubelet(ctx context.Context, cl client.Client, o Options, st realState) error {
	if pids := processesOfBinary(o, "kubelet", o.kubeletConfig()); len(pids) > 0 {
		step(o, "the kubelet is running (pid %d)", pids[0])
	} else {
		pid, exited, err := startDetached("the kubelet", filepath.Join(o.BinDir, "kubelet"), []string{
			"--config", o.kubeletConfig(),
			"--kubeconfig", o.Kubeconfig(),
			"--root-dir", filepath.Join(o.realDir(), "kubelet", "root"),
			"--cert-dir", filepath.Join(o.realDir(), "kubelet", "pki"),
			"--hostname-override=" + RealNodeName,
			"--node-ip", RealGateway,
			"--node-labels", RealNodeLabel + "=" + RealNodeValue,
			"--v", "1",
		}, o.KubeletLog())
		if err != nil {
			return err
		}
		step(o, "started the kubelet (pid %d), logging to %s", pid, o.KubeletLog())
		if err := waitReady(ctx, "the kubelet", func() error {
			return httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", st.KubeletHealthzPort))
		}, o.KubeletLog(), exited); err != nil {
			return err
		}
	}
	var notReady error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var node corev1.Node
		if notReady = cl.Get(ctx, client.ObjectKey{Name: RealNodeName}, &node); notReady != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return true, nil
				}
				notReady = fmt.Errorf("node %s: Ready=%s: %s", RealNodeName, c.Status, c.Message)
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the real node is not Ready: %w (%w); see %s", notReady, err, o.KubeletLog())
	}
	return nil
}

func httpOK(url string) error {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

// processesOfBinary lists the live processes of BinDir/name whose command
// line holds arg (a configuration file of o's).
func processesOfBinary(o Options, name, arg string) []int {
	exe := filepath.Join(o.BinDir, name)
	return processesMatching(func(args []string) bool { return args[0] == exe && slices.Contains(args, arg) })
}

// realProcesses lists the real node's processes: the kubelet, CoreDNS,
// containerd and the shims it started.
func realProcesses(o Options) []int {
	return slices.Concat(processesOfBinary(o, "kubelet", o.kubeletConfig()), processesOfBinary(o, "coredns", o.corefile()),
		processesOfBinary(o, "containerd", o.containerdConfig()), shimsOf(o))
}

// shimsOf lists the shims o's containerd started, which outlive it.
func shimsOf(o Options) []int {
	shim := filepath.Join(o.BinDir, "containerd-shim-runc-v2")
	return processesMatching(func(args []string) bool {
		return (args[0] == shim || filepath.Base(args[0]) == "containerd-shim-runc-v2") && slices.Contains(args, o.ContainerdAddress())
	})
}

// stopRealNode stops the real node's processes, and every process of its
// Pods, and removes what they made outside its directory: mounts, the
// bridge and the Pods' interfaces, cgroups, host directories, kernel
// settings. Down then removes the directory.
func stopRealNode(o Options) error {
	dir := o.realDir()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	st, err := loadRealState(o)
	if err != nil {
		return err
	}
	var errs []error
	// The kubelet first, so that it restarts nothing; then CoreDNS,
	// containerd and the shims.
	for _, c := range []struct {
		name string
		pids []int
	}{
		{"the kubelet", processesOfBinary(o, "kubelet", o.kubeletConfig())},
		{"CoreDNS", processesOfBinary(o, "coredns", o.corefile())},
		{"containerd", processesOfBinary(o, "containerd", o.containerdConfig())},
		{"a containerd shim", nil},
	} {
		if c.pids == nil {
			// Listed once containerd is gone: it starts no more.
			c.pids = shimsOf(o)
		}
		for _, pid := range c.pids {
			step(o, "stopping %s (pid %d)", c.name, pid)
			errs = append(errs, stopProcess(pid))
		}
	}
	// The Pods' processes: every one in the kubelet's cgroups.
	step(o, "removing the real node's Pods' processes, cgroups and mounts")
	errs = append(errs, removeCgroups(realCgroup))
	errs = append(errs, unmountUnder(dir))
	// The Pods' interfaces went with their network namespaces; the bridge
	// is left.
	if _, err := os.Stat(filepath.Join("/sys/class/net", realBridge)); err == nil {
		step(o, "removing the bridge %s", realBridge)
		errs = append(errs, ip(context.Background(), "link", "delete", realBridge))
	}
	for _, d := range st.CreatedDirs {
		errs = append(errs, os.RemoveAll(d))
	}
	for k, v := range st.Sysctls {
		path := filepath.Join("/proc/sys", k)
		if cur, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(cur)) != v {
			errs = append(errs, os.WriteFile(path, []byte(v), 0o644))
		}
	}
	return errors.Join(errs...)
}

// removeCgroups kills every process in the cgroup name, and the cgroups
// below it, of every hierarchy, and removes them.
func removeCgroups(name string) error {
	roots, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", name))
	if root := filepath.Join("/sys/fs/cgroup", name); isDir(root) {
		roots = append(roots, root) // cgroup v2
	}
	var errs []error
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		// Deepest first: a cgroup is removed once its children are.
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := emptyCgroup(d); err != nil {
				errs = append(errs, err)
				continue
			}
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// emptyCgroup kills the processes of one cgroup and waits until none is
// left.
func emptyCgroup(dir string) error {
	var left string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return true, nil //nolint:nilerr // gone meanwhile
		}
		left = strings.TrimSpace(string(data))
		if left == "" {
			return true, nil
		}
		for _, f := range strings.Fields(left) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("cgroup %s still holds processes %s", dir, strings.Join(strings.Fields(left), ","))
	}
	return nil
}

// unmountUnder unmounts every mount at or below dir, deepest first.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for line := range strings.SplitSeq(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPoint(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	// Later mounts may be on top of earlier ones: undo in reverse.
	slices.Reverse(points)
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountPoint undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPoint(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if c, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func loadRealState(o Options) (realState, error) {
	var st realState
	return st, loadJSON(filepath.Join(o.realDir(), "state.json"), &st)
}

func saveRealState(o Options, st realState) error {
	return saveJSON(filepath.Join(o.realDir(), "state.json"), st)
}

// RealNodeLeftovers lists what of o's real node is left on this machine:
// processes, mounts under WorkDir, the bridge, the Pods' interfaces on it
// and the kubelet's cgroups. After Down it must be empty.
func RealNodeLeftovers(o Options) []string {
	o.defaults()
	var left []string
	for _, pid := range realProcesses(o) {
		left = append(left, fmt.Sprintf("process %d", pid))
	}
	if data, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if fields := strings.Fields(line); len(fields) >= 5 {
				if p := unescapeMountPoint(fields[4]); p == o.WorkDir || strings.HasPrefix(p, o.WorkDir+"/") {
					left = append(left, "mount "+p)
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", realBridge)); err == nil {
		left = append(left, "network device "+realBridge)
		ports, _ := os.ReadDir(filepath.Join("/sys/class/net", realBridge, "brif"))
		for _, p := range ports {
			left = append(left, "network device "+p.Name())
		}
	}
	cgroups, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", realCgroup))
	if root := filepath.Join("/sys/fs/cgroup", realCgroup); isDir(root) {
		cgroups = append(cgroups, root)
	}
	for _, c := range cgroups {
		left = append(left, "cgroup "+c)
	}
	return left
}

// statusServerName is the Service trainer Pods reach the status server
// by: the configuration's dnsName, as in a cluster.
const statusServerName = "trainjob-operator-webhook"

// publishStatusServer makes the status server's name resolve to this
// machine in the real node's Pods, as the manager's Service does in a
// cluster: a headless Service without selector, and an EndpointSlice
// with the bridge's address, where the manager, a process of this
// machine, listens. CoreDNS answers its name with that address.
func publishStatusServer(ctx context.Context, cl client.Client, port int) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: statusServerName, Namespace: systemNamespace},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Ports:     []corev1.ServicePort{{Name: "status-server", Port: int32(port)}},
		},
	}
	if err := cl.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Service %s/%s: %w", systemNamespace, statusServerName, err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: statusServerName + "-dev", Namespace: systemNamespace,
			Labels: map[string]string{discoveryv1.LabelServiceName: statusServerName, discoveryv1.LabelManagedBy: "trainjob-dev"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{RealGateway}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("status-server"), Port: ptr.To(int32(port))}},
	}
	var existing discoveryv1.EndpointSlice
	err := cl.Get(ctx, client.ObjectKeyFromObject(slice), &existing)
	switch {
	case apierrors.IsNotFound(err):
		err = cl.Create(ctx, slice)
	case err == nil:
		existing.Endpoints, existing.Ports = slice.Endpoints, slice.Ports
		err = cl.Update(ctx, &existing)
	}
	if err != nil {
		return fmt.Errorf("publishing the status server at %s: %w", RealGateway, err)
	}
	return nil
}

// realImagesPolicy is the name of the MutatingAdmissionPolicy (and its
// binding) that sends the Pods running an image of this machine to the
// real node.
const realImagesPolicy = "trainjob-dev-real-images"

// routeRealImages makes every Pod created with a container whose image
// begins with RealImagePrefix select and tolerate the real node, and those
// containers never pull, so that a TrainJob of Kubeflow's runtimes naming
// TrainImage runs there as written, with no runtime patch: the Pods of the
// simulated nodes would only pretend to run it. It is a
// MutatingAdmissionPolicy (CEL, in the API server; no webhook), which adds
// the node selector and the toleration to what the Pod has and sets the
// containers' imagePullPolicy to IfNotPresent.
func routeRealImages(ctx context.Context, cl client.Client) error {
	key := strconv.Quote(RealNodeLabel)
	toleration := fmt.Sprintf(`Object.spec.tolerations{key: %s, operator: "Equal", value: %q, effect: %q}`, key, RealNodeValue, RealNodeTaint.Effect)
	patch := fmt.Sprintf(`[
  has(object.spec.nodeSelector) ?
    JSONPatch{op: "add", path: "/spec/nodeSelector/" + jsonpatch.escapeKey(%[1]s), value: %[2]q} :
    JSONPatch{op: "add", path: "/spec/nodeSelector", value: {%[1]s: %[2]q}},
  has(object.spec.tolerations) ?
    JSONPatch{op: "add", path: "/spec/tolerations/-", value: %[3]s} :
    JSONPatch{op: "add", path: "/spec/tolerations", value: [%[3]s]}
]`, key, RealNodeValue, toleration)
	// The containers of those images never pull them (none can be
	// pulled): a :latest tag would otherwise default to Always.
	pullPolicy := fmt.Sprintf(`Object{spec: Object.spec{containers: object.spec.containers.filter(c, c.image.startsWith(%q)).map(c,
  Object.spec.containers{name: c.name, imagePullPolicy: %q})}}`, RealImagePrefix, corev1.PullIfNotPresent)
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: realImagesPolicy},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
					},
				}},
			},
			MatchConditions: []admissionregistrationv1.MatchCondition{{
				Name:       "runs-an-image-of-this-machine",
				Expression: fmt.Sprintf("object.spec.containers.exists(c, c.image.startsWith(%q))", RealImagePrefix),
			}},
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: patch},
			}, {
				PatchType:          admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: pullPolicy},
			}},
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: realImagesPolicy},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: realImagesPolicy},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	// The API server takes up a new policy a moment later: until it does,
	// such a Pod would land on a simulated node. A dry run shows when.
	probe := func() bool {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "trainjob-dev-probe-", Namespace: metav1.NamespaceDefault},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: PauseImage}}},
		}
		return cl.Create(ctx, pod, client.DryRunAll) == nil && pod.Spec.NodeSelector[RealNodeLabel] == RealNodeValue
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return probe(), nil
	}); err != nil {
		return fmt.Errorf("the MutatingAdmissionPolicy %s does not send Pods to the real node: %w", realImagesPolicy, err)
	}
	return nil
}

// BuildTrainImage builds TrainImage's archive with hack/train-image.sh
// (as root; minutes the first time, then cached by what makes it), its
// progress going to out, and returns the archive's path.
func BuildTrainImage(ctx context.Context, o Options, out io.Writer) (string, error) {
	o.defaults()
	cmd := exec.CommandContext(ctx, filepath.Join(o.Root, "hack", "train-image.sh"))
	cmd.Stderr = out
	archive, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the training image (hack/train-image.sh): %w", err)
	}
	return strings.TrimSpace(string(archive)), nil
}

// loadTrainImage builds TrainImage if needed and loads it into the real
// node, for the real sample of `trainjob-dev run --real`.
func loadTrainImage(ctx context.Context, out io.Writer, o Options) error {
	start := time.Now()
	archive, err := BuildTrainImage(ctx, o, out)
	if err != nil {
		return err
	}
	if err := LoadImageArchive(ctx, o, archive, TrainImage); err != nil {
		return err
	}
	fmt.Fprintf(out, "dev: %s is in the real node (%s)\n", TrainImage, time.Since(start).Round(100*time.Millisecond))
	return nil
}

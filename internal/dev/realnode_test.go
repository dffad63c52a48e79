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
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestUnescapeMountPoint(t *testing.T) {
	for in, want := range map[string]string{
		"/work/.dev/real/containerd/state":  "/work/.dev/real/containerd/state",
		`/work/my\040dir/.dev`:              "/work/my dir/.dev",
		`/a\011tab\134back`:                 "/a\ttab\\back",
		`/trailing\04`:                      `/trailing\04`,
		`/not\0xyoctal`:                     `/not\0xyoctal`,
		"/var/lib/kubelet/pods/x/volumes/y": "/var/lib/kubelet/pods/x/volumes/y",
	} {
		if got := unescapeMountPoint(in); got != want {
			t.Errorf("unescapeMountPoint(%q) = %q, want %q", in, got, want)
		}
	}
}

// The real node's configuration files are complete (every argument in
// place) and well-formed, and keep every component's state under the
// real node's directory.
func TestRealConfigs(t *testing.T) {
	dir := t.TempDir()
	o := Options{Root: dir, WorkDir: filepath.Join(dir, ".dev"), BinDir: filepath.Join(dir, "bin")}
	o.defaults()
	if err := os.MkdirAll(filepath.Join(o.realDir(), "cni", "conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"containerd", "kubelet", "coredns"} {
		if err := os.MkdirAll(filepath.Join(o.realDir(), d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Skip("runc is not installed (hack/real-node-deps.sh)")
	}
	if err := writeRealConfigs(o, realState{KubeletPort: 10250, KubeletHealthzPort: 10248, CoreDNSReadyPort: 8181}); err != nil {
		t.Fatal(err)
	}
	read := func(path string) string {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(data); strings.Contains(s, "%!") {
			t.Errorf("%s has a formatting error:\n%s", path, s)
		}
		return string(data)
	}

	var kubelet map[string]any
	if err := yaml.UnmarshalStrict([]byte(read(o.kubeletConfig())), &kubelet); err != nil {
		t.Errorf("kubelet configuration: %v", err)
	}
	if kubelet["failCgroupV1"] != false || kubelet["cgroupDriver"] != "cgroupfs" || kubelet["port"] != float64(10250) ||
		kubelet["podLogsDir"] != filepath.Join(o.realDir(), "kubelet", "pods-logs") {
		t.Errorf("kubelet configuration: %v", kubelet)
	}

	var cni struct {
		Plugins []struct {
			Type, Bridge string
			IPMasq       bool                     `json:"ipMasq"`
			IPAM         struct{ DataDir string } `json:"ipam"`
		}
	}
	if err := json.Unmarshal([]byte(read(filepath.Join(o.realDir(), "cni", "conf", "10-trainjob-real.conflist"))), &cni); err != nil {
		t.Fatalf("CNI configuration: %v", err)
	}
	if len(cni.Plugins) != 1 || cni.Plugins[0].Type != "bridge" || cni.Plugins[0].Bridge != realBridge || cni.Plugins[0].IPMasq ||
		!strings.HasPrefix(cni.Plugins[0].IPAM.DataDir, o.realDir()) {
		t.Errorf("CNI configuration: %+v", cni)
	}

	containerd := read(o.containerdConfig())
	for _, want := range []string{`root = "` + o.realDir(), `state = "` + o.realDir(), `address = "` + o.ContainerdAddress() + `"`,
		`sandbox = "` + PauseImage + `"`, `bin_dirs = ["` + filepath.Join(o.BinDir, "cni") + `"]`, "netns_mounts_under_state_dir = true"} {
		if !strings.Contains(containerd, want) {
			t.Errorf("containerd configuration lacks %q:\n%s", want, containerd)
		}
	}
	if corefile := read(o.corefile()); !strings.Contains(corefile, `kubeconfig "`+o.Kubeconfig()+`"`) || !strings.Contains(corefile, "bind "+RealGateway) {
		t.Errorf("Corefile:\n%s", corefile)
	}
}

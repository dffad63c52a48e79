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

package jobplan

import (
	"crypto/ecdh"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// fluxRuntime has the shape of Kubeflow v2.3's flux-distributed example
// runtime (but for its image).
var fluxRuntime = frameworkRuntime("flux-distributed", "flux")

// z85Decode decodes ZeroMQ's Base85.
func z85Decode(t *testing.T, s string) []byte {
	t.Helper()
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
	if len(s)%5 != 0 {
		t.Fatalf("%q is not Z85", s)
	}
	var out []byte
	for i := 0; i < len(s); i += 5 {
		var v uint32
		for _, c := range []byte(s[i : i+5]) {
			v = v*85 + uint32(strings.IndexByte(alphabet, c))
		}
		out = append(out, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return out
}

// The LAMMPS example of Kubeflow v2.3 on flux-distributed: 2 nodes of 4
// tasks, the view image from the TrainJob's env.
func TestFlux(t *testing.T) {
	tj := utiltesting.MakeTrainJob("lammps-flux", "hpc").NumNodes(2).NumProcPerNode(4).Image("ghcr.io/converged-computing/metric-lammps:latest").
		Command("lmp", "-v", "x", "4", "-in", "in.reaxc.hns").Env("FLUX_VIEW_IMAGE", "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble").Obj()
	plan, err := Build(tj, runtimeOf(t, fluxRuntime))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	pod := plan.Jobs[0].Spec.Template.Spec
	c := trainerContainer(plan.Jobs[0])
	if diff := cmp.Diff([]string{"/bin/bash", "/etc/flux-config/entrypoint.sh", "lmp -v x 4 -in in.reaxc.hns"}, c.Command); diff != "" || c.Args != nil {
		t.Errorf("command (-want +got):\n%s\nargs %v, want none", diff, c.Args)
	}
	wantMounts := map[string]string{"flux-install": "/mnt/flux", "spack-install": "/opt/software", "lammps-flux-flux-entrypoint": "/etc/flux-config", "flux-curve": "/curve", "shared-memory": "/dev/shm"}
	if diff := cmp.Diff(wantMounts, mountsOf(c)); diff != "" {
		t.Errorf("node mounts (-want +got):\n%s", diff)
	}
	if len(pod.InitContainers) != 1 || pod.InitContainers[0].Name != "flux-installer" || pod.InitContainers[0].Image != "ghcr.io/converged-computing/flux-view-ubuntu:tag-noble" {
		t.Fatalf("init containers %v, want flux-installer of the TrainJob's view image", pod.InitContainers)
	}
	volumes := map[string]corev1.VolumeSource{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v.VolumeSource
	}
	if v := volumes["flux-curve"].Secret; v == nil || v.SecretName != "lammps-flux-flux-curve" || *v.DefaultMode != 0o400 {
		t.Errorf("curve volume %+v", volumes["flux-curve"])
	}
	if v := volumes["shared-memory"].EmptyDir; v == nil || v.Medium != corev1.StorageMediumMemory {
		t.Errorf("shared memory volume %+v", volumes["shared-memory"])
	}

	if len(plan.ConfigMaps) != 1 {
		t.Fatalf("ConfigMaps %v", plan.ConfigMaps)
	}
	scripts := plan.ConfigMaps[0].Data
	for _, want := range []string{"FLUX_HOSTS='lammps-flux-node-0-[0-1]'", `{ host = "lammps-flux-node-0-[0-1]" }`, `default_connect = "tcp://%h.lammps-flux.hpc.svc.cluster.local:%p"`, `queue-policy = "fcfs"`} {
		if !strings.Contains(scripts["init.sh"], want) {
			t.Errorf("init.sh lacks %s:\n%s", want, scripts["init.sh"])
		}
	}
	for _, want := range []string{"FLUX_MAIN_HOST='lammps-flux-node-0-0'", "FLUX_RESOURCES='--cores=0-3'", "FLUX_RUN_FLAGS='-N 2 -n 8'"} {
		if !strings.Contains(scripts["entrypoint.sh"], want) {
			t.Errorf("entrypoint.sh lacks %s", want)
		}
	}
	for name, script := range scripts {
		cmd := exec.Command("bash", "-n")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s is not valid bash: %v\n%s", name, err, out)
		}
	}

	if len(plan.Secrets) != 1 || plan.Secrets[0].Secret.Name != "lammps-flux-flux-curve" {
		t.Fatalf("Secrets %+v", plan.Secrets)
	}
	keys := map[string][]byte{}
	for range 2 {
		data, err := plan.Secrets[0].Generate()
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`public-key = "(.{40})"\n    secret-key = "(.{40})"`).FindStringSubmatch(string(data["curve.cert"]))
		if m == nil {
			t.Fatalf("curve.cert:\n%s", data["curve.cert"])
		}
		priv, err := ecdh.X25519().NewPrivateKey(z85Decode(t, m[2]))
		if err != nil {
			t.Fatal(err)
		}
		if !priv.PublicKey().Equal(mustPublic(t, z85Decode(t, m[1]))) {
			t.Error("the public key is not the secret key's")
		}
		keys[m[2]] = data["curve.cert"]
	}
	if len(keys) != 2 {
		t.Error("two certificates alike: each must come from the random source")
	}
}

func mustPublic(t *testing.T, b []byte) *ecdh.PublicKey {
	t.Helper()
	k, err := ecdh.X25519().NewPublicKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestFluxGPUs(t *testing.T) {
	tj := utiltesting.MakeTrainJob("f", "ns").NumNodes(3).Resources(corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}).Obj()
	plan, err := Build(tj, runtimeOf(t, fluxRuntime))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	for _, want := range []string{"FLUX_RESOURCES='--cores=0 --gpu=0-1'", "FLUX_RUN_FLAGS='-N 3 -n 3 -g 2'"} {
		if !strings.Contains(plan.ConfigMaps[0].Data["entrypoint.sh"], want) {
			t.Errorf("entrypoint.sh lacks %s", want)
		}
	}
}

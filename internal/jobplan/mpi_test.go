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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// runtimeOf decodes a ClusterTrainingRuntime written as YAML, as a user
// applies it.
func runtimeOf(t *testing.T, doc string) Runtime {
	t.Helper()
	var rt trainer.ClusterTrainingRuntime
	if err := yaml.UnmarshalStrict([]byte(doc), &rt); err != nil {
		t.Fatal(err)
	}
	return Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: rt.Name, Spec: &rt.Spec}
}

// deepSpeedRuntime has the shape of Kubeflow v2.3's deepspeed-distributed
// runtime (mlx-distributed differs in its image only), with the defaults
// the API server gives.
const deepSpeedRuntime = `
metadata:
  name: deepspeed-distributed
spec:
  mlPolicy:
    numNodes: 1
    mpi:
      numProcPerNode: 1
      mpiImplementation: OpenMPI
      sshAuthMountPath: /home/mpiuser/.ssh
      runLauncherAsNode: true
  template:
    spec:
      network:
        publishNotReadyAddresses: true
      successPolicy:
        operator: All
        targetReplicatedJobs: [launcher]
      replicatedJobs:
        - name: node
          template:
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: ghcr.io/kubeflow/trainer/deepspeed-runtime
                      command: [/usr/sbin/sshd]
                      args: [-De, -f, /home/mpiuser/.sshd_config]
        - name: launcher
          dependsOn:
            - name: node
              status: Ready
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: ghcr.io/kubeflow/trainer/deepspeed-runtime
`

// jobsByStep returns plan's Jobs by the name of their replicated Job.
func jobsByStep(plan *Plan) map[string]*batchv1.Job {
	out := map[string]*batchv1.Job{}
	for _, j := range plan.Jobs {
		out[j.Labels[trainer.ReplicatedJobNameLabel]] = j
	}
	return out
}

func mountsOf(c *corev1.Container) map[string]string {
	out := map[string]string{}
	for _, m := range c.VolumeMounts {
		out[m.Name] = m.MountPath
	}
	return out
}

func envOf(c *corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
		if e.ValueFrom != nil {
			out[e.Name] = "valueFrom"
		}
	}
	return out
}

func TestMPIDeepSpeed(t *testing.T) {
	gpus := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}
	tj := utiltesting.MakeTrainJob("ds", "ns").NumNodes(3).Image("my/deepspeed:1").
		Command("mpirun", "python", "train.py").Env("EPOCHS", "2").Resources(gpus).Obj()
	plan, err := Build(tj, runtimeOf(t, deepSpeedRuntime))
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	jobs := jobsByStep(plan)
	node, launcher := jobs["node"], jobs["launcher"]
	if got := []int32{*node.Spec.Parallelism, *node.Spec.Completions, *launcher.Spec.Parallelism, *launcher.Spec.Completions}; !cmp.Equal(got, []int32{2, 2, 1, 1}) {
		t.Errorf("node parallelism, completions, launcher parallelism, completions = %v; want 2 nodes and the launcher, 3 in all", got)
	}

	nodeC, launcherC := trainerContainer(node), trainerContainer(launcher)
	if nodeC.Image != "ghcr.io/kubeflow/trainer/deepspeed-runtime" || !cmp.Equal(nodeC.Command, []string{"/usr/sbin/sshd"}) {
		t.Errorf("node image %s command %v: want the runtime's sshd, not the TrainJob's", nodeC.Image, nodeC.Command)
	}
	if launcherC.Image != "my/deepspeed:1" || !cmp.Equal(launcherC.Command, []string{"mpirun", "python", "train.py"}) {
		t.Errorf("launcher image %s command %v: want the TrainJob's", launcherC.Image, launcherC.Command)
	}
	for name, c := range map[string]*corev1.Container{"node": nodeC, "launcher": launcherC} {
		if q := c.Resources.Limits["nvidia.com/gpu"]; q.Value() != 2 {
			t.Errorf("%s GPUs = %v, want the TrainJob's 2", name, c.Resources.Limits)
		}
		if envOf(c)["EPOCHS"] != "2" {
			t.Errorf("%s env %v, want the TrainJob's EPOCHS", name, c.Env)
		}
		if got := mountsOf(c)["mpi-ssh-auth"]; got != "/home/mpiuser/.ssh" {
			t.Errorf("%s mounts the SSH key at %q, want /home/mpiuser/.ssh", name, got)
		}
	}
	if _, ok := mountsOf(nodeC)["mpi-hostfile"]; ok {
		t.Error("a node mounts the hostfile; only the launcher runs mpirun")
	}
	if got := mountsOf(launcherC)["mpi-hostfile"]; got != "/etc/mpi" {
		t.Errorf("launcher mounts the hostfile at %q, want /etc/mpi", got)
	}
	wantEnv := map[string]string{
		"EPOCHS":                            "2",
		"OMPI_MCA_orte_default_hostfile":    "/etc/mpi/hostfile",
		"OMPI_MCA_orte_keep_fqdn_hostnames": "true",
		"OMPI_MCA_orte_set_default_slots":   "2",
		"OMPI_MCA_plm_rsh_args":             "-o ConnectionAttempts=10",
	}
	if diff := cmp.Diff(wantEnv, envOf(launcherC)); diff != "" {
		t.Errorf("launcher env (-want +got):\n%s", diff)
	}

	var sshVolume *corev1.SecretVolumeSource
	for _, v := range launcher.Spec.Template.Spec.Volumes {
		if v.Name == "mpi-ssh-auth" {
			sshVolume = v.Secret
		}
	}
	if sshVolume == nil || sshVolume.SecretName != "ds-mpi-ssh-auth" || *sshVolume.DefaultMode != 0o400 {
		t.Fatalf("launcher SSH volume %+v, want Secret ds-mpi-ssh-auth, mode 0400", sshVolume)
	}
	files := map[string]string{}
	for _, item := range sshVolume.Items {
		files[item.Path] = item.Key
		if mode := *item.Mode; item.Path == "id_rsa" && mode != 0o640 || item.Path != "id_rsa" && mode != 0o644 {
			t.Errorf("%s mode %o", item.Path, mode)
		}
	}
	if diff := cmp.Diff(map[string]string{"id_rsa": "ssh-privatekey", "id_rsa.pub": "ssh-publickey", "authorized_keys": "ssh-publickey"}, files); diff != "" {
		t.Errorf("SSH files (-want +got):\n%s", diff)
	}

	if len(plan.ConfigMaps) != 1 || plan.ConfigMaps[0].Name != "ds-mpi-hostfile" {
		t.Fatalf("ConfigMaps %v, want ds-mpi-hostfile", plan.ConfigMaps)
	}
	want := "ds-node-0-0.ds slots=2\nds-node-0-1.ds slots=2\nds-launcher-0-0.ds slots=2\n"
	if got := plan.ConfigMaps[0].Data["hostfile"]; got != want {
		t.Errorf("hostfile:\n%s\nwant (nodes, then the launcher as a node, 2 GPUs each):\n%s", got, want)
	}

	if len(plan.Secrets) != 1 || plan.Secrets[0].Secret.Name != "ds-mpi-ssh-auth" || plan.Secrets[0].Secret.Type != corev1.SecretTypeSSHAuth || !ptr.Deref(plan.Secrets[0].Secret.Immutable, false) {
		t.Fatalf("Secrets %+v, want the immutable ssh-auth Secret ds-mpi-ssh-auth", plan.Secrets)
	}
	for _, meta := range []metav1.ObjectMeta{plan.ConfigMaps[0].ObjectMeta, plan.Secrets[0].Secret.ObjectMeta} {
		if len(meta.OwnerReferences) != 1 || !ptr.Deref(meta.OwnerReferences[0].Controller, false) || meta.OwnerReferences[0].Name != "ds" {
			t.Errorf("%s owners %v, want the TrainJob as controller", meta.Name, meta.OwnerReferences)
		}
	}
	data, err := plan.Secrets[0].Generate()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(data["ssh-privatekey"])
	if err != nil {
		t.Fatalf("the private key does not parse as sshd reads it: %v", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(data["ssh-publickey"])
	if err != nil {
		t.Fatalf("the public key is not an authorized_keys line: %v", err)
	}
	if !cmp.Equal(pub.Marshal(), signer.PublicKey().Marshal()) {
		t.Error("the public key is not the private key's")
	}
	again, _ := plan.Secrets[0].Generate()
	if string(again["ssh-privatekey"]) == string(data["ssh-privatekey"]) {
		t.Error("two keys made alike: each must come from the random source")
	}
}

func TestMPIShapes(t *testing.T) {
	withoutLauncherAsNode := strings.Replace(deepSpeedRuntime, "runLauncherAsNode: true", "runLauncherAsNode: false", 1)
	// The launcher alone: the node replicated Job and the dependency on
	// it cut out.
	head, rest, _ := strings.Cut(deepSpeedRuntime, "        - name: node\n")
	_, launcherJob, _ := strings.Cut(rest, "        - name: launcher\n")
	launcherOnly := head + "        - name: launcher\n" + strings.Replace(launcherJob, "          dependsOn:\n            - name: node\n              status: Ready\n", "", 1)
	cases := map[string]struct {
		runtime  string
		trainJob *trainer.TrainJob
		hostfile string
		err      string
	}{
		"one node: the launcher and one node, as Kubeflow runs it": {
			runtime:  deepSpeedRuntime,
			trainJob: utiltesting.MakeTrainJob("a", "ns").Obj(),
			hostfile: "a-node-0-0.a slots=1\na-launcher-0-0.a slots=1\n",
		},
		"numProcPerNode of the TrainJob is the slots": {
			runtime:  deepSpeedRuntime,
			trainJob: utiltesting.MakeTrainJob("a", "ns").NumNodes(2).NumProcPerNode(4).Obj(),
			hostfile: "a-node-0-0.a slots=4\na-launcher-0-0.a slots=4\n",
		},
		"without runLauncherAsNode, numNodes nodes and the launcher apart": {
			runtime:  withoutLauncherAsNode,
			trainJob: utiltesting.MakeTrainJob("a", "ns").NumNodes(2).Obj(),
			hostfile: "a-node-0-0.a slots=1\na-node-0-1.a slots=1\n",
		},
		"the launcher alone as the one node": {
			runtime:  launcherOnly,
			trainJob: utiltesting.MakeTrainJob("a", "ns").Obj(),
			hostfile: "a-launcher-0-0.a slots=1\n",
		},
		"several nodes need the node replicated Job": {
			runtime:  launcherOnly,
			trainJob: utiltesting.MakeTrainJob("a", "ns").NumNodes(2).Obj(),
			err:      `the mpi policy needs a replicated Job named "node" besides the launcher "launcher" for its 2 nodes`,
		},
		"the TrainJob may not set OpenMPI's environment": {
			runtime:  deepSpeedRuntime,
			trainJob: utiltesting.MakeTrainJob("a", "ns").Env("OMPI_MCA_orte_default_hostfile", "/tmp/h").Obj(),
			err:      `spec.trainer.env[0].name: Forbidden: OMPI_MCA_orte_default_hostfile is set by the mpi runtime ClusterTrainingRuntime/deepspeed-distributed`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan, err := Build(tc.trainJob, runtimeOf(t, tc.runtime))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Build error = %v, want %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if got := plan.ConfigMaps[0].Data["hostfile"]; got != tc.hostfile {
				t.Errorf("hostfile:\n%s\nwant:\n%s", got, tc.hostfile)
			}
		})
	}
}

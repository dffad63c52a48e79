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
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
)

// The ML policies on the runtimes the dev cluster installs (config/runtimes,
// of the shapes Kubeflow Trainer v2.3 ships), each checked as its training
// program sees it: the environment, files and host names of the running
// Pods.

// hostOf is a Pod's DNS name: <hostname>.<subdomain>.
func hostOf(p *corev1.Pod) string {
	return p.Spec.Hostname + "." + p.Spec.Subdomain
}

// nodeContainer returns the container node of p, where the ML policies
// set up the training program.
func nodeContainer(t *testing.T, p *corev1.Pod) *corev1.Container {
	t.Helper()
	i := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == trainer.TrainerContainerName })
	if i < 0 {
		t.Fatalf("Pod %s has no container node", p.Name)
	}
	return &p.Spec.Containers[i]
}

// stepOf is the replicated Job of a Pod.
func stepOf(p *corev1.Pod) string {
	return p.Labels[trainer.ReplicatedJobNameLabel]
}

// completionIndex is a Pod's index in its Job, what a variable read from
// the completion index annotation holds.
func completionIndex(p *corev1.Pod) string {
	return p.Annotations["batch.kubernetes.io/job-completion-index"]
}

// resolvedEnv is the environment of container c of Pod p as its process
// sees it, values and values read from the Pod's annotations, but for the
// Job controller's JOB_COMPLETION_INDEX and the status server's variables
// (TestProgressReportedByAPodShowsEverywhere tests those): what the ML
// policy sets.
func resolvedEnv(t *testing.T, p *corev1.Pod, c *corev1.Container) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.Name == jobplan.StatusServerURLEnv || e.Name == jobplan.StatusServerCACertEnv || e.Name == jobplan.StatusServerTokenEnv:
		case e.ValueFrom == nil:
			out[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && strings.HasPrefix(e.ValueFrom.FieldRef.FieldPath, "metadata.annotations['"):
			key := strings.TrimSuffix(strings.TrimPrefix(e.ValueFrom.FieldRef.FieldPath, "metadata.annotations['"), "']")
			out[e.Name] = p.Annotations[key]
		case e.Name == "JOB_COMPLETION_INDEX":
			// The Job controller's own, from the Pod's label: not the
			// policy's.
		default:
			t.Fatalf("Pod %s: variable %s from %v", p.Name, e.Name, e.ValueFrom)
		}
	}
	return out
}

// endpointHosts are the host names the TrainJob's headless Service
// publishes, as DNS answers them.
func endpointHosts(ns, service string) ([]string, error) {
	var list discoveryv1.EndpointSliceList
	if err := cluster.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
		return nil, err
	}
	var hosts []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Hostname != nil {
				hosts = append(hosts, *e.Hostname+"."+service)
			}
		}
	}
	sort.Strings(hosts)
	return hosts, nil
}

// waitPublished waits until the Service publishes each host.
func waitPublished(t *testing.T, ns, service string, hosts []string) {
	t.Helper()
	want := slices.Sorted(slices.Values(hosts))
	cluster.Eventually(t, fmt.Sprintf("Service %s to publish %v", service, want), func() error {
		got, err := endpointHosts(ns, service)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("publishes %v", got)
		}
		return nil
	})
}

// DeepSpeed and MLX: MPI over SSH. The launcher starts once the nodes'
// sshd is Ready; mpirun finds every node in the hostfile, by a DNS name
// the Service publishes, with the TrainJob's GPUs as slots; each node
// container holds the TrainJob's own key pair, as sshd reads it; the
// TrainJob is Complete when the launcher is, and the nodes stop then; the
// key and the hostfile go with the TrainJob.
func TestMPIRuntimes(t *testing.T) {
	for _, runtime := range []string{"deepspeed-distributed", "mlx-distributed"} {
		t.Run(runtime, func(t *testing.T) {
			ns := cluster.NewNamespace(t)
			name := strings.Split(runtime, "-")[0]
			cluster.ApplyYAML(t, ns, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: %[1]s
spec:
  runtimeRef:
    name: %[2]s
  trainer:
    numNodes: 3
    command: [mpirun, --hostfile, /etc/mpi/hostfile, python3, /home/mpiuser/train.py]
    env:
      - name: EPOCHS
        value: "2"
    resourcesPerNode:
      limits:
        nvidia.com/gpu: 2
  runtimePatches:
    - manager: example.com/e2e
      trainingRuntimeSpec:
        template:
          spec:
            replicatedJobs:
              - name: launcher
                template:
                  spec:
                    template:
                      metadata:
                        annotations: {%[3]s: 6s}
`, name, runtime, runFor))

			running := cluster.WaitPodsRunning(t, ns, name, 3)
			var nodes []*corev1.Pod
			var launcher *corev1.Pod
			for i := range running {
				if stepOf(&running[i]) == "launcher" {
					launcher = &running[i]
				} else {
					nodes = append(nodes, &running[i])
				}
			}
			if launcher == nil || len(nodes) != 2 {
				t.Fatalf("running: %d nodes and launcher %v; want 2 nodes and the launcher, 3 in all", len(nodes), launcher)
			}

			// The launcher after the nodes were Ready.
			launcherJob := cluster.JobsOf(t, ns, name)[name+"-launcher-0"]
			for _, n := range nodes {
				var readyAt time.Time
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						readyAt = c.LastTransitionTime.Time
					}
				}
				if readyAt.IsZero() || launcherJob.CreationTimestamp.Time.Before(readyAt.Truncate(time.Second)) {
					t.Errorf("launcher Job created at %s, node %s Ready at %v: want the launcher after", launcherJob.CreationTimestamp, n.Name, readyAt)
				}
			}

			// The hostfile: every node, then the launcher, by the names
			// the Service publishes, 2 slots (GPUs) each.
			var hostfile corev1.ConfigMap
			if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-mpi-hostfile"}, &hostfile); err != nil {
				t.Fatal(err)
			}
			var want, hosts []string
			for _, p := range append(nodes, launcher) {
				want = append(want, hostOf(p)+" slots=2")
				hosts = append(hosts, hostOf(p))
			}
			sort.Strings(want[:len(nodes)])
			if got := strings.Split(strings.TrimSpace(hostfile.Data["hostfile"]), "\n"); !slices.Equal(got, want) {
				t.Errorf("hostfile %q, want %q", got, want)
			}
			waitPublished(t, ns, name, hosts)

			// mpirun's environment and the hostfile, on the launcher.
			lc := nodeContainer(t, launcher)
			wantEnv := map[string]string{
				"EPOCHS":                            "2",
				"OMPI_MCA_orte_default_hostfile":    "/etc/mpi/hostfile",
				"OMPI_MCA_orte_keep_fqdn_hostnames": "true",
				"OMPI_MCA_orte_set_default_slots":   "2",
				"OMPI_MCA_plm_rsh_args":             "-o ConnectionAttempts=10",
			}
			if got := resolvedEnv(t, launcher, lc); !maps.Equal(got, wantEnv) {
				t.Errorf("launcher env %v, want %v", got, wantEnv)
			}
			if !mountsAt(launcher, lc, "/etc/mpi", func(v corev1.Volume) bool {
				return v.ConfigMap != nil && v.ConfigMap.Name == hostfile.Name && len(v.ConfigMap.Items) == 1 && v.ConfigMap.Items[0].Path == "hostfile"
			}) {
				t.Errorf("the launcher does not mount the hostfile at /etc/mpi/hostfile: %v, %v", launcher.Spec.Volumes, lc.VolumeMounts)
			}

			// The key pair, in every node container.
			var secret corev1.Secret
			if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + "-mpi-ssh-auth"}, &secret); err != nil {
				t.Fatal(err)
			}
			signer, err := ssh.ParsePrivateKey(secret.Data["ssh-privatekey"])
			if err != nil {
				t.Fatalf("the private key does not parse: %v", err)
			}
			pub, _, _, _, err := ssh.ParseAuthorizedKey(secret.Data["ssh-publickey"])
			if err != nil || string(pub.Marshal()) != string(signer.PublicKey().Marshal()) {
				t.Errorf("the authorized key is not the private key's (err %v)", err)
			}
			if secret.Type != corev1.SecretTypeSSHAuth || !ptr.Deref(secret.Immutable, false) {
				t.Errorf("Secret type %s immutable %v, want an immutable %s", secret.Type, secret.Immutable, corev1.SecretTypeSSHAuth)
			}
			for _, p := range append(nodes, launcher) {
				c := nodeContainer(t, p)
				if !mountsAt(p, c, "/home/mpiuser/.ssh", func(v corev1.Volume) bool {
					if v.Secret == nil || v.Secret.SecretName != secret.Name {
						return false
					}
					files := map[string]string{}
					for _, item := range v.Secret.Items {
						files[item.Path] = item.Key
					}
					return maps.Equal(files, map[string]string{"id_rsa": "ssh-privatekey", "id_rsa.pub": "ssh-publickey", "authorized_keys": "ssh-publickey"})
				}) {
					t.Errorf("Pod %s does not hold the key pair in /home/mpiuser/.ssh: %v, %v", p.Name, p.Spec.Volumes, c.VolumeMounts)
				}
				if q := c.Resources.Limits["nvidia.com/gpu"]; !q.Equal(resource.MustParse("2")) {
					t.Errorf("Pod %s GPUs %v, want the TrainJob's 2", p.Name, c.Resources.Limits)
				}
			}

			tj := cluster.WaitCondition(t, ns, name, trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
			cluster.WaitNoPods(t, timeout, ns, name)
			for _, obj := range []client.Object{&hostfile, &secret} {
				if !metav1.IsControlledBy(obj, tj) {
					t.Errorf("%s is not the TrainJob's: %v", obj.GetName(), obj.GetOwnerReferences())
				}
			}
			if err := cluster.Client.Delete(context.Background(), tj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
				t.Fatal(err)
			}
			cluster.Eventually(t, "the key and the hostfile to go with the TrainJob", func() error {
				var left []string
				for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}} {
					key := client.ObjectKey{Namespace: ns, Name: name + "-mpi-hostfile"}
					if _, ok := obj.(*corev1.Secret); ok {
						key.Name = name + "-mpi-ssh-auth"
					}
					if err := cluster.Client.Get(context.Background(), key, obj); err == nil {
						left = append(left, key.Name)
					}
				}
				if len(left) > 0 {
					return fmt.Errorf("left: %v", left)
				}
				return nil
			})
		})
	}
}

// mountsAt reports whether container c of p mounts at path a volume of p
// that is.
func mountsAt(p *corev1.Pod, c *corev1.Container, path string, is func(corev1.Volume) bool) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		if i := slices.IndexFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name }); i >= 0 && is(p.Spec.Volumes[i]) {
			return true
		}
	}
	return false
}

// JAX and XGBoost: every node reads the number of processes (workers), its
// own rank and the address of node 0, which the Service publishes, and
// which listens on the trainer port.
func TestJAXAndXGBoostRuntimes(t *testing.T) {
	cases := []struct {
		runtime string
		env     func(rank, node0 string) map[string]string
	}{
		{"jax-distributed", func(rank, node0 string) map[string]string {
			return map[string]string{"JAX_NUM_PROCESSES": "3", "JAX_PROCESS_ID": rank, "JAX_COORDINATOR_ADDRESS": node0 + ":29500"}
		}},
		// One worker per GPU: 3 nodes of 2 GPUs.
		{"xgboost-distributed", func(rank, node0 string) map[string]string {
			return map[string]string{"DMLC_TRACKER_URI": node0, "DMLC_TRACKER_PORT": "29500", "DMLC_TASK_ID": rank, "DMLC_NUM_WORKER": "6"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.runtime, func(t *testing.T) {
			ns := cluster.NewNamespace(t)
			name := strings.Split(tc.runtime, "-")[0]
			cluster.ApplyYAML(t, ns, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: %[1]s
  annotations: {%[3]s: 6s}
spec:
  runtimeRef:
    name: %[2]s
  trainer:
    numNodes: 3
    command: [python3, train.py]
    resourcesPerNode:
      limits:
        nvidia.com/gpu: 2
`, name, tc.runtime, runFor))
			running := cluster.WaitPodsRunning(t, ns, name, 3)
			var node0 string
			var hosts []string
			for i := range running {
				hosts = append(hosts, hostOf(&running[i]))
				if completionIndex(&running[i]) == "0" {
					node0 = hostOf(&running[i])
				}
			}
			if node0 == "" {
				t.Fatalf("no Pod of completion index 0 among %d", len(running))
			}
			waitPublished(t, ns, name, hosts)
			ranks := map[string]bool{}
			for i := range running {
				p := &running[i]
				c := nodeContainer(t, p)
				rank := completionIndex(p)
				ranks[rank] = true
				if got, want := resolvedEnv(t, p, c), tc.env(rank, node0); !maps.Equal(got, want) {
					t.Errorf("Pod %s env %v, want %v", p.Name, got, want)
				}
				if !slices.ContainsFunc(c.Ports, func(port corev1.ContainerPort) bool { return port.ContainerPort == 29500 }) {
					t.Errorf("Pod %s ports %v, want 29500", p.Name, c.Ports)
				}
			}
			if len(ranks) != 3 {
				t.Errorf("ranks %v, want 0, 1 and 2", ranks)
			}
			cluster.WaitCondition(t, ns, name, trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
		})
	}
}

// torchtune on Kubeflow's llama3.2-1b runtime, as the Kubeflow SDK writes
// it: command tune run, LoRA args and one GPU. After the initializers, the
// trainer runs the single-device LoRA recipe with its config and the
// runtime's paths, and no rendezvous.
func TestTorchtuneRuntime(t *testing.T) {
	ns := cluster.NewNamespace(t)
	volumeFor(t, ns, "initializer-lora")
	cluster.ApplyYAML(t, ns, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: lora
  annotations: {%s: 4s}
spec:
  runtimeRef:
    name: torchtune-llama3.2-1b
  initializer:
    model:
      storageUri: hf://meta-llama/Llama-3.2-1B-Instruct
  trainer:
    command: [tune, run]
    args: [batch_size=2, "model.lora_attn_modules=[q_proj,v_proj]"]
    resourcesPerNode:
      limits:
        nvidia.com/gpu: 1
`, runFor))
	var trainerPod *corev1.Pod
	cluster.Eventually(t, "the trainer to run", func() error {
		for _, p := range cluster.ActivePods(t, ns, "lora") {
			if stepOf(&p) == "node" && p.Status.Phase == corev1.PodRunning {
				trainerPod = &p
				return nil
			}
		}
		return fmt.Errorf("not running yet")
	})
	c := nodeContainer(t, trainerPod)
	wantCommand := []string{"tune", "run", "lora_finetune_single_device", "--config", "llama3_2/1B_lora_single_device",
		"output_dir=/workspace/output", "tokenizer.path=/workspace/model/original/tokenizer.model", "checkpointer.checkpoint_dir=/workspace/model"}
	if !slices.Equal(c.Command, wantCommand) || !slices.Equal(c.Args, []string{"batch_size=2", "model.lora_attn_modules=[q_proj,v_proj]"}) {
		t.Errorf("trainer command %q args %q, want %q and the TrainJob's args", c.Command, c.Args, wantCommand)
	}
	wantEnv := map[string]string{"PET_NNODES": "1", "PET_NPROC_PER_NODE": "auto", "PET_NODE_RANK": "0"}
	if got := resolvedEnv(t, trainerPod, c); !maps.Equal(got, wantEnv) {
		t.Errorf("trainer env %v, want %v (no master address: torchtune's rendezvous is on its command line)", got, wantEnv)
	}
	cluster.WaitCondition(t, ns, "lora", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
}

// Flux, on Kubeflow v2.3's flux-distributed example runtime and its LAMMPS
// TrainJob: each node Pod installs Flux from the view image in an init
// container and runs the TrainJob's command through the Flux entrypoint;
// the host list names every node Pod as its host name, under the Service
// the brokers connect through; the brokers' certificate is the
// TrainJob's.
func TestFluxRuntime(t *testing.T) {
	ns := cluster.NewNamespace(t)
	cluster.ApplyYAML(t, "default", `
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: flux-distributed
  labels:
    trainer.kubeflow.org/framework: flux
spec:
  mlPolicy:
    numNodes: 1
    flux: {}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: ubuntu:jammy
`)
	t.Cleanup(func() {
		_, _ = cluster.Kubectl("delete", "clustertrainingruntime", "flux-distributed", "--ignore-not-found")
	})
	cluster.ApplyYAML(t, ns, fmt.Sprintf(`
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: lammps-flux
  annotations: {%s: 6s}
spec:
  runtimeRef:
    name: flux-distributed
  trainer:
    numNodes: 2
    numProcPerNode: 4
    image: ghcr.io/converged-computing/metric-lammps:latest
    command: ["lmp", "-v", "x", "4", "-v", "y", "4", "-v", "z", "4", "-in", "in.reaxc.hns", "-nocite"]
    env:
     - name: FLUX_VIEW_IMAGE
       value: ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy
`, runFor))
	running := cluster.WaitPodsRunning(t, ns, "lammps-flux", 2)
	var hostnames []string
	for i := range running {
		p := &running[i]
		hostnames = append(hostnames, p.Spec.Hostname)
		c := nodeContainer(t, p)
		if want := []string{"/bin/bash", "/etc/flux-config/entrypoint.sh", "lmp -v x 4 -v y 4 -v z 4 -in in.reaxc.hns -nocite"}; !slices.Equal(c.Command, want) {
			t.Errorf("Pod %s command %q, want %q", p.Name, c.Command, want)
		}
		if len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Image != "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy" {
			t.Errorf("Pod %s init containers %v, want flux-installer of the TrainJob's view image", p.Name, p.Spec.InitContainers)
		}
		if p.Spec.Subdomain != "lammps-flux" {
			t.Errorf("Pod %s subdomain %q", p.Name, p.Spec.Subdomain)
		}
	}
	sort.Strings(hostnames)
	if want := []string{"lammps-flux-node-0-0", "lammps-flux-node-0-1"}; !slices.Equal(hostnames, want) {
		t.Errorf("host names %v, want %v: what the host list lammps-flux-node-0-[0-1] names", hostnames, want)
	}
	var scripts corev1.ConfigMap
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "lammps-flux-flux-entrypoint"}, &scripts); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{ host = "lammps-flux-node-0-[0-1]" }`, fmt.Sprintf(`default_connect = "tcp://%%h.lammps-flux.%s.svc.cluster.local:%%p"`, ns)} {
		if !strings.Contains(scripts.Data["init.sh"], want) {
			t.Errorf("the broker configuration lacks %s", want)
		}
	}
	if !strings.Contains(scripts.Data["entrypoint.sh"], "FLUX_RUN_FLAGS='-N 2 -n 8'") {
		t.Error("the entrypoint does not run 8 tasks on 2 nodes")
	}
	var cert corev1.Secret
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "lammps-flux-flux-curve"}, &cert); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cert.Data["curve.cert"]), "secret-key = ") {
		t.Errorf("curve.cert:\n%s", cert.Data["curve.cert"])
	}
	waitPublished(t, ns, "lammps-flux", []string{"lammps-flux-node-0-0.lammps-flux", "lammps-flux-node-0-1.lammps-flux"})
	cluster.WaitCondition(t, ns, "lammps-flux", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
}

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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// What the MPI policy gives the launcher and the nodes, named as Kubeflow
// Trainer v2.3 names them: a training program, its mpirun and sshd find
// the same files in the same places.
const (
	// MPINodeStep is the replicated Job of the MPI nodes, which mpirun
	// reaches by SSH.
	MPINodeStep = "node"

	// The SSH key Secret <trainjob>-mpi-ssh-auth, and the files it
	// becomes in sshAuthMountPath.
	MPISSHAuthSecretSuffix = "-mpi-ssh-auth"
	mpiSSHAuthVolume       = "mpi-ssh-auth"
	mpiSSHPublicKey        = "ssh-publickey"
	mpiSSHPrivateKeyFile   = "id_rsa"
	mpiSSHPublicKeyFile    = "id_rsa.pub"
	mpiSSHAuthorizedKeys   = "authorized_keys"

	// The hostfile ConfigMap <trainjob>-mpi-hostfile, mounted in the
	// launcher at /etc/mpi/hostfile.
	MPIHostfileConfigMapSuffix = "-mpi-hostfile"
	MPIHostfileKey             = "hostfile"
	mpiHostfileVolume          = "mpi-hostfile"
	MPIHostfileDir             = "/etc/mpi"

	// OpenMPI's environment on the launcher.
	EnvOpenMPIHostfile      = "OMPI_MCA_orte_default_hostfile"
	EnvOpenMPIKeepFQDN      = "OMPI_MCA_orte_keep_fqdn_hostnames"
	EnvOpenMPIDefaultSlots  = "OMPI_MCA_orte_set_default_slots"
	EnvOpenMPIRSHArgs       = "OMPI_MCA_plm_rsh_args"
	openMPIRSHArgs          = "-o ConnectionAttempts=10"
	defaultSSHAuthMountPath = "/root/.ssh"
)

var mpiEnvNames = []string{EnvOpenMPIHostfile, EnvOpenMPIKeepFQDN, EnvOpenMPIDefaultSlots, EnvOpenMPIRSHArgs}

// The file modes of the SSH files, as Kubeflow mounts them: sshd refuses a
// private key others can read.
var (
	mpiSSHDefaultMode     int32 = 0o400
	mpiSSHPrivateKeyMode  int32 = 0o640
	mpiSSHPublicKeyMode   int32 = 0o644
	mpiHostfileMode       int32 = 0o444
	mpiSSHAuthSecretItems       = []corev1.KeyToPath{
		{Key: corev1.SSHAuthPrivateKey, Path: mpiSSHPrivateKeyFile, Mode: &mpiSSHPrivateKeyMode},
		{Key: mpiSSHPublicKey, Path: mpiSSHPublicKeyFile, Mode: &mpiSSHPublicKeyMode},
		{Key: mpiSSHPublicKey, Path: mpiSSHAuthorizedKeys, Mode: &mpiSSHPublicKeyMode},
	}
)

// mpiPlugin is MPI training (mlPolicy.mpi) with OpenMPI, as Kubeflow Trainer
// v2.3 runs the DeepSpeed and MLX runtimes. The trainer step is the
// launcher, which runs mpirun; the replicated Job node holds the nodes,
// numNodes of them, or numNodes - 1 (at least 1) when the launcher is a node
// itself (runLauncherAsNode). Every node container of both gets the
// TrainJob's SSH key, made for it in the Secret <trainjob>-mpi-ssh-auth,
// and the launcher's gets the hostfile, <trainjob>-mpi-hostfile, listing
// each node's DNS name with its slots, and the OMPI_MCA_* environment that
// points mpirun at it. The TrainJob's env and resourcesPerNode go to the
// node containers of both; its image, command and args to the launcher's.
type mpiPlugin struct{}

func (mpiPlugin) Name() string { return "mpi" }

func (mpiPlugin) selected(spec *trainer.TrainingRuntimeSpec) bool {
	return spec.MLPolicy != nil && spec.MLPolicy.MPI != nil
}

func runLauncherAsNode(spec *trainer.TrainingRuntimeSpec) bool {
	return ptr.Deref(spec.MLPolicy.MPI.RunLauncherAsNode, false)
}

// Validate decides the Pods: the launcher is one, the nodes are the rest.
func (p mpiPlugin) Validate(in *Input) field.ErrorList {
	if !p.selected(in.Runtime.Spec) {
		return nil
	}
	if errs := checkFramework(in, p.Name()); len(errs) > 0 {
		return errs
	}
	nodes := in.NumNodes()
	if runLauncherAsNode(in.Runtime.Spec) {
		nodes = max(nodes-1, 1)
	}
	launcher := in.Runtime.Spec.Template.Spec.ReplicatedJobs[in.TrainerStep()].Name
	in.PodCounts = map[string]int32{launcher: 1, MPINodeStep: nodes}
	return nil
}

func (p mpiPlugin) Contribute(in *Input, plan *Plan) field.ErrorList {
	if !p.selected(in.Runtime.Spec) || in.Container == nil {
		return nil
	}
	t, rt, mpi := in.TrainJob.Spec.Trainer, in.Runtime, in.Runtime.Spec.MLPolicy.MPI
	var errs field.ErrorList
	if t != nil {
		errs = append(errs, reservedEnv(t.Env, mpiEnvNames, "mpi", rt)...)
	}
	if impl := ptr.Deref(mpi.MPIImplementation, ""); impl != "" && impl != trainer.MPIImplementationOpenMPI {
		errs = append(errs, field.NotSupported(rt.path().Child("mlPolicy", "mpi", "mpiImplementation"),
			impl, []string{string(trainer.MPIImplementationOpenMPI)}))
	}
	launcher := in.Trainer.Labels[trainer.ReplicatedJobNameLabel]
	asNode := runLauncherAsNode(rt.Spec)
	var nodeJobs []*batchv1.Job
	for _, job := range plan.Jobs {
		if job.Labels[trainer.ReplicatedJobNameLabel] == MPINodeStep && launcher != MPINodeStep {
			nodeJobs = append(nodeJobs, job)
		}
	}
	if len(nodeJobs) == 0 && (!asNode || in.NumNodes() > 1) {
		errs = append(errs, field.Required(rt.path().Child("template", "spec", "replicatedJobs"), fmt.Sprintf(
			"the mpi policy needs a replicated Job named %q besides the launcher %q for its %d nodes", MPINodeStep, launcher, in.NumNodes())))
	}
	var nodeContainers []*corev1.Container
	for _, job := range nodeJobs {
		c := trainerContainer(job)
		if c == nil {
			errs = append(errs, field.Required(rt.path().Child("template", "spec", "replicatedJobs").Key(MPINodeStep), fmt.Sprintf(
				"the mpi policy needs a container named %q in replicated Job %q to receive the SSH key", trainer.TrainerContainerName, MPINodeStep)))
			break
		}
		nodeContainers = append(nodeContainers, c)
	}
	if len(errs) > 0 {
		return errs
	}

	slots := mpiSlots(in)
	mountPath := ptr.Deref(mpi.SSHAuthMountPath, defaultSSHAuthMountPath)
	secretName := in.TrainJob.Name + MPISSHAuthSecretSuffix
	hostfileName := in.TrainJob.Name + MPIHostfileConfigMapSuffix
	for i, job := range append(nodeJobs, in.Trainer) {
		pod := &job.Spec.Template.Spec
		pod.Volumes = upsertVolume(pod.Volumes, corev1.Volume{Name: mpiSSHAuthVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secretName, DefaultMode: &mpiSSHDefaultMode, Items: slices.Clone(mpiSSHAuthSecretItems),
		}}})
		c := in.Container
		if i < len(nodeJobs) {
			c = nodeContainers[i]
			// The nodes run the TrainJob's training too: its env and
			// resources are theirs.
			if t != nil {
				c.Env = mergeEnv(c.Env, t.Env)
				if t.ResourcesPerNode != nil {
					c.Resources = mergeResources(c.Resources, *t.ResourcesPerNode)
				}
			}
		}
		c.VolumeMounts = upsertMount(c.VolumeMounts, corev1.VolumeMount{Name: mpiSSHAuthVolume, MountPath: mountPath})
	}
	launcherPod := &in.Trainer.Spec.Template.Spec
	launcherPod.Volumes = upsertVolume(launcherPod.Volumes, corev1.Volume{Name: mpiHostfileVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: hostfileName},
		Items:                []corev1.KeyToPath{{Key: MPIHostfileKey, Path: MPIHostfileKey, Mode: &mpiHostfileMode}},
	}}})
	in.Container.VolumeMounts = upsertMount(in.Container.VolumeMounts, corev1.VolumeMount{Name: mpiHostfileVolume, MountPath: MPIHostfileDir})
	in.Container.Env = mergeEnv(in.Container.Env, []corev1.EnvVar{
		{Name: EnvOpenMPIHostfile, Value: MPIHostfileDir + "/" + MPIHostfileKey},
		{Name: EnvOpenMPIKeepFQDN, Value: "true"},
		{Name: EnvOpenMPIDefaultSlots, Value: strconv.Itoa(int(slots))},
		{Name: EnvOpenMPIRSHArgs, Value: openMPIRSHArgs},
	})

	var hosts strings.Builder
	for _, job := range plan.Jobs {
		if step := job.Labels[trainer.ReplicatedJobNameLabel]; step != MPINodeStep && (!asNode || job != in.Trainer) {
			continue
		}
		for pod := range ptr.Deref(job.Spec.Completions, 1) {
			fmt.Fprintf(&hosts, "%s-%d.%s slots=%d\n", job.Name, pod, in.Subdomain(), slots)
		}
	}
	plan.ConfigMaps = append(plan.ConfigMaps, &corev1.ConfigMap{
		ObjectMeta: childMeta(in.TrainJob, hostfileName),
		Data:       map[string]string{MPIHostfileKey: hosts.String()},
	})
	plan.Secrets = append(plan.Secrets, GeneratedSecret{
		Secret: &corev1.Secret{
			ObjectMeta: childMeta(in.TrainJob, secretName),
			Type:       corev1.SecretTypeSSHAuth,
			Immutable:  ptr.To(true),
		},
		Generate: newSSHKey,
	})
	return nil
}

// mpiSlots is the number of processes per node: the TrainJob's
// numProcPerNode, else the runtime's; when that is 1, the number of GPUs
// per node if there are more, as Kubeflow Trainer v2.3 counts them.
func mpiSlots(in *Input) int32 {
	t := in.TrainJob.Spec.Trainer
	if t != nil && t.NumProcPerNode != nil {
		return *t.NumProcPerNode
	}
	slots := ptr.Deref(in.Runtime.Spec.MLPolicy.MPI.NumProcPerNode, 1)
	if slots != 1 {
		return slots
	}
	if gpus := gpusPerNode(resourcesPerNode(in.TrainJob, in.Container)); gpus > 1 {
		return int32(gpus)
	}
	return slots
}

// newSSHKey makes the data of an MPI SSH key Secret: a new ECDSA P-521 key
// from the system's secure random source, in PEM, and its public key in
// authorized_keys form.
func newSSHKey() (map[string][]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	pub, err := ssh.NewPublicKey(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		corev1.SSHAuthPrivateKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
		mpiSSHPublicKey:          ssh.MarshalAuthorizedKey(pub),
	}, nil
}

// childMeta is the metadata of a child of the TrainJob other than its Jobs:
// named, labelled with the TrainJob's name and controlled by it.
func childMeta(trainJob *trainer.TrainJob, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       trainJob.Namespace,
		Labels:          map[string]string{trainer.TrainJobNameLabel: trainJob.Name},
		OwnerReferences: []metav1.OwnerReference{ownerRef(trainJob)},
	}
}

// upsertVolume returns volumes with v in place of the volume of its name,
// or added.
func upsertVolume(volumes []corev1.Volume, v corev1.Volume) []corev1.Volume {
	if i := slices.IndexFunc(volumes, func(o corev1.Volume) bool { return o.Name == v.Name }); i >= 0 {
		volumes[i] = v
		return volumes
	}
	return append(volumes, v)
}

// upsertMount returns mounts with m in place of the mount of its volume, or
// added.
func upsertMount(mounts []corev1.VolumeMount, m corev1.VolumeMount) []corev1.VolumeMount {
	if i := slices.IndexFunc(mounts, func(o corev1.VolumeMount) bool { return o.Name == m.Name }); i >= 0 {
		mounts[i] = m
		return mounts
	}
	return append(mounts, m)
}

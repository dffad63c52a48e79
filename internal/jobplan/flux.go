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
	"crypto/rand"
	_ "embed"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// What the flux policy adds to the node Pods, named as Kubeflow Trainer
// v2.3 names it.
const (
	FluxEntrypointConfigMapSuffix = "-flux-entrypoint"
	FluxCurveSecretSuffix         = "-flux-curve"
	FluxCurveKey                  = "curve.cert"
	fluxInstallerContainer        = "flux-installer"
	fluxInstallVolume             = "flux-install"
	fluxInstallPath               = "/mnt/flux"
	fluxConfigPath                = "/etc/flux-config"
	fluxCurveVolume               = "flux-curve"
	fluxCurvePath                 = "/curve"
	fluxMemoryVolume              = "shared-memory"
	fluxMemoryPath                = "/dev/shm"
	fluxSoftwareVolume            = "spack-install"
	fluxSoftwarePath              = "/opt/software"
)

// fluxSettings are the variables of the trainer container that configure
// Flux, with their defaults: the image of the Flux view (its OS must match
// the trainer's), the network device the brokers bind, and the queue
// policy of Fluxion.
var fluxSettings = map[string]string{
	"FLUX_VIEW_IMAGE":     "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
	"FLUX_NETWORK_DEVICE": "eth0",
	"FLUX_QUEUE_POLICY":   "fcfs",
}

var (
	//go:embed flux/init.sh
	fluxInitScript string
	//go:embed flux/entrypoint.sh
	fluxEntrypointScript string
)

// fluxPlugin is the Flux framework (mlPolicy.flux), as Kubeflow Trainer
// v2.3 runs it: an init container copies a Flux install (a "view" image)
// into each node Pod, every node runs a Flux broker, and node 0 runs the
// TrainJob's command with flux run over all the nodes. The brokers
// authenticate each other with a CURVE certificate made for the TrainJob
// from the system's secure random source (Kubeflow derives it from the
// TrainJob's UID, which anyone who can read the TrainJob knows).
type fluxPlugin struct{}

func (fluxPlugin) Name() string { return "flux" }

func (fluxPlugin) selected(spec *trainer.TrainingRuntimeSpec) bool {
	return spec.MLPolicy != nil && spec.MLPolicy.Flux != nil
}

func (p fluxPlugin) Validate(in *Input) field.ErrorList {
	if !p.selected(in.Runtime.Spec) {
		return nil
	}
	return checkFramework(in, p.Name())
}

func (p fluxPlugin) Contribute(in *Input, plan *Plan) field.ErrorList {
	if !p.selected(in.Runtime.Spec) || in.Container == nil {
		return nil
	}
	tj, c := in.TrainJob, in.Container
	for i := range in.Trainer.Spec.Template.Spec.InitContainers {
		if in.Trainer.Spec.Template.Spec.InitContainers[i].Name == fluxInstallerContainer {
			return field.ErrorList{field.Invalid(in.TrainerPath().Child("template", "spec", "template", "spec", "initContainers").Index(i).Child("name"),
				fluxInstallerContainer, "the init container flux-installer is the flux policy's own")}
		}
	}
	settings := map[string]string{}
	for name, def := range fluxSettings {
		settings[name] = def
		if i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name && e.ValueFrom == nil }); i >= 0 {
			settings[name] = c.Env[i].Value
		}
	}
	tasks := ptr.Deref(in.Runtime.Spec.MLPolicy.Flux.NumProcPerNode, 1)
	if t := tj.Spec.Trainer; t != nil && t.NumProcPerNode != nil {
		tasks = *t.NumProcPerNode
	}
	gpus := gpusPerNode(resourcesPerNode(tj, c))

	// The hosts, as Flux writes a host list: <job>-[0-N].
	hosts := fmt.Sprintf("%s-[%s]", in.Trainer.Name, fluxRange(int64(in.NumNodes())))
	resources := "--cores=" + fluxRange(int64(tasks))
	flags := fmt.Sprintf("-N %d -n %d", in.NumNodes(), int64(tasks)*int64(in.NumNodes()))
	if gpus > 0 {
		resources += " --gpu=" + fluxRange(gpus)
		flags += fmt.Sprintf(" -g %d", gpus)
	}
	command := strings.TrimSpace(strings.Join(append(slices.Clone(c.Command), c.Args...), " "))
	broker := fmt.Sprintf(`[access]
allow-guest-user = true
allow-root-owner = true

[resource]
path = "%[1]s/config/etc/flux/system/R"

[bootstrap]
curve_cert = "%[1]s/config/etc/curve/curve.cert"
default_port = 8050
default_bind = "tcp://%[2]s:%%p"
default_connect = "tcp://%%h.%[3]s.%[4]s.svc.cluster.local:%%p"
hosts = [
  { host = "%[5]s" },
]

[archive]
dbpath = "%[1]s/config/var/lib/flux/job-archive.sqlite"
period = "1m"
busytimeout = "50s"

[sched-fluxion-qmanager]
queue-policy = "%[6]s"
`, fluxInstallPath, settings["FLUX_NETWORK_DEVICE"], in.Subdomain(), tj.Namespace, hosts, settings["FLUX_QUEUE_POLICY"])

	configMap := tj.Name + FluxEntrypointConfigMapSuffix
	secret := tj.Name + FluxCurveSecretSuffix
	plan.ConfigMaps = append(plan.ConfigMaps, &corev1.ConfigMap{
		ObjectMeta: childMeta(tj, configMap),
		Data: map[string]string{
			"init.sh": shellVars(map[string]string{"FLUX_HOSTS": hosts, "FLUX_BROKER_CONFIG": broker}) + fluxInitScript,
			"entrypoint.sh": shellVars(map[string]string{
				"FLUX_MAIN_HOST": in.Trainer.Name + "-0", "FLUX_RESOURCES": resources, "FLUX_RUN_FLAGS": flags,
			}) + fluxEntrypointScript,
		},
	})
	plan.Secrets = append(plan.Secrets, GeneratedSecret{
		Secret:   &corev1.Secret{ObjectMeta: childMeta(tj, secret), Immutable: ptr.To(true)},
		Generate: func() (map[string][]byte, error) { return newCurveCert(tj.Name) },
	})

	pod := &in.Trainer.Spec.Template.Spec
	for _, v := range []corev1.Volume{
		{Name: fluxSoftwareVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: fluxInstallVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: configMap, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMap}, DefaultMode: ptr.To[int32](0o755),
		}}},
		{Name: fluxMemoryVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: fluxCurveVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To[int32](0o400)}}},
	} {
		pod.Volumes = upsertVolume(pod.Volumes, v)
	}
	pod.InitContainers = append(pod.InitContainers, corev1.Container{
		Name:    fluxInstallerContainer,
		Image:   settings["FLUX_VIEW_IMAGE"],
		Command: []string{"/bin/bash", fluxConfigPath + "/init.sh"},
		VolumeMounts: []corev1.VolumeMount{
			{Name: fluxInstallVolume, MountPath: fluxInstallPath},
			{Name: configMap, MountPath: fluxConfigPath, ReadOnly: true},
		},
	})
	for _, m := range []corev1.VolumeMount{
		{Name: fluxInstallVolume, MountPath: fluxInstallPath},
		{Name: fluxSoftwareVolume, MountPath: fluxSoftwarePath},
		{Name: configMap, MountPath: fluxConfigPath, ReadOnly: true},
		{Name: fluxCurveVolume, MountPath: fluxCurvePath, ReadOnly: true},
		{Name: fluxMemoryVolume, MountPath: fluxMemoryPath},
	} {
		c.VolumeMounts = upsertMount(c.VolumeMounts, m)
	}
	// The Flux entrypoint starts the brokers and, on node 0, runs the
	// training command over them.
	c.Command = []string{"/bin/bash", fluxConfigPath + "/entrypoint.sh", command}
	c.Args = nil
	return nil
}

// fluxRange is the range of n indexes from 0 as Flux writes it: 0, or 0-3.
func fluxRange(n int64) string {
	if n <= 1 {
		return "0"
	}
	return fmt.Sprintf("0-%d", n-1)
}

// shellVars are shell assignments of vars, in name order, quoted for the
// shell.
func shellVars(vars map[string]string) string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintf(&b, "%s='%s'\n", name, strings.ReplaceAll(vars[name], "'", `'\''`))
	}
	return b.String()
}

// newCurveCert makes a ZeroMQ CURVE certificate for the Flux brokers of a
// TrainJob: a new X25519 key pair from the system's secure random source,
// both keys Z85-encoded, in the format of flux keygen.
func newCurveCert(name string) (map[string][]byte, error) {
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	cert := fmt.Sprintf("#   ZeroMQ CURVE **Secret** Certificate\n#   Made by trainjob-operator for TrainJob %s\n\nmetadata\n    name = %q\ncurve\n    public-key = %q\n    secret-key = %q\n",
		name, name, z85(key.PublicKey().Bytes()), z85(key.Bytes()))
	return map[string][]byte{FluxCurveKey: []byte(cert)}, nil
}

// z85 is ZeroMQ's Base85 encoding (RFC 32/Z85) of data, whose length is a
// multiple of 4.
func z85(data []byte) string {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
	var b strings.Builder
	for i := 0; i+4 <= len(data); i += 4 {
		v := uint32(data[i])<<24 | uint32(data[i+1])<<16 | uint32(data[i+2])<<8 | uint32(data[i+3])
		var chunk [5]byte
		for j := 4; j >= 0; j-- {
			chunk[j] = alphabet[v%85]
			v /= 85
		}
		b.Write(chunk[:])
	}
	return b.String()
}

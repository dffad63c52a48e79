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
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The environment the torch policy gives the trainer container, read by
// torchrun.
const (
	EnvNumNodes       = "PET_NNODES"
	EnvNumProcPerNode = "PET_NPROC_PER_NODE"
	EnvNodeRank       = "PET_NODE_RANK"
	EnvMasterAddr     = "PET_MASTER_ADDR"
	EnvMasterPort     = "PET_MASTER_PORT"

	// TrainerPort is the port node 0 listens on for the others (torch's
	// rendezvous, JAX's coordinator, XGBoost's tracker), and the trainer
	// container's port, as in Kubeflow Trainer.
	TrainerPort int32 = 29500

	// completionIndexAnnotation holds a Pod's index in its Indexed Job.
	completionIndexAnnotation = "batch.kubernetes.io/job-completion-index"
)

var torchEnvNames = []string{EnvNumNodes, EnvNumProcPerNode, EnvNodeRank, EnvMasterAddr, EnvMasterPort}

// torchPlugin is PyTorch distributed training (mlPolicy.torch), as Kubeflow
// Trainer v2.3 runs it. When the TrainJob sets spec.trainer, the trainer
// container gets the PET_* environment torchrun reads — the number of nodes
// and of processes per node, the node's rank (its completion index) and the
// address and port of node 0 — replacing any the runtime sets, and the
// rendezvous port. A torchtune trainer (command tune run) gets its
// rendezvous, recipe and config on its command line instead of node 0's
// address (torchtune.go). The containers envInjection names get the whole
// environment whether or not spec.trainer is set. The TrainJob may not set
// those variables itself.
type torchPlugin struct{}

func (torchPlugin) Name() string { return "torch" }

func (torchPlugin) selected(spec *trainer.TrainingRuntimeSpec) bool {
	return spec.MLPolicy != nil && spec.MLPolicy.Torch != nil
}

func (p torchPlugin) Validate(in *Input) field.ErrorList {
	if !p.selected(in.Runtime.Spec) {
		return nil
	}
	return checkFramework(in, p.Name())
}

func (p torchPlugin) Contribute(in *Input, plan *Plan) field.ErrorList {
	if !p.selected(in.Runtime.Spec) || in.Container == nil {
		return nil
	}
	t, rt := in.TrainJob.Spec.Trainer, in.Runtime
	var errs field.ErrorList
	tune := t != nil && isTorchtune(t.Command)
	if t != nil {
		errs = append(errs, reservedEnv(t.Env, torchEnvNames, "torch", rt)...)
	}
	if tune {
		errs = append(errs, checkTorchtune(in)...)
	}
	targets, targetErrs := envInjectionTargets(rt, plan)
	if errs = append(errs, targetErrs...); len(errs) > 0 {
		return errs
	}

	nproc := numProcPerNode(in.TrainJob, rt.Spec, in.Container)
	env := []corev1.EnvVar{
		{Name: EnvNumNodes, Value: strconv.Itoa(int(in.NumNodes()))},
		{Name: EnvNumProcPerNode, Value: nproc},
		completionIndexEnv(EnvNodeRank),
	}
	master := []corev1.EnvVar{
		// Node 0 of the trainer step. Kubeflow writes <trainjob>-node-0-0
		// whatever the trainer step is named; this is the same address
		// for every runtime whose trainer step is named node, and the
		// right one for the others.
		{Name: EnvMasterAddr, Value: node0(in)},
		{Name: EnvMasterPort, Value: strconv.Itoa(int(TrainerPort))},
	}
	if c := in.Container; t != nil && c != nil {
		c.Env = mergeEnv(c.Env, env)
		if tune {
			c.Command = torchtuneCommand(in, nproc)
		} else {
			c.Env = mergeEnv(c.Env, master)
		}
		addPort(c, TrainerPort)
	}
	for _, c := range targets {
		c.Env = mergeEnv(c.Env, append(slices.Clone(env), master...))
	}
	return nil
}

// node0 is the DNS name of the first Pod of the trainer step: node 0.
func node0(in *Input) string {
	return fmt.Sprintf("%s-0.%s", in.Trainer.Name, in.Subdomain())
}

// completionIndexEnv is the variable name holding the Pod's completion
// index: the node's rank.
func completionIndexEnv(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: fmt.Sprintf("metadata.annotations['%s']", completionIndexAnnotation),
	}}}
}

// addPort adds port to c's ports, unless it has it.
func addPort(c *corev1.Container, port int32) {
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == port }) {
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: port, Protocol: corev1.ProtocolTCP})
	}
}

// envInjectionTargets returns the containers of plan's Jobs that the torch
// policy's envInjection names, and an error for each that none of the
// replicated Job's Jobs has.
func envInjectionTargets(rt Runtime, plan *Plan) ([]*corev1.Container, field.ErrorList) {
	inj := rt.Spec.MLPolicy.Torch.EnvInjection
	if inj == nil {
		return nil, nil
	}
	path := rt.path().Child("mlPolicy", "torch", "envInjection", "targets")
	var out []*corev1.Container
	var errs field.ErrorList
	for i, target := range inj.Targets {
		for j, name := range target.ContainerNames {
			found := false
			for _, job := range plan.Jobs {
				if job.Labels[trainer.ReplicatedJobNameLabel] != target.JobName {
					continue
				}
				pod := &job.Spec.Template.Spec
				for _, list := range [][]corev1.Container{pod.Containers, pod.InitContainers} {
					if k := slices.IndexFunc(list, func(c corev1.Container) bool { return c.Name == name }); k >= 0 {
						out, found = append(out, &list[k]), true
					}
				}
			}
			if !found {
				errs = append(errs, field.NotFound(path.Index(i).Child("containerNames").Index(j),
					fmt.Sprintf("container %q of replicated Job %q", name, target.JobName)))
			}
		}
	}
	return out, errs
}

// numProcPerNode is the PET_NPROC_PER_NODE value, as Kubeflow Trainer v2.3
// decides it: the TrainJob's numProcPerNode; else, for runtimes of Kubeflow
// v2.0 and v2.1, the runtime's; else auto. auto becomes the number of CPUs
// of a trainer that asks for no GPU (its CPU request, else its CPU limit,
// each rounded up; at least 1) and is left for torchrun to resolve to the
// number of GPUs otherwise; cpu (v2.0 and v2.1) always becomes the number of
// CPUs. The resources are the TrainJob's resourcesPerNode if it sets them,
// else the trainer container's.
func numProcPerNode(trainJob *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec, c *corev1.Container) string {
	t := trainJob.Spec.Trainer
	if t != nil && t.NumProcPerNode != nil {
		return strconv.Itoa(int(*t.NumProcPerNode))
	}
	v := intstr.FromString("auto")
	if p := spec.MLPolicy.Torch.NumProcPerNode; p != nil {
		v = *p
	}
	if v.Type == intstr.Int {
		return strconv.Itoa(v.IntValue())
	}
	res := resourcesPerNode(trainJob, c)
	if v.StrVal == "cpu" || v.StrVal == "auto" && gpusPerNode(res) == 0 {
		return strconv.FormatInt(max(1, cpusPerNode(res)), 10)
	}
	return v.StrVal
}

// resourcesPerNode are the resources of a trainer node, as Kubeflow Trainer
// v2.3 reads them to count its GPUs and CPUs: the TrainJob's
// resourcesPerNode if it sets them, else those of the trainer container c
// (none if c is nil).
func resourcesPerNode(trainJob *trainer.TrainJob, c *corev1.Container) *corev1.ResourceRequirements {
	if t := trainJob.Spec.Trainer; t != nil && t.ResourcesPerNode != nil {
		return t.ResourcesPerNode
	}
	if c != nil {
		return &c.Resources
	}
	return &corev1.ResourceRequirements{}
}

// gpusPerNode is the number of GPUs a trainer asks for, as Kubeflow Trainer
// counts them: the first resource whose name contains "gpu" (in name order
// here, where Kubeflow takes any), from the requests, else the limits.
func gpusPerNode(res *corev1.ResourceRequirements) int64 {
	for _, list := range []corev1.ResourceList{res.Requests, res.Limits} {
		for _, name := range slices.Sorted(maps.Keys(list)) {
			if strings.Contains(strings.ToLower(string(name)), "gpu") {
				if q := list[name]; q.Value() > 0 {
					return q.Value()
				}
			}
		}
	}
	return 0
}

// cpusPerNode is a trainer's CPU request, else its CPU limit, rounded up to
// whole CPUs; 0 if it sets neither.
func cpusPerNode(res *corev1.ResourceRequirements) int64 {
	if q, ok := res.Requests[corev1.ResourceCPU]; ok && !q.IsZero() {
		return q.Value()
	}
	if q, ok := res.Limits[corev1.ResourceCPU]; ok {
		return q.Value()
	}
	return 0
}

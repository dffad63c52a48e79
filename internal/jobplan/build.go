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

// Package jobplan turns a TrainJob and the training runtime it references
// into the objects that run it: one Indexed batch/v1 Job per replica of every
// replicated Job of the runtime, and a headless Service that gives the Pods
// stable DNS names.
package jobplan

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// Runtime is the training runtime a TrainJob references, resolved.
type Runtime struct {
	// Kind is TrainingRuntime or ClusterTrainingRuntime.
	Kind string
	// Name of the runtime.
	Name string
	// Spec of the runtime.
	Spec *trainer.TrainingRuntimeSpec
	// UID and Generation of the runtime object the spec was read from.
	UID        types.UID
	Generation int64
	// SpecPath is where errors about the runtime's spec point: nil for
	// runtime[<kind>/<name>].spec, as a TrainJob's errors name it; spec
	// when the runtime itself is being admitted.
	SpecPath *field.Path
}

// path is the runtime's spec, for errors.
func (rt Runtime) path() *field.Path {
	if rt.SpecPath != nil {
		return rt.SpecPath
	}
	return field.NewPath("runtime").Key(rt.Kind + "/" + rt.Name).Child("spec")
}

// Step is one replicated Job of the runtime as the TrainJob runs it.
type Step struct {
	// Name of the replicated Job.
	Name string
	// Replicas is the number of child Jobs of the step.
	Replicas int32
	// Trainer is true for the trainer step.
	Trainer bool
	// DependsOn are the steps that must reach a status before the Jobs of
	// this one are created: the runtime's dependsOn, or, with startupPolicy
	// InOrder, the step before, Ready.
	DependsOn []trainer.DependsOn
}

// Plan is everything a TrainJob needs to run.
type Plan struct {
	// Steps lists the replicated Jobs, in the runtime's order.
	Steps []Step
	// Jobs are the child Jobs, step by step and replica by replica.
	Jobs []*batchv1.Job
	// Network is the runtime's network, with JobSet's defaults.
	Network trainer.Network
	// Service is the headless Service named after the subdomain; nil
	// without DNS hostnames.
	Service *corev1.Service
	// Success says when the TrainJob is Complete: the runtime's
	// successPolicy, or JobSet's default, All of every step.
	Success trainer.SuccessPolicy
	// Failure is the runtime's failurePolicy, its rules named; nil if it
	// has none.
	Failure *trainer.FailurePolicy
	// JobsTTL is the runtime template's ttlSecondsAfterFinished: how long
	// after the TrainJob finishes its Jobs go, as a JobSet's do; nil if
	// they stay.
	JobsTTL *int32
	// Warnings are what the TrainJob's author should know about how it
	// runs on this runtime, though it can run.
	Warnings []string
	// Claims are the PersistentVolumeClaims of the runtime's
	// volumeClaimPolicies, created before the Jobs.
	Claims []*corev1.PersistentVolumeClaim
	// ConfigMaps and Secrets are the ML policy's own children, created
	// before the Jobs whose Pods mount them.
	ConfigMaps []*corev1.ConfigMap
	Secrets    []GeneratedSecret
	// PodGroup is the PodGroup of the runtime's podGroupPolicy, created
	// before the Jobs; nil without one.
	PodGroup *unstructured.Unstructured
}

// GeneratedSecret is a Secret whose data is made when it is created, once:
// a key, which Build, giving the same Plan for the same inputs, does not
// make. It is never changed after.
type GeneratedSecret struct {
	// Secret is the Secret but for its data.
	Secret *corev1.Secret
	// Generate makes the data.
	Generate func() (map[string][]byte, error)
}

// JobName is the name of the child Job for replica index of replicated Job
// rjob of TrainJob trainJob.
func JobName(trainJob, rjob string, index int32) string {
	return fmt.Sprintf("%s-%s-%d", trainJob, rjob, index)
}

// ChildLabels are the labels by which the child Job for replica index of
// replicated Job rjob of TrainJob trainJob, and its Pods, are known.
func ChildLabels(trainJob, rjob string, index int32) map[string]string {
	return map[string]string{
		trainer.TrainJobNameLabel:      trainJob,
		trainer.ReplicatedJobNameLabel: rjob,
		trainer.ReplicaIndexLabel:      strconv.Itoa(int(index)),
	}
}

// Error is a TrainJob and runtime that cannot be turned into Jobs. It names
// the fields at fault.
type Error struct {
	Errs field.ErrorList
}

func (e *Error) Error() string { return e.Errs.ToAggregate().Error() }

const (
	// DefaultNumNodes is the number of trainer nodes when neither the
	// TrainJob nor the runtime sets one.
	DefaultNumNodes int32 = 1

	// maxDNSLabel is the longest name a child Job (its name is a label value)
	// and a Pod hostname may have.
	maxDNSLabel = 63

	// lastAppliedAnnotation is not copied from the TrainJob to its Pods.
	lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"
)

// Build returns the children of trainJob on rt, with the TrainJob's
// runtimePatches applied to rt first. It does not look at the cluster: the
// same inputs always give the same Plan.
func Build(trainJob *trainer.TrainJob, rt Runtime) (*Plan, error) {
	spec, errs := patchedSpec(rt.Spec, &trainJob.Spec)
	if len(errs) > 0 {
		return nil, &Error{Errs: errs}
	}
	rt.Spec = spec
	rtPath := rt.path()
	rjobsPath := rtPath.Child("template", "spec", "replicatedJobs")
	trainerPath := field.NewPath("spec", "trainer")

	rjobs := rt.Spec.Template.Spec.ReplicatedJobs
	trainerIdx, err := trainerStep(rjobs, rjobsPath)
	if err != nil {
		errs = append(errs, err)
	}
	if trainerIdx < 0 && trainJob.Spec.Trainer != nil {
		errs = append(errs, field.Invalid(trainerPath, "{...}", fmt.Sprintf(
			"runtime %s/%s has no trainer step (a replicated Job labelled %s=%s, or named %q) for the trainer overrides to apply to",
			rt.Kind, rt.Name, trainer.AncestorStepLabel, trainer.TrainerStep, trainer.TrainerContainerName)))
	}
	if trainerIdx >= 0 && replicasOf(rjobs[trainerIdx]) != 1 {
		errs = append(errs, field.Invalid(rjobsPath.Index(trainerIdx).Child("replicas"), rjobs[trainerIdx].Replicas,
			"the trainer step must have exactly 1 replica: its nodes are the Pods of that Job (set numNodes instead)"))
	}
	for i := range rjobs {
		if step := rjobs[i].Template.Labels[trainer.AncestorStepLabel]; (step == trainer.DatasetInitializerStep || step == trainer.ModelInitializerStep) && replicasOf(rjobs[i]) != 1 {
			errs = append(errs, field.Invalid(rjobsPath.Index(i).Child("replicas"), rjobs[i].Replicas,
				fmt.Sprintf("the %s step must have exactly 1 replica, as in Kubeflow Trainer", step)))
		}
	}
	errs = append(errs, checkDependsOn(rjobs, rjobsPath)...)
	numNodes := numNodes(trainJob, rt.Spec)
	policy := policyOf(rt.Spec)
	if policy.SetsUpTrainer() && trainerIdx < 0 {
		errs = append(errs, field.Required(rjobsPath, fmt.Sprintf(
			"the %s policy needs a trainer step: a replicated Job labelled %s=%s", policy.Name(), trainer.AncestorStepLabel, trainer.TrainerStep)))
	}
	if len(errs) > 0 {
		return nil, &Error{Errs: errs}
	}

	failurePolicy, failureErrs := failurePolicy(rt.Spec, rtPath.Child("template", "spec", "failurePolicy"))
	errs = append(errs, failureErrs...)
	network := networkOf(rt.Spec)
	plan := &Plan{Network: network, Service: serviceFor(trainJob, &network), Success: successPolicy(rt.Spec), Failure: failurePolicy,
		JobsTTL: rt.Spec.Template.Spec.TTLSecondsAfterFinished}
	coordinator, coordErr := coordinatorOf(trainJob, rt.Spec, numNodes, trainerIdx, rtPath.Child("template", "spec", "coordinator"))
	if coordErr != nil {
		errs = append(errs, coordErr)
	}
	in := &PolicyInput{TrainJob: trainJob, Runtime: rt, NumNodes: numNodes, Path: rjobsPath, Subdomain: Subdomain(trainJob, &network), TrainerStep: trainerIdx}
	counts := podCounts(policy, rt.Spec, trainerIdx, numNodes)
	trainerReady := false
	for i := range rjobs {
		rjob := &rjobs[i]
		isTrainer := i == trainerIdx
		plan.Steps = append(plan.Steps, Step{Name: rjob.Name, Replicas: replicasOf(*rjob), Trainer: isTrainer, DependsOn: dependsOn(rt.Spec, i)})
		for r := range replicasOf(*rjob) {
			job := baseJob(trainJob, rt.Spec, i, r, coordinator, &network)
			completions := ptr.Deref(job.Spec.Completions, 1)
			if n, ok := counts[rjob.Name]; ok {
				completions = n
				job.Spec.Completions = ptr.To(n)
				job.Spec.Parallelism = ptr.To(n)
			}
			if longest := len(job.Name) + 1 + len(strconv.Itoa(int(completions-1))); longest > maxDNSLabel {
				errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), trainJob.Name, fmt.Sprintf(
					"too long for runtime %s/%s: Pod hostname %s-%d of replicated Job %q would be %d characters, over %d; use a name of at most %d characters",
					rt.Kind, rt.Name, job.Name, completions-1, rjob.Name, longest, maxDNSLabel, maxDNSLabel-(longest-len(trainJob.Name)))))
				continue
			}
			if isTrainer {
				in.Trainer, in.Path = job, rjobsPath.Index(i)
				in.Container = trainerContainer(job)
				overrideErrs := applyOverrides(in, policy)
				trainerReady = len(overrideErrs) == 0 && (in.Container != nil || !policy.SetsUpTrainer())
				errs = append(errs, overrideErrs...)
			}
			plan.Jobs = append(plan.Jobs, job)
		}
	}
	// The policy's own errors are reported with the others, whenever the
	// trainer step it works on could be built.
	if trainerReady || !policy.SetsUpTrainer() {
		errs = append(errs, policy.Apply(in, plan)...)
	}
	errs = append(errs, applyPodGroupPolicy(trainJob, rt, plan)...)
	initErrs, initWarnings := applyInitializers(trainJob, rt, plan)
	errs, plan.Warnings = append(errs, initErrs...), initWarnings
	var claimErrs field.ErrorList
	plan.Claims, claimErrs = claims(trainJob, rt.Spec, plan.Jobs, rtPath.Child("template", "spec", "volumeClaimPolicies"))
	errs = append(errs, claimErrs...)
	if len(errs) > 0 {
		return nil, &Error{Errs: errs}
	}
	return plan, nil
}

// trainerStep returns the index of the trainer step: the replicated Job
// labelled as the trainer, or else the one named "node"; -1 if there is none.
func trainerStep(rjobs []trainer.ReplicatedJob, path *field.Path) (int, *field.Error) {
	found := -1
	for i := range rjobs {
		if rjobs[i].Template.Labels[trainer.AncestorStepLabel] != trainer.TrainerStep {
			continue
		}
		if found >= 0 {
			return -1, field.Invalid(path.Index(i).Child("template", "metadata", "labels"), trainer.TrainerStep,
				fmt.Sprintf("only one replicated Job may be the trainer step; %q is one already", rjobs[found].Name))
		}
		found = i
	}
	if found >= 0 {
		return found, nil
	}
	for i := range rjobs {
		if rjobs[i].Name == trainer.TrainerContainerName {
			return i, nil
		}
	}
	return -1, nil
}

func replicasOf(rjob trainer.ReplicatedJob) int32 {
	if rjob.Replicas < 1 {
		return 1
	}
	return rjob.Replicas
}

func numNodes(trainJob *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec) int32 {
	if t := trainJob.Spec.Trainer; t != nil && t.NumNodes != nil {
		return *t.NumNodes
	}
	if spec.MLPolicy != nil && spec.MLPolicy.NumNodes != nil {
		return *spec.MLPolicy.NumNodes
	}
	return DefaultNumNodes
}

// baseJob is the child Job of replica r of replicated Job i of the runtime,
// before the trainer overrides: the runtime's template with the TrainJob's
// metadata, JobSet's labels and annotations, ownership, tracking finalizer,
// Indexed completion and DNS settings. The labels the controller finds its
// children by, and JobSet's, win over those of the runtime and the TrainJob.
func baseJob(trainJob *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec, i int, r int32, coordinator string, network *trainer.Network) *batchv1.Job {
	rjob := &spec.Template.Spec.ReplicatedJobs[i]
	tmpl := rjob.Template.DeepCopy()
	ours := ChildLabels(trainJob.Name, rjob.Name, r)
	jobSet := jobSetKeys(trainJob, spec.Template.Spec.ReplicatedJobs, i, r)
	if coordinator != "" {
		jobSet[trainer.JobSetCoordinatorKey] = coordinator
	}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            JobName(trainJob.Name, rjob.Name, r),
			Namespace:       trainJob.Namespace,
			Labels:          merge(spec.Template.Metadata.Labels, tmpl.Labels, trainJob.Spec.Labels, jobSet, ours),
			Annotations:     merge(spec.Template.Metadata.Annotations, tmpl.Annotations, trainJob.Spec.Annotations, jobSet),
			OwnerReferences: []metav1.OwnerReference{ownerRef(trainJob)},
			Finalizers:      []string{trainer.JobTrackingFinalizer},
		},
		Spec: tmpl.Spec,
	}
	job.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	job.Spec.Suspend = ptr.To(ptr.Deref(trainJob.Spec.Suspend, false))

	pod := &job.Spec.Template
	pod.Labels = merge(pod.Labels, trainJob.Labels, jobSet, ours)
	pod.Annotations = merge(pod.Annotations, podAnnotations(trainJob.Annotations), jobSet)
	if dnsHostnames(network) {
		pod.Spec.Subdomain = Subdomain(trainJob, network)
	}
	if pod.Spec.RestartPolicy == "" {
		// OnFailure, as JobSet's webhook defaults it under Kubeflow: the
		// runtimes Kubeflow ships leave it unset. (Always, which a Job
		// refuses, is refused in the runtime already.)
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	}
	return job
}

// jobSetKeys are the labels, and the same annotations, that JobSet v0.12.0
// sets on the child Job for replica r of replicated Job i of rjobs and on its
// Pod template (labelAndAnnotateObject in its controller), for a JobSet
// named after the TrainJob. The TrainJob's UID stands for the JobSet's, and
// the restart attempt is the TrainJob's status.restarts.
func jobSetKeys(trainJob *trainer.TrainJob, rjobs []trainer.ReplicatedJob, i int, r int32) map[string]string {
	rjob := &rjobs[i]
	group := groupOf(rjob)
	global, before, groupReplicas, groupBefore := 0, 0, 0, 0
	for j := range rjobs {
		n := int(replicasOf(rjobs[j]))
		global += n
		if j < i {
			before += n
		}
		if groupOf(&rjobs[j]) == group {
			groupReplicas += n
			if j < i {
				groupBefore += n
			}
		}
	}
	jobKey := sha1.Sum([]byte(trainJob.Namespace + "/" + JobName(trainJob.Name, rjob.Name, r)))
	return map[string]string{
		trainer.JobSetNameLabel:                  trainJob.Name,
		trainer.JobSetUIDLabel:                   string(trainJob.UID),
		trainer.JobSetReplicatedJobNameLabel:     rjob.Name,
		trainer.JobSetRestartAttemptLabel:        strconv.Itoa(int(trainJob.Status.Restarts)),
		trainer.JobSetReplicatedJobReplicasLabel: strconv.Itoa(int(replicasOf(*rjob))),
		trainer.JobSetGlobalReplicasLabel:        strconv.Itoa(global),
		trainer.JobSetJobIndexLabel:              strconv.Itoa(int(r)),
		trainer.JobSetJobKeyLabel:                hex.EncodeToString(jobKey[:]),
		trainer.JobSetJobGlobalIndexLabel:        strconv.Itoa(before + int(r)),
		trainer.JobSetGroupNameLabel:             group,
		trainer.JobSetGroupReplicasLabel:         strconv.Itoa(groupReplicas),
		trainer.JobSetJobGroupIndexLabel:         strconv.Itoa(groupBefore + int(r)),
	}
}

// groupOf is the group of a replicated Job: its groupName, or JobSet's
// default group.
func groupOf(rjob *trainer.ReplicatedJob) string {
	if rjob.GroupName != nil && *rjob.GroupName != "" {
		return *rjob.GroupName
	}
	return trainer.JobSetDefaultGroupName
}

func podAnnotations(in map[string]string) map[string]string {
	out := maps.Clone(in)
	delete(out, lastAppliedAnnotation)
	return out
}

// merge returns the union of the maps; later maps win. It returns nil when
// all are empty.
func merge(ms ...map[string]string) map[string]string {
	var out map[string]string
	for _, m := range ms {
		if len(m) == 0 {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(m))
		}
		maps.Copy(out, m)
	}
	return out
}

func ownerRef(trainJob *trainer.TrainJob) metav1.OwnerReference {
	return *metav1.NewControllerRef(trainJob, trainer.GroupVersion.WithKind(trainer.TrainJobKind))
}

// Subdomain is the Pods' subdomain and the name of the headless Service
// under network: its subdomain, or the TrainJob's name.
func Subdomain(trainJob *trainer.TrainJob, network *trainer.Network) string {
	if network != nil && network.Subdomain != "" {
		return network.Subdomain
	}
	return trainJob.Name
}

// networkOf is the runtime's network with JobSet's defaults: DNS hostnames
// on, Pods published before they are ready.
func networkOf(spec *trainer.TrainingRuntimeSpec) trainer.Network {
	var n trainer.Network
	if spec.Template.Spec.Network != nil {
		n = *spec.Template.Spec.Network.DeepCopy()
	}
	if n.EnableDNSHostnames == nil {
		n.EnableDNSHostnames = ptr.To(true)
	}
	if n.PublishNotReadyAddresses == nil {
		n.PublishNotReadyAddresses = ptr.To(true)
	}
	return n
}

// ServiceKey is the namespace and name of the TrainJob's Service, by the
// network pinned in its status.
func ServiceKey(trainJob *trainer.TrainJob) types.NamespacedName {
	return types.NamespacedName{Namespace: trainJob.Namespace, Name: Subdomain(trainJob, trainJob.Status.Network)}
}

// Service is the TrainJob's headless Service, by the network pinned in its
// status (JobSet's defaults if none is): with the Pods' hostname and
// subdomain it gives each Pod the DNS name <hostname>.<subdomain>, so
// PET_MASTER_ADDR resolves as under Kubeflow. It is nil when the network
// turns DNS hostnames off.
func Service(trainJob *trainer.TrainJob) *corev1.Service {
	return serviceFor(trainJob, trainJob.Status.Network)
}

// HasService reports whether the TrainJob has a headless Service, by the
// network pinned in its status: it does unless DNS hostnames are off.
func HasService(trainJob *trainer.TrainJob) bool {
	return dnsHostnames(trainJob.Status.Network)
}

func dnsHostnames(network *trainer.Network) bool {
	return network == nil || ptr.Deref(network.EnableDNSHostnames, true)
}

func serviceFor(trainJob *trainer.TrainJob, network *trainer.Network) *corev1.Service {
	if !dnsHostnames(network) {
		return nil
	}
	publish := true
	if network != nil {
		publish = ptr.Deref(network.PublishNotReadyAddresses, true)
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            Subdomain(trainJob, network),
			Namespace:       trainJob.Namespace,
			Labels:          map[string]string{trainer.TrainJobNameLabel: trainJob.Name},
			OwnerReferences: []metav1.OwnerReference{ownerRef(trainJob)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{trainer.TrainJobNameLabel: trainJob.Name},
			PublishNotReadyAddresses: publish,
		},
	}
}

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
// stable DNS names. Each concern of the plan (the runtime patches, the Jobs,
// the network, each ML framework, gang scheduling, initializers, volume
// claims) is a Plugin of its own file, registered in plugin.go; Build runs
// them in that order.
package jobplan

import (
	"fmt"
	"maps"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

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
// runtimePatches applied to rt first: every plugin validates, then, if none
// found an error, each contributes its part, in the order of plugins. It
// does not look at the cluster: the same inputs, and options, always give
// the same Plan.
func Build(trainJob *trainer.TrainJob, rt Runtime, opts ...Option) (*Plan, error) {
	in := &Input{TrainJob: Planned(trainJob), Runtime: rt}
	for _, o := range opts {
		o(in)
	}
	var errs field.ErrorList
	for _, p := range plugins {
		errs = append(errs, p.Validate(in)...)
	}
	if len(errs) > 0 {
		return nil, &Error{Errs: errs}
	}
	plan := &Plan{}
	for _, p := range plugins {
		errs = append(errs, p.Contribute(in, plan)...)
	}
	if len(errs) > 0 {
		return nil, &Error{Errs: errs}
	}
	return plan, nil
}

// Planned is the TrainJob as its plan reads it: its name, namespace, UID,
// labels, annotations but kubectl's last applied configuration, spec but
// who made each runtime patch and when, and restart count; nothing else.
// Build sees only these, so TrainJobs that agree on them, and on their
// runtime, have the same plan.
func Planned(tj *trainer.TrainJob) *trainer.TrainJob {
	out := &trainer.TrainJob{
		TypeMeta: tj.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: tj.Name, Namespace: tj.Namespace, UID: tj.UID,
			Labels: maps.Clone(tj.Labels), Annotations: maps.Clone(tj.Annotations),
		},
		Spec:   *tj.Spec.DeepCopy(),
		Status: trainer.TrainJobStatus{Restarts: tj.Status.Restarts},
	}
	delete(out.Annotations, lastAppliedAnnotation)
	for i := range out.Spec.RuntimePatches {
		out.Spec.RuntimePatches[i].Manager, out.Spec.RuntimePatches[i].Time = "", nil
	}
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

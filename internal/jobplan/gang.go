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
	"bytes"
	"encoding/json"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The PodGroups of the gang schedulers a runtime's podGroupPolicy selects,
// and how a Pod names its group.
var (
	// CoschedulingPodGroup is the PodGroup of the Kubernetes
	// scheduler-plugins' coscheduling plugin.
	CoschedulingPodGroup = schema.GroupVersionKind{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Kind: "PodGroup"}
	// VolcanoPodGroup is Volcano's PodGroup.
	VolcanoPodGroup = schema.GroupVersionKind{Group: "scheduling.volcano.sh", Version: "v1beta1", Kind: "PodGroup"}
)

const (
	// coschedulingPodGroupLabel, on a Pod, names its coscheduling
	// PodGroup.
	coschedulingPodGroupLabel = "scheduling.x-k8s.io/pod-group"
	// volcanoGroupNameAnnotation, on a Pod, names its Volcano PodGroup.
	volcanoGroupNameAnnotation = "scheduling.k8s.io/group-name"
	// VolcanoQueueAnnotation names the Volcano queue of the PodGroup, on
	// a runtime's template metadata or a TrainJob's spec.annotations.
	VolcanoQueueAnnotation = "scheduling.volcano.sh/queue-name"
)

// podGroupPlugin is the runtime's podGroupPolicy (applyPodGroupPolicy).
type podGroupPlugin struct{}

func (podGroupPlugin) Name() string { return "podGroup" }

func (podGroupPlugin) Validate(*Input) field.ErrorList { return nil }

func (podGroupPlugin) Contribute(in *Input, plan *Plan) field.ErrorList {
	return applyPodGroupPolicy(in.TrainJob, in.Runtime, plan)
}

// applyPodGroupPolicy makes the PodGroup of the runtime's podGroupPolicy, as
// Kubeflow Trainer v2.3 makes it, named after the TrainJob and owned by it,
// and names it on every Pod: a label for coscheduling, an annotation for
// Volcano. Its minMember and minResources are the Pods, and their
// requests, of the replicated Jobs that wait for no other: those start
// together, and a later stage's Pods join a group that is running already.
// An empty Volcano queue name is refused, as Kubeflow refuses it.
func applyPodGroupPolicy(trainJob *trainer.TrainJob, rt Runtime, plan *Plan) field.ErrorList {
	spec := rt.Spec
	policy := spec.PodGroupPolicy
	if policy == nil || policy.Coscheduling == nil && policy.Volcano == nil {
		return nil
	}
	first := map[string]bool{}
	for _, s := range plan.Steps {
		first[s.Name] = len(s.DependsOn) == 0
	}
	var members int64
	resources := corev1.ResourceList{}
	for _, job := range plan.Jobs {
		pod := &job.Spec.Template
		if policy.Coscheduling != nil {
			pod.Labels = merge(pod.Labels, map[string]string{coschedulingPodGroupLabel: trainJob.Name})
		} else {
			pod.Annotations = merge(pod.Annotations, map[string]string{volcanoGroupNameAnnotation: trainJob.Name})
		}
		if !first[job.Labels[trainer.ReplicatedJobNameLabel]] {
			continue
		}
		n := int64(ptr.Deref(job.Spec.Parallelism, 1))
		members += n
		for name, q := range podRequests(&pod.Spec) {
			q.Mul(n)
			sum := resources[name]
			sum.Add(q)
			resources[name] = sum
		}
	}

	pg := &unstructured.Unstructured{}
	meta := childMeta(trainJob, trainJob.Name)
	pg.SetName(meta.Name)
	pg.SetNamespace(meta.Namespace)
	pg.SetLabels(meta.Labels)
	pg.SetOwnerReferences(meta.OwnerReferences)
	podGroupSpec := map[string]any{
		"minMember":    members,
		"minResources": quantities(resources),
	}
	if c := policy.Coscheduling; c != nil {
		pg.SetGroupVersionKind(CoschedulingPodGroup)
		podGroupSpec["scheduleTimeoutSeconds"] = int64(ptr.Deref(c.ScheduleTimeoutSeconds, 60))
	} else {
		pg.SetGroupVersionKind(VolcanoPodGroup)
		// The queue: the TrainJob's annotation, else the runtime's.
		for _, src := range []struct {
			annotations map[string]string
			path        *field.Path
		}{
			{trainJob.Spec.Annotations, field.NewPath("spec", "annotations")},
			{spec.Template.Metadata.Annotations, rt.path().Child("template", "metadata", "annotations")},
		} {
			q, ok := src.annotations[VolcanoQueueAnnotation]
			if !ok {
				continue
			}
			if q == "" {
				return field.ErrorList{field.Invalid(src.path.Key(VolcanoQueueAnnotation), q, "the Volcano queue name must not be empty")}
			}
			podGroupSpec["queue"] = q
			break
		}
		// The priority class of the last replicated Job that names one,
		// as Kubeflow takes it.
		for _, rjob := range slices.Backward(spec.Template.Spec.ReplicatedJobs) {
			if pc := rjob.Template.Spec.Template.Spec.PriorityClassName; pc != "" {
				podGroupSpec["priorityClassName"] = pc
				break
			}
		}
		if nt := policy.Volcano.NetworkTopology; nt != nil {
			topology := map[string]any{"mode": string(nt.Mode)}
			if nt.HighestTierAllowed != nil {
				topology["highestTierAllowed"] = int64(*nt.HighestTierAllowed)
			}
			podGroupSpec["networkTopology"] = topology
		}
	}
	pg.Object["spec"] = podGroupSpec
	plan.PodGroup = pg
	return nil
}

// podRequests are the resources a Pod of spec requests once admitted: a
// container's limit stands for a request it leaves out, as the API server
// defaults it; init containers, sidecars and overhead count as the
// scheduler counts them.
func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	pod := &corev1.Pod{Spec: *spec.DeepCopy()}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			r := &list[i].Resources
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = q.DeepCopy()
				}
			}
		}
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// quantities is list as an unstructured map of quantity strings, in name
// order.
func quantities(list corev1.ResourceList) map[string]any {
	out := make(map[string]any, len(list))
	for _, name := range slices.Sorted(maps.Keys(list)) {
		q := list[name]
		out[string(name)] = q.String()
	}
	return out
}

// SamePodGroup reports whether live, a PodGroup as read back, has the
// spec of want: each field want sets, compared as JSON (so that a number
// read back as int64 equals the one written). Fields the scheduler or the
// CRD's defaults add are not compared.
func SamePodGroup(live, want *unstructured.Unstructured) bool {
	l, _, _ := unstructured.NestedMap(live.Object, "spec")
	w, _, _ := unstructured.NestedMap(want.Object, "spec")
	sub := make(map[string]any, len(w))
	for k := range w {
		sub[k] = l[k]
	}
	a, errA := json.Marshal(sub)
	b, errB := json.Marshal(w)
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

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
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// A Job's scheduling directives are what Kubernetes lets change in the Pod
// template of a suspended Job that has not started (or whose startTime was
// cleared): the template's labels and annotations, and its Pods' node
// selector, node affinity, tolerations and scheduling gates. Kueue writes
// the flavor it admits a TrainJob on there, through runtimePatches; nothing
// else of a Job's Pods can change once the Job exists.

// apiServerLabels are the labels the API server gives a Job's Pod template;
// they are kept whatever the plan says.
var apiServerLabels = []string{batchv1.ControllerUidLabel, batchv1.JobNameLabel, "controller-uid", "job-name"}

// WithSchedulingDirectives returns a copy of job whose Pod template has the scheduling
// directives of desired's.
func WithSchedulingDirectives(job, desired *batchv1.Job) *batchv1.Job {
	out := job.DeepCopy()
	pod, want := &out.Spec.Template, &desired.Spec.Template
	labels := maps.Clone(want.Labels)
	for _, k := range apiServerLabels {
		if v, ok := pod.Labels[k]; ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
		}
	}
	pod.Labels, pod.Annotations = labels, maps.Clone(want.Annotations)
	pod.Spec.NodeSelector = maps.Clone(want.Spec.NodeSelector)
	pod.Spec.Tolerations = slices.Clone(want.Spec.Tolerations)
	pod.Spec.SchedulingGates = slices.Clone(want.Spec.SchedulingGates)
	var nodeAffinity *corev1.NodeAffinity
	if want.Spec.Affinity != nil {
		nodeAffinity = want.Spec.Affinity.NodeAffinity.DeepCopy()
	}
	switch {
	case pod.Spec.Affinity != nil && !equality.Semantic.DeepEqual(pod.Spec.Affinity.NodeAffinity, nodeAffinity):
		pod.Spec.Affinity.NodeAffinity = nodeAffinity
		if *pod.Spec.Affinity == (corev1.Affinity{}) {
			pod.Spec.Affinity = nil
		}
	case pod.Spec.Affinity == nil && nodeAffinity != nil:
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: nodeAffinity}
	}
	return out
}

// SameSchedulingDirectives reports whether job's Pods already have the scheduling
// directives of desired's.
func SameSchedulingDirectives(job, desired *batchv1.Job) bool {
	return equality.Semantic.DeepEqual(job.Spec.Template, WithSchedulingDirectives(job, desired).Spec.Template)
}

// ChangedBeyondSchedulingDirectives returns the names of the Jobs of next
// whose Pods differ from the same Job's in prev in more than their
// scheduling directives. A Job that only one of the plans has is not
// compared.
func ChangedBeyondSchedulingDirectives(prev, next *Plan) []string {
	var changed []string
	for _, job := range next.Jobs {
		i := slices.IndexFunc(prev.Jobs, func(p *batchv1.Job) bool { return p.Name == job.Name })
		if i >= 0 && !equality.Semantic.DeepEqual(WithSchedulingDirectives(prev.Jobs[i], job).Spec.Template, job.Spec.Template) {
			changed = append(changed, job.Name)
		}
	}
	return changed
}

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

package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KueueManager is the manager of the runtime patch Kueue writes: the node
// labels, tolerations, labels, annotations and scheduling gates of the
// flavor a TrainJob is admitted on.
const KueueManager = "kueue.x-k8s.io/manager"

// RuntimePatch is a change to the TrainJob's runtime template, owned by one
// manager (a user, a controller such as Kueue, an admission webhook). The
// patches apply in list order, each as a strategic merge patch, before the
// TrainJob's trainer overrides and ML policy. They may change only while the
// TrainJob is suspended, before or after the change (Kueue writes its patch
// and unsuspends in one update), and not while a child Job has active Pods.
// The child Jobs' Pods follow a change on the next resume.
type RuntimePatch struct {
	// manager owns the patch, for example kueue.x-k8s.io/manager. Patches
	// are keyed by it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[-A-Za-z0-9/._~%!$&()*+,;=:]+$')",message="manager must be a domain-prefixed path, such as kueue.x-k8s.io/manager"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="manager is immutable"
	// +required
	Manager string `json:"manager"`

	// time is when the patch was last written. It is for people to read;
	// nothing depends on it.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`

	// trainingRuntimeSpec patches the runtime's spec.
	// +optional
	TrainingRuntimeSpec *TrainingRuntimeSpecPatch `json:"trainingRuntimeSpec,omitempty"`
}

// TrainingRuntimeSpecPatch is the part of a runtime's spec a patch may change.
type TrainingRuntimeSpecPatch struct {
	// template patches the runtime's template.
	// +optional
	Template *JobSetTemplatePatch `json:"template,omitempty"`
}

// JobSetTemplatePatch patches the runtime's template.
type JobSetTemplatePatch struct {
	// metadata adds labels and annotations to every child Job, as the
	// runtime template's own metadata does.
	// +optional
	Metadata *PatchMetadata `json:"metadata,omitempty"`

	// spec patches the replicated Jobs.
	// +optional
	Spec *JobSetSpecPatch `json:"spec,omitempty"`
}

// PatchMetadata is the metadata a patch may set: labels and annotations. It
// has the shape of an ObjectMeta, so that patches written with Kubeflow's
// types decode; any other field is refused.
//
// +kubebuilder:validation:XValidation:rule="!has(self.name) && !has(self.namespace) && !has(self.finalizers)",message="a runtime patch's metadata may set labels and annotations only"
type PatchMetadata struct {
	// labels to add.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations to add.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// name may not be set; it is in the schema so that setting it is refused
	// rather than dropped.
	// +optional
	Name string `json:"name,omitempty"`

	// namespace may not be set.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// finalizers may not be set.
	// +optional
	// +listType=atomic
	Finalizers []string `json:"finalizers,omitempty"`
}

// JobSetSpecPatch patches the replicated Jobs of the runtime.
type JobSetSpecPatch struct {
	// replicatedJobs are the patches of the replicated Jobs, by name. Each
	// must name a replicated Job of the runtime.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	ReplicatedJobs []ReplicatedJobPatch `json:"replicatedJobs,omitempty"`
}

// ReplicatedJobPatch patches one replicated Job of the runtime.
type ReplicatedJobPatch struct {
	// name of the replicated Job.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// template patches the replicated Job's Job template.
	// +optional
	Template *JobTemplatePatch `json:"template,omitempty"`
}

// JobTemplatePatch patches a Job template.
type JobTemplatePatch struct {
	// metadata adds labels and annotations to the Jobs.
	// +optional
	Metadata *PatchMetadata `json:"metadata,omitempty"`

	// spec patches the Jobs' spec.
	// +optional
	Spec *JobSpecPatch `json:"spec,omitempty"`
}

// JobSpecPatch patches a Job spec.
type JobSpecPatch struct {
	// template patches the Jobs' Pod template.
	// +optional
	Template *PodTemplatePatch `json:"template,omitempty"`
}

// PodTemplatePatch patches a Pod template.
type PodTemplatePatch struct {
	// metadata adds labels and annotations to the Pods.
	// +optional
	Metadata *PatchMetadata `json:"metadata,omitempty"`

	// spec patches the Pods' spec.
	// +optional
	Spec *PodSpecPatch `json:"spec,omitempty"`
}

// PodSpecPatch holds the fields of a Pod spec a patch may set. Lists keyed
// by name merge with the runtime's entries of the same name; tolerations
// replace the runtime's.
type PodSpecPatch struct {
	// serviceAccountName of the Pods.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="serviceAccountName is immutable"
	// +optional
	ServiceAccountName *string `json:"serviceAccountName,omitempty"`

	// volumes added to the Pods.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="volumes are immutable"
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// initContainers patches init containers of the runtime, by name.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="initContainers are immutable"
	// +optional
	InitContainers []ContainerPatch `json:"initContainers,omitempty"`

	// containers patches containers of the runtime, by name.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="containers are immutable"
	// +optional
	Containers []ContainerPatch `json:"containers,omitempty"`

	// imagePullSecrets added to the Pods.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="imagePullSecrets are immutable"
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// securityContext of the Pods.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="securityContext is immutable"
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`

	// nodeSelector added to the Pods'.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// affinity of the Pods, merged into the runtime's.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// tolerations of the Pods; they replace the runtime's.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// schedulingGates added to the Pods.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +optional
	SchedulingGates []corev1.PodSchedulingGate `json:"schedulingGates,omitempty"`

	// terminationGracePeriodSeconds of the Pods.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="terminationGracePeriodSeconds is immutable"
	// +optional
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// ContainerPatch patches a container of the runtime, named by name.
type ContainerPatch struct {
	// name of the container; the replicated Job must have it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// env merged into the container's environment. It cannot be set on the
	// trainer container node: its environment comes from spec.trainer.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// volumeMounts added to the container.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// securityContext of the container, merged into the runtime's.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
}

// PodTemplateOverride is Kubeflow Trainer v2.1's way to change the Pod
// template of replicated Jobs, kept so that v2.1 TrainJobs apply unchanged.
// It applies as a runtime patch of each target Job's Pod template, before
// spec.runtimePatches; later overrides win over earlier ones.
type PodTemplateOverride struct {
	// targetJobs are the replicated Jobs to change.
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	// +required
	TargetJobs []PodTemplateOverrideTargetJob `json:"targetJobs"`

	// metadata adds labels and annotations to the Pods.
	// +optional
	Metadata *PatchMetadata `json:"metadata,omitempty"`

	// spec changes the Pods' spec.
	// +optional
	Spec *PodTemplateSpecOverride `json:"spec,omitempty"`
}

// PodTemplateOverrideTargetJob names a replicated Job.
type PodTemplateOverrideTargetJob struct {
	// name of the replicated Job.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`
}

// PodTemplateSpecOverride holds the Pod spec fields a v2.1 override may set.
type PodTemplateSpecOverride struct {
	// serviceAccountName of the Pods.
	// +optional
	ServiceAccountName *string `json:"serviceAccountName,omitempty"`

	// nodeSelector added to the Pods'.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// affinity of the Pods, merged into the runtime's.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// tolerations of the Pods; they replace the runtime's.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// volumes added to the Pods.
	// +listType=map
	// +listMapKey=name
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// initContainers changes init containers of the runtime, by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	InitContainers []ContainerOverride `json:"initContainers,omitempty"`

	// containers changes containers of the runtime, by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	Containers []ContainerOverride `json:"containers,omitempty"`

	// schedulingGates added to the Pods.
	// +listType=map
	// +listMapKey=name
	// +optional
	SchedulingGates []corev1.PodSchedulingGate `json:"schedulingGates,omitempty"`

	// imagePullSecrets added to the Pods.
	// +listType=map
	// +listMapKey=name
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// ContainerOverride changes a container of the runtime, named by name (v2.0
// and v2.1).
type ContainerOverride struct {
	// name of the container; the replicated Job must have it.
	// +kubebuilder:validation:MinLength=1
	// +required
	Name string `json:"name"`

	// env merged into the container's environment; not on the trainer
	// container node, whose environment comes from spec.trainer.
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// volumeMounts added to the container.
	// +listType=map
	// +listMapKey=name
	// +optional
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
}

// PodSpecOverride is Kubeflow Trainer v2.0's way to change the Pod spec of
// replicated Jobs, kept so that v2.0 TrainJobs apply unchanged. It applies as
// a PodTemplateOverride does.
type PodSpecOverride struct {
	// targetJobs are the replicated Jobs to change.
	// +kubebuilder:validation:MinItems=1
	// +listType=atomic
	// +required
	TargetJobs []PodTemplateOverrideTargetJob `json:"targetJobs"`

	// serviceAccountName of the Pods.
	// +optional
	ServiceAccountName *string `json:"serviceAccountName,omitempty"`

	// nodeSelector added to the Pods'.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations of the Pods; they replace the runtime's.
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// volumes added to the Pods.
	// +listType=map
	// +listMapKey=name
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// initContainers changes init containers of the runtime, by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	InitContainers []ContainerOverride `json:"initContainers,omitempty"`

	// containers changes containers of the runtime, by name.
	// +listType=map
	// +listMapKey=name
	// +optional
	Containers []ContainerOverride `json:"containers,omitempty"`

	// schedulingGates added to the Pods.
	// +listType=map
	// +listMapKey=name
	// +optional
	SchedulingGates []corev1.PodSchedulingGate `json:"schedulingGates,omitempty"`
}

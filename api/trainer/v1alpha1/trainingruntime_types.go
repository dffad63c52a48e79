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
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	// TrainingRuntimeKind is the kind of the namespaced runtime.
	TrainingRuntimeKind = "TrainingRuntime"
	// ClusterTrainingRuntimeKind is the kind of the cluster-scoped runtime.
	ClusterTrainingRuntimeKind = "ClusterTrainingRuntime"
)

// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:scope=Cluster,categories=kubeflow;trainer
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.spec.mlPolicy.numNodes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterTrainingRuntime is a training runtime that TrainJobs of every
// namespace can reference.
type ClusterTrainingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec of the runtime.
	// +optional
	Spec TrainingRuntimeSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterTrainingRuntimeList is a list of ClusterTrainingRuntimes.
type ClusterTrainingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterTrainingRuntime `json:"items"`
}

// +kubebuilder:object:root=true
// +kubebuilder:storageversion
// +kubebuilder:resource:categories=kubeflow;trainer
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.spec.mlPolicy.numNodes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TrainingRuntime is a training runtime that TrainJobs of its own namespace
// can reference.
type TrainingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec of the runtime.
	// +optional
	Spec TrainingRuntimeSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// TrainingRuntimeList is a list of TrainingRuntimes.
type TrainingRuntimeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainingRuntime `json:"items"`
}

// TrainingRuntimeSpec describes how a TrainJob runs: the ML policy and the
// template of the Jobs to create.
type TrainingRuntimeSpec struct {
	// mlPolicy holds the ML-specific parameters of the runtime.
	// +optional
	MLPolicy *MLPolicy `json:"mlPolicy,omitempty"`

	// template of the Jobs created for a TrainJob. It has the shape of a
	// JobSet template, so Kubeflow runtimes apply unchanged.
	// +required
	Template JobSetTemplateSpec `json:"template"`

	// podGroupPolicy schedules the Pods of a TrainJob as a gang, all or
	// none, with the PodGroup of a gang scheduler.
	// +optional
	PodGroupPolicy *PodGroupPolicy `json:"podGroupPolicy,omitempty"`
}

// MLPolicy holds the ML-specific parameters of a runtime. At most one
// framework policy may be set; without one the runtime is a plain one and no
// framework environment is injected.
//
// +kubebuilder:validation:XValidation:rule="[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost), has(self.flux)].filter(x, x).size() <= 1",message="only one of the policies torch, mpi, jax, xgboost and flux can be set"
type MLPolicy struct {
	// numNodes is the default number of training nodes. Defaults to 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	NumNodes *int32 `json:"numNodes,omitempty"`

	// torch configures PyTorch distributed training: the trainer receives the
	// PET_* environment that torchrun reads.
	// +optional
	Torch *TorchMLPolicySource `json:"torch,omitempty"`

	// mpi configures MPI training (OpenMPI), as the DeepSpeed and MLX
	// runtimes use it: an SSH key and a hostfile for the launcher's
	// mpirun.
	// +optional
	MPI *MPIMLPolicySource `json:"mpi,omitempty"`

	// flux configures the Flux framework: every node runs a Flux broker,
	// and node 0 runs the trainer's command with flux run over them.
	// +optional
	Flux *FluxMLPolicySource `json:"flux,omitempty"`

	// jax configures JAX distributed training: the trainer receives the
	// JAX_* environment of jax.distributed.initialize.
	// +optional
	JAX *JAXMLPolicySource `json:"jax,omitempty"`

	// xgboost configures XGBoost distributed training: the trainer
	// receives the DMLC_* environment of XGBoost's collective.
	// +optional
	XGBoost *XGBoostMLPolicySource `json:"xgboost,omitempty"`
}

// TorchMLPolicySource configures PyTorch distributed training.
//
// +kubebuilder:validation:XValidation:rule="!has(self.elasticPolicy)",fieldPath=".elasticPolicy",message="torch.elasticPolicy is not supported by trainjob-operator yet"
type TorchMLPolicySource struct {
	// envInjection gives the PET_* environment, and the address and port of
	// node 0, to more containers than the trainer container node, which
	// always has it: sidecars or init containers of the runtime's replicated
	// Jobs.
	// +optional
	EnvInjection *EnvInjection `json:"envInjection,omitempty"`

	// numProcPerNode is the number of processes per node of Kubeflow Trainer
	// v2.0 and v2.1 runtimes, kept so that they apply unchanged: a positive
	// integer, or auto, cpu or gpu. spec.trainer.numProcPerNode of a
	// TrainJob overrides it. Runtimes of v2.2 and later leave it out.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="self > 0 || self in ['auto', 'cpu', 'gpu']",message="numProcPerNode must be a positive integer, auto, cpu or gpu"
	// +optional
	NumProcPerNode *intstr.IntOrString `json:"numProcPerNode,omitempty"`

	// elasticPolicy is not supported yet.
	// +optional
	ElasticPolicy *runtime.RawExtension `json:"elasticPolicy,omitempty"`
}

// EnvInjection names the containers, besides the trainer container, that
// get an ML policy's environment.
type EnvInjection struct {
	// targets are the containers, by replicated Job.
	// +listType=map
	// +listMapKey=jobName
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Targets []EnvInjectionTarget `json:"targets,omitempty"`
}

// EnvInjectionTarget names containers of one replicated Job.
type EnvInjectionTarget struct {
	// jobName is the name of the replicated Job.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	JobName string `json:"jobName"`

	// containerNames are containers or init containers of the replicated
	// Job.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="!self.exists(c, c == 'node')",message="containerNames must not include the main node container because PET_* envs are always injected into it"
	// +required
	ContainerNames []string `json:"containerNames"`
}

// JobSetTemplateSpec is the template of the Jobs of a TrainJob.
type JobSetTemplateSpec struct {
	// metadata holds labels and annotations added to every child Job.
	// +optional
	Metadata TemplateMetadata `json:"metadata,omitempty"`

	// spec lists the replicated Jobs.
	// +required
	Spec JobSetSpec `json:"spec"`
}

// TemplateMetadata is the metadata a template may set.
type TemplateMetadata struct {
	// labels added to every child Job.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// annotations added to every child Job.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// JobSetSpec lists the replicated Jobs of a runtime, and the policies that
// order their start and decide when the TrainJob is Complete. Its shape and
// meaning are those of a JobSet v0.12 spec.
//
// +kubebuilder:validation:XValidation:rule="!has(self.successPolicy) || !has(self.successPolicy.targetReplicatedJobs) || self.successPolicy.targetReplicatedJobs.all(t, self.replicatedJobs.exists(r, r.name == t))",fieldPath=".successPolicy.targetReplicatedJobs",message="successPolicy.targetReplicatedJobs names a replicated Job the template does not have"
// +kubebuilder:validation:XValidation:rule="!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && self.replicatedJobs.exists(x, has(x.dependsOn)))",fieldPath=".startupPolicy",message="startupPolicy InOrder and dependsOn cannot be combined (as in JobSet): use dependsOn alone"
// +kubebuilder:validation:XValidation:rule="self.replicatedJobs.all(r, !has(r.dependsOn) || r.dependsOn.all(d, d.name != r.name && self.replicatedJobs.exists(x, x.name == d.name)))",fieldPath=".replicatedJobs",message="dependsOn names a replicated Job the template does not have, or the replicated Job itself"
// +kubebuilder:validation:XValidation:rule="!has(self.replicatedJobs[0].dependsOn)",fieldPath=".replicatedJobs",message="the first replicated Job cannot have dependsOn: a replicated Job may only depend on those listed before it"
// +kubebuilder:validation:XValidation:rule="!has(self.coordinator) || self.replicatedJobs.exists(r, r.name == self.coordinator.replicatedJob && (!has(self.coordinator.jobIndex) || self.coordinator.jobIndex < r.replicas))",fieldPath=".coordinator",message="coordinator names a replicated Job the template does not have, or a jobIndex not below its replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.failurePolicy) || !has(self.failurePolicy.restartStrategy) || self.failurePolicy.restartStrategy != 'InPlaceRestart'",fieldPath=".failurePolicy.restartStrategy",message="restartStrategy InPlaceRestart (alpha in JobSet, behind a feature gate) is not supported by trainjob-operator: use Recreate or BlockingRecreate"
// +kubebuilder:validation:XValidation:rule="!has(self.failurePolicy) || !has(self.failurePolicy.rules) || self.failurePolicy.rules.all(r, r.action != 'RestartJob' && r.action != 'RestartJobAndIgnoreMaxRestarts')",fieldPath=".failurePolicy.rules",message="the actions RestartJob and RestartJobAndIgnoreMaxRestarts (alpha in JobSet, behind a feature gate) are not supported by trainjob-operator: use RestartJobSet, RestartJobSetAndIgnoreMaxRestarts or FailJobSet"
// +kubebuilder:validation:XValidation:rule="!has(self.failurePolicy) || !has(self.failurePolicy.rules) || self.failurePolicy.rules.all(r, !has(r.targetReplicatedJobs) || r.targetReplicatedJobs.all(t, self.replicatedJobs.exists(x, x.name == t)))",fieldPath=".failurePolicy.rules",message="a failurePolicy rule's targetReplicatedJobs names a replicated Job the template does not have"
// +kubebuilder:validation:XValidation:rule="!has(self.failurePolicy) || !has(self.failurePolicy.rules) || self.failurePolicy.rules.all(r, !has(r.name) || self.failurePolicy.rules.filter(x, has(x.name) && x.name == r.name).size() == 1)",fieldPath=".failurePolicy.rules",message="failurePolicy rule names must be unique"
// +kubebuilder:validation:XValidation:rule="!has(self.suspend)",fieldPath=".suspend",message="suspend belongs on the TrainJob (spec.suspend), not in the runtime template"
// +kubebuilder:validation:XValidation:rule="!has(self.managedBy)",fieldPath=".managedBy",message="managedBy belongs on the TrainJob (spec.managedBy), not in the runtime template"
// +kubebuilder:validation:XValidation:rule="!self.replicatedJobs.exists(r, has(r.template.metadata) && has(r.template.metadata.labels) && 'trainer.kubeflow.org/trainjob-ancestor-step' in r.template.metadata.labels && r.template.metadata.labels['trainer.kubeflow.org/trainjob-ancestor-step'] == 'trainer') || self.replicatedJobs.all(r, r.name != 'node' || !has(r.template.spec) || !has(r.template.spec.parallelism) || has(r.template.spec.completions) || (has(r.template.metadata) && has(r.template.metadata.labels) && 'trainer.kubeflow.org/trainjob-ancestor-step' in r.template.metadata.labels && r.template.metadata.labels['trainer.kubeflow.org/trainjob-ancestor-step'] == 'trainer'))",fieldPath=".replicatedJobs",reason=FieldValueRequired,message="replicated Job \"node\" sets parallelism but not completions, and it is not the trainer step here (another replicated Job is labelled trainer.kubeflow.org/trainjob-ancestor-step: trainer): its Jobs are Indexed, and an Indexed Job needs completions; set completions (the number of Pods that must succeed) too"
type JobSetSpec struct {
	// replicatedJobs are the steps of the runtime. Each creates `replicas`
	// Indexed Jobs named <trainjob>-<name>-<replica index>.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +required
	ReplicatedJobs []ReplicatedJob `json:"replicatedJobs"`

	// network is the Pods' network identity: DNS hostnames under a headless
	// Service (see Network).
	// +optional
	Network *Network `json:"network,omitempty"`
	// successPolicy says when the TrainJob is Complete: by default, once
	// every Job of every replicated Job succeeded.
	// +optional
	SuccessPolicy *SuccessPolicy `json:"successPolicy,omitempty"`
	// failurePolicy says what a failed Job does: without one, the TrainJob
	// fails; with one, it may restart all of its Jobs (see FailurePolicy).
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`
	// startupPolicy orders the start of the replicated Jobs; JobSet
	// deprecates it in favour of dependsOn.
	// +optional
	StartupPolicy *StartupPolicy `json:"startupPolicy,omitempty"`
	// coordinator names the Pod whose DNS name every Job and Pod carries in
	// the label and annotation jobset.sigs.k8s.io/coordinator.
	// +optional
	Coordinator *Coordinator `json:"coordinator,omitempty"`
	// suspend is set on the TrainJob instead.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
	// managedBy is set on the TrainJob instead.
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`
	// ttlSecondsAfterFinished is, as in JobSet, how long after the
	// TrainJob finishes its Jobs (with their Pods) and Service are
	// deleted; the TrainJob and its status stay (its own
	// spec.ttlSecondsAfterFinished deletes it). Unset, they stay until
	// the TrainJob is deleted.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// volumeClaimPolicies make PersistentVolumeClaims for each TrainJob,
	// mounted where its containers mount a volume of a template's name
	// (see VolumeClaimPolicy).
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	// +optional
	VolumeClaimPolicies []VolumeClaimPolicy `json:"volumeClaimPolicies,omitempty"`
}

// ReplicatedJob is one step of a runtime: a Job template created `replicas`
// times.
//
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.ttlSecondsAfterFinished)",fieldPath=".template.spec.ttlSecondsAfterFinished",message="a Job-level ttlSecondsAfterFinished would delete Jobs behind the TrainJob's back: set spec.ttlSecondsAfterFinished on the TrainJob instead"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.activeDeadlineSeconds)",fieldPath=".template.spec.activeDeadlineSeconds",message="a Job-level activeDeadlineSeconds would fail Jobs behind the TrainJob's back: set spec.activeDeadlineSeconds on the TrainJob instead"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.suspend)",fieldPath=".template.spec.suspend",message="suspend belongs on the TrainJob (spec.suspend), not in the Job template"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.managedBy)",fieldPath=".template.spec.managedBy",message="the child Jobs are run by the Kubernetes Job controller; managedBy must not be set in the Job template"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.completionMode) || self.template.spec.completionMode == 'Indexed'",fieldPath=".template.spec.completionMode",message="child Jobs are Indexed Jobs: completionMode must be Indexed or unset"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec) || !has(self.template.spec.parallelism) || has(self.template.spec.completions) || self.name == 'node' || (has(self.template.metadata) && has(self.template.metadata.labels) && 'trainer.kubeflow.org/trainjob-ancestor-step' in self.template.metadata.labels && self.template.metadata.labels['trainer.kubeflow.org/trainjob-ancestor-step'] == 'trainer')",fieldPath=".template.spec.completions",reason=FieldValueRequired,message="parallelism is set but completions is not: the child Jobs are Indexed, and an Indexed Job needs completions; set completions (the number of Pods that must succeed) too. Only the trainer step may leave it out: it gets both from numNodes"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec) || !has(self.template.spec.template.spec) || !has(self.template.spec.template.spec.restartPolicy) || self.template.spec.template.spec.restartPolicy in ['Never', 'OnFailure']",fieldPath=".template.spec.template.spec.restartPolicy",reason=FieldValueInvalid,message="restartPolicy must be Never or OnFailure, or unset (OnFailure): the Pods of a Job may not restart Always"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec) || !has(self.template.spec.selector)",fieldPath=".template.spec.selector",reason=FieldValueForbidden,message="selector must not be set: the API server gives every child Job a selector of its own, and one written in a runtime would match the Pods of every TrainJob on it"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec) || !has(self.template.spec.manualSelector) || !self.template.spec.manualSelector",fieldPath=".template.spec.manualSelector",reason=FieldValueForbidden,message="manualSelector must not be true: the API server gives every child Job a selector of its own"
type ReplicatedJob struct {
	// name of the step. Child Jobs are named <trainjob>-<name>-<index>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Name string `json:"name"`

	// replicas is the number of Jobs created from the template. Defaults to 1.
	// The trainer step must have exactly one: its nodes are the Pods of that
	// Job.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// template of the Jobs.
	// +required
	Template batchv1.JobTemplateSpec `json:"template"`

	// dependsOn are replicated Jobs listed before this one, and the status
	// each must reach before the Jobs of this one are created: Ready (each
	// of its Jobs has all its Pods ready, or finished) or Complete (each of
	// its Jobs succeeded). All must be reached.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=5
	// +optional
	DependsOn []DependsOn `json:"dependsOn,omitempty"`

	// groupName puts the replicated Job in a group, as in JobSet: its Jobs
	// and Pods are labelled with the group, the number of Jobs of the
	// group and their index in it. Defaults to default.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	GroupName *string `json:"groupName,omitempty"`
}

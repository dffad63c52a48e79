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

const (
	// TrainJobKind is the kind of the TrainJob.
	TrainJobKind = "TrainJob"

	// DefaultManagedBy is the value of spec.managedBy for TrainJobs this
	// controller reconciles; TrainJobs naming any other manager are left alone.
	DefaultManagedBy = "trainer.kubeflow.org/trainjob-controller"
)

// Condition types of a TrainJob.
const (
	// TrainJobCreated is False, with a reason, while the child Jobs of the
	// TrainJob cannot be created (for example when the referenced runtime
	// does not exist yet), and absent otherwise: a TrainJob that runs
	// normally has no condition, as under Kubeflow Trainer, whose clients
	// read "no condition" as running. Versions before set it True once the
	// Jobs existed; the controller removes it from such TrainJobs.
	TrainJobCreated = "Created"

	// TrainJobSuspended is True while spec.suspend is true and every child
	// Job has been seen with no Pod left; False with reason Suspending until
	// then. It becomes False, with reason Resumed, on resume.
	TrainJobSuspended = "Suspended"

	// TrainJobComplete is True once every trainer Job succeeded. Terminal.
	TrainJobComplete = "Complete"

	// TrainJobFailed is True once the TrainJob failed. Terminal.
	TrainJobFailed = "Failed"
)

// Condition reasons of a TrainJob.
const (
	// TrainJobJobsCreatedReason is the reason of the event recorded when
	// Jobs of the TrainJob are created (the Created=True reason of earlier
	// versions).
	TrainJobJobsCreatedReason = "JobsCreated"
	// TrainJobRuntimeNotFoundReason is the Created=False reason when the
	// referenced (Cluster)TrainingRuntime does not exist.
	TrainJobRuntimeNotFoundReason = "RuntimeNotFound"
	// TrainJobInvalidRuntimeReason is the Created=False reason when the
	// TrainJob and its runtime cannot be turned into Jobs.
	TrainJobInvalidRuntimeReason = "InvalidRuntime"
	// TrainJobNameTakenReason is the Created=False reason when a child's
	// name is held by an object the TrainJob does not own (a Job of an
	// earlier TrainJob of the same name still being deleted, or of another
	// TrainJob). The TrainJob starts once the name is free.
	TrainJobNameTakenReason = "NameTaken"
	// TrainJobJobRefusedReason is the Created=False reason when the API
	// server refused to create a child Job (a quota, an admission webhook,
	// Job validation); the message is the API server's.
	TrainJobJobRefusedReason = "JobRefused"
	// TrainJobRuntimeChangedReason is the Created=False reason when the
	// runtime changed, between the creation of some of the TrainJob's Jobs
	// and the others, in a way that no longer gives the replicated Jobs the
	// TrainJob started with.
	TrainJobRuntimeChangedReason = "RuntimeChanged"
	// TrainJobPodGroupUnavailableReason is the Created=False reason when
	// the runtime's podGroupPolicy asks for a PodGroup whose CRD is not
	// installed. The TrainJob starts once it is.
	TrainJobPodGroupUnavailableReason = "PodGroupUnavailable"

	// TrainJobSuspendedReason is the Suspended=True reason.
	TrainJobSuspendedReason = "Suspended"
	// TrainJobSuspendingReason is the Suspended=False reason while the
	// TrainJob is suspended but Pods of its Jobs are still running or not
	// every Job has been seen without them yet.
	TrainJobSuspendingReason = "Suspending"
	// TrainJobResumedReason is the Suspended=False reason after a resume.
	TrainJobResumedReason = "Resumed"

	// TrainJobJobsCompletedReason is the Complete=True reason.
	TrainJobJobsCompletedReason = "AllJobsCompleted"

	// TrainJobJobFailedReason is the Failed=True reason when a child Job
	// failed: FailedJobs, as JobSet and so Kubeflow Trainer name it.
	TrainJobJobFailedReason = "FailedJobs"
	// TrainJobJobDeletedReason is the Failed=True reason when a child Job was
	// deleted before it finished: its outcome is unknown and it is not re-run.
	TrainJobJobDeletedReason = "JobDeleted"
	// TrainJobDeadlineExceededReason is the Failed=True reason when the
	// TrainJob was active longer than spec.activeDeadlineSeconds.
	TrainJobDeadlineExceededReason = "DeadlineExceeded"
	// TrainJobFailJobSetReason is the Failed=True reason when a failure
	// policy rule with action FailJobSet matched a failed Job, as JobSet
	// names it.
	TrainJobFailJobSetReason = "FailJobSetFailurePolicyAction"
	// TrainJobReachedMaxRestartsReason is the Failed=True reason when a Job
	// failed after the failure policy's maxRestarts were made, as JobSet
	// names it.
	TrainJobReachedMaxRestartsReason = "ReachedMaxRestarts"
)

// States of a TrainJob, as status.state shows them.
const (
	// TrainJobStateCreated: its Jobs are not created yet, or cannot be
	// (Created=False says why).
	TrainJobStateCreated = "Created"
	// TrainJobStateRunning: its Jobs were created and it is not suspended.
	TrainJobStateRunning = "Running"
	// TrainJobStateSuspending: spec.suspend is true and Pods of its Jobs
	// may still run.
	TrainJobStateSuspending = "Suspending"
	// TrainJobStateSuspended: suspended, with no Pod of its Jobs left.
	TrainJobStateSuspended = "Suspended"
	// TrainJobStateComplete: Complete=True.
	TrainJobStateComplete = "Complete"
	// TrainJobStateFailed: Failed=True.
	TrainJobStateFailed = "Failed"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:categories=kubeflow;trainer
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`,description="Created, Running, Suspending, Suspended, Complete or Failed"
// +kubebuilder:printcolumn:name="Runtime",type=string,JSONPath=`.spec.runtimeRef.name`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.spec.trainer.numNodes`,description="Training nodes requested by the TrainJob (empty: the runtime's numNodes)"
// +kubebuilder:printcolumn:name="Started",type=date,JSONPath=`.status.startTime`,priority=1
// +kubebuilder:printcolumn:name="Deadline",type=integer,JSONPath=`.spec.activeDeadlineSeconds`,priority=1,description="spec.activeDeadlineSeconds"
// +kubebuilder:printcolumn:name="TTL",type=integer,JSONPath=`.spec.ttlSecondsAfterFinished`,priority=1,description="spec.ttlSecondsAfterFinished"
// +kubebuilder:printcolumn:name="Restarts",type=integer,JSONPath=`.status.restarts`,priority=1,description="Restarts made by the runtime's failurePolicy"
// +kubebuilder:printcolumn:name="Progress",type=integer,JSONPath=`.status.trainerStatus.progressPercentage`,priority=1,description="Percent complete, as the trainer reported it"
// +kubebuilder:printcolumn:name="ETA",type=integer,JSONPath=`.status.trainerStatus.estimatedRemainingSeconds`,priority=1,description="Seconds of training left, as the trainer reported it"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a lowercase RFC 1035 label: start with a letter, then letters, digits or '-'"
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be no more than 63 characters"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(oldSelf.spec) || !has(oldSelf.status) || !has(oldSelf.status.jobsStatus) || oldSelf.status.jobsStatus.all(j, j.active == 0) || ((has(self.spec.runtimePatches) ? self.spec.runtimePatches : []) == (has(oldSelf.spec.runtimePatches) ? oldSelf.spec.runtimePatches : []) && (has(self.spec.podTemplateOverrides) ? self.spec.podTemplateOverrides : []) == (has(oldSelf.spec.podTemplateOverrides) ? oldSelf.spec.podTemplateOverrides : []) && (has(self.spec.podSpecOverrides) ? self.spec.podSpecOverrides : []) == (has(oldSelf.spec.podSpecOverrides) ? oldSelf.spec.podSpecOverrides : []))",fieldPath=".spec",reason=FieldValueForbidden,message="runtimePatches, podTemplateOverrides and podSpecOverrides cannot change while Jobs of the TrainJob have active Pods: suspend it and wait for its Pods to stop"
// +kubebuilder:validation:XValidation:rule="!has(self.spec) || !has(self.spec.suspend) || !self.spec.suspend || (has(oldSelf.spec) && has(oldSelf.spec.suspend) && oldSelf.spec.suspend) || !has(oldSelf.status) || !has(oldSelf.status.conditions) || !oldSelf.status.conditions.exists(c, c.type in ['Complete', 'Failed'] && c.status == 'True')",fieldPath=".spec.suspend",reason=FieldValueForbidden,message="the TrainJob finished (it is Complete or Failed); a finished TrainJob cannot be suspended"

// TrainJob runs a distributed training job described by a training runtime.
type TrainJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec of the TrainJob.
	// +optional
	Spec TrainJobSpec `json:"spec,omitempty"`

	// status of the TrainJob.
	// +optional
	Status TrainJobStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// TrainJobList is a list of TrainJobs.
type TrainJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TrainJob `json:"items"`
}

// TrainJobSpec is the desired state of a TrainJob.
//
// +kubebuilder:validation:XValidation:rule="(has(self.runtimePatches) ? self.runtimePatches : []) == (has(oldSelf.runtimePatches) ? oldSelf.runtimePatches : []) || (has(self.suspend) && self.suspend) || (has(oldSelf.suspend) && oldSelf.suspend)",fieldPath=".runtimePatches",reason=FieldValueForbidden,message="runtimePatches can change only while the TrainJob is suspended, before or after the change"
// +kubebuilder:validation:XValidation:rule="(has(self.podTemplateOverrides) ? self.podTemplateOverrides : []) == (has(oldSelf.podTemplateOverrides) ? oldSelf.podTemplateOverrides : []) || (has(self.suspend) && self.suspend) || (has(oldSelf.suspend) && oldSelf.suspend)",fieldPath=".podTemplateOverrides",reason=FieldValueForbidden,message="podTemplateOverrides can change only while the TrainJob is suspended, before or after the change"
// +kubebuilder:validation:XValidation:rule="(has(self.podSpecOverrides) ? self.podSpecOverrides : []) == (has(oldSelf.podSpecOverrides) ? oldSelf.podSpecOverrides : []) || (has(self.suspend) && self.suspend) || (has(oldSelf.suspend) && oldSelf.suspend)",fieldPath=".podSpecOverrides",reason=FieldValueForbidden,message="podSpecOverrides can change only while the TrainJob is suspended, before or after the change"
// +kubebuilder:validation:XValidation:rule="has(self.trainer) == has(oldSelf.trainer)",fieldPath=".trainer",message="trainer is immutable: it cannot be added or removed once the TrainJob exists"
// +kubebuilder:validation:XValidation:rule="has(self.labels) == has(oldSelf.labels) || size(has(self.labels) ? self.labels : oldSelf.labels) == 0",fieldPath=".labels",message="labels are immutable: they are given to the TrainJob's Jobs when they are created, so a change would not reach them"
// +kubebuilder:validation:XValidation:rule="has(self.annotations) == has(oldSelf.annotations) || size(has(self.annotations) ? self.annotations : oldSelf.annotations) == 0",fieldPath=".annotations",message="annotations are immutable: they are given to the TrainJob's Jobs when they are created, so a change would not reach them"
type TrainJobSpec struct {
	// runtimeRef references the training runtime the TrainJob runs on.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="runtimeRef is immutable"
	// +required
	RuntimeRef RuntimeRef `json:"runtimeRef"`

	// trainer overrides the trainer step of the runtime: image, command,
	// arguments, environment, number of nodes and resources per node. It is
	// immutable. resourcesPerNode is compared by value (500m is 0.5) by the
	// webhook, as clients that write a TrainJob back through Go types (Kueue
	// at admission) re-format quantities.
	// +kubebuilder:validation:XValidation:rule="(has(self.image) ? self.image : '') == (has(oldSelf.image) ? oldSelf.image : '') && (has(self.command) ? self.command : []) == (has(oldSelf.command) ? oldSelf.command : []) && (has(self.args) ? self.args : []) == (has(oldSelf.args) ? oldSelf.args : []) && (has(self.env) ? self.env : []) == (has(oldSelf.env) ? oldSelf.env : []) && (has(self.numNodes) ? self.numNodes : 0) == (has(oldSelf.numNodes) ? oldSelf.numNodes : 0) && (has(self.numProcPerNode) ? self.numProcPerNode : 0) == (has(oldSelf.numProcPerNode) ? oldSelf.numProcPerNode : 0) && has(self.resourcesPerNode) == has(oldSelf.resourcesPerNode)",message="trainer is immutable"
	// +optional
	Trainer *Trainer `json:"trainer,omitempty"`

	// labels are added to the child Jobs of the TrainJob when they are
	// created. They are immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="labels are immutable: they are given to the TrainJob's Jobs when they are created, so a change would not reach them"
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to the child Jobs of the TrainJob when they are
	// created. They are immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="annotations are immutable: they are given to the TrainJob's Jobs when they are created, so a change would not reach them"
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// suspend suspends the TrainJob: the child Jobs are suspended and their
	// Pods deleted. Resuming restarts them; completed work is kept. A
	// finished (Complete or Failed) TrainJob cannot be suspended.
	// +kubebuilder:default=false
	// +optional
	Suspend *bool `json:"suspend,omitempty"`

	// activeDeadlineSeconds is how long, in seconds, the TrainJob may be active
	// counted from status.startTime, which is reset when the TrainJob is
	// resumed. When it is reached, every Pod is terminated and the TrainJob
	// fails with reason DeadlineExceeded. It may be changed at any time, to
	// give a running TrainJob more or less time.
	// +kubebuilder:validation:Minimum=1
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// ttlSecondsAfterFinished is how long, in seconds, a finished (Complete or
	// Failed) TrainJob is kept before it is deleted with its children. 0
	// deletes it as soon as it finishes; unset keeps it (or leaves it to the
	// cluster's retention policy). It may be changed at any time.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// managedBy names the controller that reconciles this TrainJob. This
	// controller reconciles TrainJobs with the default value and leaves every
	// other TrainJob alone (for example to MultiKueue).
	// +kubebuilder:default="trainer.kubeflow.org/trainjob-controller"
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$')",message="managedBy must be a domain-prefixed path such as trainer.kubeflow.org/trainjob-controller"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="managedBy is immutable"
	// +optional
	ManagedBy *string `json:"managedBy,omitempty"`

	// initializer configures the runtime's dataset and model initializer
	// steps: where they download from, their environment and credentials.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="initializer is immutable"
	// +optional
	Initializer *Initializer `json:"initializer,omitempty"`

	// runtimePatches change the runtime's template for this TrainJob, each
	// owned by a manager (Kueue writes the one of kueue.x-k8s.io/manager).
	// They apply in order, before the trainer overrides. They can change
	// only while the TrainJob is suspended (before or after the change) and
	// none of its Jobs has active Pods; the Pods follow on the next resume.
	// +listType=map
	// +listMapKey=manager
	// +kubebuilder:validation:MaxItems=16
	// +optional
	RuntimePatches []RuntimePatch `json:"runtimePatches,omitempty"`

	// podTemplateOverrides change the Pod templates of replicated Jobs, as
	// in Kubeflow Trainer v2.1 (v2.2 replaced them with runtimePatches);
	// kept so that v2.1 TrainJobs apply unchanged. They apply before
	// runtimePatches, later overrides winning over earlier ones, and
	// change only while the TrainJob is suspended.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	PodTemplateOverrides []PodTemplateOverride `json:"podTemplateOverrides,omitempty"`

	// podSpecOverrides change the Pod specs of replicated Jobs, as in
	// Kubeflow Trainer v2.0; kept so that v2.0 TrainJobs apply unchanged.
	// They apply before podTemplateOverrides.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +optional
	PodSpecOverrides []PodSpecOverride `json:"podSpecOverrides,omitempty"`
}

// RuntimeRef references a TrainingRuntime (in the TrainJob's namespace) or a
// ClusterTrainingRuntime.
type RuntimeRef struct {
	// name of the runtime.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// apiGroup of the runtime. Defaults to trainer.kubeflow.org.
	// +kubebuilder:default="trainer.kubeflow.org"
	// +kubebuilder:validation:Enum=trainer.kubeflow.org
	// +optional
	APIGroup *string `json:"apiGroup,omitempty"`

	// kind of the runtime. Defaults to ClusterTrainingRuntime.
	// +kubebuilder:default="ClusterTrainingRuntime"
	// +kubebuilder:validation:Enum=ClusterTrainingRuntime;TrainingRuntime
	// +optional
	Kind *string `json:"kind,omitempty"`
}

// Trainer overrides the trainer step of the runtime: the replicated Job
// labelled trainer.kubeflow.org/trainjob-ancestor-step=trainer, and in it the
// container named "node".
type Trainer struct {
	// image of the trainer container.
	// +kubebuilder:validation:MaxLength=500
	// +optional
	Image *string `json:"image,omitempty"`

	// command of the trainer container.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=1048576
	// +optional
	Command []string `json:"command,omitempty"`

	// args of the trainer container.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=1048576
	// +optional
	Args []string `json:"args,omitempty"`

	// env is merged into the trainer container's environment; a variable of
	// the same name in the runtime is replaced.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// numNodes is the number of training nodes (Pods). Defaults to the
	// runtime's mlPolicy.numNodes, or 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	NumNodes *int32 `json:"numNodes,omitempty"`

	// resourcesPerNode replaces the compute resources of the trainer container.
	// +optional
	ResourcesPerNode *corev1.ResourceRequirements `json:"resourcesPerNode,omitempty"`

	// numProcPerNode is the number of processes on every node. Without it,
	// the torch policy runs one process per GPU of the trainer container if
	// it asks for GPUs (torchrun's auto), else one per CPU it requests (its
	// limit if it requests none), at least one.
	// +kubebuilder:validation:Minimum=1
	// +optional
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
}

// TrainJobStatus is the observed state of a TrainJob.
type TrainJobStatus struct {
	// conditions of the TrainJob: Failed, Complete, Suspended and Created,
	// kept in that order. A TrainJob that runs and was never suspended has
	// none, as under Kubeflow Trainer.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// state is the TrainJob's state in one word, for display (kubectl's
	// State column): Created, Running, Suspending, Suspended, Complete or
	// Failed. It is derived from the conditions, spec.suspend and
	// jobsStatus, which clients should read.
	// +kubebuilder:validation:Enum=Created;Running;Suspending;Suspended;Complete;Failed
	// +optional
	State string `json:"state,omitempty"`

	// jobsStatus has one entry per replicated Job of the runtime.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	JobsStatus []JobStatus `json:"jobsStatus,omitempty"`

	// successPolicy says when the TrainJob is Complete: the runtime's
	// successPolicy, or All of every replicated Job, fixed with jobsStatus
	// when the first Jobs are created. Without it (a TrainJob whose Jobs
	// an earlier version created), the TrainJob is Complete once every Job
	// of its trainer step succeeded.
	// +optional
	SuccessPolicy *SuccessPolicy `json:"successPolicy,omitempty"`

	// network is the runtime's network, fixed with jobsStatus when the
	// first Jobs are created: whether the TrainJob has a headless Service,
	// its name, and whether it publishes Pods before they are ready.
	// Without it (Jobs an earlier version created), the Service is named
	// after the TrainJob and publishes every Pod.
	// +optional
	Network *Network `json:"network,omitempty"`

	// failurePolicy is the runtime's failurePolicy, fixed with jobsStatus
	// when the first Jobs are created; none, the TrainJob fails with its
	// first failed Job.
	// +optional
	FailurePolicy *FailurePolicy `json:"failurePolicy,omitempty"`

	// jobsTTLSecondsAfterFinished is the runtime template's
	// ttlSecondsAfterFinished, fixed with jobsStatus when the first Jobs
	// are created: how long after the TrainJob finishes its Jobs and their
	// Pods are deleted. None, they stay until the TrainJob is deleted.
	// +kubebuilder:validation:Minimum=0
	// +optional
	JobsTTLSecondsAfterFinished *int32 `json:"jobsTTLSecondsAfterFinished,omitempty"`

	// restarts is how many times the failure policy restarted the
	// TrainJob's Jobs. The Jobs of the current attempt carry it in their
	// label jobset.sigs.k8s.io/restart-attempt; jobsStatus counts theirs.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Restarts int32 `json:"restarts,omitempty"`

	// restartsCountTowardsMax is how many of those restarts count against
	// the failure policy's maxRestarts.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RestartsCountTowardsMax int32 `json:"restartsCountTowardsMax,omitempty"`

	// startTime is when the TrainJob last started running: when the
	// controller first saw it unsuspended (whether or not its Jobs could be
	// created then), and again on every resume. The active deadline counts
	// from it.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the TrainJob completed successfully.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// trainerStatus is the latest progress the trainer's Pods reported to
	// the manager's status server: how far along training is, how long it
	// has left and its metrics. Empty until a Pod reports; it stays when
	// the TrainJob finishes. See docs/lifecycle.md.
	// +optional
	TrainerStatus *TrainerStatus `json:"trainerStatus,omitempty"`
}

// TrainerStatus is the latest progress the trainer step reported.
// +kubebuilder:validation:XValidation:rule="has(self.lastUpdatedTime)",message="lastUpdatedTime is required when trainerStatus is present"
type TrainerStatus struct {
	// progressPercentage is how complete training is, from 0 to 100;
	// empty if unknown.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ProgressPercentage *int32 `json:"progressPercentage,omitempty"`

	// estimatedRemainingSeconds is how long training has left, in seconds;
	// empty if unknown.
	// +kubebuilder:validation:Minimum=0
	// +optional
	EstimatedRemainingSeconds *int32 `json:"estimatedRemainingSeconds,omitempty"`

	// metrics are the model's current metrics, as the training program
	// named them.
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	Metrics []Metric `json:"metrics,omitempty"`

	// lastUpdatedTime is when the training program observed this status.
	// +optional
	LastUpdatedTime metav1.Time `json:"lastUpdatedTime,omitempty"`
}

// Metric is one named value a training program reports, e.g. loss.
type Metric struct {
	// name of the metric, e.g. "loss" or "eval_accuracy".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Name string `json:"name,omitempty"`

	// value of the metric, as a string.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	Value string `json:"value,omitempty"`
}

// UpdateTrainJobStatusRequest is the body a trainer Pod posts to the
// status server: POST
// /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status
// (see StatusServerPath).
type UpdateTrainJobStatusRequest struct {
	// trainerStatus is the trainer step's progress; a request without it
	// changes nothing.
	// +optional
	TrainerStatus *TrainerStatus `json:"trainerStatus,omitempty"`
}

// JobStatus summarises the child Jobs of one replicated Job.
type JobStatus struct {
	// name of the replicated Job.
	// +required
	Name string `json:"name"`

	// replicas is the number of child Jobs of the replicated Job. It is fixed
	// when the TrainJob's Jobs are first created, so that later changes to
	// the runtime do not change a TrainJob that runs already. Absent from
	// a status written by a client of Kubeflow's types, which do not have
	// it (Kueue's MultiKueue mirrors a worker's status so).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas int32 `json:"replicas"`

	// trainer is true for the trainer step.
	// +optional
	Trainer bool `json:"trainer,omitempty"`

	// waiting is true while Jobs of the replicated Job are still to be
	// created: it waits for the replicated Jobs it depends on, or its
	// creation has not succeeded yet. A missing Job of a replicated Job
	// that is not waiting went away before its outcome was recorded.
	// +optional
	Waiting bool `json:"waiting,omitempty"`

	// ready is the number of child Jobs whose Pods are all ready or succeeded.
	// +optional
	Ready int32 `json:"ready"`

	// succeeded is the number of child Jobs that succeeded.
	// +optional
	Succeeded int32 `json:"succeeded"`

	// failed is the number of child Jobs that failed.
	// +optional
	Failed int32 `json:"failed"`

	// active is the number of child Jobs with at least one running or
	// pending Pod.
	// +optional
	Active int32 `json:"active"`

	// suspended is the number of child Jobs that are suspended.
	// +optional
	Suspended int32 `json:"suspended"`

	// succeededReplicas lists the replica indexes of the child Jobs whose
	// success is recorded. A recorded child Job is never created again, even
	// if it is deleted.
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	SucceededReplicas []int32 `json:"succeededReplicas,omitempty"`

	// failedReplicas lists the replica indexes of the child Jobs whose failure
	// (or deletion before they finished) is recorded.
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	FailedReplicas []int32 `json:"failedReplicas,omitempty"`
}

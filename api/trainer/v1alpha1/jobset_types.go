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

import corev1 "k8s.io/api/core/v1"

// The JobSet policies of a runtime's template, with JobSet v0.12's fields
// and meaning, applied here to the child Jobs this controller creates.

// DependsOnStatus is the state a replicated Job waits for in the replicated
// Jobs it depends on.
// +kubebuilder:validation:Enum=Ready;Complete
type DependsOnStatus string

const (
	// DependsOnReady waits until every Job of the dependency has started:
	// each is Ready (its succeeded and ready Pods reach its parallelism, or
	// its completions if fewer), or has finished.
	DependsOnReady DependsOnStatus = "Ready"
	// DependsOnComplete waits until every Job of the dependency succeeded.
	DependsOnComplete DependsOnStatus = "Complete"
)

// DependsOn is a replicated Job that must reach a status before the Jobs of
// the replicated Job that names it are created.
type DependsOn struct {
	// name of a replicated Job listed before this one.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +required
	Name string `json:"name"`

	// status the replicated Job must reach: Ready or Complete.
	// +required
	Status DependsOnStatus `json:"status"`
}

// StartupPolicyOptions orders the start of the replicated Jobs.
// +kubebuilder:validation:Enum=AnyOrder;InOrder
type StartupPolicyOptions string

const (
	// AnyOrder starts every replicated Job at once (unless dependsOn says
	// otherwise).
	AnyOrder StartupPolicyOptions = "AnyOrder"
	// InOrder starts the replicated Jobs in the order they are listed, each
	// once every Job of the one before has started, as if each depended on
	// the one before with status Ready.
	InOrder StartupPolicyOptions = "InOrder"
)

// StartupPolicy orders the start of the replicated Jobs. JobSet deprecates
// it in favour of dependsOn, which it may not be combined with.
type StartupPolicy struct {
	// startupPolicyOrder is AnyOrder or InOrder.
	// +required
	StartupPolicyOrder StartupPolicyOptions `json:"startupPolicyOrder"`
}

// Operator says whether all, or any, of the Jobs a success policy targets
// must succeed.
// +kubebuilder:validation:Enum=All;Any
type Operator string

const (
	// OperatorAll completes the TrainJob once every Job of the targeted
	// replicated Jobs succeeded.
	OperatorAll Operator = "All"
	// OperatorAny completes the TrainJob once one Job of the targeted
	// replicated Jobs succeeded.
	OperatorAny Operator = "Any"
)

// SuccessPolicy says when the TrainJob is Complete. Without one, it is
// Complete once every Job of every replicated Job succeeded, as a JobSet.
// Once it is Complete, its Jobs still running are stopped.
type SuccessPolicy struct {
	// operator is All or Any.
	// +required
	Operator Operator `json:"operator"`

	// targetReplicatedJobs are the replicated Jobs whose Jobs count; empty,
	// all of them.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=40
	// +optional
	TargetReplicatedJobs []string `json:"targetReplicatedJobs,omitempty"`
}

// Network is the Pods' network identity, as in JobSet: with DNS hostnames
// (the default), every Pod is reachable at
// <trainjob>-<replicated Job>-<job index>-<pod index>.<subdomain> through a
// headless Service named after the subdomain, which is the TrainJob's name
// unless set.
type Network struct {
	// enableDNSHostnames gives the Pods their DNS names, through the
	// headless Service; true by default. False: no Service, and the Pods
	// have no subdomain.
	// +optional
	EnableDNSHostnames *bool `json:"enableDNSHostnames,omitempty"`

	// subdomain names the headless Service and the Pods' subdomain; the
	// TrainJob's name by default.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	// +optional
	Subdomain string `json:"subdomain,omitempty"`

	// publishNotReadyAddresses publishes the Pods' DNS records before they
	// are ready; true by default.
	// +optional
	PublishNotReadyAddresses *bool `json:"publishNotReadyAddresses,omitempty"`
}

// Coordinator names one Pod as the TrainJob's coordinator: every Job and
// Pod carries its stable DNS name in the label and annotation
// jobset.sigs.k8s.io/coordinator.
type Coordinator struct {
	// replicatedJob holding the coordinator Pod.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +required
	ReplicatedJob string `json:"replicatedJob"`

	// jobIndex is the index of the coordinator's Job in its replicated Job.
	// +kubebuilder:validation:Minimum=0
	// +optional
	JobIndex int `json:"jobIndex,omitempty"`

	// podIndex is the completion index of the coordinator Pod in its Job.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PodIndex int `json:"podIndex,omitempty"`
}

// FailurePolicyAction is what a failure policy rule does.
// +kubebuilder:validation:Enum=FailJobSet;RestartJobSet;RestartJobSetAndIgnoreMaxRestarts;RestartJob;RestartJobAndIgnoreMaxRestarts
type FailurePolicyAction string

const (
	// FailJobSet fails the TrainJob at once.
	FailJobSet FailurePolicyAction = "FailJobSet"
	// RestartJobSet restarts every Job of the TrainJob, counting the
	// restart against maxRestarts; once they are spent, the TrainJob fails.
	RestartJobSet FailurePolicyAction = "RestartJobSet"
	// RestartJobSetAndIgnoreMaxRestarts restarts every Job of the TrainJob
	// without counting the restart against maxRestarts.
	RestartJobSetAndIgnoreMaxRestarts FailurePolicyAction = "RestartJobSetAndIgnoreMaxRestarts"
	// RestartJob restarts the failed Job alone, behind JobSet's alpha
	// RestartJob gate: not supported.
	RestartJob FailurePolicyAction = "RestartJob"
	// RestartJobAndIgnoreMaxRestarts is RestartJob without counting the
	// restart: not supported.
	RestartJobAndIgnoreMaxRestarts FailurePolicyAction = "RestartJobAndIgnoreMaxRestarts"
)

// JobSetRestartStrategy is how the Jobs of a TrainJob are recreated on a
// restart.
// +kubebuilder:validation:Enum=Recreate;BlockingRecreate;InPlaceRestart
type JobSetRestartStrategy string

const (
	// Recreate creates each Job of the new attempt as soon as the Job of
	// its name of the attempt before is gone.
	Recreate JobSetRestartStrategy = "Recreate"
	// BlockingRecreate creates the Jobs of the new attempt once every Job
	// of the attempt before is gone.
	BlockingRecreate JobSetRestartStrategy = "BlockingRecreate"
	// InPlaceRestart restarts the containers where they run, behind
	// JobSet's alpha InPlaceRestart gate: not supported.
	InPlaceRestart JobSetRestartStrategy = "InPlaceRestart"
)

// FailurePolicy says what a failed Job does to the TrainJob: without one,
// the TrainJob fails at once; with one, the first rule that matches the
// failure decides, and without a matching rule the TrainJob restarts
// (RestartJobSet). A restart deletes every Job of the TrainJob and creates
// them again, with the restart attempt in their labels.
type FailurePolicy struct {
	// maxRestarts is how many restarts that count (RestartJobSet) the
	// TrainJob may make; once they are made, the next one fails it
	// instead, with reason ReachedMaxRestarts.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxRestarts int32 `json:"maxRestarts,omitempty"`

	// restartStrategy is Recreate (the default) or BlockingRecreate.
	// +kubebuilder:default=Recreate
	// +optional
	RestartStrategy JobSetRestartStrategy `json:"restartStrategy,omitempty"`

	// rules are tried in order on a failed Job; the first that matches
	// decides.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Rules []FailurePolicyRule `json:"rules,omitempty"`
}

// FailurePolicyRule matches a failed Job and says what to do.
type FailurePolicyRule struct {
	// name of the rule, unique among the rules; failurePolicyRule<index>
	// if not set.
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`
	// +optional
	Name string `json:"name,omitempty"`

	// action to take: FailJobSet, RestartJobSet or
	// RestartJobSetAndIgnoreMaxRestarts.
	// +required
	Action FailurePolicyAction `json:"action"`

	// onJobFailureReasons match the reason of the Job's Failed condition;
	// empty, any.
	// +listType=set
	// +kubebuilder:validation:MaxItems=5
	// +kubebuilder:validation:items:Enum=BackoffLimitExceeded;DeadlineExceeded;FailedIndexes;MaxFailedIndexesExceeded;PodFailurePolicy
	// +optional
	OnJobFailureReasons []string `json:"onJobFailureReasons,omitempty"`

	// onJobFailureMessagePatterns are regular expressions (RE2), one of
	// which must match somewhere in the message of the Job's Failed
	// condition; empty, any.
	// +listType=set
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=1024
	// +optional
	OnJobFailureMessagePatterns []string `json:"onJobFailureMessagePatterns,omitempty"`

	// targetReplicatedJobs are the replicated Jobs whose failed Jobs the
	// rule matches; empty, all.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=40
	// +optional
	TargetReplicatedJobs []string `json:"targetReplicatedJobs,omitempty"`
}

// RetentionPolicyType says what becomes of a TrainJob's claims when it is
// deleted.
// +kubebuilder:validation:Enum=Delete;Retain
type RetentionPolicyType string

const (
	// RetentionPolicyDelete deletes the claims with the TrainJob: they are
	// owned by it.
	RetentionPolicyDelete RetentionPolicyType = "Delete"
	// RetentionPolicyRetain keeps the claims when the TrainJob is deleted:
	// they are owned by nothing, and a later TrainJob of the same name
	// uses them again.
	RetentionPolicyRetain RetentionPolicyType = "Retain"
)

// VolumeRetentionPolicy says what becomes of the claims of a
// VolumeClaimPolicy.
type VolumeRetentionPolicy struct {
	// whenDeleted is Delete (the default) or Retain.
	// +kubebuilder:default=Delete
	// +optional
	WhenDeleted *RetentionPolicyType `json:"whenDeleted,omitempty"`
}

// VolumeClaimPolicy makes PersistentVolumeClaims for each TrainJob from
// templates, as JobSet v0.12 does: template <name> gives the claim
// <name>-<trainjob>, created before the TrainJob's Jobs; every container (or
// init container) of a Job that mounts a volume named <name> gets the
// claim as that volume.
//
// +kubebuilder:validation:XValidation:rule="self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)",fieldPath=".templates",message="namespace cannot be set for volumeClaimPolicies templates: the claims are made in the TrainJob's namespace"
type VolumeClaimPolicy struct {
	// templates of the claims. Each must ask for storage.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:XValidation:rule="self.all(t, has(t.metadata.name) && size(t.metadata.name) > 0)",message="each volumeClaimPolicies template needs metadata.name: the name of the volume the containers mount"
	// +kubebuilder:validation:XValidation:rule="self.all(t, has(t.spec.resources) && has(t.spec.resources.requests) && 'storage' in t.spec.resources.requests)",message="each volumeClaimPolicies template must request storage (spec.resources.requests.storage)"
	// +required
	Templates []corev1.PersistentVolumeClaim `json:"templates"`

	// retentionPolicy says what becomes of the claims when the TrainJob is
	// deleted.
	// +optional
	RetentionPolicy *VolumeRetentionPolicy `json:"retentionPolicy,omitempty"`
}

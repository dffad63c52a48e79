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

// MPIMLPolicySource configures MPI training. The launcher (the trainer
// step) runs mpirun over the Pods of the replicated Job named node, and
// over itself with runLauncherAsNode; they reach each other by SSH with a
// key made for the TrainJob.
type MPIMLPolicySource struct {
	// numProcPerNode is the number of processes per node: the slots of
	// each host in the hostfile. Defaults to 1, which becomes the number
	// of GPUs per node when a node has more than one.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`

	// mpiImplementation is the MPI implementation the hostfile and the
	// environment are written for. Defaults to OpenMPI, the only one.
	// +kubebuilder:default=OpenMPI
	// +kubebuilder:validation:Enum=OpenMPI;""
	// +optional
	MPIImplementation *MPIImplementation `json:"mpiImplementation,omitempty"`

	// sshAuthMountPath is the directory where the SSH key, its public key
	// and the authorized keys are mounted in each node container.
	// Defaults to /root/.ssh.
	// +kubebuilder:default=/root/.ssh
	// +kubebuilder:validation:MaxLength=4096
	// +optional
	SSHAuthMountPath *string `json:"sshAuthMountPath,omitempty"`

	// runLauncherAsNode makes the launcher one of the nodes: it is in the
	// hostfile and counts towards numNodes. Defaults to false.
	// +kubebuilder:default=false
	// +optional
	RunLauncherAsNode *bool `json:"runLauncherAsNode,omitempty"`
}

// MPIImplementation is an implementation of MPI.
type MPIImplementation string

const (
	// MPIImplementationOpenMPI is OpenMPI.
	MPIImplementationOpenMPI MPIImplementation = "OpenMPI"
)

// JAXMLPolicySource configures JAX distributed training. It has no
// settings.
type JAXMLPolicySource struct{}

// XGBoostMLPolicySource configures XGBoost distributed training: one
// worker per GPU of a node, or one per node without GPUs. It has no
// settings.
type XGBoostMLPolicySource struct{}

// FluxMLPolicySource configures the Flux framework.
type FluxMLPolicySource struct {
	// numProcPerNode is the number of processes per node.
	// +kubebuilder:default=1
	// +kubebuilder:validation:XValidation:rule="self >= 1",message="NumProcPerNode in fluxPolicy must be >= 1"
	// +optional
	NumProcPerNode *int32 `json:"numProcPerNode,omitempty"`
}

// PodGroupPolicy schedules a TrainJob's Pods as a gang. Only one of its
// members may be set.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.coscheduling) && has(self.volcano))",message="only one of coscheduling and volcano can be set"
type PodGroupPolicy struct {
	// coscheduling uses the coscheduling plugin of the Kubernetes
	// scheduler-plugins: a PodGroup (scheduling.x-k8s.io) of every Pod of
	// the TrainJob.
	// +optional
	Coscheduling *CoschedulingPodGroupPolicySource `json:"coscheduling,omitempty"`

	// volcano uses the Volcano scheduler: a PodGroup
	// (scheduling.volcano.sh) of every Pod of the TrainJob.
	// +optional
	Volcano *VolcanoPodGroupPolicySource `json:"volcano,omitempty"`
}

// CoschedulingPodGroupPolicySource configures the coscheduling plugin. The
// PodGroup's minMember is the number of Pods of the TrainJob.
type CoschedulingPodGroupPolicySource struct {
	// scheduleTimeoutSeconds is how long the scheduler waits for the whole
	// gang to fit before it gives up on a round. Defaults to 60.
	// +kubebuilder:default=60
	// +optional
	ScheduleTimeoutSeconds *int32 `json:"scheduleTimeoutSeconds,omitempty"`
}

// VolcanoPodGroupPolicySource configures the Volcano scheduler.
type VolcanoPodGroupPolicySource struct {
	// networkTopology constrains the Pods to a tier of Volcano's network
	// topology (its HyperNodes).
	// +optional
	NetworkTopology *NetworkTopologySpec `json:"networkTopology,omitempty"`
}

// NetworkTopologySpec is Volcano's network topology constraint of a
// PodGroup.
type NetworkTopologySpec struct {
	// mode is hard (the constraint must hold) or soft (best effort).
	// +kubebuilder:default=hard
	// +kubebuilder:validation:Enum=hard;soft
	// +optional
	Mode NetworkTopologyMode `json:"mode,omitempty"`

	// highestTierAllowed is the highest tier the Pods may span.
	// +kubebuilder:default=1
	// +optional
	HighestTierAllowed *int `json:"highestTierAllowed,omitempty"`
}

// NetworkTopologyMode is hard or soft.
type NetworkTopologyMode string

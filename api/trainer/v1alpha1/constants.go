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

// Labels, annotations and finalizers on the objects a TrainJob owns.
const (
	// TrainJobNameLabel is set on every child Job, Pod and Service to the
	// name of the TrainJob that owns it.
	TrainJobNameLabel = "trainer.kubeflow.org/trainjob-name"

	// ReplicatedJobNameLabel is set on child Jobs and Pods to the name of the
	// replicated Job of the runtime they come from.
	ReplicatedJobNameLabel = "trainer.kubeflow.org/replicated-job-name"

	// ReplicaIndexLabel is set on child Jobs and Pods to the replica index of
	// their Job within the replicated Job.
	ReplicaIndexLabel = "trainer.kubeflow.org/replica-index"

	// AncestorStepLabel, on a replicated Job template of a runtime, names the
	// step it plays. The value TrainerStep marks the trainer step.
	AncestorStepLabel = "trainer.kubeflow.org/trainjob-ancestor-step"

	// TrainerStep is the AncestorStepLabel value of the trainer step.
	TrainerStep = "trainer"

	// TrainerContainerName is the container of the trainer step that receives
	// the TrainJob's trainer overrides and the framework environment.
	TrainerContainerName = "node"

	// JobTrackingFinalizer is set on every child Job. The controller removes
	// it only once the Job's outcome is recorded in the TrainJob's status, so
	// that a child deleted early never makes a TrainJob re-run or forget a
	// failure.
	JobTrackingFinalizer = "trainer.kubeflow.org/job-tracking"

	// KueueQueueNameLabel names the Kueue LocalQueue a TrainJob is queued
	// in. Kueue keeps such a TrainJob suspended while it waits for
	// admission, and suspends it again when it is preempted.
	KueueQueueNameLabel = "kueue.x-k8s.io/queue-name"
)

// The keys JobSet v0.12.0 sets on each child Job and on its Pod template,
// each both as a label and as an annotation with the same value, so that
// tools that select a JobSet's Jobs and Pods by them (the Kubeflow SDK,
// Kueue's topology-aware scheduling, commands from Kubeflow's documentation
// such as `kubectl logs -l jobset.sigs.k8s.io/jobset-name=<trainjob>`) find
// a TrainJob's. They win over the labels and annotations of the runtime and
// the TrainJob, as JobSet's do. docs/compatibility.md says where their values
// differ from JobSet's.
const (
	// JobSetNameLabel is the TrainJob's name: the name of the JobSet
	// Kubeflow Trainer would create.
	JobSetNameLabel = "jobset.sigs.k8s.io/jobset-name"

	// JobSetUIDLabel is the TrainJob's UID, in place of the JobSet's.
	JobSetUIDLabel = "jobset.sigs.k8s.io/jobset-uid"

	// JobSetReplicatedJobNameLabel is the name of the replicated Job.
	JobSetReplicatedJobNameLabel = "jobset.sigs.k8s.io/replicatedjob-name"

	// JobSetRestartAttemptLabel is the restart attempt the Job belongs to:
	// the TrainJob's status.restarts when the Job was created, as JobSet
	// writes its own.
	JobSetRestartAttemptLabel = "jobset.sigs.k8s.io/restart-attempt"

	// JobSetReplicatedJobReplicasLabel is the number of replicas (child
	// Jobs) of the replicated Job.
	JobSetReplicatedJobReplicasLabel = "jobset.sigs.k8s.io/replicatedjob-replicas"

	// JobSetGlobalReplicasLabel is the number of child Jobs of all the
	// replicated Jobs.
	JobSetGlobalReplicasLabel = "jobset.sigs.k8s.io/global-replicas"

	// JobSetJobIndexLabel is the replica index of the Job within its
	// replicated Job.
	JobSetJobIndexLabel = "jobset.sigs.k8s.io/job-index"

	// JobSetJobKeyLabel is the SHA-1 of "<namespace>/<job name>", in hex.
	JobSetJobKeyLabel = "jobset.sigs.k8s.io/job-key"

	// JobSetJobGlobalIndexLabel is the index of the Job among the child
	// Jobs of all the replicated Jobs, in the runtime's order.
	JobSetJobGlobalIndexLabel = "jobset.sigs.k8s.io/job-global-index"

	// JobSetGroupNameLabel is the group of the replicated Job: its
	// groupName, or JobSetDefaultGroupName.
	JobSetGroupNameLabel = "jobset.sigs.k8s.io/group-name"

	// JobSetGroupReplicasLabel is the number of child Jobs of the
	// replicated Jobs of the group.
	JobSetGroupReplicasLabel = "jobset.sigs.k8s.io/group-replicas"

	// JobSetJobGroupIndexLabel is the index of the Job among the child Jobs
	// of the replicated Jobs of its group, in the runtime's order.
	JobSetJobGroupIndexLabel = "jobset.sigs.k8s.io/job-group-index"

	// JobSetCoordinatorKey is the label and annotation holding the DNS name
	// of the Pod the runtime's coordinator names.
	JobSetCoordinatorKey = "jobset.sigs.k8s.io/coordinator"

	// JobSetDefaultGroupName is the group of a replicated Job that names
	// none, as JobSet defaults it.
	JobSetDefaultGroupName = "default"
)

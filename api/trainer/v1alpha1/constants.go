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

	// JobSetNameLabel is set on child Pods to the TrainJob's name, as JobSet
	// does, so that commands from Kubeflow's documentation such as
	// `kubectl logs -l jobset.sigs.k8s.io/jobset-name=<trainjob>` work.
	JobSetNameLabel = "jobset.sigs.k8s.io/jobset-name"

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

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

// Package testing holds builders of the objects the tests use, so that a test
// says only what matters to it:
//
//	MakeTrainJob("a", "ns").NumNodes(2).Suspend(true).Obj()
package testing

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// TrainJobWrapper builds a TrainJob.
type TrainJobWrapper struct{ trainer.TrainJob }

// MakeTrainJob returns a TrainJob on the ClusterTrainingRuntime
// "torch-distributed", with the defaults the API server would set.
func MakeTrainJob(name, namespace string) *TrainJobWrapper {
	return &TrainJobWrapper{trainer.TrainJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: trainer.TrainJobSpec{
			RuntimeRef: trainer.RuntimeRef{
				Name:     "torch-distributed",
				APIGroup: ptr.To(trainer.GroupVersion.Group),
				Kind:     ptr.To(trainer.ClusterTrainingRuntimeKind),
			},
			Suspend:   ptr.To(false),
			ManagedBy: ptr.To(trainer.DefaultManagedBy),
		},
	}}
}

// Obj returns the TrainJob.
func (w *TrainJobWrapper) Obj() *trainer.TrainJob { return &w.TrainJob }

// Clone returns a copy of the wrapper.
func (w *TrainJobWrapper) Clone() *TrainJobWrapper { return &TrainJobWrapper{*w.DeepCopy()} }

// UID sets the UID.
func (w *TrainJobWrapper) UID(uid string) *TrainJobWrapper {
	w.ObjectMeta.UID = types.UID(uid)
	return w
}

// ResourceVersion sets the resource version.
func (w *TrainJobWrapper) ResourceVersion(rv string) *TrainJobWrapper {
	w.ObjectMeta.ResourceVersion = rv
	return w
}

// Label sets a label.
func (w *TrainJobWrapper) Label(k, v string) *TrainJobWrapper {
	if w.Labels == nil {
		w.Labels = map[string]string{}
	}
	w.Labels[k] = v
	return w
}

// Annotation sets an annotation.
func (w *TrainJobWrapper) Annotation(k, v string) *TrainJobWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// RuntimeRef sets the referenced runtime.
func (w *TrainJobWrapper) RuntimeRef(kind, name string) *TrainJobWrapper {
	w.Spec.RuntimeRef.Kind = ptr.To(kind)
	w.Spec.RuntimeRef.Name = name
	return w
}

// Suspend sets spec.suspend.
func (w *TrainJobWrapper) Suspend(s bool) *TrainJobWrapper {
	w.Spec.Suspend = ptr.To(s)
	return w
}

// ManagedBy sets spec.managedBy.
func (w *TrainJobWrapper) ManagedBy(m string) *TrainJobWrapper {
	w.Spec.ManagedBy = ptr.To(m)
	return w
}

// TTL sets spec.ttlSecondsAfterFinished.
func (w *TrainJobWrapper) TTL(seconds int32) *TrainJobWrapper {
	w.Spec.TTLSecondsAfterFinished = ptr.To(seconds)
	return w
}

// Deadline sets spec.activeDeadlineSeconds.
func (w *TrainJobWrapper) Deadline(seconds int64) *TrainJobWrapper {
	w.Spec.ActiveDeadlineSeconds = ptr.To(seconds)
	return w
}

func (w *TrainJobWrapper) trainer() *trainer.Trainer {
	if w.Spec.Trainer == nil {
		w.Spec.Trainer = &trainer.Trainer{}
	}
	return w.Spec.Trainer
}

// NumNodes sets spec.trainer.numNodes.
func (w *TrainJobWrapper) NumNodes(n int32) *TrainJobWrapper {
	w.trainer().NumNodes = ptr.To(n)
	return w
}

// NumProcPerNode sets spec.trainer.numProcPerNode.
func (w *TrainJobWrapper) NumProcPerNode(v int32) *TrainJobWrapper {
	w.trainer().NumProcPerNode = &v
	return w
}

// Image sets spec.trainer.image.
func (w *TrainJobWrapper) Image(image string) *TrainJobWrapper {
	w.trainer().Image = ptr.To(image)
	return w
}

// Command sets spec.trainer.command.
func (w *TrainJobWrapper) Command(cmd ...string) *TrainJobWrapper {
	w.trainer().Command = cmd
	return w
}

// Args sets spec.trainer.args.
func (w *TrainJobWrapper) Args(args ...string) *TrainJobWrapper {
	w.trainer().Args = args
	return w
}

// Env adds a variable to spec.trainer.env.
func (w *TrainJobWrapper) Env(name, value string) *TrainJobWrapper {
	w.trainer().Env = append(w.trainer().Env, corev1.EnvVar{Name: name, Value: value})
	return w
}

// Resources sets spec.trainer.resourcesPerNode.
func (w *TrainJobWrapper) Resources(r corev1.ResourceRequirements) *TrainJobWrapper {
	w.trainer().ResourcesPerNode = &r
	return w
}

// Condition sets a status condition as the controller would store it.
func (w *TrainJobWrapper) Condition(c metav1.Condition) *TrainJobWrapper {
	for i := range w.Status.Conditions {
		if w.Status.Conditions[i].Type == c.Type {
			w.Status.Conditions[i] = c
			return w
		}
	}
	w.Status.Conditions = append(w.Status.Conditions, c)
	return w
}

// StartTime sets status.startTime.
func (w *TrainJobWrapper) StartTime(t time.Time) *TrainJobWrapper {
	w.Status.StartTime = ptr.To(metav1.NewTime(t))
	return w
}

// TrainerStatus sets the progress the trainer reported at.
func (w *TrainJobWrapper) TrainerStatus(progress, remainingSeconds int32, at time.Time) *TrainJobWrapper {
	w.Status.TrainerStatus = &trainer.TrainerStatus{
		ProgressPercentage: ptr.To(progress), EstimatedRemainingSeconds: ptr.To(remainingSeconds), LastUpdatedTime: metav1.NewTime(at),
	}
	return w
}

// JobsStatus sets status.jobsStatus.
func (w *TrainJobWrapper) JobsStatus(js ...trainer.JobStatus) *TrainJobWrapper {
	w.Status.JobsStatus = js
	return w
}

// RuntimeSpecWrapper builds the spec of a training runtime.
type RuntimeSpecWrapper struct{ trainer.TrainingRuntimeSpec }

// MakeRuntimeSpec returns a runtime spec with one replicated Job "node",
// labelled as the trainer step, whose Pods run a container "node".
func MakeRuntimeSpec() *RuntimeSpecWrapper {
	w := &RuntimeSpecWrapper{}
	w.ReplicatedJob(MakeReplicatedJob("node").Trainer().Obj())
	return w
}

// Obj returns the runtime spec.
func (w *RuntimeSpecWrapper) Obj() *trainer.TrainingRuntimeSpec { return &w.TrainingRuntimeSpec }

// Torch sets the torch policy.
func (w *RuntimeSpecWrapper) Torch() *RuntimeSpecWrapper {
	w.mlPolicy().Torch = &trainer.TorchMLPolicySource{}
	return w
}

// NumProcPerNode sets the torch policy's numProcPerNode.
func (w *RuntimeSpecWrapper) NumProcPerNode(v intstr.IntOrString) *RuntimeSpecWrapper {
	w.mlPolicy().Torch.NumProcPerNode = &v
	return w
}

// NumNodes sets mlPolicy.numNodes.
func (w *RuntimeSpecWrapper) NumNodes(n int32) *RuntimeSpecWrapper {
	w.mlPolicy().NumNodes = ptr.To(n)
	return w
}

func (w *RuntimeSpecWrapper) mlPolicy() *trainer.MLPolicy {
	if w.MLPolicy == nil {
		w.MLPolicy = &trainer.MLPolicy{}
	}
	return w.MLPolicy
}

// ReplicatedJobs replaces the replicated Jobs.
func (w *RuntimeSpecWrapper) ReplicatedJobs(rjobs ...trainer.ReplicatedJob) *RuntimeSpecWrapper {
	w.Template.Spec.ReplicatedJobs = rjobs
	return w
}

// ReplicatedJob adds a replicated Job.
func (w *RuntimeSpecWrapper) ReplicatedJob(rjob trainer.ReplicatedJob) *RuntimeSpecWrapper {
	w.Template.Spec.ReplicatedJobs = append(w.Template.Spec.ReplicatedJobs, rjob)
	return w
}

// TemplateLabel sets a label of the JobSet-level template metadata.
func (w *RuntimeSpecWrapper) TemplateLabel(k, v string) *RuntimeSpecWrapper {
	if w.Template.Metadata.Labels == nil {
		w.Template.Metadata.Labels = map[string]string{}
	}
	w.Template.Metadata.Labels[k] = v
	return w
}

// FailurePolicy sets the JobSet-level failure policy.
func (w *RuntimeSpecWrapper) FailurePolicy(p trainer.FailurePolicy) *RuntimeSpecWrapper {
	w.Template.Spec.FailurePolicy = &p
	return w
}

// JobsTTL sets the JobSet-level ttlSecondsAfterFinished: how long after the
// TrainJob finished its Jobs are deleted.
func (w *RuntimeSpecWrapper) JobsTTL(seconds int32) *RuntimeSpecWrapper {
	w.Template.Spec.TTLSecondsAfterFinished = ptr.To(seconds)
	return w
}

// Coscheduling sets podGroupPolicy to the coscheduling plugin's, which
// waits scheduleTimeoutSeconds for the whole gang.
func (w *RuntimeSpecWrapper) Coscheduling(scheduleTimeoutSeconds int32) *RuntimeSpecWrapper {
	w.PodGroupPolicy = &trainer.PodGroupPolicy{Coscheduling: &trainer.CoschedulingPodGroupPolicySource{
		ScheduleTimeoutSeconds: ptr.To(scheduleTimeoutSeconds),
	}}
	return w
}

// ClusterRuntime returns a ClusterTrainingRuntime with this spec.
func (w *RuntimeSpecWrapper) ClusterRuntime(name string) *trainer.ClusterTrainingRuntime {
	return &trainer.ClusterTrainingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.ClusterTrainingRuntimeKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       *w.DeepCopy(),
	}
}

// Runtime returns a TrainingRuntime with this spec.
func (w *RuntimeSpecWrapper) Runtime(name, namespace string) *trainer.TrainingRuntime {
	return &trainer.TrainingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainingRuntimeKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       *w.DeepCopy(),
	}
}

// ReplicatedJobWrapper builds a replicated Job of a runtime.
type ReplicatedJobWrapper struct{ trainer.ReplicatedJob }

// MakeReplicatedJob returns a replicated Job with one replica whose Pods run
// one container of the same name.
func MakeReplicatedJob(name string) *ReplicatedJobWrapper {
	return &ReplicatedJobWrapper{trainer.ReplicatedJob{
		Name:     name,
		Replicas: 1,
		Template: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{
				Template: corev1.PodTemplateSpec{
					Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: name, Image: "registry.example/" + name + ":1"}},
					},
				},
			},
		},
	}}
}

// Obj returns the replicated Job.
func (w *ReplicatedJobWrapper) Obj() trainer.ReplicatedJob { return w.ReplicatedJob }

// Trainer labels the replicated Job as the trainer step.
func (w *ReplicatedJobWrapper) Trainer() *ReplicatedJobWrapper {
	return w.Label(trainer.AncestorStepLabel, trainer.TrainerStep)
}

// Label sets a label of the Job template.
func (w *ReplicatedJobWrapper) Label(k, v string) *ReplicatedJobWrapper {
	if w.Template.Labels == nil {
		w.Template.Labels = map[string]string{}
	}
	w.Template.Labels[k] = v
	return w
}

// Replicas sets the number of replicas.
func (w *ReplicatedJobWrapper) Replicas(n int32) *ReplicatedJobWrapper {
	w.ReplicatedJob.Replicas = n
	return w
}

// Containers replaces the Pod template's containers.
func (w *ReplicatedJobWrapper) Containers(cs ...corev1.Container) *ReplicatedJobWrapper {
	w.Template.Spec.Template.Spec.Containers = cs
	return w
}

// Completions sets the Job template's completions and parallelism.
func (w *ReplicatedJobWrapper) Completions(n int32) *ReplicatedJobWrapper {
	w.Template.Spec.Completions = ptr.To(n)
	w.Template.Spec.Parallelism = ptr.To(n)
	return w
}

// BackoffLimit sets the Job template's backoffLimit.
func (w *ReplicatedJobWrapper) BackoffLimit(n int32) *ReplicatedJobWrapper {
	w.Template.Spec.BackoffLimit = ptr.To(n)
	return w
}

func (w *ReplicatedJobWrapper) podSpec() *corev1.PodSpec { return &w.Template.Spec.Template.Spec }

// RestartPolicy sets the Pod template's restartPolicy.
func (w *ReplicatedJobWrapper) RestartPolicy(p corev1.RestartPolicy) *ReplicatedJobWrapper {
	w.podSpec().RestartPolicy = p
	return w
}

// PodAnnotation sets an annotation of the Pod template.
func (w *ReplicatedJobWrapper) PodAnnotation(k, v string) *ReplicatedJobWrapper {
	t := &w.Template.Spec.Template
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[k] = v
	return w
}

// Resources sets the resources of every container of the Pod template.
func (w *ReplicatedJobWrapper) Resources(r corev1.ResourceRequirements) *ReplicatedJobWrapper {
	for i := range w.podSpec().Containers {
		w.podSpec().Containers[i].Resources = *r.DeepCopy()
	}
	return w
}

// SchedulerName sets the Pod template's schedulerName.
func (w *ReplicatedJobWrapper) SchedulerName(name string) *ReplicatedJobWrapper {
	w.podSpec().SchedulerName = name
	return w
}

// NodeSelector sets a label of the Pod template's nodeSelector.
func (w *ReplicatedJobWrapper) NodeSelector(k, v string) *ReplicatedJobWrapper {
	if w.podSpec().NodeSelector == nil {
		w.podSpec().NodeSelector = map[string]string{}
	}
	w.podSpec().NodeSelector[k] = v
	return w
}

// Toleration adds a toleration to the Pod template.
func (w *ReplicatedJobWrapper) Toleration(t corev1.Toleration) *ReplicatedJobWrapper {
	w.podSpec().Tolerations = append(w.podSpec().Tolerations, t)
	return w
}

// JobWrapper builds a batch/v1 Job, for a child Job's status in tests.
type JobWrapper struct{ batchv1.Job }

// WrapJob wraps a copy of job.
func WrapJob(job *batchv1.Job) *JobWrapper { return &JobWrapper{*job.DeepCopy()} }

// MakeJob returns a Job of one Pod, whose one container runs image: the
// least the API server accepts.
func MakeJob(name, namespace, image string) *JobWrapper {
	return &JobWrapper{batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: image}},
		}}},
	}}
}

// ControlledByTrainJob makes the TrainJob name of UID uid the Job's
// controller, as the TrainJob controller does its children.
func (w *JobWrapper) ControlledByTrainJob(name string, uid types.UID) *JobWrapper {
	w.OwnerReferences = append(w.OwnerReferences, metav1.OwnerReference{
		APIVersion: trainer.GroupVersion.String(), Kind: trainer.TrainJobKind, Name: name, UID: uid,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	})
	return w
}

// Obj returns the Job.
func (w *JobWrapper) Obj() *batchv1.Job { return &w.Job }

// Active sets status.active (and status.ready).
func (w *JobWrapper) Active(n int32) *JobWrapper {
	w.Status.Active = n
	w.Status.Ready = ptr.To(n)
	return w
}

// Condition adds a True condition to the Job's status.
func (w *JobWrapper) Condition(t batchv1.JobConditionType, reason, message string, at time.Time) *JobWrapper {
	w.Status.Conditions = append(w.Status.Conditions, batchv1.JobCondition{
		Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastProbeTime: metav1.NewTime(at), LastTransitionTime: metav1.NewTime(at),
	})
	return w
}

// Succeeded marks the Job Complete, as the Job controller does.
func (w *JobWrapper) Succeeded(at time.Time) *JobWrapper {
	w.Status.Active = 0
	w.Status.Ready = ptr.To[int32](0)
	w.Status.Succeeded = ptr.Deref(w.Spec.Completions, 1)
	w.Status.StartTime = ptr.To(metav1.NewTime(at))
	w.Status.CompletionTime = ptr.To(metav1.NewTime(at))
	return w.Condition(batchv1.JobSuccessCriteriaMet, "CompletionsReached", "Reached expected number of succeeded pods", at).
		Condition(batchv1.JobComplete, "CompletionsReached", "Reached expected number of succeeded pods", at)
}

// Failed marks the Job Failed with a reason, as the Job controller does.
func (w *JobWrapper) Failed(reason string, at time.Time) *JobWrapper {
	w.Status.Active = 0
	w.Status.Ready = ptr.To[int32](0)
	w.Status.Failed = 1
	w.Status.StartTime = ptr.To(metav1.NewTime(at))
	return w.Condition(batchv1.JobFailureTarget, reason, "Job has reached the specified backoff limit", at).
		Condition(batchv1.JobFailed, reason, "Job has reached the specified backoff limit", at)
}

// FailureTarget gives the Job the Job controller's failure verdict, as it
// does before its Pods have terminated: Active and Ready are left as they
// are.
func (w *JobWrapper) FailureTarget(reason string, at time.Time) *JobWrapper {
	w.Status.Failed = 1
	return w.Condition(batchv1.JobFailureTarget, reason, "Job has reached the specified backoff limit", at)
}

// SuspendedByController marks the Job suspended with no Pod left, as the Job
// controller does once it deleted the Pods of a suspended Job.
func (w *JobWrapper) SuspendedByController(at time.Time) *JobWrapper {
	w.Spec.Suspend = ptr.To(true)
	w.Status.Active = 0
	w.Status.Ready = ptr.To[int32](0)
	w.Status.Terminating = ptr.To[int32](0)
	return w.Condition(batchv1.JobSuspended, "JobSuspended", "Job suspended", at)
}

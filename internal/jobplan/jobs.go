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
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// jobsPlugin builds the steps of the plan and their Jobs: one Indexed Job
// per replica of each of the runtime's replicated Jobs, in order, as JobSet
// would create them (labels, annotations, the coordinator's address), each
// with the Pods PodCounts decides. It refuses a dependsOn JobSet would
// refuse, a coordinator that names no Pod, and a TrainJob name too long for
// its Pods' hostnames.
type jobsPlugin struct{}

func (jobsPlugin) Name() string { return "jobs" }

func (jobsPlugin) Validate(in *Input) field.ErrorList {
	errs := checkDependsOn(in.Runtime.Spec.Template.Spec.ReplicatedJobs, in.replicatedJobsPath())
	if _, err := coordinatorOf(in); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func (jobsPlugin) Contribute(in *Input, plan *Plan) field.ErrorList {
	tj, rt := in.TrainJob, in.Runtime
	coordinator, _ := coordinatorOf(in)
	trainerIdx := in.TrainerStep()
	var errs field.ErrorList
	rjobs := rt.Spec.Template.Spec.ReplicatedJobs
	for i := range rjobs {
		rjob := &rjobs[i]
		plan.Steps = append(plan.Steps, Step{Name: rjob.Name, Replicas: replicasOf(*rjob), Trainer: i == trainerIdx, DependsOn: dependsOn(rt.Spec, i)})
		for r := range replicasOf(*rjob) {
			job := baseJob(tj, rt.Spec, i, r, coordinator)
			completions := ptr.Deref(job.Spec.Completions, 1)
			n, ok := in.PodCounts[rjob.Name]
			if !ok && i == trainerIdx {
				n, ok = in.NumNodes(), true
			}
			if ok {
				completions = n
				job.Spec.Completions = ptr.To(n)
				job.Spec.Parallelism = ptr.To(n)
			}
			if longest := len(job.Name) + 1 + len(strconv.Itoa(int(completions-1))); longest > maxDNSLabel {
				errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), tj.Name, fmt.Sprintf(
					"too long for runtime %s/%s: Pod hostname %s-%d of replicated Job %q would be %d characters, over %d; use a name of at most %d characters",
					rt.Kind, rt.Name, job.Name, completions-1, rjob.Name, longest, maxDNSLabel, maxDNSLabel-(longest-len(tj.Name)))))
				continue
			}
			plan.Jobs = append(plan.Jobs, job)
		}
	}
	return errs
}

// JobNames are the names of the Jobs of TrainJob trainJob on a runtime of
// spec, step by step and replica by replica, as Build names them: runtime
// patches change neither the replicated Jobs' names nor their replicas.
func JobNames(trainJob string, spec *trainer.TrainingRuntimeSpec) []string {
	var names []string
	for _, rjob := range spec.Template.Spec.ReplicatedJobs {
		for r := range replicasOf(rjob) {
			names = append(names, JobName(trainJob, rjob.Name, r))
		}
	}
	return names
}

func replicasOf(rjob trainer.ReplicatedJob) int32 {
	if rjob.Replicas < 1 {
		return 1
	}
	return rjob.Replicas
}

// baseJob is the child Job of replica r of replicated Job i of the runtime,
// before the trainer overrides: the runtime's template with the TrainJob's
// metadata, JobSet's labels and annotations, ownership, tracking finalizer
// and Indexed completion. The labels the controller finds its
// children by, and JobSet's, win over those of the runtime and the TrainJob.
func baseJob(trainJob *trainer.TrainJob, spec *trainer.TrainingRuntimeSpec, i int, r int32, coordinator string) *batchv1.Job {
	rjob := &spec.Template.Spec.ReplicatedJobs[i]
	tmpl := rjob.Template.DeepCopy()
	ours := ChildLabels(trainJob.Name, rjob.Name, r)
	jobSet := jobSetKeys(trainJob, spec.Template.Spec.ReplicatedJobs, i, r)
	if coordinator != "" {
		jobSet[trainer.JobSetCoordinatorKey] = coordinator
	}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:            JobName(trainJob.Name, rjob.Name, r),
			Namespace:       trainJob.Namespace,
			Labels:          merge(spec.Template.Metadata.Labels, tmpl.Labels, trainJob.Spec.Labels, jobSet, ours),
			Annotations:     merge(spec.Template.Metadata.Annotations, tmpl.Annotations, trainJob.Spec.Annotations, jobSet),
			OwnerReferences: []metav1.OwnerReference{ownerRef(trainJob)},
			Finalizers:      []string{trainer.JobTrackingFinalizer},
		},
		Spec: tmpl.Spec,
	}
	job.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
	job.Spec.Suspend = ptr.To(ptr.Deref(trainJob.Spec.Suspend, false))

	pod := &job.Spec.Template
	pod.Labels = merge(pod.Labels, trainJob.Labels, jobSet, ours)
	pod.Annotations = merge(pod.Annotations, trainJob.Annotations, jobSet)
	if pod.Spec.RestartPolicy == "" {
		// OnFailure, as JobSet's webhook defaults it under Kubeflow: the
		// runtimes Kubeflow ships leave it unset. (Always, which a Job
		// refuses, is refused in the runtime already.)
		pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	}
	return job
}

// jobSetKeys are the labels, and the same annotations, that JobSet v0.12.0
// sets on the child Job for replica r of replicated Job i of rjobs and on its
// Pod template (labelAndAnnotateObject in its controller), for a JobSet
// named after the TrainJob. The TrainJob's UID stands for the JobSet's, and
// the restart attempt is the TrainJob's status.restarts.
func jobSetKeys(trainJob *trainer.TrainJob, rjobs []trainer.ReplicatedJob, i int, r int32) map[string]string {
	rjob := &rjobs[i]
	group := groupOf(rjob)
	global, before, groupReplicas, groupBefore := 0, 0, 0, 0
	for j := range rjobs {
		n := int(replicasOf(rjobs[j]))
		global += n
		if j < i {
			before += n
		}
		if groupOf(&rjobs[j]) == group {
			groupReplicas += n
			if j < i {
				groupBefore += n
			}
		}
	}
	jobKey := sha1.Sum([]byte(trainJob.Namespace + "/" + JobName(trainJob.Name, rjob.Name, r)))
	return map[string]string{
		trainer.JobSetNameLabel:                  trainJob.Name,
		trainer.JobSetUIDLabel:                   string(trainJob.UID),
		trainer.JobSetReplicatedJobNameLabel:     rjob.Name,
		trainer.JobSetRestartAttemptLabel:        strconv.Itoa(int(trainJob.Status.Restarts)),
		trainer.JobSetReplicatedJobReplicasLabel: strconv.Itoa(int(replicasOf(*rjob))),
		trainer.JobSetGlobalReplicasLabel:        strconv.Itoa(global),
		trainer.JobSetJobIndexLabel:              strconv.Itoa(int(r)),
		trainer.JobSetJobKeyLabel:                hex.EncodeToString(jobKey[:]),
		trainer.JobSetJobGlobalIndexLabel:        strconv.Itoa(before + int(r)),
		trainer.JobSetGroupNameLabel:             group,
		trainer.JobSetGroupReplicasLabel:         strconv.Itoa(groupReplicas),
		trainer.JobSetJobGroupIndexLabel:         strconv.Itoa(groupBefore + int(r)),
	}
}

// groupOf is the group of a replicated Job: its groupName, or JobSet's
// default group.
func groupOf(rjob *trainer.ReplicatedJob) string {
	if rjob.GroupName != nil && *rjob.GroupName != "" {
		return *rjob.GroupName
	}
	return trainer.JobSetDefaultGroupName
}

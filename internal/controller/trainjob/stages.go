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

package trainjob

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// Stages (JobSet's dependsOn and startupPolicy InOrder): the Jobs of a
// replicated Job are created once the replicated Jobs it depends on reach
// their status, counted from jobsStatus: Complete, once every Job of the
// dependency succeeded; Ready, once every Job of it is ready (its ready and
// succeeded Pods reach its parallelism) or finished. A replicated Job stays
// waiting (jobsStatus[].waiting) until its Jobs are all created. Suspension
// does not hold creation back (the Jobs are created suspended), and a
// resumed TrainJob resumes the Jobs of a replicated Job only once its
// dependencies are reached again, as JobSet does: work done (succeeded
// Jobs) is never run again.

// allCreated reports whether every Job of the TrainJob was created: its
// replicated Jobs are pinned in jobsStatus and none waits. Created=False
// (a Job that could not be created) means one does: versions before
// marked waiting replicated Jobs only by that condition, and marked the
// TrainJob whose Jobs were all created with Created=True.
func allCreated(tj *trainer.TrainJob) bool {
	if creationBlocked(tj) || slices.ContainsFunc(tj.Status.JobsStatus, func(js trainer.JobStatus) bool { return js.Waiting }) {
		return false
	}
	return shapePinned(&tj.Status) || meta.IsStatusConditionTrue(tj.Status.Conditions, trainer.TrainJobCreated)
}

// created reports whether the Jobs of replicated Job step were all created
// once: a missing one went away.
func created(tj *trainer.TrainJob, step string) bool {
	i := slices.IndexFunc(tj.Status.JobsStatus, func(js trainer.JobStatus) bool { return js.Name == step })
	if i < 0 || tj.Status.JobsStatus[i].Waiting || tj.Status.JobsStatus[i].Replicas < 1 {
		return false
	}
	// Versions before pinned the replicated Jobs before creating them and
	// had no waiting flag: there, Created=False says they were not all
	// created.
	return !creationBlocked(tj)
}

// creationBlocked reports whether the stored status says Jobs of the
// TrainJob could not be created.
func creationBlocked(tj *trainer.TrainJob) bool {
	c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobCreated)
	return c != nil && c.Status == metav1.ConditionFalse
}

// reached reports whether every dependency has reached its status, by the
// counts of status.jobsStatus; if not, it says what is waited for.
func reached(status *trainer.TrainJobStatus, deps []trainer.DependsOn) (bool, string) {
	var waiting []string
	for _, d := range deps {
		i := slices.IndexFunc(status.JobsStatus, func(js trainer.JobStatus) bool { return js.Name == d.Name })
		if i < 0 {
			waiting = append(waiting, fmt.Sprintf("%s to be %s", d.Name, d.Status))
			continue
		}
		js := &status.JobsStatus[i]
		done := js.Succeeded == js.Replicas
		if d.Status == trainer.DependsOnReady {
			done = js.Ready+js.Succeeded+js.Failed == js.Replicas
		}
		if !done {
			waiting = append(waiting, fmt.Sprintf("%s to be %s", d.Name, d.Status))
		}
	}
	return len(waiting) == 0, strings.Join(waiting, " and ")
}

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

package lifecycle

import (
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// MultiKueue is the spec.managedBy of TrainJobs that Kueue's MultiKueue
// dispatches to a worker cluster.
const MultiKueue = "kueue.x-k8s.io/multikueue"

// ManagedElsewhere reports whether spec.managedBy names another controller
// than this one. Such a TrainJob is left alone: no Jobs, no status, no
// deletion.
func ManagedElsewhere(tj *trainer.TrainJob) bool {
	return ptr.Deref(tj.Spec.ManagedBy, trainer.DefaultManagedBy) != trainer.DefaultManagedBy
}

// DispatchedByMultiKueue reports whether tj is, on Kueue's manager cluster,
// a TrainJob that MultiKueue runs on a worker cluster, where this
// controller runs its copy. Kueue keeps its status there, mirrored from
// the copy's. Like any TrainJob managed elsewhere it is not run here (no
// Jobs, no status, no deadline: the worker's controller enforces that on
// the copy), but its own expiry holds here, ttlSecondsAfterFinished or the
// cluster's retention, from the finish Kueue mirrored: deleting it is how
// it is retired, and Kueue deletes the copy with it.
func DispatchedByMultiKueue(tj *trainer.TrainJob) bool {
	return ptr.Deref(tj.Spec.ManagedBy, "") == MultiKueue
}

// KnownManager reports whether a spec.managedBy names a controller known to
// run TrainJobs: this one, or MultiKueue.
func KnownManager(managedBy string) bool {
	return managedBy == trainer.DefaultManagedBy || managedBy == MultiKueue
}

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

// KnownManager reports whether a spec.managedBy names a controller known to
// run TrainJobs: this one, or MultiKueue.
func KnownManager(managedBy string) bool {
	return managedBy == trainer.DefaultManagedBy || managedBy == MultiKueue
}

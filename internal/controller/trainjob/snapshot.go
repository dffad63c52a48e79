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
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
)

// A runtime for life: from its first Jobs on, a TrainJob runs on its
// runtime as it was then. Later stages, the Jobs of a restart and the
// scheduling directives of a resume are built from a snapshot of it, a
// ConfigMap <trainjob>-runtime-snapshot the TrainJob owns, holding the
// runtime object as YAML under the key "runtime" (Kubeflow Trainer v2.3's
// name and format, so a TrainJob Kubeflow started keeps its snapshot
// here). Whatever happens to the runtime afterwards (edited, deleted,
// recreated) changes nothing of the TrainJob.
//
// The snapshot is made, with the TrainJob's first Jobs and before them, only
// for a TrainJob that will read its runtime again (needsSnapshot): one
// whose Jobs are not all created at once (stages), whose failure policy can
// restart it, or that may resume with the scheduling directives of its
// runtime and of patches (created suspended, queued in Kueue, patched). A
// TrainJob that creates every Job at once and runs to its end pays no write
// for it. Until its first Jobs exist, a TrainJob takes its runtime as it
// is, and its snapshot follows the runtime.
//
// A TrainJob that needed none has Jobs made from its runtime as it was,
// and no patches: a resume resumes them as they are, reading nothing
// (observed.resumePlan). Jobs it could not create at once are created from
// the runtime as it is, and only while it still gives the replicated Jobs,
// network and success policy the TrainJob started with (Created=False,
// RuntimeChanged, otherwise). So is a TrainJob whose Jobs an earlier
// version made.

const (
	// snapshotsCached is how many TrainJobs' snapshots are kept parsed, and
	// snapshotCacheTTL for how long: a staged TrainJob reads its snapshot
	// on every reconcile while a stage waits.
	snapshotsCached  = 4096
	snapshotCacheTTL = 10 * time.Minute

	// snapshotSuffix names a TrainJob's snapshot after the TrainJob.
	snapshotSuffix = "-runtime-snapshot"
	// snapshotDataKey is the key of the runtime in the snapshot's data.
	snapshotDataKey = "runtime"
)

// snapshotKey is the name of the TrainJob's snapshot.
func snapshotKey(tj *trainer.TrainJob) types.NamespacedName {
	return types.NamespacedName{Namespace: tj.Namespace, Name: tj.Name + snapshotSuffix}
}

// snapshotObject is a runtime as a snapshot holds it, of either kind: the
// fields of its object this controller writes and reads. (Not an API type:
// its metadata is a struct of its own.)
type snapshotObject struct {
	APIVersion string                      `json:"apiVersion"`
	Kind       string                      `json:"kind"`
	Metadata   snapshotMetadata            `json:"metadata"`
	Spec       trainer.TrainingRuntimeSpec `json:"spec"`
}

// snapshotMetadata is what a snapshot keeps of the runtime's metadata.
type snapshotMetadata struct {
	Name       string    `json:"name"`
	Namespace  string    `json:"namespace,omitempty"`
	UID        types.UID `json:"uid,omitempty"`
	Generation int64     `json:"generation,omitempty"`
}

// needsSnapshot reports whether a TrainJob creating its first Jobs by plan
// will read its runtime again: a replicated Job of it waits for others
// (startable says which may start now), its failure policy can restart
// it, or it may be resumed with scheduling directives its runtime and
// patches give it: it is suspended, queued in Kueue (which may preempt
// and admit it again elsewhere, admitted before this controller first saw
// it), or has runtime patches.
func needsSnapshot(tj *trainer.TrainJob, plan *jobplan.Plan, startable map[string]bool) bool {
	if ptr.Deref(tj.Spec.Suspend, false) || tj.Labels[trainer.KueueQueueNameLabel] != "" || patched(tj) {
		return true
	}
	if slices.ContainsFunc(plan.Steps, func(s jobplan.Step) bool { return !startable[s.Name] }) {
		return true
	}
	if f := plan.Failure; f != nil {
		return f.MaxRestarts > 0 || slices.ContainsFunc(f.Rules, func(r trainer.FailurePolicyRule) bool {
			return r.Action == trainer.RestartJobSetAndIgnoreMaxRestarts
		})
	}
	return false
}

// makeSnapshot is the snapshot of rt for the TrainJob.
func makeSnapshot(tj *trainer.TrainJob, rt jobplan.Runtime) (*corev1.ConfigMap, error) {
	obj := snapshotObject{
		APIVersion: trainer.GroupVersion.String(), Kind: rt.Kind,
		Metadata: snapshotMetadata{Name: rt.Name, UID: rt.UID, Generation: rt.Generation},
		Spec:     *rt.Spec,
	}
	if rt.Kind == trainer.TrainingRuntimeKind {
		obj.Metadata.Namespace = tj.Namespace
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("writing the snapshot of %s %s: %w", rt.Kind, rt.Name, err)
	}
	key := snapshotKey(tj)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: key.Namespace,
			Labels:          map[string]string{trainer.TrainJobNameLabel: tj.Name},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))},
		},
		Data: map[string]string{snapshotDataKey: string(data)},
	}, nil
}

// readSnapshot reads the TrainJob's snapshot, from the API server: the
// runtime it runs on. It returns nil if the TrainJob has none: no
// ConfigMap of the name, or one that is not the TrainJob's (an earlier
// TrainJob's of the same name, not deleted yet). A snapshot that cannot be
// read, or names another runtime, is an error: the TrainJob waits rather
// than run on what it did not start with.
func (r *Reconciler) readSnapshot(ctx context.Context, tj *trainer.TrainJob) (*jobplan.Runtime, error) {
	// A snapshot read is the TrainJob's for life: nothing writes it once
	// the TrainJob created Jobs, and a TrainJob's UID is never reused.
	if rt, ok := r.snapshots.Get(tj.UID); ok {
		return rt.(*jobplan.Runtime), nil
	}
	key := snapshotKey(tj)
	var cm corev1.ConfigMap
	err := r.apiReader.Get(ctx, key, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the runtime snapshot %s: %w", key, err)
	case !metav1.IsControlledBy(&cm, tj):
		return nil, nil
	}
	var obj snapshotObject
	if err := yaml.Unmarshal([]byte(cm.Data[snapshotDataKey]), &obj); err != nil {
		return nil, fmt.Errorf("runtime snapshot %s: %w", key, err)
	}
	if want := jobplan.KindOf(tj); obj.Kind != want || obj.Metadata.Name != tj.Spec.RuntimeRef.Name {
		return nil, fmt.Errorf("runtime snapshot %s holds %s %q, not the TrainJob's %s %q", key, obj.Kind, obj.Metadata.Name, want, tj.Spec.RuntimeRef.Name)
	}
	rt := &jobplan.Runtime{Kind: obj.Kind, Name: obj.Metadata.Name, Spec: &obj.Spec, UID: obj.Metadata.UID, Generation: obj.Metadata.Generation}
	r.snapshots.Add(tj.UID, rt, snapshotCacheTTL)
	return rt, nil
}

// createdAny reports whether the TrainJob created a Job in its life: a
// replicated Job of it no longer waits, it restarted, or Jobs of it exist.
func createdAny(tj *trainer.TrainJob, obs *observed) bool {
	return tj.Status.Restarts > 0 || len(obs.children) > 0 || len(obs.previous) > 0 || createdJobs(&tj.Status) > 0
}

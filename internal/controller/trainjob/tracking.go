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
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/tracking"
)

// A child Job's tracking, one level above KEP-2307's Pod tracking:
//
//  1. Every child Job is created with the JobTrackingFinalizer.
//  2. When a child finishes (or is deleted before it finished), its replica
//     index is added to succeededReplicas or failedReplicas of the TrainJob's
//     jobsStatus, and the TrainJob's status is written.
//  3. Only once that write succeeded is the finalizer removed, so the child
//     may go away without its outcome being lost.
//  4. A recorded child is never created again.
//
// Once the TrainJob is finished or being deleted, or when the TrainJob is gone,
// every child's finalizer is removed: no object stays stuck behind it.

// child is a child Job with the replicated Job and replica it stands for.
type child struct {
	job     *batchv1.Job
	step    string
	replica int32
}

// outcome of a child Job.
type outcome int

const (
	running outcome = iota
	succeeded
	failed
)

// jobOutcome reads a child Job's outcome from its conditions: succeeded
// when Complete, failed when Failed or FailureTarget. FailureTarget is the
// Job controller's verdict, final and with the reason and message Failed
// will copy; Failed follows once the Job's Pods have terminated, seconds
// later on a wide Job. A restart waits for the Pods anyway (the Job is
// deleted in the foreground), so it need not wait twice. (A Job whose
// failed Pod decides its failure is given the verdict before the Job
// controller writes it: readPodFailures.)
func jobOutcome(job *batchv1.Job) (outcome, *batchv1.JobCondition) {
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return succeeded, c
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			return failed, c
		}
	}
	return running, nil
}

// hasPods reports whether a Job has Pods running or terminating.
func hasPods(job *batchv1.Job) bool {
	return job.Status.Active > 0 || ptr.Deref(job.Status.Terminating, 0) > 0
}

// childOf returns the replicated Job and replica of a child Job from its
// labels, or false if they are missing or malformed.
func childOf(job *batchv1.Job) (child, bool) {
	step := job.Labels[trainer.ReplicatedJobNameLabel]
	replica, err := strconv.ParseInt(job.Labels[trainer.ReplicaIndexLabel], 10, 32)
	if step == "" || err != nil || replica < 0 {
		return child{}, false
	}
	return child{job: job, step: step, replica: int32(replica)}, true
}

// jobStatusFor returns the jobsStatus entry of a replicated Job, adding an
// empty one if there is none.
func jobStatusFor(status *trainer.TrainJobStatus, step string) *trainer.JobStatus {
	for i := range status.JobsStatus {
		if status.JobsStatus[i].Name == step {
			return &status.JobsStatus[i]
		}
	}
	status.JobsStatus = append(status.JobsStatus, trainer.JobStatus{Name: step})
	return &status.JobsStatus[len(status.JobsStatus)-1]
}

// recordedOutcome returns the outcome recorded for a replica, or running if
// none is.
func recordedOutcome(js *trainer.JobStatus, replica int32) outcome {
	switch {
	case slices.Contains(js.SucceededReplicas, replica):
		return succeeded
	case slices.Contains(js.FailedReplicas, replica):
		return failed
	}
	return running
}

// isRecorded reports whether the outcome of a child is in the status.
func isRecorded(status *trainer.TrainJobStatus, c child) bool {
	for i := range status.JobsStatus {
		if status.JobsStatus[i].Name == c.step {
			return recordedOutcome(&status.JobsStatus[i], c.replica) != running
		}
	}
	return false
}

// record adds an outcome to the ledger, keeping the lists sorted.
func record(js *trainer.JobStatus, replica int32, o outcome) {
	list := &js.SucceededReplicas
	if o == failed {
		list = &js.FailedReplicas
	}
	if i, found := slices.BinarySearch(*list, replica); !found {
		*list = slices.Insert(*list, i, replica)
	}
}

// failure is why a TrainJob fails.
type failure struct {
	reason  string
	message string
}

// jobFailure is a child Job found failed, or gone before it finished: what
// it would fail the TrainJob with, and what a failure policy rule matches
// (the reason and message of its Failed condition, empty for a Job that
// went away, its replicated Job, and when it failed).
type jobFailure struct {
	failure
	job, step             string
	jobReason, jobMessage string
	at                    time.Time
}

// recordOutcomes adds to status the outcome of every child that finished, or
// that is being deleted before it finished, and returns the failures it
// finds. Deletions are not counted once the TrainJob has finished: by then
// its children are stopped on purpose.
func recordOutcomes(status *trainer.TrainJobStatus, children []child, finished bool) []jobFailure {
	var failures []jobFailure
	for _, c := range children {
		js := jobStatusFor(status, c.step)
		if recordedOutcome(js, c.replica) != running {
			continue
		}
		o, cond := jobOutcome(c.job)
		switch {
		case o == succeeded:
			record(js, c.replica, succeeded)
		case o == failed:
			record(js, c.replica, failed)
			failures = append(failures, jobFailure{
				failure: failure{reason: trainer.TrainJobJobFailedReason, message: fmt.Sprintf("Job %s failed: %s", c.job.Name, conditionText(cond))},
				job:     c.job.Name, step: c.step, jobReason: cond.Reason, jobMessage: cond.Message, at: cond.LastTransitionTime.Time,
			})
		case c.job.DeletionTimestamp != nil && !finished:
			record(js, c.replica, failed)
			failures = append(failures, jobFailure{
				failure: failure{reason: trainer.TrainJobJobDeletedReason, message: fmt.Sprintf("Job %s was deleted before it finished; it is not run again", c.job.Name)},
				job:     c.job.Name, step: c.step, at: c.job.DeletionTimestamp.Time,
			})
		}
	}
	return failures
}

// recordVanished records as failed the children of the pinned shape that
// went away before their outcome was recorded, and returns their failures.
func recordVanished(status *trainer.TrainJobStatus, vanished []missingChild, now time.Time) []jobFailure {
	var failures []jobFailure
	for _, m := range vanished {
		record(jobStatusFor(status, m.step), m.replica, failed)
		failures = append(failures, jobFailure{
			failure: failure{reason: trainer.TrainJobJobDeletedReason, message: fmt.Sprintf(
				"Job %s disappeared before its outcome was recorded (its %s finalizer was removed by someone else); it is not run again", m.job, trainer.JobTrackingFinalizer)},
			job: m.job, step: m.step, at: now,
		})
	}
	return failures
}

func conditionText(c *batchv1.JobCondition) string {
	switch {
	case c.Reason != "" && c.Message != "":
		return c.Reason + ": " + c.Message
	case c.Reason != "":
		return c.Reason
	}
	return c.Message
}

// releaseRecorded removes the tracking finalizer from the children whose
// outcome is in status, or from all of them if all is set. status must be
// what is stored in the API server.
func (r *Reconciler) releaseRecorded(ctx context.Context, status *trainer.TrainJobStatus, children []child, all bool) error {
	var jobs []*batchv1.Job
	for _, c := range children {
		if all || isRecorded(status, c) {
			jobs = append(jobs, c.job)
		}
	}
	return r.releaseFinalizers(ctx, jobs)
}

// releaseFinalizers removes the tracking finalizer from each Job that has it.
func (r *Reconciler) releaseFinalizers(ctx context.Context, jobs []*batchv1.Job) error {
	return eachInParallel(jobs, func(job *batchv1.Job) error { return r.releaseFinalizer(ctx, job) })
}

func (r *Reconciler) releaseFinalizer(ctx context.Context, job *batchv1.Job) error {
	if !slices.Contains(job.Finalizers, trainer.JobTrackingFinalizer) {
		r.released.observe(job)
		return nil
	}
	if r.released.pending(job) {
		return nil // removed already; the cache has not caught up yet
	}
	// Expected before the patch, so that its event cannot come first.
	r.released.expect(job)
	err := r.patchOutFinalizer(ctx, job)
	if apierrors.IsInvalid(err) {
		// The cached Job was behind (its finalizers changed): look at the
		// Job as it is now and try once more.
		var live batchv1.Job
		if err = r.apiReader.Get(ctx, client.ObjectKeyFromObject(job), &live); err == nil {
			if !slices.Contains(live.Finalizers, trainer.JobTrackingFinalizer) {
				return nil
			}
			err = r.patchOutFinalizer(ctx, &live)
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		r.released.forget(job) // no event of this removal will come
		return fmt.Errorf("removing finalizer %s from Job %s: %w", trainer.JobTrackingFinalizer, klog.KObj(job), err)
	}
	ctrl.LoggerFrom(ctx).V(2).Info("Released child Job", "job", klog.KObj(job))
	return nil
}

// releasedFor is how long a removed finalizer is trusted to be gone while
// the cache still shows it; past it, the removal is tried again.
const releasedFor = time.Minute

// releasesAwaited bounds how many removals are awaited at once, the least
// recently used forgotten first: one forgotten costs one patch more.
const releasesAwaited = 16384

// releasedJobs is an expectations store of the finalizer removals: the Jobs
// whose tracking finalizer this process removed, until a reconcile sees
// them without it in the cache, or for releasedFor. A reconcile on a cache
// that has not seen a removal yet does not patch again: that costs a failed
// JSON-patch test and a live read, for nothing. Unlike Kueue's store, the
// watch's events do not end the wait: a reconcile acts on the Jobs it
// listed before, which may be older than the event. Jobs are keyed one by
// one, not by TrainJob: a removal is awaited on its own, and a Job need not
// name its TrainJob (orphans, Jobs whose labels were changed).
type releasedJobs struct {
	awaited *cache.LRUExpireCache
}

func newReleasedJobs(clk cache.Clock) *releasedJobs {
	return &releasedJobs{awaited: cache.NewLRUExpireCacheWithClock(releasesAwaited, clk)}
}

// releasedKey names a Job and, with its UID, this Job of that name alone.
type releasedKey struct {
	types.NamespacedName
	uid types.UID
}

func keyOf(job *batchv1.Job) releasedKey {
	return releasedKey{client.ObjectKeyFromObject(job), job.UID}
}

// pending reports whether the removal of job's finalizer is awaited.
func (r *releasedJobs) pending(job *batchv1.Job) bool {
	_, ok := r.awaited.Get(keyOf(job))
	return ok
}

func (r *releasedJobs) expect(job *batchv1.Job) { r.awaited.Add(keyOf(job), struct{}{}, releasedFor) }

func (r *releasedJobs) forget(job *batchv1.Job) { r.awaited.Remove(keyOf(job)) }

// observe forgets the removal awaited for job, the cache's copy, if it
// shows the finalizer gone.
func (r *releasedJobs) observe(job *batchv1.Job) {
	if !slices.Contains(job.Finalizers, trainer.JobTrackingFinalizer) {
		r.forget(job)
	}
}

// patchOutFinalizer removes the tracking finalizer from job.
func (r *Reconciler) patchOutFinalizer(ctx context.Context, job *batchv1.Job) error {
	return tracking.RemoveFinalizer(ctx, r.client, job)
}

// releaseOrphans removes the tracking finalizer from child Jobs labelled for
// TrainJob namespace/name whose owner no longer exists. The owner is read
// from the API server, not the cache: a TrainJob deleted and created again
// under the same name must keep the tracking of its own children.
func (r *Reconciler) releaseOrphans(ctx context.Context, jobs []*batchv1.Job, namespace, name string) error {
	if len(jobs) == 0 {
		return nil
	}
	var live trainer.TrainJob
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &live)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading TrainJob %s/%s: %w", namespace, name, err)
	}
	var orphans []*batchv1.Job
	for _, job := range jobs {
		owner := ctrlOwnerUID(job)
		if err != nil || owner != live.UID || live.DeletionTimestamp != nil {
			orphans = append(orphans, job)
		}
	}
	return r.releaseFinalizers(ctx, orphans)
}

func ctrlOwnerUID(job *batchv1.Job) types.UID {
	if ref := metav1.GetControllerOf(job); ref != nil {
		return ref.UID
	}
	return ""
}

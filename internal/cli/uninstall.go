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

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/tracking"
)

// Uninstalling: every child Job carries the tracking finalizer, which only the
// manager removes. Deleting the installation while TrainJobs run (the CRDs go,
// and every TrainJob with them) leaves their Jobs behind: the garbage
// collector may not delete them at all (it cannot look up an owner whose CRD
// is gone), and those it deletes stay, held by the finalizer. The Job
// controller does not look after a Job being deleted, so their Pods keep
// running. `trainctl uninstall` clears the way first, whether the manager
// still runs or not, and whether the CRDs still exist or not.
//
// It works in rounds until a round finds nothing left:
//  1. delete every TrainJob of every namespace (none if the CRD is gone);
//  2. remove the tracking finalizer from every Job that carries it, and
//     delete every child Job: the garbage collector would not always do it,
//     for it cannot resolve an owner whose CRD is gone, nor find the owner of
//     a Job orphaned with --cascade=orphan;
//  3. delete the TrainJobs' headless Services, for the same reason;
//  4. delete the Pods of child Jobs that were gone or being deleted already
//     when the round looked: the Job controller does not delete the Pods of
//     a Job being deleted, and nothing deletes those of a Job deleted with
//     --cascade=orphan. (Those of a Job deleted in the round are the garbage
//     collector's to delete, which saves a request a Pod; the next round
//     deletes any left.)
//
// Every round starts from fresh lists: the manager, while it still runs,
// creates the Jobs of TrainJobs created meanwhile, and changes finalizers.

const (
	defaultUninstallTimeout = 5 * time.Minute
	uninstallInterval       = 2 * time.Second // between rounds
	uninstallProgressEvery  = 5 * time.Second // between progress lines
	listPageSize            = 500
	namedAtMost             = 10 // objects named in the timeout error
)

func newUninstallCommand(g *globals) *cobra.Command {
	timeout := defaultUninstallTimeout
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Delete every TrainJob, its Jobs and Pods, and release the tracking finalizers, before the installation is deleted",
		Long: `Prepare the cluster for the installation to be deleted: delete every TrainJob
in every namespace, remove the finalizer ` + trainer.JobTrackingFinalizer + `
from every Job that has it, delete the TrainJobs' Jobs, Services and Pods, and
wait until none is left. It works whether the manager still runs or not, and
whether the CRDs are still installed or were deleted already.

It ignores --namespace: it acts on the whole cluster. Then delete the
installation itself, as it was installed (docs/install.md):
kubectl delete --ignore-not-found -f dist/install.yaml (or -k config/default),
or helm uninstall and then the CRDs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, not %s", timeout)
			}
			cl, err := g.uninstallClient()
			if err != nil {
				return err
			}
			u := newUninstaller(cl, g.out)
			u.timeout = timeout
			return u.run(cmd.Context())
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", defaultUninstallTimeout, "How long to wait until nothing is left before giving up")
	return cmd
}

// uninstallClient is a client of the cluster with kubectl's client-side rate
// limits: an uninstall makes a few requests per object, and client-go's
// default of 5 a second would take minutes over a few hundred TrainJobs.
func (g *globals) uninstallClient() (client.Client, error) {
	cl, _, err := g.clientWith(func(cfg *rest.Config) { cfg.QPS, cfg.Burst = 50, 300 })
	return cl, err
}

// uninstaller deletes what TrainJobs leave in a cluster.
type uninstaller struct {
	client        client.Client
	out           io.Writer
	clock         clock.Clock
	timeout       time.Duration
	interval      time.Duration
	progressEvery time.Duration
	// pause waits between rounds; nil waits interval on clock.
	pause func(ctx context.Context) error
}

func newUninstaller(cl client.Client, out io.Writer) *uninstaller {
	return &uninstaller{
		client: cl, out: out, clock: clock.RealClock{},
		timeout: defaultUninstallTimeout, interval: uninstallInterval, progressEvery: uninstallProgressEvery,
	}
}

// leftover is what one round found, before it acted.
type leftover struct {
	crdGone    bool
	trainJobs  int
	jobs       int
	finalizers int // Jobs still carrying the tracking finalizer
	services   int
	pods       int
	// named describes each object found, for the timeout error.
	named []string
	// complete is false if the round met an error: it may not have seen
	// or done all.
	complete bool
	// err is the last error of the round that waiting may cure.
	err error
}

func (l *leftover) empty() bool {
	return l.complete && l.trainJobs+l.jobs+l.finalizers+l.services+l.pods == 0
}

func (l *leftover) add(what string, obj client.Object, note string) {
	s := what + " " + obj.GetNamespace() + "/" + obj.GetName()
	if note != "" {
		s += " (" + note + ")"
	}
	l.named = append(l.named, s)
}

func (l *leftover) failed(err error) {
	l.complete = false
	l.err = err
}

func (l *leftover) String() string {
	s := fmt.Sprintf("%d TrainJobs, %d child Jobs (%d held by %s), %d Services, %d Pods",
		l.trainJobs, l.jobs, l.finalizers, trainer.JobTrackingFinalizer, l.services, l.pods)
	if l.crdGone {
		s = "no TrainJob CRD; " + s
	}
	return s
}

// done counts what the uninstaller did.
type done struct {
	trainJobs, jobs, services, pods, finalizers int
}

// run works in rounds until one finds nothing left, or the timeout passes.
func (u *uninstaller) run(ctx context.Context) error {
	start := u.clock.Now()
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	var did done
	var last *leftover
	var printed time.Time
	for first := true; ; first = false {
		left, err := u.round(ctx, &did)
		if err != nil {
			return err
		}
		now := u.clock.Now()
		elapsed := now.Sub(start).Round(100 * time.Millisecond)
		if first {
			if left.crdGone {
				fmt.Fprintln(u.out, "The TrainJob CRD is not installed: no TrainJob to delete; looking for the Jobs, Pods and Services of those that were.")
			}
			fmt.Fprintln(u.out, withError("Found "+left.String(), left.err))
			printed = now
		}
		if left.empty() {
			fmt.Fprintf(u.out, "Deleted %d TrainJobs, %d child Jobs, %d Services and %d Pods; released %d tracking finalizers.\n",
				did.trainJobs, did.jobs, did.services, did.pods, did.finalizers)
			fmt.Fprintf(u.out, "Done in %s: no TrainJob, child Job, Pod of one, Service or %s finalizer is left.\n", elapsed, trainer.JobTrackingFinalizer)
			fmt.Fprintln(u.out, "Next, delete the installation (CRDs, runtimes, RBAC, webhook, manager) as it was installed:")
			fmt.Fprintln(u.out, "  kubectl delete --ignore-not-found -f dist/install.yaml   (or -k config/default)")
			fmt.Fprintln(u.out, "  helm uninstall trainjob-operator -n trainjob-system && kubectl delete -f charts/trainjob-operator/crds/")
			return nil
		}
		if ctx.Err() != nil && last != nil {
			// The round was cut short: the one before says better what is
			// left.
			left = last
		}
		last = left
		if !first && now.Sub(printed) >= u.progressEvery {
			fmt.Fprintln(u.out, withError(fmt.Sprintf("[%s] left: %s", elapsed, left), left.err))
			printed = now
		}
		if err := ctx.Err(); errors.Is(err, context.Canceled) {
			return fmt.Errorf("interrupted with %s left: %w", left, err)
		}
		if now.Sub(start) >= u.timeout || ctx.Err() != nil {
			return u.timedOut(left)
		}
		if err := u.wait(ctx); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return u.timedOut(left)
			}
			return fmt.Errorf("interrupted with %s left: %w", left, err)
		}
	}
}

// withError adds to a progress line the error the round met, if any.
func withError(line string, err error) string {
	if err != nil {
		return line + "; retrying after: " + err.Error()
	}
	return line
}

func (u *uninstaller) wait(ctx context.Context) error {
	if u.pause != nil {
		return u.pause(ctx)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-u.clock.After(u.interval):
		return nil
	}
}

func (u *uninstaller) timedOut(left *leftover) error {
	named := left.named
	if len(named) > namedAtMost {
		named = append(slices.Clone(named[:namedAtMost]), fmt.Sprintf("and %d more", len(named)-namedAtMost))
	}
	msg := fmt.Sprintf("not done after %s: left %s", u.timeout, left)
	if len(named) > 0 {
		msg += ": " + strings.Join(named, ", ")
	}
	if left.err != nil {
		return fmt.Errorf("%s; last error: %w", msg, left.err)
	}
	return errors.New(msg)
}

// found is what a round finds, before it acts.
type found struct {
	trainJobs []*trainer.TrainJob
	jobs      map[types.UID]*batchv1.Job // every Job, by UID; nil if unknown
	children  []*batchv1.Job             // the child Jobs among them
	services  []*corev1.Service
	pods      []*corev1.Pod // the Pods of child Jobs
}

// round looks at the cluster, then deletes and releases what it found, and
// says what that was. It returns an error only if waiting cannot help
// (access refused).
func (u *uninstaller) round(ctx context.Context, did *done) (*leftover, error) {
	left := &leftover{complete: true}
	f, errs := u.look(ctx, left)
	// Refused a list, it would act blind: deleting TrainJobs without
	// releasing their Jobs strands them.
	if err := refused(errs); err != nil {
		return nil, err
	}
	errs = append(errs, u.act(ctx, f, did)...)
	if err := refused(errs); err != nil {
		return nil, err
	}
	for _, err := range errs {
		left.failed(err)
	}
	return left, nil
}

// refused returns the first error that waiting cannot cure: access refused.
func refused(errs []error) error {
	for _, err := range errs {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return err
		}
	}
	return nil
}

// look lists the TrainJobs and what they leave, and counts and names them in
// left. A missing TrainJob CRD means there is no TrainJob.
func (u *uninstaller) look(ctx context.Context, left *leftover) (*found, []error) {
	f := &found{}
	var errs []error
	err := listPages(ctx, u.client, func() *trainer.TrainJobList { return &trainer.TrainJobList{} }, func(l *trainer.TrainJobList) {
		for i := range l.Items {
			tj := &l.Items[i]
			f.trainJobs = append(f.trainJobs, tj)
			note := ""
			if tj.DeletionTimestamp != nil {
				note = "being deleted, finalizers: " + strings.Join(tj.Finalizers, ", ")
			}
			left.add("TrainJob", tj, note)
		}
	})
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		left.crdGone = true
	case err != nil:
		errs = append(errs, fmt.Errorf("listing TrainJobs: %w", err))
	}
	left.trainJobs = len(f.trainJobs)

	jobs := map[types.UID]*batchv1.Job{}
	err = listPages(ctx, u.client, func() *batchv1.JobList { return &batchv1.JobList{} }, func(l *batchv1.JobList) {
		for i := range l.Items {
			job := &l.Items[i]
			jobs[job.UID] = job
			if !isChildJob(job) {
				continue
			}
			f.children = append(f.children, job)
			var notes []string
			if slices.Contains(job.Finalizers, trainer.JobTrackingFinalizer) {
				left.finalizers++
				notes = append(notes, "held by "+trainer.JobTrackingFinalizer)
			}
			if job.DeletionTimestamp != nil {
				others := slices.DeleteFunc(slices.Clone(job.Finalizers), func(f string) bool { return f == trainer.JobTrackingFinalizer })
				if len(others) > 0 {
					notes = append(notes, "being deleted, finalizers: "+strings.Join(others, ", "))
				}
			}
			left.add("Job", job, strings.Join(notes, "; "))
		}
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing Jobs: %w", err))
	} else {
		f.jobs = jobs
	}
	left.jobs = len(f.children)

	err = listPages(ctx, u.client, func() *corev1.ServiceList { return &corev1.ServiceList{} }, func(l *corev1.ServiceList) {
		for i := range l.Items {
			if svc := &l.Items[i]; tracking.IsTrainJob(metav1.GetControllerOf(svc)) {
				f.services = append(f.services, svc)
				left.add("Service", svc, "")
			}
		}
	}, client.HasLabels{trainer.TrainJobNameLabel})
	if err != nil {
		errs = append(errs, fmt.Errorf("listing Services: %w", err))
	}
	left.services = len(f.services)

	if f.jobs != nil { // else whose Pods they are is unknown: next round
		err = listPages(ctx, u.client, func() *corev1.PodList { return &corev1.PodList{} }, func(l *corev1.PodList) {
			for i := range l.Items {
				if pod := &l.Items[i]; isChildPod(pod, f.jobs) {
					f.pods = append(f.pods, pod)
					left.add("Pod", pod, string(pod.Status.Phase))
				}
			}
		}, client.HasLabels{trainer.TrainJobNameLabel})
		if err != nil {
			errs = append(errs, fmt.Errorf("listing Pods: %w", err))
		}
	}
	left.pods = len(f.pods)
	return f, errs
}

// act deletes the TrainJobs, releases and deletes their Jobs, and deletes
// their Services and the Pods of Jobs that were gone or being deleted
// already.
func (u *uninstaller) act(ctx context.Context, f *found, did *done) []error {
	var errs []error
	for _, tj := range f.trainJobs {
		if tj.DeletionTimestamp != nil {
			continue
		}
		if err := u.delete(ctx, tj); err != nil {
			errs = append(errs, fmt.Errorf("deleting TrainJob %s/%s: %w", tj.Namespace, tj.Name, err))
		} else {
			did.trainJobs++
		}
	}
	for _, job := range f.children {
		if slices.Contains(job.Finalizers, trainer.JobTrackingFinalizer) {
			released, err := removeTrackingFinalizer(ctx, u.client, job)
			if err != nil {
				errs = append(errs, fmt.Errorf("removing finalizer %s from Job %s/%s: %w", trainer.JobTrackingFinalizer, job.Namespace, job.Name, err))
			}
			if released {
				did.finalizers++
			}
		}
		if job.DeletionTimestamp != nil {
			continue
		}
		if err := u.delete(ctx, job); err != nil {
			errs = append(errs, fmt.Errorf("deleting Job %s/%s: %w", job.Namespace, job.Name, err))
		} else {
			did.jobs++
		}
	}
	for _, svc := range f.services {
		if svc.DeletionTimestamp != nil {
			continue
		}
		if err := u.delete(ctx, svc); err != nil {
			errs = append(errs, fmt.Errorf("deleting Service %s/%s: %w", svc.Namespace, svc.Name, err))
		} else {
			did.services++
		}
	}
	for _, pod := range f.pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if ref := metav1.GetControllerOf(pod); ref != nil {
			if job := f.jobs[ref.UID]; job != nil && job.DeletionTimestamp == nil {
				// Its Job was not being deleted when this round looked: if
				// it was deleted just now, the garbage collector deletes
				// its Pods, or else the next round does.
				continue
			}
		}
		if err := u.delete(ctx, pod); err != nil {
			errs = append(errs, fmt.Errorf("deleting Pod %s/%s: %w", pod.Namespace, pod.Name, err))
		} else {
			did.pods++
		}
	}
	return errs
}

// delete deletes obj in the background; it being gone already is success.
func (u *uninstaller) delete(ctx context.Context, obj client.Object) error {
	err := u.client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// listPages lists every object of a kind in the cluster, a page at a time.
func listPages[L client.ObjectList](ctx context.Context, cl client.Client, newList func() L, each func(L), opts ...client.ListOption) error {
	cont := ""
	for {
		l := newList()
		if err := cl.List(ctx, l, append(slices.Clone(opts), client.Limit(listPageSize), client.Continue(cont))...); err != nil {
			return err
		}
		each(l)
		if cont = l.GetContinue(); cont == "" {
			return nil
		}
	}
}

// isChildJob reports whether a Job is, or was, the child of a TrainJob: it
// carries the tracking finalizer, or a TrainJob controls it, or it has no
// controller and the TrainJob name label (orphaned with --cascade=orphan).
func isChildJob(job *batchv1.Job) bool {
	if slices.Contains(job.Finalizers, trainer.JobTrackingFinalizer) {
		return true
	}
	ref := metav1.GetControllerOf(job)
	if ref == nil {
		_, labelled := job.Labels[trainer.TrainJobNameLabel]
		return labelled
	}
	return tracking.IsTrainJob(ref)
}

// isChildPod reports whether a Pod labelled with a TrainJob's name is a
// child Job's: its controller is a child Job, or a Job that is gone, or it
// has no controller (its Job was deleted with --cascade=orphan). jobs holds
// every Job by UID.
func isChildPod(pod *corev1.Pod, jobs map[types.UID]*batchv1.Job) bool {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return true
	}
	if ref.Kind != "Job" || !strings.HasPrefix(ref.APIVersion, batchv1.GroupName+"/") {
		return false
	}
	job, found := jobs[ref.UID]
	return !found || isChildJob(job)
}

// removeTrackingFinalizer removes the tracking finalizer from job as the
// manager's tracking does. A failed test (Invalid: the finalizers changed
// meanwhile, the manager may have removed it) is no error: the next round
// looks again.
func removeTrackingFinalizer(ctx context.Context, cl client.Client, job *batchv1.Job) (released bool, err error) {
	err = tracking.RemoveFinalizer(ctx, cl, job)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err), apierrors.IsInvalid(err):
		return false, nil
	}
	return false, err
}

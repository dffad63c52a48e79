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
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// childJob is a Job as the manager creates it for tj (nil: orphaned with
// --cascade=orphan, which drops the owner reference), with finalizers.
func childJob(name string, tj *trainer.TrainJob, finalizers ...string) *batchv1.Job {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		Labels:     map[string]string{trainer.TrainJobNameLabel: strings.Split(name, "-")[0]},
		Finalizers: finalizers,
	}}
	if tj != nil {
		job.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))}
	}
	return job
}

// deleting marks a Job as being deleted (the garbage collector's work once
// its TrainJob is gone).
func deleting(job *batchv1.Job) *batchv1.Job {
	job.DeletionTimestamp = &metav1.Time{Time: now}
	return job
}

// podOf is a running Pod of job (nil: no controller), labelled as the
// manager labels them.
func podOf(name string, job *batchv1.Job, finalizers ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "ns",
			Labels:     map[string]string{trainer.TrainJobNameLabel: strings.Split(name, "-")[0]},
			Finalizers: finalizers,
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if job != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}
	}
	return pod
}

func serviceOf(tj *trainer.TrainJob) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Name: tj.Name, Namespace: tj.Namespace,
		Labels:          map[string]string{trainer.TrainJobNameLabel: tj.Name},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(tj, trainer.GroupVersion.WithKind(trainer.TrainJobKind))},
	}}
}

// Objects that are not a TrainJob's: the uninstaller must leave them.
func notOurs() []client.Object {
	cron := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "uid-cron", Controller: ptr.To(true)}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name: "nightly-1", Namespace: "ns", UID: "uid-nightly-1", OwnerReferences: []metav1.OwnerReference{cron},
	}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: "nightly-1-x", Namespace: "ns",
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
	}}
	// Labelled as a TrainJob's, but run by a Job that is no TrainJob's.
	labelled := podOf("nightly-1-y", job)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Labels: map[string]string{trainer.TrainJobNameLabel: "web"}}}
	return []client.Object{job, pod, labelled, svc}
}

var notOursLeft = []string{"Job ns/nightly-1", "Pod ns/nightly-1-x", "Pod ns/nightly-1-y", "Service ns/web"}

// remaining lists what the cluster holds, with the finalizers of each.
func remaining(t *testing.T, cl client.Client) []string {
	t.Helper()
	var out []string
	add := func(kind string, o metav1.Object) {
		s := kind + " " + o.GetNamespace() + "/" + o.GetName()
		if len(o.GetFinalizers()) > 0 {
			s += " " + fmt.Sprint(o.GetFinalizers())
		}
		out = append(out, s)
	}
	var tjs trainer.TrainJobList
	var jobs batchv1.JobList
	var pods corev1.PodList
	var svcs corev1.ServiceList
	for _, l := range []client.ObjectList{&tjs, &jobs, &pods, &svcs} {
		if err := cl.List(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	for i := range tjs.Items {
		add("TrainJob", &tjs.Items[i])
	}
	for i := range jobs.Items {
		add("Job", &jobs.Items[i])
	}
	for i := range pods.Items {
		add("Pod", &pods.Items[i])
	}
	for i := range svcs.Items {
		add("Service", &svcs.Items[i])
	}
	slices.Sort(out)
	return out
}

// collectGarbage deletes the Pods whose Job is gone, as the garbage
// collector does; the fake client has none.
func collectGarbage(t *testing.T, cl client.Client) {
	t.Helper()
	ctx := context.Background()
	var jobs batchv1.JobList
	var pods corev1.PodList
	if err := cl.List(ctx, &jobs); err != nil {
		t.Fatal(err)
	}
	if err := cl.List(ctx, &pods); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		ref := metav1.GetControllerOf(&pods.Items[i])
		if ref == nil || ref.Kind != "Job" || slices.ContainsFunc(jobs.Items, func(j batchv1.Job) bool { return j.UID == ref.UID }) {
			continue
		}
		if err := cl.Delete(ctx, &pods.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
}

// Interceptors of the fake client.
func failTrainJobLists(err error) interceptor.Funcs {
	return interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*trainer.TrainJobList); ok {
			return err
		}
		return c.List(ctx, list, opts...)
	}}
}

func TestUninstall(t *testing.T) {
	a := utiltesting.MakeTrainJob("a", "ns").UID("uid-a").Obj()
	b := utiltesting.MakeTrainJob("b", "ns").UID("uid-b").Obj()
	// A TrainJob running two Jobs of one Pod each, with its Service.
	running := func() []client.Object {
		j0, j1 := childJob("a-node-0", a, trainer.JobTrackingFinalizer), childJob("a-node-1", a, trainer.JobTrackingFinalizer)
		return []client.Object{a.DeepCopy(), j0, j1, podOf("a-node-0-0", j0), podOf("a-node-1-0", j1), serviceOf(a)}
	}
	// What the garbage collector leaves once the CRD is gone: the Jobs being
	// deleted, held by the finalizer; the Pods running; the Service.
	stranded := func() []client.Object {
		j0, j1 := deleting(childJob("a-node-0", a, trainer.JobTrackingFinalizer)), deleting(childJob("a-node-1", a, trainer.JobTrackingFinalizer))
		return []client.Object{j0, j1, podOf("a-node-0-0", j0), podOf("a-node-1-0", j1), serviceOf(a)}
	}
	noMatch := &meta.NoKindMatchError{GroupKind: trainer.GroupVersion.WithKind(trainer.TrainJobKind).GroupKind(), SearchedVersions: []string{"v1alpha1"}}
	invalidOnce := func() interceptor.Funcs {
		failed := false
		return interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if !failed {
				failed = true
				return apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, obj.GetName(), field.ErrorList{field.Invalid(field.NewPath("metadata", "finalizers"), nil, "the test operation failed")})
			}
			return c.Patch(ctx, obj, patch, opts...)
		}}
	}

	cases := map[string]struct {
		objs         []client.Object
		interceptors interceptor.Funcs
		// between runs at each pause, numbered from 1, after the garbage
		// collector, unless noGC.
		between    func(t *testing.T, cl client.Client, pause int)
		noGC       bool
		wantErr    string // a part of the error; "" for none
		wantLeft   []string
		wantOut    []string // parts of the output
		wantPauses int
	}{
		"the manager is gone, the CRD installed, a TrainJob runs": {
			objs:     running(),
			wantLeft: notOursLeft,
			wantOut: []string{
				"Found 1 TrainJobs, 2 child Jobs (2 held by trainer.kubeflow.org/job-tracking), 1 Services, 2 Pods\n",
				// The garbage collector deletes the Pods of the Jobs deleted.
				"Deleted 1 TrainJobs, 2 child Jobs, 1 Services and 0 Pods; released 2 tracking finalizers.",
				"Done in 2s: no TrainJob, child Job, Pod of one, Service or trainer.kubeflow.org/job-tracking finalizer is left.",
				"kubectl delete --ignore-not-found -f dist/install.yaml",
			},
			wantPauses: 1,
		},
		"no garbage collector: the next round deletes the Pods of the Jobs deleted": {
			objs:       running(),
			noGC:       true,
			wantLeft:   notOursLeft,
			wantOut:    []string{"Deleted 1 TrainJobs, 2 child Jobs, 1 Services and 2 Pods; released 2 tracking finalizers."},
			wantPauses: 2,
		},
		"the CRD is gone (no match for the kind): Jobs being deleted, held by the finalizer": {
			objs:         stranded(),
			interceptors: failTrainJobLists(noMatch),
			wantLeft:     notOursLeft,
			wantOut: []string{
				"The TrainJob CRD is not installed",
				"Found no TrainJob CRD; 0 TrainJobs, 2 child Jobs (2 held by trainer.kubeflow.org/job-tracking), 1 Services, 2 Pods\n",
				"Deleted 0 TrainJobs, 0 child Jobs, 1 Services and 2 Pods; released 2 tracking finalizers.",
			},
			wantPauses: 1,
		},
		"the CRD is gone after the client learnt of it (NotFound)": {
			objs:         stranded(),
			interceptors: failTrainJobLists(apierrors.NewNotFound(schema.GroupResource{Group: trainer.GroupVersion.Group, Resource: "trainjobs"}, "")),
			wantLeft:     notOursLeft,
			wantOut:      []string{"The TrainJob CRD is not installed", "released 2 tracking finalizers"},
			wantPauses:   1,
		},
		"the GC could not delete the Jobs (owner kind unknown): they are deleted": {
			objs: []client.Object{
				childJob("a-node-0", a, trainer.JobTrackingFinalizer), podOf("a-node-0-0", childJob("a-node-0", a)),
			},
			interceptors: failTrainJobLists(noMatch),
			wantLeft:     notOursLeft,
			wantOut:      []string{"Deleted 0 TrainJobs, 1 child Jobs, 0 Services and 0 Pods; released 1 tracking finalizers."},
			wantPauses:   1,
		},
		"Jobs and Pods orphaned with --cascade=orphan": {
			objs: []client.Object{
				childJob("c-node-0", nil), podOf("c-node-0-0", nil),
				// A Pod whose Job is gone, left by a Job deleted with the
				// tracking finalizer and an orphan propagation.
				podOf("d-node-0-0", childJob("d-node-0", nil)),
			},
			wantLeft:   notOursLeft,
			wantOut:    []string{"Deleted 0 TrainJobs, 1 child Jobs, 0 Services and 2 Pods; released 0 tracking finalizers."},
			wantPauses: 1,
		},
		"nothing to do": {
			wantLeft:   notOursLeft,
			wantOut:    []string{"Deleted 0 TrainJobs, 0 child Jobs, 0 Services and 0 Pods", "Done in 0s"},
			wantPauses: 0,
		},
		"the manager still runs and creates a TrainJob's Job after the first round": {
			objs: running(),
			between: func(t *testing.T, cl client.Client, pause int) {
				if pause != 1 {
					return
				}
				j := childJob("b-node-0", b, trainer.JobTrackingFinalizer)
				for _, o := range []client.Object{b.DeepCopy(), j, podOf("b-node-0-0", j)} {
					if err := cl.Create(context.Background(), o); err != nil {
						t.Fatal(err)
					}
				}
			},
			wantLeft:   notOursLeft,
			wantOut:    []string{"Deleted 2 TrainJobs, 3 child Jobs, 1 Services and 0 Pods; released 3 tracking finalizers."},
			wantPauses: 2,
		},
		"the Job's finalizers changed since the list: the JSON patch test fails, and the next round removes it": {
			objs:         stranded()[:1],
			interceptors: invalidOnce(),
			wantLeft:     notOursLeft,
			// No error to show: the next round looks again.
			wantOut: []string{"Found 0 TrainJobs, 1 child Jobs (1 held by trainer.kubeflow.org/job-tracking), 0 Services, 0 Pods\n", "released 1 tracking finalizers"},
			// Round 2 removes the finalizer, round 3 finds nothing.
			wantPauses: 2,
		},
		"a transient error is shown and retried": {
			objs: running(),
			interceptors: func() interceptor.Funcs {
				failed := false
				return interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					if _, ok := obj.(*batchv1.Job); ok && !failed {
						failed = true
						return apierrors.NewInternalError(fmt.Errorf("etcd is slow"))
					}
					return c.Delete(ctx, obj, opts...)
				}}
			}(),
			wantLeft: notOursLeft,
			wantOut: []string{
				"Found 1 TrainJobs, 2 child Jobs (2 held by trainer.kubeflow.org/job-tracking), 1 Services, 2 Pods; retrying after: deleting Job ns/a-node-0: Internal error occurred: etcd is slow\n",
				"Deleted 1 TrainJobs, 2 child Jobs, 1 Services and 0 Pods; released 2 tracking finalizers.",
			},
			// Round 2 deletes the Job and its Pod, round 3 finds nothing.
			wantPauses: 2,
		},
		"another controller's finalizers stay, and hold a Job and a Pod past the timeout": {
			objs: func() []client.Object {
				j := deleting(childJob("a-node-0", a, "example.com/before", trainer.JobTrackingFinalizer, "example.com/after"))
				return []client.Object{j, podOf("a-node-0-0", j, "example.com/keep")}
			}(),
			interceptors: failTrainJobLists(noMatch),
			wantErr: "not done after 1m0s: left no TrainJob CRD; 0 TrainJobs, 1 child Jobs (0 held by trainer.kubeflow.org/job-tracking), 0 Services, 1 Pods: " +
				"Job ns/a-node-0 (being deleted, finalizers: example.com/before, example.com/after), Pod ns/a-node-0-0 (Running)",
			wantLeft: []string{
				"Job ns/a-node-0 [example.com/before example.com/after]", "Job ns/nightly-1",
				"Pod ns/a-node-0-0 [example.com/keep]", "Pod ns/nightly-1-x", "Pod ns/nightly-1-y", "Service ns/web",
			},
			// A round every 2s, a progress line every 5s or more.
			wantOut:    []string{"Found ", "[6s] left:", "[12s] left:", "[1m0s] left:"},
			wantPauses: 30,
		},
		"access refused: fails at once, before deleting anything": {
			objs: running(),
			interceptors: interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*batchv1.JobList); ok {
					return apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", fmt.Errorf("no"))
				}
				return c.List(ctx, list, opts...)
			}},
			wantErr:    `listing Jobs: jobs.batch is forbidden`,
			wantLeft:   []string{"Job ns/a-node-0 [trainer.kubeflow.org/job-tracking]", "Job ns/a-node-1 [trainer.kubeflow.org/job-tracking]", "Pod ns/a-node-0-0", "Pod ns/a-node-1-0", "Service ns/a", "TrainJob ns/a"},
			wantPauses: 0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := tc.objs
			if !strings.HasPrefix(name, "access refused") {
				objs = append(slices.Clone(objs), notOurs()...)
			}
			base := utiltesting.NewClientBuilder(nil, objs...).Build()
			cl := interceptor.NewClient(base, tc.interceptors)
			var out bytes.Buffer
			clk := clocktesting.NewFakeClock(now)
			u := newUninstaller(cl, &out)
			u.clock, u.timeout = clk, time.Minute
			pauses := 0
			u.pause = func(context.Context) error {
				pauses++
				if pauses > 1000 {
					t.Fatal("the uninstaller does not stop")
				}
				clk.Step(u.interval)
				if !tc.noGC {
					collectGarbage(t, base)
				}
				if tc.between != nil {
					tc.between(t, cl, pauses)
				}
				return nil
			}

			err := u.run(context.Background())
			t.Logf("output:\n%s", out.String())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantLeft, remaining(t, base)); diff != "" {
				t.Errorf("left in the cluster (-want +got):\n%s", diff)
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the output lacks %q", want)
				}
			}
			if pauses != tc.wantPauses {
				t.Errorf("paused %d times, want %d", pauses, tc.wantPauses)
			}
		})
	}
}

func TestUninstallCommand(t *testing.T) {
	cmd, _, err := NewCommand(&bytes.Buffer{}, &bytes.Buffer{}).Find([]string{"uninstall"})
	if err != nil || cmd.Name() != "uninstall" {
		t.Fatalf("no uninstall command: %v", err)
	}
	if got := cmd.Flags().Lookup("timeout"); got == nil || got.DefValue != "5m0s" {
		t.Errorf("--timeout: %+v, want a flag defaulting to 5m0s", got)
	}
}

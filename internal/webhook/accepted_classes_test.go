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

package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// dryRuns counts the Jobs dry-run, and refuses them with refuse's answer
// when it gives one.
type dryRuns struct {
	mu     sync.Mutex
	names  []string
	refuse func(job *batchv1.Job) error
}

func (d *dryRuns) funcs() *interceptor.Funcs {
	return &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		job, ok := obj.(*batchv1.Job)
		if !ok {
			return c.Create(ctx, obj, opts...)
		}
		d.mu.Lock()
		d.names = append(d.names, job.Name)
		d.mu.Unlock()
		if d.refuse != nil {
			if err := d.refuse(job); err != nil {
				return err
			}
		}
		return c.Create(ctx, obj, opts...)
	}}
}

func (d *dryRuns) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	names := d.names
	d.names = nil
	return names
}

// A burst of TrainJobs alike but for their names is dry-run once: the API
// server's answer for the first stands for the others of its class. Any
// difference that can change the answer (the length of the name, the kind
// of a character, the namespace, the spec) is dry-run again.
func TestValidateCreateDryRunsEachClassOnce(t *testing.T) {
	torch := utiltesting.MakeRuntimeSpec().Torch().ClusterRuntime("torch-distributed")
	base := func(name string) *utiltesting.TrainJobWrapper {
		return utiltesting.MakeTrainJob(name, "ns").NumNodes(2).UID(fmt.Sprintf("uid-of-%s", name))
	}
	stamped := func(tj *trainer.TrainJob, at time.Time) *trainer.TrainJob {
		// As the mutating webhook stamps each TrainJob's patches.
		p := flavorPatch(trainer.KueueManager, map[string]string{"pool": "a"})
		p.Time = &metav1.Time{Time: at}
		tj.Spec.RuntimePatches = []trainer.RuntimePatch{p}
		return tj
	}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		first, then *trainer.TrainJob
		wantAgain   bool
	}{
		"another name of the same class": {
			first: base("run-a1").Obj(), then: base("job-q7").Obj(),
		},
		"patches stamped at other times": {
			first: stamped(base("run-a1").Obj(), now), then: stamped(base("run-b2").Obj(), now.Add(time.Second)),
		},
		"a longer name": {
			first: base("run-a1").Obj(), then: base("run-a12").Obj(), wantAgain: true,
		},
		"a digit where a letter was": {
			first: base("run-a1").Obj(), then: base("run-11").Obj(), wantAgain: true,
		},
		"a dash where a letter was": {
			first: base("run-ab").Obj(), then: base("run--b").Obj(), wantAgain: true,
		},
		"another namespace": {
			first: base("run-a1").Obj(), then: utiltesting.MakeTrainJob("run-a2", "other").NumNodes(2).UID("u").Obj(), wantAgain: true,
		},
		"another spec": {
			first: base("run-a1").Obj(), then: base("run-a2").Image("example.com/other:1").Obj(), wantAgain: true,
		},
		"without a UID": {
			first: base("run-a1").Obj(), then: base("run-a2").UID("").Obj(), wantAgain: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var d dryRuns
			v := validator(t, d.funcs(), torch)
			v.classes = newAcceptedClasses(clockFunc(func() time.Time { return now }))
			for _, tj := range []*trainer.TrainJob{tc.first, tc.then} {
				if warnings, err := v.ValidateCreate(context.Background(), tj); err != nil || len(warnings) > 0 {
					t.Fatalf("ValidateCreate(%s) = %q, %v; want no warning and no error", tj.Name, warnings, err)
				}
				got := d.take()
				want := []string{tj.Name + "-node-0"}
				if tj == tc.then && !tc.wantAgain {
					want = nil
				}
				if strings.Join(got, ",") != strings.Join(want, ",") {
					t.Errorf("ValidateCreate(%s) dry-ran %q, want %q", tj.Name, got, want)
				}
			}
		})
	}
}

// Only an acceptance is remembered: a refusal, or a dry run that could not
// answer, is asked again for the next TrainJob of the class, which gets the
// API server's answer in its own name. An acceptance stands for
// acceptedClassTTL.
func TestValidateCreateRemembersOnlyAcceptances(t *testing.T) {
	torch := utiltesting.MakeRuntimeSpec().Torch().ClusterRuntime("torch-distributed")
	var refusal error
	d := dryRuns{refuse: func(job *batchv1.Job) error {
		if refusal == nil {
			return nil
		}
		if apierrors.IsInvalid(refusal) {
			return jobInvalid(job.Name, field.Required(field.NewPath("spec", "template", "spec", "restartPolicy"), ""))
		}
		return refusal
	}}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	v := validator(t, d.funcs(), torch)
	v.classes = newAcceptedClasses(clockFunc(func() time.Time { return now }))
	create := func(name string) (warnings []string, err error) {
		w, err := v.ValidateCreate(context.Background(), utiltesting.MakeTrainJob(name, "ns").UID("u-"+name).Obj())
		return w, err
	}

	refusal = jobInvalid("")
	for _, name := range []string{"tj-a", "tj-b"} {
		if _, err := create(name); err == nil || !strings.Contains(err.Error(), `Job.batch "`+name+`-node-0" is invalid`) {
			t.Errorf("ValidateCreate(%s) = %v, want the API server's refusal of %s-node-0", name, err, name)
		}
	}
	refusal = apierrors.NewTimeoutError("request did not complete within requested timeout", 0)
	if w, _ := create("tj-c"); len(w) != 1 {
		t.Errorf("ValidateCreate(tj-c) warnings %q, want the dry run's timeout", w)
	}
	if got := d.take(); strings.Join(got, ",") != "tj-a-node-0,tj-b-node-0,tj-c-node-0" {
		t.Errorf("dry-ran %q, want each refused or unanswered TrainJob's Job", got)
	}

	refusal = nil
	for _, name := range []string{"tj-d", "tj-e"} {
		if w, err := create(name); err != nil || len(w) > 0 {
			t.Errorf("ValidateCreate(%s) = %q, %v; want it accepted", name, w, err)
		}
	}
	if got := d.take(); strings.Join(got, ",") != "tj-d-node-0" {
		t.Errorf("dry-ran %q, want tj-d-node-0 alone (tj-e is of its class)", got)
	}
	now = now.Add(acceptedClassTTL)
	refusal = errors.New("not asked")
	if _, err := create("tj-f"); err != nil {
		t.Errorf("ValidateCreate(tj-f) as the acceptance expires = %v, want it accepted unasked", err)
	}
	now = now.Add(time.Nanosecond)
	refusal = jobInvalid("")
	if _, err := create("tj-g"); err == nil {
		t.Errorf("ValidateCreate(tj-g) once the acceptance expired: accepted without asking, want the API server's refusal")
	}
	if got := d.take(); strings.Join(got, ",") != "tj-g-node-0" {
		t.Errorf("dry-ran %q, want tj-g-node-0 alone", got)
	}
}

// The classes remembered stay within maxAcceptedClasses: over the bound,
// the least recently used goes; all go once acceptedClassTTL has passed.
func TestAcceptedClassesBounded(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	a := newAcceptedClasses(clockFunc(func() time.Time { return now }))
	classN := func(i int) jobsClass { return jobsClass{byte(i), byte(i >> 8)} }
	for i := range maxAcceptedClasses {
		a.accept(classN(i))
		now = now.Add(time.Millisecond)
	}
	if !a.accepted(classN(0)) {
		t.Fatalf("class 0 not remembered within the bound")
	}
	a.accept(classN(maxAcceptedClasses))
	if n := len(a.cache.Keys()); n != maxAcceptedClasses {
		t.Fatalf("%d classes remembered, want %d", n, maxAcceptedClasses)
	}
	if !a.accepted(classN(0)) || a.accepted(classN(1)) || !a.accepted(classN(maxAcceptedClasses)) {
		t.Errorf("over the bound, the least recently used class (1) is not the one dropped")
	}
	now = now.Add(acceptedClassTTL + time.Second)
	if a.accepted(classN(maxAcceptedClasses)) || len(a.cache.Keys()) != 0 {
		t.Errorf("classes remembered after acceptedClassTTL")
	}
}

// clockFunc is a clock that reads the time from a function.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// The API server's warnings on a dry-run Job (Pod Security admission's on
// its Pod template) are given with the TrainJob's, and an acceptance with
// warnings is not remembered: every TrainJob of the class is dry-run and
// gets them.
func TestValidateCreateGivesDryRunWarningsEveryTime(t *testing.T) {
	torch := utiltesting.MakeRuntimeSpec().Torch().ClusterRuntime("torch-distributed")
	const psa = `would violate PodSecurity "restricted:latest": runAsNonRoot != true (pod or container "node" must set securityContext.runAsNonRoot=true)`
	funcs := &interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		// As the API server answers, through the dry-run client's handler.
		DryRunWarnings{}.HandleWarningHeaderWithContext(ctx, 299, "-", psa)
		DryRunWarnings{}.HandleWarningHeaderWithContext(ctx, 199, "-", "not an API server warning")
		return c.Create(ctx, obj, opts...)
	}}
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	v := validator(t, funcs, torch)
	v.classes = newAcceptedClasses(clockFunc(func() time.Time { return now }))
	for _, name := range []string{"run-a1", "run-b2", "run-c3"} {
		warnings, err := v.ValidateCreate(context.Background(), utiltesting.MakeTrainJob(name, "ns").UID("u-"+name).Obj())
		want := []string{fmt.Sprintf(`the API server warns of Job %s-node-0 of replicated Job "node" (dry run): %s`, name, psa)}
		if err != nil || strings.Join(warnings, "\n") != strings.Join(want, "\n") {
			t.Errorf("ValidateCreate(%s) = %q, %v; want it accepted with %q", name, warnings, err, want)
		}
	}
}

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
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// complete marks the TrainJob name of namespace ns Complete, as the
// controller would.
func complete(t *testing.T, cl client.Client, ns, name string) {
	t.Helper()
	var tj trainer.TrainJob
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &tj); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&tj.Status.Conditions, cond(trainer.TrainJobComplete, "True", trainer.TrainJobJobsCompletedReason, now))
	tj.Status.State = trainer.TrainJobStateComplete
	if err := cl.Status().Update(context.Background(), &tj); err != nil {
		t.Fatal(err)
	}
}

// get --watch prints the TrainJobs, then a row or an object each time one
// of those asked for changes, until interrupted.
func TestGetWatch(t *testing.T) {
	cases := map[string]struct {
		args []string
		// listed is printed before the changes, then changed once b
		// completes and a is deleted.
		listed, changed string
	}{
		"the table": {
			args: []string{"-w"},
			listed: "NAME   STATE        NODES   PROGRESS   ETA   STARTED   DEADLINE IN   DELETED IN   AGE\n" +
				"a      Suspending   -       -          -     -         -             -            60m\n" +
				"b      Running      2       -          -     10m ago   -             -            60m\n",
			changed: "b      Complete     2       -          -     10m ago   -             -            60m\n" +
				"a      Suspending   -       -          -     -         -             -            60m\n",
		},
		"names": {
			args:    []string{"--watch", "-o", "name"},
			listed:  "trainjob.trainer.kubeflow.org/a\ntrainjob.trainer.kubeflow.org/b\n",
			changed: "trainjob.trainer.kubeflow.org/b\ntrainjob.trainer.kubeflow.org/a\n",
		},
		"changes only": {
			args:    []string{"--watch-only", "-o", "jsonpath={.metadata.name}={.status.state};"},
			changed: "b=Complete;a=;",
		},
		"one TrainJob": {
			args:    []string{"b", "-w", "-o", "custom-columns=NAME:.metadata.name,STATE:.status.state"},
			listed:  "NAME   STATE\nb      <none>\n",
			changed: "b      Complete\n",
		},
		"every namespace": {
			args: []string{"-A", "-w", "-l", "team=nlp", "--no-headers"},
			listed: "ns      a   Suspending   -   -   -   -   -   -   60m\n" +
				"other   c   Created      -   -   -   -   -   -   60m\n",
			changed: "ns      a   Suspending   -   -   -   -   -   -   60m\n",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opened := make(chan struct{})
			cl := utiltesting.NewClientBuilder(watched(opened), someTrainJobs()...).Build()
			ctx, interrupt := context.WithCancel(context.Background())
			defer interrupt()
			s, done := start(ctx, t, cl, append([]string{"get"}, tc.args...)...)
			select {
			case <-opened:
			case err := <-done:
				t.Fatalf("returned before watching: %v\n%s", err, s.out.String())
			}
			if got := s.out.String(); got != tc.listed {
				t.Errorf("listed (-want +got):\n%s", cmp.Diff(tc.listed, got))
			}
			complete(t, cl, "ns", "b")
			a := &trainer.TrainJob{}
			a.Namespace, a.Name = "ns", "a"
			if err := cl.Delete(ctx, a); err != nil {
				t.Fatal(err)
			}
			s.out.waitFor(t, tc.listed+tc.changed)
			interrupt()
			if err := <-done; err != nil {
				t.Errorf("interrupted: %v, want no error", err)
			}
			if got := s.out.String(); got != tc.listed+tc.changed {
				t.Errorf("printed (-want +got):\n%s", cmp.Diff(tc.listed+tc.changed, got))
			}
		})
	}
}

// get --watch --timeout stops watching, with no error, when the time is up.
func TestGetWatchTimeout(t *testing.T) {
	cl := utiltesting.NewClientBuilder(nil, someTrainJobs()...).Build()
	s, err := trainctl(context.Background(), t, cl, "get", "a", "-w", "--timeout", "50ms", "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.out.String(), "trainjob.trainer.kubeflow.org/a\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}

// get --watch of a TrainJob that does not exist fails at once.
func TestGetWatchNotFound(t *testing.T) {
	cl := utiltesting.NewClientBuilder(nil, someTrainJobs()...).Build()
	_, err := trainctl(context.Background(), t, cl, "get", "z", "-w")
	if err == nil || err.Error() != "TrainJob z not found in namespace ns" {
		t.Errorf("error %v, want TrainJob z not found", err)
	}
}

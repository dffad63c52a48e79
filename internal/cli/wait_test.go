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
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

const metA, metB, metC = "trainjob.trainer.kubeflow.org/a condition met\n",
	"trainjob.trainer.kubeflow.org/b condition met\n",
	"trainjob.trainer.kubeflow.org/c condition met\n"

// wait returns once the TrainJobs meet the condition, at once if they do
// already, and fails, saying which do not and how they are, once the
// timeout has passed.
func TestWait(t *testing.T) {
	cases := map[string]struct {
		args []string
		// then happens once trainctl watches, if not nil.
		then    func(t *testing.T, cl client.Client)
		want    string
		wantErr string
	}{
		"running already": {
			args: []string{"b", "--for=running"},
			want: metB,
		},
		"a state": {
			args: []string{"a", "b", "--for=state=suspending", "--timeout=0"},
			want: metA, wantErr: "not met: state Suspending of TrainJob ns/b (Running)",
		},
		"a condition, once it is met": {
			args: []string{"b", "--for=condition=Complete"},
			then: func(t *testing.T, cl client.Client) { complete(t, cl, "ns", "b") },
			want: metB,
		},
		"a condition, any case, a value": {
			args: []string{"b", "--for", "condition=complete=TRUE"},
			then: func(t *testing.T, cl client.Client) { complete(t, cl, "ns", "b") },
			want: metB,
		},
		"a condition False": {
			args:    []string{"b", "--for=condition=Complete=False", "--timeout=50ms"},
			wantErr: "timed out after 50ms waiting for condition Complete=False of TrainJob ns/b (Running)",
		},
		"the timeout": {
			args:    []string{"a", "b", "--for=condition=Complete", "--timeout=50ms"},
			then:    func(t *testing.T, cl client.Client) { complete(t, cl, "ns", "b") },
			want:    metB,
			wantErr: "timed out after 50ms waiting for condition Complete=True of TrainJob ns/a (Suspending)",
		},
		"no timeout: looks once": {
			args:    []string{"b", "--for=condition=Complete", "--timeout=0s"},
			wantErr: "not met: condition Complete=True of TrainJob ns/b (Running)",
		},
		"a selector, every namespace": {
			args: []string{"-A", "-l", "team=nlp", "--for=condition=Complete"},
			then: func(t *testing.T, cl client.Client) {
				complete(t, cl, "ns", "b") // not one of them
				complete(t, cl, "other", "c")
				complete(t, cl, "ns", "a")
			},
			want: metC + metA,
		},
		"--all": {
			args:    []string{"--all", "--for=running", "--timeout=0"},
			want:    metB,
			wantErr: "not met: state Running of TrainJob ns/a (Suspending)",
		},
		"jsonpath": {
			args: []string{"b", "--for=jsonpath={.spec.trainer.numNodes}=2"},
			want: metB,
		},
		"jsonpath, kubectl's relaxed form": {
			args: []string{"a", "b", "--for=jsonpath=.metadata.labels.team=cv", "--timeout=0"},
			want: metB, wantErr: "not met: jsonpath {.metadata.labels.team}=cv of TrainJob ns/a (Suspending)",
		},
		"jsonpath with a filter, once the field exists": {
			args: []string{"b", `--for=jsonpath={.status.conditions[?(@.type=="Complete")].reason}`},
			then: func(t *testing.T, cl client.Client) { complete(t, cl, "ns", "b") },
			want: metB,
		},
		"delete": {
			args: []string{"a", "--for=delete"},
			then: func(t *testing.T, cl client.Client) {
				if err := cl.Delete(context.Background(), someTrainJobs()[0]); err != nil {
					t.Fatal(err)
				}
			},
			want: metA,
		},
		"delete, gone already": {
			args: []string{"z", "--for=delete"},
			want: "trainjob.trainer.kubeflow.org/z condition met\n",
		},
		"deleted while waited for": {
			args: []string{"a", "--for=condition=Complete"},
			then: func(t *testing.T, cl client.Client) {
				if err := cl.Delete(context.Background(), someTrainJobs()[0]); err != nil {
					t.Fatal(err)
				}
			},
			wantErr: "TrainJob ns/a was deleted while waiting for condition Complete=True",
		},
		"not found": {
			args:    []string{"z", "--for=running"},
			wantErr: "TrainJob z not found in namespace ns",
		},
		"none selected": {
			args:    []string{"-l", "team=none", "--for=running"},
			wantErr: "no TrainJobs in namespace ns to wait for",
		},
		"nothing named": {
			args:    []string{"--for=running"},
			wantErr: "name the TrainJobs to wait for, or select them with -l, --all or -A",
		},
		"no --for": {
			args:    []string{"a"},
			wantErr: "--for is required: condition=TYPE[=VALUE], running, state=STATE, jsonpath=JSONPATH[=VALUE] or delete",
		},
		"an unknown --for": {
			args:    []string{"a", "--for=ready"},
			wantErr: "--for=ready: want condition=TYPE[=VALUE], running, state=STATE, jsonpath=JSONPATH[=VALUE] or delete",
		},
		"an unknown state": {
			args:    []string{"a", "--for=state=Done"},
			wantErr: "--for=state=Done: want state=Created|Running|Suspending|Suspended|Complete|Failed",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			opened := make(chan struct{})
			cl := utiltesting.NewClientBuilder(watched(opened), someTrainJobs()...).Build()
			s, done := start(context.Background(), t, cl, append([]string{"wait"}, tc.args...)...)
			var err error
			if tc.then != nil {
				select {
				case <-opened:
					tc.then(t, cl)
					err = <-done
				case err = <-done:
					t.Errorf("returned before watching: %v", err)
				}
			} else {
				err = <-done
			}
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("error %q, want %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, s.out.String()); diff != "" {
				t.Errorf("printed (-want +got):\n%s", diff)
			}
		})
	}
}

// Waiting for a TrainJob managed by MultiKueue reads the state its
// manager wrote.
func TestWaitManagedElsewhere(t *testing.T) {
	tj := utiltesting.MakeTrainJob("mk", "ns").ManagedBy("kueue.x-k8s.io/multikueue").Obj()
	tj.Status.State = trainer.TrainJobStateRunning
	cl := utiltesting.NewClientBuilder(nil, tj).Build()
	s, err := trainctl(context.Background(), t, cl, "wait", "mk", "--for=running", "--timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.out.String(), "trainjob.trainer.kubeflow.org/mk condition met\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}

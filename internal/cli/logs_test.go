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
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// A TrainJob in its second attempt: an initializer step and two trainer
// nodes, node 1 replaced once; the first attempt's Pods are still there.
func loggedTrainJob() []client.Object {
	tj := utiltesting.MakeTrainJob("tj", "ns").Obj()
	tj.Status.Restarts = 1
	tj.Status.JobsStatus = []trainer.JobStatus{{Name: "dataset-initializer", Replicas: 1}, {Name: "node", Replicas: 1, Trainer: true}}
	pod := func(name, step, index, attempt string, created time.Duration) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(now.Add(created)), Labels: map[string]string{
				trainer.TrainJobNameLabel: "tj", trainer.JobSetReplicatedJobNameLabel: step, trainer.JobSetJobIndexLabel: "0",
				completionIndexLabel: index, trainer.JobSetRestartAttemptLabel: attempt,
			}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "sidecar"}, {Name: "node"}}},
		}
	}
	init := pod("init", "dataset-initializer", "0", "1", 0)
	init.Spec.Containers = []corev1.Container{{Name: "dataset-initializer"}, {Name: "sidecar"}}
	return []client.Object{tj, init,
		pod("old-0", "node", "0", "0", -time.Hour), pod("old-1", "node", "1", "0", -time.Hour),
		pod("n0", "node", "0", "1", 0), pod("n1-failed", "node", "1", "1", 0), pod("n1", "node", "1", "1", time.Minute),
		pod("n10", "node", "10", "1", 0),
	}
}

// fakeLogs answers two lines per Pod and container, and records the
// options it was asked with.
type fakeLogs struct {
	mu   sync.Mutex
	opts []corev1.PodLogOptions
}

func (f *fakeLogs) stream(_ context.Context, ns, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
	f.mu.Lock()
	f.opts = append(f.opts, *opts)
	f.mu.Unlock()
	return io.NopCloser(strings.NewReader(fmt.Sprintf("%s/%s %s: one\n%s/%s %s: two\n", ns, pod, opts.Container, ns, pod, opts.Container))), nil
}

func runLogs(t *testing.T, logs *fakeLogs, args ...string) (string, error) {
	t.Helper()
	if os.Getenv("KUBECONFIG") == "" {
		useKubeconfig(t)
	}
	cl := utiltesting.NewClientBuilder(nil, loggedTrainJob()...).Build()
	var out, errOut bytes.Buffer
	g := newGlobals(&out, &errOut)
	g.newClient = func(*rest.Config) (client.WithWatch, error) { return cl, nil }
	g.newLogs = func(*rest.Config) (podLogs, error) { return logs.stream, nil }
	cmd := newRootCommand(g)
	cmd.SetArgs(append([]string{"logs", "-n", "ns"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestLogs(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		want    string
		wantErr string
	}{
		"the trainer step's nodes of the current attempt, newest Pod each, in rank order": {
			want: "[node-0] ns/n0 node: one\n[node-0] ns/n0 node: two\n[node-1] ns/n1 node: one\n[node-1] ns/n1 node: two\n" +
				"[node-10] ns/n10 node: one\n[node-10] ns/n10 node: two\n",
		},
		"one node, without prefix": {
			args: []string{"--step", "node", "--index", "1"},
			want: "ns/n1 node: one\nns/n1 node: two\n",
		},
		"a step as the SDK names it": {
			args: []string{"--step", "node-1"},
			want: "ns/n1 node: one\nns/n1 node: two\n",
		},
		"another step, its first container": {
			args: []string{"--step", "dataset-initializer"},
			want: "ns/init dataset-initializer: one\nns/init dataset-initializer: two\n",
		},
		"a container named": {
			args: []string{"--step", "node-0", "-c", "sidecar"},
			want: "ns/n0 sidecar: one\nns/n0 sidecar: two\n",
		},
		"no prefix asked": {
			args: []string{"--index", "0", "--prefix=false", "--tail", "1"},
			want: "ns/n0 node: one\nns/n0 node: two\n",
		},
		"a step it does not have": {
			args: []string{"--step", "launcher"}, wantErr: `TrainJob tj has no step "launcher": its steps are [dataset-initializer node]`,
		},
		"a node it does not have": {
			args: []string{"--index", "3"}, wantErr: "TrainJob tj has no Pod of step node node 3 in restart attempt 1",
		},
		"two nodes named": {
			args: []string{"--step", "node-1", "--index", "0"}, wantErr: "--step node-1 names node 1, --index 0 another",
		},
	} {
		t.Run(name, func(t *testing.T) {
			logs := &fakeLogs{}
			got, err := runLogs(t, logs, append([]string{"tj"}, tc.args...)...)
			if !errorSays(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// --follow streams every Pod at once; --tail, --since and --timestamps
// reach the API server as kubectl logs sends them.
func TestLogsFollowAndOptions(t *testing.T) {
	logs := &fakeLogs{}
	got, err := runLogs(t, logs, "tj", "-f", "--tail", "5", "--since", "2m", "--timestamps")
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range []string{"n0", "n1", "n10"} {
		if !strings.Contains(got, "ns/"+pod+" node: two") {
			t.Errorf("following, the output lacks %s's lines:\n%s", pod, got)
		}
	}
	if len(logs.opts) != 3 {
		t.Fatalf("%d streams, want 3", len(logs.opts))
	}
	for _, o := range logs.opts {
		if !o.Follow || o.TailLines == nil || *o.TailLines != 5 || o.SinceSeconds == nil || *o.SinceSeconds != 120 || !o.Timestamps {
			t.Errorf("log options %+v, want follow, tail 5, since 120 s, timestamps", o)
		}
	}
}

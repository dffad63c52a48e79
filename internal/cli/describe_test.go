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
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// withEventIndexes lets the fake client select events by the fields
// describe selects them by, as the API server does.
func withEventIndexes(b *fake.ClientBuilder) *fake.ClientBuilder {
	return b.WithIndex(&corev1.Event{}, "involvedObject.kind", func(o client.Object) []string {
		return []string{o.(*corev1.Event).InvolvedObject.Kind}
	}).WithIndex(&corev1.Event{}, "involvedObject.name", func(o client.Object) []string {
		return []string{o.(*corev1.Event).InvolvedObject.Name}
	})
}

// A running TrainJob with a deadline, its Job and Pod, an event about it.
func describedCluster() client.WithWatch {
	tj := utiltesting.MakeTrainJob("a", "ns").UID("uid-a").TTL(60).Deadline(3600).StartTime(now.Add(-10 * time.Minute)).
		Condition(cond(trainer.TrainJobCreated, "True", trainer.TrainJobJobsCreatedReason, now.Add(-10*time.Minute))).Obj()
	tj.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	job := childJob("a-node-0", tj)
	pod := podOf("a-node-0-0", job)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "a.1", Namespace: "ns"},
		InvolvedObject: corev1.ObjectReference{Kind: trainer.TrainJobKind, Name: "a", UID: "uid-a"},
		Reason:         "Created", Message: "Created Job a-node-0", Type: corev1.EventTypeNormal,
		LastTimestamp: metav1.NewTime(now.Add(-10 * time.Minute)),
	}
	return withEventIndexes(utiltesting.NewClientBuilder(nil, tj, job, pod, ev)).Build()
}

// describe -o json and -o yaml print one TrainJobDescription that decodes
// back: the TrainJob as stored, what describe makes of it, its Jobs,
// Pods and events.
func TestDescribeObject(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			cl := describedCluster()
			s, err := trainctl(context.Background(), t, cl, "describe", "a", "-o", format)
			if err != nil {
				t.Fatal(err)
			}
			var got Description
			if err := yaml.UnmarshalStrict(s.out.Bytes(), &got); err != nil {
				t.Fatalf("not a description: %v\n%s", err, s.out.String())
			}
			ctx := context.Background()
			var job batchv1.Job
			var pod corev1.Pod
			var ev corev1.Event
			if err := cl.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "a-node-0"}, &job); err != nil {
				t.Fatal(err)
			}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "a-node-0-0"}, &pod); err != nil {
				t.Fatal(err)
			}
			if err := cl.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "a.1"}, &ev); err != nil {
				t.Fatal(err)
			}
			want := Description{
				TypeMeta:       metav1.TypeMeta{APIVersion: "trainctl.trainer.kubeflow.org/v1alpha1", Kind: "TrainJobDescription"},
				TrainJob:       stored(t, cl, "ns/a")[0],
				State:          "Running",
				ActiveDeadline: &metav1.Time{Time: now.Add(50 * time.Minute)},
				Timeline: []Moment{
					{At: metav1.NewTime(now.Add(-time.Hour)), What: "created"},
					{At: metav1.NewTime(now.Add(-10 * time.Minute)), What: "Created: Created Job a-node-0"},
					{At: metav1.NewTime(now.Add(-10 * time.Minute)), What: "started (startTime: the active deadline counts from here)"},
					{At: metav1.NewTime(now.Add(50 * time.Minute)), What: "active deadline (3600s), in 50m", Upcoming: true},
				},
				Jobs:   []batchv1.Job{*typed(&job)},
				Pods:   []corev1.Pod{*typed(&pod)},
				Events: []corev1.Event{*typed(&ev)},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("description (-want +got):\n%s", diff)
			}
		})
	}
}

// describe's other formats.
func TestDescribeFormats(t *testing.T) {
	t.Setenv("KUBECTL_KYAML", "") // kyaml among the formats, as by default
	cases := map[string]struct {
		args    []string
		want    string
		wantErr string
	}{
		"name":           {args: []string{"-o", "name"}, want: "trainjob.trainer.kubeflow.org/a\n"},
		"jsonpath":       {args: []string{"-o", "jsonpath={.state} {.trainJob.kind} {.jobs[0].kind} {.events[*].reason}"}, want: "Running TrainJob Job Created"},
		"go-template":    {args: []string{"-o", "go-template={{range .timeline}}{{if .upcoming}}{{.what}}{{end}}{{end}}"}, want: "active deadline (3600s), in 50m"},
		"custom-columns": {args: []string{"-o", "custom-columns=NAME:.trainJob.metadata.name,STATE:.state"}, want: "NAME   STATE\na      Running\n"},
		"the timeline":   {want: "Name:         a\n"},
		"wide":           {args: []string{"-o", "wide"}, wantErr: `--output "wide": want one of json, yaml, kyaml, name, go-template, go-template-file, template, templatefile, jsonpath, jsonpath-as-json, jsonpath-file, custom-columns=HEADER:JSONPATH,...`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := trainctl(context.Background(), t, describedCluster(), append([]string{"describe", "a"}, tc.args...)...)
			if !errorSays(t, err, tc.wantErr) {
				return
			}
			got := s.out.String()
			if name == "the timeline" {
				got = got[:len(tc.want)]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// describe shows the trainer's last progress report: percent, time left
// counted down from the report, and each metric.
func TestDescribeShowsProgress(t *testing.T) {
	tj := utiltesting.MakeTrainJob("a", "ns").StartTime(now.Add(-10*time.Minute)).TrainerStatus(45, 600, now.Add(-2*time.Minute)).Obj()
	tj.Status.TrainerStatus.Metrics = []trainer.Metric{{Name: "loss", Value: "0.15"}, {Name: "accuracy", Value: "0.92"}}
	var out strings.Builder
	if err := (&description{tj: tj}).print(&out, nil, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Progress:     45%, ETA 8m (reported 2m ago)\n",
		"Metric:       loss = 0.15\n",
		"Metric:       accuracy = 0.92\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe does not show %q:\n%s", want, out.String())
		}
	}
}

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
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// someTrainJobs are a and b in namespace ns, c in other; a queued in
// Kueue, b running on 2 nodes.
func someTrainJobs() []client.Object {
	created := metav1.NewTime(now.Add(-time.Hour))
	a := utiltesting.MakeTrainJob("a", "ns").Label("team", "nlp").Label(trainer.KueueQueueNameLabel, "q").Suspend(true).Obj()
	b := utiltesting.MakeTrainJob("b", "ns").Label("team", "cv").NumNodes(2).StartTime(now.Add(-10 * time.Minute)).
		JobsStatus(trainer.JobStatus{Name: "node", Replicas: 2, Trainer: true}).Obj()
	b.Status.Restarts = 1
	c := utiltesting.MakeTrainJob("c", "other").Label("team", "nlp").Obj()
	for _, tj := range []*trainer.TrainJob{a, b, c} {
		tj.CreationTimestamp = created
	}
	return []client.Object{a, b, c}
}

// stored is the TrainJobs as the cluster holds and kubectl prints them.
func stored(t *testing.T, cl client.Client, names ...string) []trainer.TrainJob {
	t.Helper()
	var list trainer.TrainJobList
	if err := cl.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []trainer.TrainJob
	for _, n := range names {
		for i := range list.Items {
			if list.Items[i].Namespace+"/"+list.Items[i].Name == n {
				out = append(out, *typed(&list.Items[i]))
			}
		}
	}
	return out
}

// decodeList decodes a kubectl List of TrainJobs in JSON or YAML.
func decodeList(t *testing.T, data []byte) []trainer.TrainJob {
	t.Helper()
	var list corev1.List
	if err := yaml.Unmarshal(data, &list); err != nil {
		t.Fatalf("not a List: %v\n%s", err, data)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Errorf("apiVersion %q, kind %q: want v1 List", list.APIVersion, list.Kind)
	}
	tjs := []trainer.TrainJob{}
	for _, item := range list.Items {
		var tj trainer.TrainJob
		if err := yaml.Unmarshal(item.Raw, &tj); err != nil {
			t.Fatal(err)
		}
		tjs = append(tjs, tj)
	}
	return tjs
}

// get -o json and -o yaml print the TrainJobs as kubectl would: the object
// for one name, a v1 List otherwise, each with its apiVersion and kind.
func TestGetObjects(t *testing.T) {
	cases := map[string]struct {
		args   []string
		want   []string
		single bool
	}{
		"json":            {args: []string{"-o", "json"}, want: []string{"ns/a", "ns/b"}},
		"yaml":            {args: []string{"-o", "yaml"}, want: []string{"ns/a", "ns/b"}},
		"every namespace": {args: []string{"-A", "-o", "json"}, want: []string{"ns/a", "ns/b", "other/c"}},
		"-n":              {args: []string{"-n", "other", "-o", "yaml"}, want: []string{"other/c"}},
		"-l":              {args: []string{"-A", "-l", "team=nlp", "-o", "json"}, want: []string{"ns/a", "other/c"}},
		"--selector":      {args: []string{"--selector", "team in (cv)", "-o", "yaml"}, want: []string{"ns/b"}},
		"none":            {args: []string{"-l", "team=none", "-o", "json"}, want: []string{}},
		"names":           {args: []string{"b", "a", "-o", "json"}, want: []string{"ns/a", "ns/b"}},
		"one name, json":  {args: []string{"b", "-o", "json"}, want: []string{"ns/b"}, single: true},
		"one name, yaml":  {args: []string{"a", "--output=yaml"}, want: []string{"ns/a"}, single: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cl := utiltesting.NewClientBuilder(nil, someTrainJobs()...).Build()
			s, err := trainctl(context.Background(), t, cl, append([]string{"get"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			want := stored(t, cl, tc.want...)
			var got []trainer.TrainJob
			if tc.single {
				var tj trainer.TrainJob
				if err := yaml.Unmarshal(s.out.Bytes(), &tj); err != nil {
					t.Fatalf("not a TrainJob: %v\n%s", err, s.out.String())
				}
				got = []trainer.TrainJob{tj}
			} else {
				got = decodeList(t, s.out.Bytes())
				if want == nil {
					want = []trainer.TrainJob{}
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("TrainJobs printed (-want +got):\n%s\n%s", diff, s.out.String())
			}
		})
	}
}

// The other formats of cli-runtime's printers, and the tables.
func TestGetFormats(t *testing.T) {
	t.Setenv("KUBECTL_KYAML", "") // kyaml among the formats, as by default
	cases := map[string]struct {
		args    []string
		want    string
		wantErr string
	}{
		"name": {
			args: []string{"-o", "name"},
			want: "trainjob.trainer.kubeflow.org/a\ntrainjob.trainer.kubeflow.org/b\n",
		},
		"name of one": {
			args: []string{"b", "-o", "name"},
			want: "trainjob.trainer.kubeflow.org/b\n",
		},
		"jsonpath": {
			args: []string{"-o", "jsonpath={.items[*].metadata.name}"},
			want: "a b",
		},
		"jsonpath of one": {
			args: []string{"b", "-o", "jsonpath={.kind} {.apiVersion} {.spec.trainer.numNodes}"},
			want: "TrainJob trainer.kubeflow.org/v1alpha1 2",
		},
		"jsonpath-as-json": {
			args: []string{"-A", "-o", "jsonpath-as-json={.items[*].metadata.namespace}"},
			want: "[\n    \"ns\",\n    \"ns\",\n    \"other\"\n]\n",
		},
		"go-template": {
			args: []string{"-o", `go-template={{range .items}}{{.metadata.name}}={{index .metadata.labels "team"}};{{end}}`},
			want: "a=nlp;b=cv;",
		},
		"--template": {
			args: []string{"b", "--template", `{{.metadata.name}}`},
			want: "b",
		},
		"custom-columns": {
			args: []string{"-A", "-o", "custom-columns=NAME:.metadata.name,NS:{.metadata.namespace},NODES:spec.trainer.numNodes"},
			want: "NAME   NS      NODES\na      ns      <none>\nb      ns      2\nc      other   <none>\n",
		},
		"custom-columns without headers": {
			args: []string{"-o", "custom-columns=NAME:.metadata.name,TEAM:.metadata.labels.team", "--no-headers"},
			want: "a   nlp\nb   cv\n",
		},
		"the table": {
			args: []string{},
			want: "NAME   STATE        NODES   PROGRESS   ETA   STARTED   DEADLINE IN   DELETED IN   AGE\n" +
				"a      Suspending   -       -          -     -         -             -            60m\n" +
				"b      Running      2       -          -     10m ago   -             -            60m\n",
		},
		"wide": {
			args: []string{"-A", "-o", "wide"},
			want: "NAMESPACE   NAME   STATE        NODES   PROGRESS   ETA   STARTED   DEADLINE IN   DELETED IN   AGE   RUNTIME                                    RESTARTS   QUEUE\n" +
				"ns          a      Suspending   -       -          -     -         -             -            60m   ClusterTrainingRuntime/torch-distributed   0          q\n" +
				"ns          b      Running      2       -          -     10m ago   -             -            60m   ClusterTrainingRuntime/torch-distributed   1          -\n" +
				"other       c      Created      -       -          -     -         -             -            60m   ClusterTrainingRuntime/torch-distributed   0          -\n",
		},
		"the table without headers": {
			args: []string{"a", "--no-headers"},
			want: "a   Suspending   -   -   -   -   -   -   60m\n",
		},
		"an unknown format": {
			args:    []string{"-o", "xml"},
			wantErr: `--output "xml": want one of json, yaml, kyaml, name, go-template, go-template-file, template, templatefile, jsonpath, jsonpath-as-json, jsonpath-file, wide, custom-columns=HEADER:JSONPATH,...`,
		},
		"custom-columns without a path": {
			args:    []string{"-o", "custom-columns=NAME"},
			wantErr: `custom-columns: "NAME": want HEADER:JSONPATH`,
		},
		"a name not found": {
			args:    []string{"a", "z", "-o", "name"},
			wantErr: "TrainJob z not found in namespace ns",
		},
		"a bad selector": {
			args:    []string{"-l", "a==b==c"},
			wantErr: "--selector",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cl := utiltesting.NewClientBuilder(nil, someTrainJobs()...).Build()
			s, err := trainctl(context.Background(), t, cl, append([]string{"get"}, tc.args...)...)
			if !errorSays(t, err, tc.wantErr) {
				return
			}
			if diff := cmp.Diff(tc.want, s.out.String()); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

// jsonpath-as-json decodes back.
func TestGetJSONPathAsJSONDecodes(t *testing.T) {
	cl := utiltesting.NewClientBuilder(nil, someTrainJobs()...).Build()
	s, err := trainctl(context.Background(), t, cl, "get", "b", "-o", "jsonpath-as-json={.status}")
	if err != nil {
		t.Fatal(err)
	}
	var got []trainer.TrainJobStatus
	if err := json.Unmarshal(s.out.Bytes(), &got); err != nil {
		t.Fatalf("%v\n%s", err, s.out.String())
	}
	want := []trainer.TrainJobStatus{stored(t, cl, "ns/b")[0].Status}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

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

package jobplan

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// Whatever a TrainJob and its runtime say, Build does not panic; it either
// names what is wrong, or returns Jobs the API server and the Pods'
// hostnames accept.
func FuzzBuild(f *testing.F) {
	f.Add("mnist", "node", int32(2), int32(1), "PET_NNODES", true, true)
	f.Add("a", "worker", int32(1), int32(3), "LR", false, false)
	f.Add(strings.Repeat("x", 63), "node", int32(100000), int32(1), "X", true, true)
	f.Add("b", "node", int32(0), int32(-4), "", true, false)
	f.Fuzz(func(t *testing.T, name, step string, numNodes, replicas int32, envName string, torch, trainerLabel bool) {
		spec := utiltesting.MakeRuntimeSpec()
		rjob := utiltesting.MakeReplicatedJob(step).Replicas(replicas)
		if trainerLabel {
			rjob.Trainer()
		}
		spec.ReplicatedJobs(rjob.Obj())
		if torch {
			spec.Torch()
		}
		w := utiltesting.MakeTrainJob(name, "ns").NumNodes(numNodes)
		if envName != "" {
			w.Env(envName, "v")
		}
		plan, err := Build(w.Obj(), Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "rt", Spec: spec.Obj()})
		if err != nil {
			var buildErr *Error
			if !errors.As(err, &buildErr) || len(buildErr.Errs) == 0 {
				t.Fatalf("error %v names no field", err)
			}
			return
		}
		for _, job := range plan.Jobs {
			completions := int32(1)
			if job.Spec.Completions != nil {
				completions = *job.Spec.Completions
			}
			host := job.Name + "-" + strconv.Itoa(int(completions-1))
			// A positive numNodes is what the API lets through.
			if numNodes >= 1 && len(validation.IsDNS1123Label(host)) > 0 && validName(name, step) {
				t.Fatalf("Pod hostname %q of Job %q is not a DNS label", host, job.Name)
			}
			for _, ls := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
				for k, v := range ls {
					if errs := validation.IsValidLabelValue(v); len(errs) > 0 && validName(name, step) {
						t.Fatalf("Job %q: label %s=%q is not a valid label value: %v", job.Name, k, v, errs)
					}
				}
			}
			for _, c := range job.Spec.Template.Spec.Containers {
				seen := map[string]bool{}
				for _, e := range c.Env {
					if seen[e.Name] && torch {
						t.Fatalf("variable %s set twice in container %s: %v", e.Name, c.Name, envNames(c))
					}
					seen[e.Name] = true
				}
			}
		}
	})
}

// validName reports whether the names are ones the API server accepts.
func validName(trainJob, step string) bool {
	return len(validation.IsDNS1035Label(trainJob)) == 0 && len(validation.IsDNS1035Label(step)) == 0 && len(step) <= 40
}

func envNames(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		out = append(out, e.Name)
	}
	return out
}

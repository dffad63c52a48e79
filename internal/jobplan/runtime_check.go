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
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

const (
	// probeName is the name of the TrainJobs a runtime is checked with: the
	// shortest a TrainJob can have, so that a name found too long with it
	// (a Pod hostname, a claim) is too long for every TrainJob.
	probeName = "x"

	// maxNumNodes is the most nodes a TrainJob may ask for (the schema's
	// maximum of spec.trainer.numNodes).
	maxNumNodes int32 = 100000
)

// CheckRuntime returns what keeps every TrainJob from running on rt: the
// errors of Build for a TrainJob of namespace that only names rt, and so
// takes all of its defaults, unless a TrainJob asking for the fewest or the
// most nodes could run on it (a coordinator Pod beyond the runtime's
// default numNodes, an MPI launcher that is a node and has no workers:
// the TrainJob chooses its numNodes, and these are not the runtime's
// faults). Errors about the runtime point under rt.SpecPath; an error about
// the TrainJob itself, which only the runtime can cause, points at that
// path, and says which field of the TrainJob it is.
func CheckRuntime(rt Runtime, namespace string) field.ErrorList {
	errs := probeErrors(rt, probe(rt, namespace, nil))
	if len(errs) == 0 {
		return nil
	}
	for _, n := range []int32{1, maxNumNodes} {
		if probeErrors(rt, probe(rt, namespace, ptr.To(n))) == nil {
			return nil
		}
	}
	specPath := rt.path().String()
	for i, e := range errs {
		if !underPath(e.Field, specPath) {
			errs[i] = field.Invalid(rt.path(), "{...}", fmt.Sprintf(
				"a TrainJob that only names this runtime cannot run on it: %v", e))
		}
	}
	return errs
}

// probe is a TrainJob on rt that sets nothing but, if numNodes is not nil,
// its number of nodes.
func probe(rt Runtime, namespace string, numNodes *int32) *trainer.TrainJob {
	tj := &trainer.TrainJob{
		ObjectMeta: metav1.ObjectMeta{Name: probeName, Namespace: namespace},
		Spec:       trainer.TrainJobSpec{RuntimeRef: trainer.RuntimeRef{Name: rt.Name, Kind: ptr.To(rt.Kind)}},
	}
	if numNodes != nil {
		tj.Spec.Trainer = &trainer.Trainer{NumNodes: numNodes}
	}
	return tj
}

// probeErrors returns the errors of Build for tj on rt.
func probeErrors(rt Runtime, tj *trainer.TrainJob) field.ErrorList {
	_, err := Build(tj, rt)
	if err == nil {
		return nil
	}
	var buildErr *Error
	if errors.As(err, &buildErr) {
		return buildErr.Errs
	}
	return field.ErrorList{field.InternalError(rt.path(), err)}
}

// underPath reports whether the field path f is path or under it.
func underPath(f, path string) bool {
	rest, ok := strings.CutPrefix(f, path)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

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
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// KindOf is the kind of runtime a TrainJob references, with its default.
func KindOf(tj *trainer.TrainJob) string {
	return ptr.Deref(tj.Spec.RuntimeRef.Kind, trainer.ClusterTrainingRuntimeKind)
}

// Resolve reads the runtime a TrainJob references. Its errors are the
// reader's: a missing runtime is a NotFound error.
func Resolve(ctx context.Context, reader client.Reader, tj *trainer.TrainJob) (Runtime, error) {
	rt := Runtime{Kind: KindOf(tj), Name: tj.Spec.RuntimeRef.Name}
	var err error
	if rt.Kind == trainer.TrainingRuntimeKind {
		var obj trainer.TrainingRuntime
		err = reader.Get(ctx, types.NamespacedName{Namespace: tj.Namespace, Name: rt.Name}, &obj)
		rt.Spec, rt.UID, rt.Generation = &obj.Spec, obj.UID, obj.Generation
	} else {
		var obj trainer.ClusterTrainingRuntime
		err = reader.Get(ctx, types.NamespacedName{Name: rt.Name}, &obj)
		rt.Spec, rt.UID, rt.Generation = &obj.Spec, obj.UID, obj.Generation
	}
	return rt, err
}

// Where is " in namespace <ns>" for a TrainingRuntime, and empty for a
// ClusterTrainingRuntime: what messages about the runtime append to its name.
func (rt Runtime) Where(tj *trainer.TrainJob) string {
	if rt.Kind == trainer.TrainingRuntimeKind {
		return " in namespace " + tj.Namespace
	}
	return ""
}

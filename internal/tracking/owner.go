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

package tracking

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// IsTrainJob reports whether an owner reference names a TrainJob, of any
// version of the trainer.kubeflow.org group.
func IsTrainJob(ref *metav1.OwnerReference) bool {
	if ref == nil || ref.Kind != trainer.TrainJobKind {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == trainer.GroupVersion.Group
}

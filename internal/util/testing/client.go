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

package testing

import (
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
)

// NewClientBuilder is the fake client of unit tests: the product's scheme,
// objs stored, the status subresources of TrainJobs and Jobs as the API
// server has them, and funcs, if not nil, in front of every call.
func NewClientBuilder(funcs *interceptor.Funcs, objs ...client.Object) *fake.ClientBuilder {
	b := fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(objs...).
		WithStatusSubresource(&trainer.TrainJob{}, &batchv1.Job{})
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return b
}

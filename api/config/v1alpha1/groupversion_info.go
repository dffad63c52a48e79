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

package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the Configuration.
	GroupVersion = schema.GroupVersion{Group: "config.trainer.kubeflow.org", Version: "v1alpha1"}

	// SchemeBuilder registers the Configuration and its defaults into a
	// scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, RegisterDefaults)

	// AddToScheme adds the Configuration and its defaults to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind is the kind of the Configuration.
const Kind = "Configuration"

// addKnownTypes registers the Configuration only: it is a file, never
// served, so none of the API machinery's kinds (lists, watch events,
// options) belong in its group.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Configuration{})
	return nil
}

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

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// FinishedCondition returns the Complete or Failed condition of the TrainJob
// if one is True, and nil while it has not finished. The finish time is the
// condition's lastTransitionTime.
func (tj *TrainJob) FinishedCondition() *metav1.Condition {
	for i := range tj.Status.Conditions {
		c := &tj.Status.Conditions[i]
		if (c.Type == TrainJobComplete || c.Type == TrainJobFailed) && c.Status == metav1.ConditionTrue {
			return c
		}
	}
	return nil
}

// StatusServerPath is the path of a TrainJob's progress endpoint on the
// status server, as Kubeflow Trainer's trainer Pods post to it.
func StatusServerPath(namespace, name string) string {
	return "/apis/" + GroupVersion.Group + "/" + GroupVersion.Version + "/namespaces/" + namespace + "/trainjobs/" + name + "/status"
}

// StatusTokenAudience is the audience of the ServiceAccount tokens the
// status server accepts for a TrainJob: a token minted for one TrainJob is
// refused for every other.
func StatusTokenAudience(namespace, name string) string {
	return GroupVersion.Group + "/" + GroupVersion.Version + "/namespaces/" + namespace + "/trainjobs/" + name + "/status"
}

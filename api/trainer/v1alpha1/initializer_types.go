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

import corev1 "k8s.io/api/core/v1"

const (
	// DatasetInitializerStep is the AncestorStepLabel value, and the
	// container name, of the step that downloads the dataset.
	DatasetInitializerStep = "dataset-initializer"
	// ModelInitializerStep is the AncestorStepLabel value, and the
	// container name, of the step that downloads the model.
	ModelInitializerStep = "model-initializer"
	// InitializerVolume is the volume Kubeflow's runtimes share between
	// their initializers and the trainer.
	InitializerVolume = "initializer"
	// StorageURIEnv is the variable that tells an initializer where to
	// download from.
	StorageURIEnv = "STORAGE_URI"
)

// Initializer configures the steps that download the dataset and the model
// before the trainer starts: the runtime's replicated Jobs labelled
// trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer and
// model-initializer, which run before the trainer through dependsOn.
type Initializer struct {
	// dataset configures the dataset initializer.
	// +optional
	Dataset *DatasetInitializer `json:"dataset,omitempty"`

	// model configures the model initializer.
	// +optional
	Model *ModelInitializer `json:"model,omitempty"`
}

// DatasetInitializer configures the container dataset-initializer of the
// runtime's dataset-initializer step.
type DatasetInitializer struct {
	// storageUri is where to download the dataset from (STORAGE_URI), such
	// as hf://tatsu-lab/alpaca or s3://bucket/path; it may be empty.
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",message="storageUri may be empty, or it must be a valid URI (scheme://...)"
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	StorageUri *string `json:"storageUri,omitempty"` //nolint:revive // Kubeflow's name

	// env is merged into the container's environment; a variable of the
	// same name as the runtime's replaces it.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// secretRef names a Secret of the TrainJob's namespace whose keys
	// become the container's environment (credentials to download with).
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// ModelInitializer configures the container model-initializer of the
// runtime's model-initializer step.
type ModelInitializer struct {
	// storageUri is where to download the model from (STORAGE_URI), such as
	// hf://meta-llama/Llama-3.2-1B-Instruct; it may be empty.
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",message="storageUri may be empty, or it must be a valid URI (scheme://...)"
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	StorageUri *string `json:"storageUri,omitempty"` //nolint:revive // Kubeflow's name

	// env is merged into the container's environment; a variable of the
	// same name as the runtime's replaces it.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`

	// secretRef names a Secret of the TrainJob's namespace whose keys
	// become the container's environment (credentials to download with).
	// +optional
	SecretRef *corev1.LocalObjectReference `json:"secretRef,omitempty"`
}

// Package v1alpha1 is the config.trainer.kubeflow.org/v1alpha1 API: the
// Configuration file of the trainjob-operator manager.
//
// +kubebuilder:object:generate=true
// +groupName=config.trainer.kubeflow.org
package v1alpha1

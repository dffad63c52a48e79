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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// networkPlugin gives the plan the runtime's network, with JobSet's
// defaults, and, unless it turns DNS hostnames off, the headless Service
// and the subdomain on every Pod that make <hostname>.<subdomain> resolve.
type networkPlugin struct{}

func (networkPlugin) Name() string { return "network" }

func (networkPlugin) Validate(*Input) field.ErrorList { return nil }

func (networkPlugin) Contribute(in *Input, plan *Plan) field.ErrorList {
	network := in.Network()
	plan.Network = network
	plan.Service = serviceFor(in.TrainJob, &network)
	if dnsHostnames(&network) {
		for _, job := range plan.Jobs {
			job.Spec.Template.Spec.Subdomain = Subdomain(in.TrainJob, &network)
		}
	}
	return nil
}

// Subdomain is the Pods' subdomain and the name of the headless Service
// under network: its subdomain, or the TrainJob's name.
func Subdomain(trainJob *trainer.TrainJob, network *trainer.Network) string {
	if network != nil && network.Subdomain != "" {
		return network.Subdomain
	}
	return trainJob.Name
}

// networkOf is the runtime's network with JobSet's defaults: DNS hostnames
// on, Pods published before they are ready.
func networkOf(spec *trainer.TrainingRuntimeSpec) trainer.Network {
	var n trainer.Network
	if spec.Template.Spec.Network != nil {
		n = *spec.Template.Spec.Network.DeepCopy()
	}
	if n.EnableDNSHostnames == nil {
		n.EnableDNSHostnames = ptr.To(true)
	}
	if n.PublishNotReadyAddresses == nil {
		n.PublishNotReadyAddresses = ptr.To(true)
	}
	return n
}

// ServiceKey is the namespace and name of the TrainJob's Service, by the
// network pinned in its status.
func ServiceKey(trainJob *trainer.TrainJob) types.NamespacedName {
	return types.NamespacedName{Namespace: trainJob.Namespace, Name: Subdomain(trainJob, trainJob.Status.Network)}
}

// Service is the TrainJob's headless Service, by the network pinned in its
// status (JobSet's defaults if none is): with the Pods' hostname and
// subdomain it gives each Pod the DNS name <hostname>.<subdomain>, so
// PET_MASTER_ADDR resolves as under Kubeflow. It is nil when the network
// turns DNS hostnames off.
func Service(trainJob *trainer.TrainJob) *corev1.Service {
	return serviceFor(trainJob, trainJob.Status.Network)
}

// HasService reports whether the TrainJob has a headless Service, by the
// network pinned in its status: it does unless DNS hostnames are off.
func HasService(trainJob *trainer.TrainJob) bool {
	return dnsHostnames(trainJob.Status.Network)
}

func dnsHostnames(network *trainer.Network) bool {
	return network == nil || ptr.Deref(network.EnableDNSHostnames, true)
}

func serviceFor(trainJob *trainer.TrainJob, network *trainer.Network) *corev1.Service {
	if !dnsHostnames(network) {
		return nil
	}
	publish := true
	if network != nil {
		publish = ptr.Deref(network.PublishNotReadyAddresses, true)
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            Subdomain(trainJob, network),
			Namespace:       trainJob.Namespace,
			Labels:          map[string]string{trainer.TrainJobNameLabel: trainJob.Name},
			OwnerReferences: []metav1.OwnerReference{ownerRef(trainJob)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{trainer.TrainJobNameLabel: trainJob.Name},
			PublishNotReadyAddresses: publish,
		},
	}
}

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

package trainjob

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The runtime's network decides the TrainJob's Service: named after its
// subdomain, publishing not-ready Pods or not, or none at all without DNS
// hostnames; and the Pods' subdomain with it.
func TestNetwork(t *testing.T) {
	cases := map[string]struct {
		network     *trainer.Network
		wantService string // "" for none
		wantPublish bool
		wantDomain  string
	}{
		"JobSet's defaults": {wantService: "tj", wantPublish: true, wantDomain: "tj"},
		"a subdomain, not-ready Pods unpublished": {
			network:     &trainer.Network{Subdomain: "ring", PublishNotReadyAddresses: ptr.To(false)},
			wantService: "ring", wantDomain: "ring",
		},
		"no DNS hostnames": {network: &trainer.Network{EnableDNSHostnames: ptr.To(false)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := utiltesting.MakeRuntimeSpec().Torch()
			spec.Obj().Template.Spec.Network = tc.network
			f := newFixture(t, nil, utiltesting.MakeTrainJob("tj", testNS).Obj(), spec.ClusterRuntime("torch-distributed"))
			if err := f.reconcile(t, "tj"); err != nil {
				t.Fatal(err)
			}
			var services corev1.ServiceList
			if err := f.client.List(context.Background(), &services, client.InNamespace(testNS)); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.wantService == "" && len(services.Items) != 0:
				t.Errorf("Services %d, want none", len(services.Items))
			case tc.wantService != "" && (len(services.Items) != 1 || services.Items[0].Name != tc.wantService || services.Items[0].Spec.PublishNotReadyAddresses != tc.wantPublish):
				t.Errorf("Services %+v, want one named %s publishing not-ready Pods %t", services.Items, tc.wantService, tc.wantPublish)
			}
			pod := f.jobs(t)[0].Spec.Template.Spec
			if pod.Subdomain != tc.wantDomain {
				t.Errorf("Pods' subdomain %q, want %q", pod.Subdomain, tc.wantDomain)
			}
			// A second reconcile, the Jobs created: no Service is made
			// where none is wanted, and the one wanted is kept.
			if err := f.reconcile(t, "tj"); err != nil {
				t.Fatal(err)
			}
			var again corev1.ServiceList
			if err := f.client.List(context.Background(), &again, client.InNamespace(testNS)); err != nil {
				t.Fatal(err)
			}
			if len(again.Items) != len(services.Items) {
				t.Errorf("Services after a second reconcile %d, want %d", len(again.Items), len(services.Items))
			}
			if got := f.trainJob(t, "tj").Status.Network; got == nil || ptr.Deref(got.EnableDNSHostnames, true) != (tc.wantService != "") {
				t.Errorf("pinned network %+v", got)
			}
		})
	}
}

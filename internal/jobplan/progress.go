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
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	corev1 "k8s.io/api/core/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// What the trainer containers are given to report their progress, as
// Kubeflow Trainer v2.3's TrainJobStatus plugin gives them.
const (
	StatusServerURLEnv    = "KUBEFLOW_TRAINER_SERVER_URL"
	StatusServerCACertEnv = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	StatusServerTokenEnv  = "KUBEFLOW_TRAINER_SERVER_TOKEN"
	// StatusServerVolume is mounted at StatusServerMountPath, with the
	// token and the CA certificate.
	StatusServerVolume    = "kubeflow-trainer-token"
	StatusServerMountPath = "/var/run/secrets/kubeflow/trainer"
	// statusTokenSeconds is how long a token lives; the kubelet renews it
	// at 80 % of that.
	statusTokenSeconds = 3600
)

// StatusServer is where the trainer Pods report their progress.
type StatusServer struct {
	// URL is the server's, without a path.
	URL string
	// CAConfigMap names the ConfigMap of the TrainJob's namespace whose
	// key CAKey holds the server's CA certificate.
	CAConfigMap, CAKey string
}

// An Option is a setting of the manager that a plan depends on.
type Option func(*Input)

// WithStatusServer gives the trainer containers what they need to report
// their progress to s.
func WithStatusServer(s StatusServer) Option {
	return func(in *Input) { in.StatusServer = &s }
}

// progressPlugin gives every container of the trainer step the status
// server's URL for the TrainJob, its CA certificate and a token whose
// audience is the TrainJob's, in a projected volume. The certificate's
// ConfigMap is optional: training never waits for progress reporting.
type progressPlugin struct{}

func (progressPlugin) Name() string { return "progress" }

func (progressPlugin) Validate(*Input) field.ErrorList { return nil }

func (progressPlugin) Contribute(in *Input, _ *Plan) field.ErrorList {
	s := in.StatusServer
	if s == nil || in.Trainer == nil {
		return nil
	}
	tj := in.TrainJob
	pod := &in.Trainer.Spec.Template.Spec
	pod.Volumes = upsertVolume(pod.Volumes, corev1.Volume{
		Name: StatusServerVolume,
		VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience:          trainer.StatusTokenAudience(tj.Namespace, tj.Name),
				ExpirationSeconds: ptr.To[int64](statusTokenSeconds),
				Path:              "token",
			}},
			{ConfigMap: &corev1.ConfigMapProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.CAConfigMap},
				Items:                []corev1.KeyToPath{{Key: s.CAKey, Path: "ca.crt"}},
				Optional:             ptr.To(true),
			}},
		}}},
	})
	env := []corev1.EnvVar{
		{Name: StatusServerURLEnv, Value: s.URL + trainer.StatusServerPath(tj.Namespace, tj.Name)},
		{Name: StatusServerCACertEnv, Value: StatusServerMountPath + "/ca.crt"},
		{Name: StatusServerTokenEnv, Value: StatusServerMountPath + "/token"},
	}
	for i := range pod.Containers {
		c := &pod.Containers[i]
		c.Env = mergeEnv(c.Env, env)
		c.VolumeMounts = upsertMount(c.VolumeMounts, corev1.VolumeMount{Name: StatusServerVolume, MountPath: StatusServerMountPath, ReadOnly: true})
	}
	return nil
}

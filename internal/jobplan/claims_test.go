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
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func claimTemplate(name string) corev1.PersistentVolumeClaim {
	return corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": "fast"}},
		Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
		}},
	}
}

// The claims of the volume claim policies: named <template>-<trainjob>,
// owned by the TrainJob unless retained, mounted by the Jobs whose
// containers mount a volume of the template's name, and only those.
func TestVolumeClaimPolicies(t *testing.T) {
	spec := initializerRuntime()
	spec.Template.Spec.VolumeClaimPolicies = []trainer.VolumeClaimPolicy{
		{Templates: []corev1.PersistentVolumeClaim{claimTemplate(trainer.InitializerVolume)}},
		{Templates: []corev1.PersistentVolumeClaim{claimTemplate("checkpoints")}, RetentionPolicy: &trainer.VolumeRetentionPolicy{WhenDeleted: ptr.To(trainer.RetentionPolicyRetain)}},
	}
	node := &spec.Template.Spec.ReplicatedJobs[2].Template.Spec.Template.Spec
	node.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "checkpoints", MountPath: "/ckpt"}}
	plan, err := Build(utiltesting.MakeTrainJob("tj", "ns").UID("uid-1").Obj(), Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "rt", Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Claims) != 2 {
		t.Fatalf("claims %d, want 2", len(plan.Claims))
	}
	init, ckpt := plan.Claims[0], plan.Claims[1]
	if init.Name != "initializer-tj" || init.Namespace != "ns" || len(init.OwnerReferences) != 1 || init.OwnerReferences[0].UID != "uid-1" ||
		init.Labels["tier"] != "fast" || init.Labels[trainer.JobSetNameLabel] != "tj" {
		t.Errorf("claim %s/%s: owners %v, labels %v", init.Namespace, init.Name, init.OwnerReferences, init.Labels)
	}
	if ckpt.Name != "checkpoints-tj" || len(ckpt.OwnerReferences) != 0 {
		t.Errorf("retained claim %s: owners %v, want none", ckpt.Name, ckpt.OwnerReferences)
	}
	volumes := map[string][]string{}
	for _, job := range plan.Jobs {
		for _, v := range job.Spec.Template.Spec.Volumes {
			volumes[job.Name] = append(volumes[job.Name], v.Name+"="+v.PersistentVolumeClaim.ClaimName)
		}
	}
	want := map[string]string{"tj-dataset-initializer-0": "initializer=initializer-tj", "tj-model-initializer-0": "", "tj-node-0": "checkpoints=checkpoints-tj"}
	for job, v := range want {
		if got := strings.Join(volumes[job], ","); got != v {
			t.Errorf("Job %s volumes %q, want %q", job, got, v)
		}
	}
}

func TestVolumeClaimPoliciesRefused(t *testing.T) {
	cases := map[string]struct {
		change func(*trainer.TrainingRuntimeSpec)
		name   string
		want   string
	}{
		"a template no container mounts": {
			change: func(s *trainer.TrainingRuntimeSpec) {
				s.Template.Spec.VolumeClaimPolicies = []trainer.VolumeClaimPolicy{{Templates: []corev1.PersistentVolumeClaim{claimTemplate("data")}}}
			},
			want: `volumeClaimPolicies[0].templates[0].metadata.name: Invalid value: "data": no container of the runtime mounts a volume of this name`,
		},
		"a template of a volume the Pods declare": {
			change: func(s *trainer.TrainingRuntimeSpec) {
				s.Template.Spec.VolumeClaimPolicies = []trainer.VolumeClaimPolicy{{Templates: []corev1.PersistentVolumeClaim{claimTemplate(trainer.InitializerVolume)}}}
				pod := &s.Template.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec
				pod.Volumes = []corev1.Volume{{Name: trainer.InitializerVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			},
			want: `replicated Job "dataset-initializer" declares a volume of the same name`,
		},
		"two templates of one name": {
			change: func(s *trainer.TrainingRuntimeSpec) {
				s.Template.Spec.VolumeClaimPolicies = []trainer.VolumeClaimPolicy{
					{Templates: []corev1.PersistentVolumeClaim{claimTemplate(trainer.InitializerVolume)}},
					{Templates: []corev1.PersistentVolumeClaim{claimTemplate(trainer.InitializerVolume)}},
				}
			},
			want: `volumeClaimPolicies[1].templates[0].metadata.name: Duplicate value: "initializer"`,
		},
		"a claim name too long for the TrainJob": {
			change: func(s *trainer.TrainingRuntimeSpec) {
				s.Template.Spec.VolumeClaimPolicies = []trainer.VolumeClaimPolicy{{Templates: []corev1.PersistentVolumeClaim{claimTemplate(strings.Repeat("v", 40))}}}
			},
			name: strings.Repeat("a", 30),
			want: "too long for the volume claim template",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := initializerRuntime()
			tc.change(spec)
			tjName := "tj"
			if tc.name != "" {
				tjName = tc.name
			}
			_, err := Build(utiltesting.MakeTrainJob(tjName, "ns").Obj(), Runtime{Kind: trainer.ClusterTrainingRuntimeKind, Name: "rt", Spec: spec})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

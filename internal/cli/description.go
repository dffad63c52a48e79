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

package cli

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

// descriptionGroupVersion and descriptionKind name what describe -o
// prints. No API server serves them: they say what the document is.
var descriptionGroupVersion = schema.GroupVersion{Group: "trainctl.trainer.kubeflow.org", Version: "v1alpha1"}

const descriptionKind = "TrainJobDescription"

// Description is what trainctl describe -o json|yaml|... prints: the
// TrainJob as stored, what describe makes of it, and its Jobs, Pods and
// events.
type Description struct {
	metav1.TypeMeta `json:",inline"`
	// TrainJob is the TrainJob as the API server has it.
	TrainJob trainer.TrainJob `json:"trainJob"`
	// State is its state as trainctl get shows it.
	State string `json:"state"`
	// ActiveDeadline is when its active deadline falls, while it runs.
	ActiveDeadline *metav1.Time `json:"activeDeadline,omitempty"`
	// DeadlinePaused is true while it is suspended with a deadline.
	DeadlinePaused bool `json:"deadlinePaused,omitempty"`
	// Deletion is when it will be deleted, and by which rule; none when
	// nothing will delete it.
	Deletion *Deletion `json:"deletion,omitempty"`
	// Timeline is what happened to it and what is due, in time order.
	Timeline []Moment       `json:"timeline"`
	Jobs     []batchv1.Job  `json:"jobs"`
	Pods     []corev1.Pod   `json:"pods"`
	Events   []corev1.Event `json:"events"`
}

// Deletion is when a TrainJob will be deleted, by a rule of lifecycle's.
type Deletion struct {
	At metav1.Time `json:"at"`
	// Policy is ttlSecondsAfterFinished, afterFinished or afterSuspended.
	Policy string `json:"policy"`
}

// Moment is a line of the timeline.
type Moment struct {
	At   metav1.Time `json:"at"`
	What string      `json:"what"`
	// Upcoming is true for what is still to come.
	Upcoming bool `json:"upcoming,omitempty"`
}

var _ runtime.Object = (*Description)(nil)

// DeepCopyObject copies d.
func (d *Description) DeepCopyObject() runtime.Object {
	c := *d
	c.TrainJob = *d.TrainJob.DeepCopy()
	c.ActiveDeadline = d.ActiveDeadline.DeepCopy()
	if d.Deletion != nil {
		del := *d.Deletion
		c.Deletion = &del
	}
	c.Timeline = append([]Moment(nil), d.Timeline...)
	c.Jobs = make([]batchv1.Job, len(d.Jobs))
	for i := range d.Jobs {
		d.Jobs[i].DeepCopyInto(&c.Jobs[i])
	}
	c.Pods = make([]corev1.Pod, len(d.Pods))
	for i := range d.Pods {
		d.Pods[i].DeepCopyInto(&c.Pods[i])
	}
	c.Events = make([]corev1.Event, len(d.Events))
	for i := range d.Events {
		d.Events[i].DeepCopyInto(&c.Events[i])
	}
	return &c
}

// object is d as describe -o prints it, each object typed.
func (d *description) object(retention *configv1alpha1.TrainJobRetentionPolicy, now time.Time) *Description {
	tj := d.tj
	o := &Description{
		TrainJob:       *typed(tj),
		State:          state(tj),
		DeadlinePaused: lifecycle.DeadlinePaused(tj),
		Timeline:       []Moment{},
		Jobs:           []batchv1.Job{},
		Pods:           []corev1.Pod{},
		Events:         []corev1.Event{},
	}
	o.SetGroupVersionKind(descriptionGroupVersion.WithKind(descriptionKind))
	if due, ok := lifecycle.ActiveDeadline(tj); ok {
		o.ActiveDeadline = &metav1.Time{Time: due}
	}
	if exp := lifecycle.ExpiryOf(tj, retention); exp != nil {
		o.Deletion = &Deletion{At: metav1.NewTime(exp.At), Policy: exp.Policy}
	}
	for _, m := range d.timeline(retention, now) {
		o.Timeline = append(o.Timeline, Moment{At: metav1.NewTime(m.at), What: m.what, Upcoming: m.at.After(now)})
	}
	for i := range d.jobs {
		o.Jobs = append(o.Jobs, *typed(&d.jobs[i]))
	}
	for i := range d.pods {
		o.Pods = append(o.Pods, *typed(&d.pods[i]))
	}
	for i := range d.events {
		o.Events = append(o.Events, *typed(&d.events[i]))
	}
	return o
}

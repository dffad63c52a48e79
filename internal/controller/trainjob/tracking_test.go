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
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReleasedJobs(t *testing.T) {
	r := newReleasedJobs()
	now := time.Now()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "1"}}
	again := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Namespace: "ns", UID: "2"}}
	if r.recent(job, now) {
		t.Fatal("a Job never released is recent")
	}
	r.add(job, now)
	if !r.recent(job, now.Add(releasedFor-time.Second)) {
		t.Error("a Job just released is not recent")
	}
	if r.recent(again, now) {
		t.Error("a new Job of the same name counts as released")
	}
	if r.recent(job, now.Add(releasedFor)) {
		t.Error("a release past releasedFor is still trusted")
	}
	r.forget(job)
	if r.recent(job, now) {
		t.Error("a forgotten Job is recent")
	}
}

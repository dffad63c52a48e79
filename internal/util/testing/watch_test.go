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

package testing

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func job(name, rv string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv}}
}

func TestFollowResumesFromTheLastVersionSeen(t *testing.T) {
	w := watch.NewFake()
	go func() {
		w.Add(job("a", "11"))
		w.Modify(job("a", "12"))
		w.Action(watch.Bookmark, job("", "15"))
		w.Stop() // the API server ended the watch
	}()
	var seen []watch.EventType
	rv := follow(w, "10", func(e Event) {
		seen = append(seen, e.Type)
		if e.At.IsZero() {
			t.Errorf("%s event without its arrival time", e.Type)
		}
	}, nil)
	if rv != "15" {
		t.Errorf("resumes from %q, want the bookmark's 15", rv)
	}
	if len(seen) != 2 || seen[0] != watch.Added || seen[1] != watch.Modified {
		t.Errorf("events %v, want [ADDED MODIFIED]: bookmarks are not changes", seen)
	}
}

func TestFollowStartsOverAfterAnError(t *testing.T) {
	w := watch.NewFake()
	go func() {
		w.Add(job("a", "11"))
		w.Error(&metav1.Status{Reason: metav1.StatusReasonExpired, Code: 410})
	}()
	if rv := follow(w, "10", func(Event) {}, nil); rv != "" {
		t.Errorf("after an error it resumes from %q; want the current state (\"\")", rv)
	}
}

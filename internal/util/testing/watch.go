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
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Event is one change seen by Watch, with the time it arrived.
type Event struct {
	Type   watch.EventType
	Object client.Object
	At     time.Time
}

// WatchSilence is how long Watch lets a watch go without an event or a
// bookmark before taking it for stalled. The API server sends a bookmark
// about every minute; a watch of 10,000 Pods once stopped receiving events
// though the API server had not closed it.
const WatchSilence = 150 * time.Second

// Watch lists the objects of newList's kind in ns (every namespace when ns
// is empty), then calls fn for each change after that list until ctx ends.
// It returns once the list is read, with its error.
//
// Nothing is lost between watches: when one ends, or stays silent for
// WatchSilence (onStall, when not nil, is told the version it resumes
// from), the next starts from the last version seen. When that version is
// too old, the next starts from the current state, whose objects come as
// Added; deletions missed meanwhile are not seen.
func Watch(ctx context.Context, c client.WithWatch, ns string, newList func() client.ObjectList,
	fn func(Event), onStall func(resourceVersion string)) error {
	list := newList()
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	rv := list.GetResourceVersion()
	go func() {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, newList(), client.InNamespace(ns),
				&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				rv = "" // from the current state
				continue
			}
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			rv = follow(w, rv, fn, onStall)
		}
	}()
	return nil
}

// follow calls fn for each event of w until it ends, fails or stays
// silent, and returns the version to watch from next.
func follow(w watch.Interface, rv string, fn func(Event), onStall func(string)) string {
	defer w.Stop()
	silent := time.NewTimer(WatchSilence)
	defer silent.Stop()
	for {
		select {
		case <-silent.C:
			if onStall != nil {
				onStall(rv)
			}
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			at := time.Now()
			silent.Reset(WatchSilence)
			if ev.Type == watch.Error {
				// Mostly "too old": the API server no longer has the
				// history from rv.
				return ""
			}
			o, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = o.GetResourceVersion()
			if ev.Type != watch.Bookmark {
				fn(Event{Type: ev.Type, Object: o, At: at})
			}
		}
	}
}

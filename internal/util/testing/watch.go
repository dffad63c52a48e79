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
	"errors"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
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
// Nothing is lost between watches: client-go's RetryWatcher starts the next
// from the last version seen when one ends, and when one stays silent for
// WatchSilence, onStall (when not nil) is told the version it resumes from.
// When that version is too old, Watch starts over from the current state:
// it lists again, and the objects listed come as Added; deletions missed
// meanwhile are not seen.
func Watch(ctx context.Context, c client.WithWatch, ns string, newList func() client.ObjectList,
	fn func(Event), onStall func(resourceVersion string)) error {
	w := &watcher{c: c, ns: ns, newList: newList, fn: fn, onStall: onStall}
	rw, err := w.list(ctx, false)
	if err != nil {
		return err
	}
	go w.run(ctx, rw)
	return nil
}

type watcher struct {
	c       client.WithWatch
	ns      string
	newList func() client.ObjectList
	fn      func(Event)
	onStall func(resourceVersion string)
	// stalled is set when a watch is ended for silence, and read by the
	// next one.
	stalled atomic.Bool
}

// list reads the current state and starts a RetryWatcher from its version;
// with added, it calls fn with each object listed as Added.
func (w *watcher) list(ctx context.Context, added bool) (*watchtools.RetryWatcher, error) {
	list := w.newList()
	if err := w.c.List(ctx, list, client.InNamespace(w.ns)); err != nil {
		return nil, err
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(),
		&cache.ListWatch{WatchFuncWithContext: w.watch})
	if err != nil || !added {
		return rw, err
	}
	at := time.Now()
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			w.fn(Event{Type: watch.Added, Object: obj, At: at})
		}
		return nil
	})
	return rw, nil
}

// run calls fn for each change rw sees. When rw stops on an error (mostly
// "too old": the API server no longer has the history from its last
// version), run starts over from the current state, until ctx ends.
func (w *watcher) run(ctx context.Context, rw *watchtools.RetryWatcher) {
	for {
		// Bookmarks are not passed on; an error, the last event before rw
		// stops, carries a Status, not an object.
		for ev := range rw.ResultChan() {
			if obj, ok := ev.Object.(client.Object); ok {
				w.fn(Event{Type: ev.Type, Object: obj, At: time.Now()})
			}
		}
		if ctx.Err() != nil {
			return
		}
		// Fails only when ctx ends.
		if wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
			var err error
			rw, err = w.list(ctx, true)
			return err == nil, nil
		}) != nil {
			return
		}
	}
}

// watch is the ListWatch's watch of RetryWatcher: a watch from the version
// in opts, which ends itself when silent for WatchSilence.
func (w *watcher) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if w.stalled.Swap(false) && w.onStall != nil {
		w.onStall(opts.ResourceVersion)
	}
	iw, err := w.c.Watch(ctx, w.newList(), client.InNamespace(w.ns), &client.ListOptions{Raw: &opts})
	var status apierrors.APIStatus
	if (apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) && errors.As(err, &status) {
		// RetryWatcher keeps retrying an error of opening the watch, but
		// stops on one it receives as an event.
		ew := watch.NewFakeWithChanSize(1, false)
		s := status.Status()
		ew.Error(&s)
		return ew, nil
	}
	if err != nil {
		return nil, err
	}
	return endWhenSilent(iw, func() { w.stalled.Store(true) }), nil
}

// endWhenSilent passes on w's events, bookmarks included, until w ends, or
// until it has been silent for WatchSilence: then it calls stalled and ends.
func endWhenSilent(w watch.Interface, stalled func()) watch.Interface {
	out := make(chan watch.Event)
	pw := watch.NewProxyWatcher(out)
	go func() {
		defer close(out)
		defer w.Stop()
		silent := time.NewTimer(WatchSilence)
		defer silent.Stop()
		for {
			select {
			case <-pw.StopChan():
				return
			case <-silent.C:
				stalled()
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				select {
				case out <- ev:
				case <-pw.StopChan():
					return
				}
				silent.Reset(WatchSilence)
			}
		}
	}()
	return pw
}

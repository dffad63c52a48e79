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
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func job(name, rv string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv}}
}

// opened is one watch the fake API server was asked for.
type opened struct {
	rv string // the version it was asked from
	w  *watch.FakeWatcher
}

// fakeAPI is the fake client with the Jobs objs stored, whose lists come
// with the versions listRVs, one per list, and whose watches are handed to
// the test on opened (or fail with openErr[rv]).
type fakeAPI struct {
	client.WithWatch
	opened chan opened

	mu      sync.Mutex
	lists   int
	events  []Event
	stalls  []string
	openErr map[string]error
}

func newFakeAPI(t *testing.T, listRVs []string, objs ...client.Object) *fakeAPI {
	f := &fakeAPI{opened: make(chan opened, 10), openErr: map[string]error{}}
	f.WithWatch = NewClientBuilder(&interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.lists == len(listRVs) {
				return errors.New("no more lists")
			}
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			list.SetResourceVersion(listRVs[f.lists])
			f.lists++
			return nil
		},
		Watch: func(_ context.Context, _ client.WithWatch, _ client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			lo := (&client.ListOptions{}).ApplyOptions(opts)
			if lo.Namespace != "ns" || lo.Raw == nil || !lo.Raw.AllowWatchBookmarks {
				t.Errorf("watch with %+v, want namespace ns and the raw options asking for bookmarks", lo)
			}
			rv := lo.Raw.ResourceVersion
			f.mu.Lock()
			err := f.openErr[rv]
			f.mu.Unlock()
			if err != nil {
				return nil, err
			}
			w := watch.NewFake()
			f.opened <- opened{rv: rv, w: w}
			return w, nil
		},
	}, objs...).Build()
	return f
}

// watch starts Watch of the Jobs in ns, recording events and stalls.
func (f *fakeAPI) watch(ctx context.Context) error {
	return Watch(ctx, f, "ns", func() client.ObjectList { return &batchv1.JobList{} }, func(e Event) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.events = append(f.events, e)
	}, func(rv string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.stalls = append(f.stalls, rv)
	})
}

// seen returns the events so far as "TYPE name@rv", and fails the test on an
// event without its arrival time.
func (f *fakeAPI) seen(t *testing.T) []string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events {
		if e.At.IsZero() {
			t.Errorf("%s event without its arrival time", e.Type)
		}
		out = append(out, fmt.Sprintf("%s %s@%s", e.Type, e.Object.GetName(), e.Object.GetResourceVersion()))
	}
	return out
}

func (f *fakeAPI) stalled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.stalls)
}

// next returns the next watch opened, failing the test if none is within a
// minute (of the bubble's clock).
func (f *fakeAPI) next(t *testing.T) opened {
	t.Helper()
	select {
	case o := <-f.opened:
		return o
	case <-time.After(time.Minute):
		t.Fatal("no watch opened")
		return opened{}
	}
}

func TestWatchReturnsTheListError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeAPI(t, nil)
		if err := f.watch(t.Context()); err == nil {
			t.Fatal("Watch succeeded though its list failed")
		}
		synctest.Wait()
		if len(f.opened) != 0 {
			t.Error("a watch was opened though the list failed")
		}
	})
}

func TestWatchResumesFromTheLastVersionSeen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFakeAPI(t, []string{"10"}, job("old", ""))
		if err := f.watch(ctx); err != nil {
			t.Fatal(err)
		}
		o := f.next(t)
		if o.rv != "10" {
			t.Errorf("first watch from %q, want the list's 10", o.rv)
		}
		o.w.Add(job("a", "11"))
		o.w.Modify(job("a", "12"))
		o.w.Action(watch.Bookmark, job("", "15"))
		o.w.Stop() // the API server ended the watch
		if o = f.next(t); o.rv != "15" {
			t.Errorf("resumes from %q, want the bookmark's 15", o.rv)
		}
		synctest.Wait()
		if seen, want := f.seen(t), []string{"ADDED a@11", "MODIFIED a@12"}; !slices.Equal(seen, want) {
			t.Errorf("events %v, want %v: the list's objects are not changes, nor are bookmarks", seen, want)
		}
		if s := f.stalled(); len(s) != 0 {
			t.Errorf("onStall(%v) though the watch was not silent", s)
		}
	})
}

func TestWatchRestartsASilentWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFakeAPI(t, []string{"10"})
		if err := f.watch(ctx); err != nil {
			t.Fatal(err)
		}
		o := f.next(t)
		stalledWatch := o.w
		o.w.Add(job("a", "11"))
		time.Sleep(WatchSilence - time.Second)
		o.w.Action(watch.Bookmark, job("", "13")) // a bookmark is not silence
		last := time.Now()
		select {
		case o = <-f.opened:
		case <-time.After(WatchSilence + time.Minute):
			t.Fatal("no new watch after the old one was silent")
		}
		if since := time.Since(last); since < WatchSilence {
			t.Errorf("the watch was restarted after %v of silence, want %v", since, WatchSilence)
		}
		if o.rv != "13" {
			t.Errorf("resumes from %q, want the bookmark's 13", o.rv)
		}
		if s := f.stalled(); !slices.Equal(s, []string{"13"}) {
			t.Errorf("onStall(%v), want once with the version it resumes from, 13", s)
		}
		if !stalledWatch.IsStopped() {
			t.Error("the silent watch was not stopped")
		}
		o.w.Add(job("a", "14"))
		synctest.Wait()
		if seen, want := f.seen(t), []string{"ADDED a@11", "ADDED a@14"}; !slices.Equal(seen, want) {
			t.Errorf("events %v, want %v", seen, want)
		}
	})
}

func TestWatchStartsOverWhenTooOld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFakeAPI(t, []string{"10", "20"}, job("b", ""))
		if err := f.watch(ctx); err != nil {
			t.Fatal(err)
		}
		o := f.next(t)
		o.w.Add(job("a", "11"))
		o.w.Error(&metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: 410})
		if o = f.next(t); o.rv != "20" {
			t.Errorf("after an error it resumes from %q; want the current state, listed at 20", o.rv)
		}
		synctest.Wait()
		// The fake client stores b at version 999.
		if seen, want := f.seen(t), []string{"ADDED a@11", "ADDED b@999"}; !slices.Equal(seen, want) {
			t.Errorf("events %v, want %v: the current state's objects come as Added", seen, want)
		}
		if s := f.stalled(); len(s) != 0 {
			t.Errorf("onStall(%v) after an error, not a silence", s)
		}
	})
}

func TestWatchStartsOverWhenTooOldToOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := newFakeAPI(t, []string{"10", "20"}, job("b", ""))
		f.openErr["10"] = apierrors.NewResourceExpired("too old resource version: 10 (15)")
		if err := f.watch(ctx); err != nil {
			t.Fatal(err)
		}
		if o := f.next(t); o.rv != "20" {
			t.Errorf("a watch too old to open resumes from %q; want the current state, listed at 20", o.rv)
		}
		synctest.Wait()
		if seen, want := f.seen(t), []string{"ADDED b@999"}; !slices.Equal(seen, want) {
			t.Errorf("events %v, want %v", seen, want)
		}
	})
}

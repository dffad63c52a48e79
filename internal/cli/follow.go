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
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// rewatchPause is how long follow waits before opening again a watch that
// the server closed at once, so as not to spin.
const rewatchPause = time.Second

// follow lists the TrainJobs of s and hands them to listed, then hands each
// change to one of them to changed, until either says it is done, ctx ends
// or a request fails. A watch the server ends is opened again from the last
// version seen; when that version is too old, the TrainJobs are listed and
// handed to listed again.
func follow(ctx context.Context, cl client.WithWatch, s scope,
	listed func([]trainer.TrainJob) (done bool, err error),
	changed func(watch.EventType, *trainer.TrainJob) (done bool, err error),
) error {
	var rv string
	relist := true
	for {
		if relist {
			tjs, listRV, err := listTrainJobs(ctx, cl, s)
			if err != nil {
				return err
			}
			if done, err := listed(tjs); done || err != nil {
				return err
			}
			rv, relist = listRV, false
		}
		opts := append(s.listOptions(), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		w, err := cl.Watch(ctx, &trainer.TrainJobList{}, opts...)
		if expired(err) {
			relist = true
			continue
		}
		if err != nil {
			return err
		}
		opened := time.Now()
		done, err := func() (bool, error) {
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return true, ctx.Err()
				case ev, ok := <-w.ResultChan():
					if !ok {
						return false, nil
					}
					if ev.Type == watch.Error {
						err := apierrors.FromObject(ev.Object)
						relist = expired(err)
						return !relist, err
					}
					if m, err := meta.Accessor(ev.Object); err == nil && m.GetResourceVersion() != "" {
						rv = m.GetResourceVersion()
					}
					tj, ok := ev.Object.(*trainer.TrainJob)
					if ev.Type == watch.Bookmark || !ok || !s.has(tj) {
						continue
					}
					if done, err := changed(ev.Type, tj); done || err != nil {
						return true, err
					}
				}
			}
		}()
		if done {
			return err
		}
		if !relist && time.Since(opened) < rewatchPause {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(rewatchPause):
			}
		}
	}
}

// expired says whether err is the server's: the version asked for is gone.
func expired(err error) bool {
	return err != nil && (apierrors.IsGone(err) || apierrors.IsResourceExpired(err))
}

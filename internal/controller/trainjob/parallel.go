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
	"errors"

	"k8s.io/client-go/util/workqueue"
)

// childRequests bounds how many requests about one TrainJob's children a
// reconcile has in flight at once (JobSet allows 50): a runtime of many
// replicated Jobs is created, stopped and deleted in a round trip or a
// few, not one Job after another, without one TrainJob taking the whole
// client.
const childRequests = 16

// inParallel runs do(i) for each i in [0, n), at most childRequests at a
// time, and returns once all have returned. do must only write what is its
// own (its index's slot of a result slice). Every piece runs, so every
// slot holds an outcome: the requests themselves carry the reconcile's
// context, and fail with it.
func inParallel(n int, do func(i int)) {
	workqueue.ParallelizeUntil(context.Background(), childRequests, n, do)
}

// eachInParallel runs do for each item, in parallel as inParallel does, and
// joins the errors in the items' order.
func eachInParallel[T any](items []T, do func(T) error) error {
	errs := make([]error, len(items))
	inParallel(len(items), func(i int) { errs[i] = do(items[i]) })
	return errors.Join(errs...)
}

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

// Package tracking holds how the tracking finalizer of a child Job is
// removed, for the controller that records the Job's outcome first and for
// trainctl uninstall, which releases what a removed manager left.
package tracking

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// RemoveFinalizer removes the tracking finalizer from job with a JSON patch
// that tests the entry it removes: it removes that finalizer and nothing
// else, whatever else changed on the Job since it was read. A failed test
// (the Job's finalizers changed since) is an Invalid error.
func RemoveFinalizer(ctx context.Context, c client.Writer, job *batchv1.Job) error {
	path := fmt.Sprintf("/metadata/finalizers/%d", slices.Index(job.Finalizers, trainer.JobTrackingFinalizer))
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": trainer.JobTrackingFinalizer},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return err
	}
	return c.Patch(ctx, job, client.RawPatch(types.JSONPatchType, patch))
}

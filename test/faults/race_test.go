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

package faults

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// A user extends a finished TrainJob's TTL at moments spread around its
// expiry, many times over, against the real API server. Whenever the API
// server took the extension on a TrainJob not yet being deleted, the
// TrainJob must stay.
func TestTTLExtendedAroundExpiry(t *testing.T) {
	n := envInt("FAULTS_RACES", 30)
	ns := cluster.NewNamespace(t)
	ctx := context.Background()
	var mu sync.Mutex
	var kept, lost, violations []string
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("race-%03d", i)
			// From 600ms before the expiry to 300ms after it.
			offset := time.Duration(i*900/n-600) * time.Millisecond
			outcome, err := race(ctx, ns, name, offset)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				violations = append(violations, fmt.Sprintf("%s: %v", name, err))
			case outcome:
				kept = append(kept, name)
			default:
				lost = append(lost, name)
			}
		}()
	}
	wg.Wait()
	t.Logf("TTL extension races: %d; the extension won %d, the deletion won %d; extensions taken and then deleted anyway: %d",
		n, len(kept), len(lost), len(violations))
	for _, v := range violations {
		t.Error(v)
	}
	if len(kept) == 0 || len(lost) == 0 {
		t.Logf("all races went one way: the window around expiry did not split them this time")
	}
}

// race runs one TrainJob with a 3s TTL to completion and extends its TTL to
// an hour at offset from its expiry. It reports whether the extension won,
// and an error if the API server took it and the TrainJob was deleted all
// the same.
func race(ctx context.Context, ns, name string, offset time.Duration) (bool, error) {
	tj := utiltesting.MakeTrainJob(name, ns).Command("torchrun", "x.py").
		Annotation("pod-complete.stage.kwok.x-k8s.io/delay", "1s").TTL(3).Obj()
	if err := cluster.Client.Create(ctx, tj); err != nil {
		return false, err
	}
	var finished time.Time
	deadline := time.Now().Add(2 * time.Minute)
	for finished.IsZero() {
		if time.Now().After(deadline) {
			return false, errors.New("did not finish in 2 minutes")
		}
		var cur trainer.TrainJob
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(tj), &cur); err != nil {
			return false, err
		}
		if c := cur.FinishedCondition(); c != nil {
			finished = c.LastTransitionTime.Time
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Until(finished.Add(3*time.Second + offset)))

	patched := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	err := cluster.Client.Patch(ctx, patched, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"ttlSecondsAfterFinished":3600}}`)))
	taken := err == nil && patched.DeletionTimestamp == nil
	if err != nil && !apierrors.IsNotFound(err) {
		// A TrainJob being deleted refuses no patch, but the webhook is
		// not consulted for it: any other error is unexpected.
		return false, fmt.Errorf("extending the TTL: %w", err)
	}
	time.Sleep(5 * time.Second)
	var cur trainer.TrainJob
	err = cluster.Client.Get(ctx, client.ObjectKeyFromObject(tj), &cur)
	gone := apierrors.IsNotFound(err) || (err == nil && cur.DeletionTimestamp != nil)
	if taken && gone {
		return false, fmt.Errorf("the extension was taken %v from the expiry, yet the TrainJob was deleted", offset)
	}
	return taken, nil
}

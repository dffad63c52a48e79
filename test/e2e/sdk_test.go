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

package e2e

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// sdkPollInterval is how often followSDKStatus reads a TrainJob as the
// Kubeflow SDK would. The SDK's wait_for_job_status polls every 2 s; reading
// more often sees every state a poll could.
const sdkPollInterval = 200 * time.Millisecond

// sdkFollower reads a TrainJob as the Kubeflow SDK's get_job does
// (utiltesting.KubeflowSDKStatus), every sdkPollInterval and whenever poll
// is called, and keeps the states it read, in order, each once per stretch.
type sdkFollower struct {
	ns, name string
	cancel   context.CancelFunc
	done     chan struct{}
	last     sync.Once

	mu   sync.Mutex
	seen []string
}

// followSDKStatus starts following the TrainJob; stop ends it. Call it
// before the TrainJob is created; reads of a TrainJob that does not exist
// (yet, or any more) are skipped.
func followSDKStatus(t *testing.T, ns, name string) *sdkFollower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &sdkFollower{ns: ns, name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		tick := time.NewTicker(sdkPollInterval)
		defer tick.Stop()
		for {
			f.poll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { f.stop() })
	return f
}

// poll reads the TrainJob once and records its state. Called right after
// the TrainJob is created, it reads it before its Pods can run: a poll
// interval is longer than a simulated Pod takes to start.
func (f *sdkFollower) poll(ctx context.Context) {
	state, ok := sdkStatus(ctx, f.ns, f.name)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 || f.seen[len(f.seen)-1] != state {
		f.seen = append(f.seen, state)
	}
}

// stop ends the following, reads the TrainJob a last time (the test may
// have seen a change the last poll did not), and returns the states read.
func (f *sdkFollower) stop() []string {
	f.cancel()
	<-f.done
	f.last.Do(func() { f.poll(context.Background()) })
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.seen)
}

// sdkStatus is the TrainJob's state as the Kubeflow SDK reads it, and false
// if it could not be read.
func sdkStatus(ctx context.Context, ns, name string) (string, bool) {
	var tj trainer.TrainJob
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &tj); err != nil {
		return "", false
	}
	var nodes int32
	var spec *trainer.TrainingRuntimeSpec
	if tj.Spec.RuntimeRef.Kind != nil && *tj.Spec.RuntimeRef.Kind == trainer.TrainingRuntimeKind {
		var rt trainer.TrainingRuntime
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tj.Spec.RuntimeRef.Name}, &rt); err != nil {
			return "", false
		}
		spec = &rt.Spec
	} else {
		var rt trainer.ClusterTrainingRuntime
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: tj.Spec.RuntimeRef.Name}, &rt); err != nil {
			return "", false
		}
		spec = &rt.Spec
	}
	if spec.MLPolicy != nil && spec.MLPolicy.NumNodes != nil {
		nodes = *spec.MLPolicy.NumNodes
	}
	var pods corev1.PodList
	if err := cluster.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{trainer.JobSetNameLabel: name}); err != nil {
		return "", false
	}
	return utiltesting.KubeflowSDKStatus(&tj, nodes, pods.Items), true
}

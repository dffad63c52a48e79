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

package main

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
)

// limitResult is what a bare client gets from the API server doing what
// the controllers must for each object: create a Job (of one Pod) and its
// headless Service; later delete both, the Job with foreground
// propagation, until nothing of them is left. It runs with the
// controllers' client QPS and burst, and as many requests at once as the
// manager has TrainJob workers, on the same cluster (whose
// kube-controller-manager runs the Jobs' Pods meanwhile, as it would the
// controllers').
type limitResult struct {
	N       int     `json:"n"`
	QPS     float64 `json:"qps"`
	Burst   int     `json:"burst"`
	Workers int     `json:"workers"`
	// CreateRate is objects (a Job and a Service each) created per second;
	// DeleteRate, objects deleted and gone per second.
	CreateRate float64 `json:"createPerSecond"`
	DeleteRate float64 `json:"deletePerSecond"`
}

// limit measures the bare client: the bound of what the controllers can
// create and delete on this API server.
func (b *bench) limit(ctx context.Context) (any, error) {
	// As many objects as the largest scenario it is compared with: the
	// bare client's rates grow with N (its first seconds are slower).
	n := max(b.c.burstN, b.c.ttlN)
	b.logf("the API server's limit: a bare client creates %d Jobs of one Pod with a headless Service each, then deletes them (Jobs in the foreground), at QPS %v / burst %d, %d at once",
		n, b.qps, b.burst, b.trainJobWorkers)
	if err := b.ensureNodes(ctx, n); err != nil {
		return nil, err
	}
	ns, drop, err := b.namespace(ctx, "bench-limit")
	if err != nil {
		return nil, err
	}
	defer drop()
	rc := *b.rc
	rc.QPS, rc.Burst = float32(b.qps), b.burst
	cl, err := client.New(&rc, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	jobs := make([]client.Object, n)
	for i := range jobs {
		jobs[i] = batchJob(fmt.Sprintf("job-%05d", i), ns, "1h", nil)
	}
	res := limitResult{N: n, QPS: b.qps, Burst: b.burst, Workers: b.trainJobWorkers}

	start := time.Now()
	err = b.forAllWith(ctx, b.trainJobWorkers, "created", "Jobs and Services", jobs, func(o client.Object) error {
		if err := cl.Create(ctx, o); err != nil {
			return err
		}
		return cl.Create(ctx, headlessService(o))
	})
	if err != nil {
		return nil, err
	}
	res.CreateRate = float64(n) / time.Since(start).Seconds()

	start = time.Now()
	err = b.forAllWith(ctx, b.trainJobWorkers, "deleted", "Jobs and Services", jobs, func(o client.Object) error {
		if err := cl.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
			return err
		}
		return cl.Delete(ctx, headlessService(o))
	})
	if err != nil {
		return nil, err
	}
	err = b.waitFor(ctx, "the bare client's deletions", 10*time.Minute, func() (bool, string) {
		left := b.leftIn(ctx, ns)
		return left == 0, fmt.Sprintf("%d objects left", left)
	})
	if err != nil {
		return nil, err
	}
	res.DeleteRate = float64(n) / time.Since(start).Seconds()
	b.bare = &res
	fmt.Fprintf(b.out, "\nThe API server's limit for a bare client (QPS %v / burst %d, %d at once): creates %.1f objects/s (a Job and a Service each), deletes %.1f objects/s until gone\n\n",
		b.qps, b.burst, b.trainJobWorkers, res.CreateRate, res.DeleteRate)
	return res, nil
}

// headlessService is the headless Service of a batch Job's Pods, as the
// controllers make one for each TrainJob's.
func headlessService(job client.Object) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: job.GetName(), Namespace: job.GetNamespace()},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, PublishNotReadyAddresses: true,
			Selector: map[string]string{batchv1.JobNameLabel: job.GetName()}},
	}
}

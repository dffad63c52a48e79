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

package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MultiKueue, with Options.MultiKueue: Kueue's MultiKueue dispatches the
// TrainJobs queued on this cluster (the manager cluster) to worker
// clusters. Each worker is a local cluster as this one is (its own etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok, on
// ports of its own, under WorkDir/workers/<name>), with Kueue and the
// manager running on it. On this cluster Kueue runs with MultiKueue's
// settings (multiKueueConfiguration); trainjob-dev gives it each worker's
// kubeconfig, its credentials inlined, as the Secret
// kueue-system/<worker>-kubeconfig that config/samples/multikueue's
// MultiKueueClusters name.
const (
	// MultiKueueManagedBy is the spec.managedBy Kueue's webhook gives the
	// TrainJobs it dispatches.
	MultiKueueManagedBy = "kueue.x-k8s.io/multikueue"
	// MultiKueueOriginLabel marks the copies MultiKueue creates on a
	// worker, with the manager's origin as value (Kueue's default,
	// "multikueue").
	MultiKueueOriginLabel = "kueue.x-k8s.io/multikueue-origin"
)

// MultiKueueWorkers are the worker clusters' names, as the MultiKueueClusters
// of config/samples/multikueue name them.
var MultiKueueWorkers = []string{"worker1", "worker2"}

// multiKueueConfiguration is the multiKueue section of Kueue's
// configuration on the manager cluster (format: gcInterval and
// workerLostTimeout). Kueue's defaults are 1m and 15m.
const multiKueueConfiguration = `multiKueue:
  gcInterval: %s
  workerLostTimeout: %s
`

// MultiKueueGCInterval is how often MultiKueue looks for copies on the
// workers whose TrainJob is gone from the manager cluster (Kueue's default
// is a minute).
const MultiKueueGCInterval = 20 * time.Second

// DefaultWorkerLostTimeout is how long MultiKueue waits for a worker it
// lost before it dispatches the TrainJobs admitted there again, unless
// Options.WorkerLostTimeout says otherwise (Kueue's default is 15
// minutes, too long to watch here).
const DefaultWorkerLostTimeout = 2 * time.Minute

// Worker is the options of the worker cluster name of the manager cluster
// of o: the same binaries and repository, its own directory and name, and
// Kueue; nothing else of o's extras.
func (o Options) Worker(name string) Options {
	o.defaults()
	return Options{
		Root:                  o.Root,
		BinDir:                o.BinDir,
		WorkDir:               filepath.Join(o.WorkDir, "workers", name),
		Name:                  o.Name + "-" + name,
		Nodes:                 o.Nodes,
		Out:                   prefixed{o.Out, name},
		ManagerArgs:           o.ManagerArgs,
		Kueue:                 true,
		KueuePodsReadyTimeout: o.KueuePodsReadyTimeout,
		Configuration:         o.Configuration,
	}
}

// prefixed writes each step line of a worker's Up with the worker's name.
type prefixed struct {
	out  io.Writer
	name string
}

func (p prefixed) Write(b []byte) (int, error) {
	if _, err := fmt.Fprintf(p.out, "[%s] %s", p.name, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

// upWorkers brings up the worker clusters and applies the Kueue objects of
// config/samples/multikueue/worker.yaml to each.
func upWorkers(ctx context.Context, o Options) error {
	for _, name := range MultiKueueWorkers {
		w := o.Worker(name)
		if err := Up(ctx, w); err != nil {
			return fmt.Errorf("worker cluster %s: %w", name, err)
		}
		if err := applyWithRetry(ctx, w, filepath.Join(o.Root, "config", "samples", "multikueue", "worker")); err != nil {
			return fmt.Errorf("worker cluster %s: %w", name, err)
		}
	}
	return nil
}

// ensureMultiKueue gives the manager cluster's Kueue each worker's
// kubeconfig and applies config/samples/multikueue/manager: the
// MultiKueueClusters, MultiKueueConfig, AdmissionCheck and queues. It
// returns once every MultiKueueCluster is connected and the ClusterQueue
// is active.
func ensureMultiKueue(ctx context.Context, cl client.Client, o Options) error {
	for _, name := range MultiKueueWorkers {
		kubeconfig, err := inlinedKubeconfig(o.Worker(name).Kubeconfig())
		if err != nil {
			return fmt.Errorf("worker cluster %s: %w", name, err)
		}
		secret := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-kubeconfig", Namespace: KueueNamespace},
			Data:       map[string][]byte{"kubeconfig": kubeconfig},
		}
		if err := createOrReplace(ctx, cl, secret, nil); err != nil {
			return fmt.Errorf("the kubeconfig Secret of worker %s: %w", name, err)
		}
	}
	step(o, "MultiKueue: connecting Kueue to the workers %v", MultiKueueWorkers)
	if err := applyWithRetry(ctx, o, filepath.Join(o.Root, "config", "samples", "multikueue", "manager")); err != nil {
		return err
	}
	var errs []error
	for _, name := range MultiKueueWorkers {
		errs = append(errs, kubectl(ctx, o, "wait", "--for", "condition=Active", "--timeout", "2m", "multikueuecluster/"+name))
	}
	errs = append(errs, kubectl(ctx, o, "wait", "--for", "condition=Active", "--timeout", "1m", "admissioncheck/multikueue", "clusterqueue/multikueue"))
	return errors.Join(errs...)
}

// inlinedKubeconfig is the kubeconfig at path with the files it names
// (certificates, keys) inlined: Kueue accepts no file paths in a
// MultiKueueCluster's kubeconfig.
func inlinedKubeconfig(path string) ([]byte, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return nil, fmt.Errorf("inlining the files of %s: %w", path, err)
	}
	return clientcmd.Write(*cfg)
}

// applyWithRetry applies the manifests of dir to o's cluster, retrying for
// a minute: Kueue's webhooks refuse its objects until its caches are up.
func applyWithRetry(ctx context.Context, o Options, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		err := kubectl(ctx, o, "apply", "--server-side", "--force-conflicts", "-f", dir)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(2 * time.Second):
		}
	}
}

// downWorkers stops and deletes the worker clusters of o, if any.
func downWorkers(ctx context.Context, o Options) error {
	var errs []error
	for _, name := range MultiKueueWorkers {
		w := o.Worker(name)
		if _, err := os.Stat(w.WorkDir); err != nil {
			continue
		}
		errs = append(errs, Down(ctx, w))
	}
	return errors.Join(errs...)
}

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
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainjob-operator/trainjob-operator/internal/cli"
)

// NewCommand returns the command of the local development cluster, which
// make dev, dev-up and dev-down run. It is tooling: the product's binaries
// do not link it.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	o := Options{}
	cmd := &cobra.Command{
		Use:   "trainjob-dev",
		Short: "Run the product on a local control plane with simulated nodes",
		Long: `The local development cluster: etcd, kube-apiserver, kube-controller-manager
and kube-scheduler built from Go modules into bin/, simulated nodes (kwok), and
the manager running on this machine behind its validating webhook.

  trainjob-dev run    bring it up, apply config/samples, show what happens
                      to each TrainJob, and tear it all down on Ctrl-C (make dev)
  trainjob-dev up     bring it up and leave it running; safe to repeat (make dev-up)
  trainjob-dev down   stop the manager and delete the cluster (make dev-down)

With --kueue (make dev KUEUE=1), Kueue runs beside the manager, built into
bin/kueue by 'hack/build-tools.sh kueue', with its TrainJob integration on;
run also applies config/samples/kueue: a ResourceFlavor, a ClusterQueue, a
LocalQueue and TrainJobs queued in it. See docs/kueue.md.

With --multikueue (make dev MULTIKUEUE=1), two worker clusters come up
beside this one (the manager cluster), each a local cluster of its own
with Kueue and the manager, under .dev/workers/; Kueue here runs with
MultiKueue dispatching to them. run applies config/samples/multikueue:
TrainJobs queued here that run on a worker, with their status mirrored
back; the live view shows each one's cluster. See docs/multicluster.md.

With --coscheduler (make dev COSCHEDULING=1), the coscheduling scheduler of
the Kubernetes scheduler-plugins runs beside kube-scheduler, built into
bin/coscheduler by 'make coscheduler', with its PodGroup CRD installed: the
gang scheduler of a runtime's podGroupPolicy coscheduling. Pods name it with
schedulerName: scheduler-plugins-scheduler. run also applies
config/samples/gang. See docs/compatibility.md#gang-scheduling.

With --prometheus (make dev PROMETHEUS=1), Prometheus runs on this machine,
built into bin/prometheus by 'make prometheus', scraping the manager (over
HTTPS with a ServiceAccount's token, as the Helm chart's ServiceMonitor does)
and kube-apiserver, and evaluating the chart's alerts. See
docs/observability.md.

With --real (make dev REAL=1), a real node joins the cluster: a kubelet
built from the control plane's k8s.io/kubernetes, containerd and runc, Pods
on a bridge of this machine (CNI), and CoreDNS answering cluster names,
all as root; built into bin/ by 'make real-node'. Only Pods that select the
label and tolerate the taint trainjob-operator.dev/node=real run there, and
every Pod of an image built here (localhost/trainjob-operator/...) is sent
there. run also builds the training image if needed, loads it, and applies
config/samples/real: a real torchrun job. See docs/real-node.md.

The kubeconfig is written to .dev/kubeconfig.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	f := cmd.PersistentFlags()
	f.StringVar(&o.Root, "root", ".", "The repository: config/ is read from it, bin/ and .dev/ are in it")
	f.IntVar(&o.Nodes, "nodes", 4, "Simulated nodes to create")
	f.StringVar(&o.Name, "cluster-name", "trainjob-dev", "Name of the local cluster")
	f.BoolVar(&o.Kueue, "kueue", false, "Also run Kueue (bin/kueue) with its TrainJob integration, and apply config/samples/kueue")
	f.BoolVar(&o.Prometheus, "prometheus", false, "Also run Prometheus (bin/prometheus), scraping the manager and kube-apiserver, with the chart's alerts")
	f.BoolVar(&o.Real, "real", false, "Also run a real node (kubelet, containerd, CNI, CoreDNS; bin/ from 'make real-node') for Pods that select and tolerate "+RealNodeLabel+"="+RealNodeValue+"; needs root")
	f.BoolVar(&o.MultiKueue, "multikueue", false, "Also bring up the worker clusters "+strings.Join(MultiKueueWorkers, " and ")+" (each with Kueue and the manager) and run Kueue with MultiKueue dispatching to them, and apply config/samples/multikueue")
	f.BoolVar(&o.Coscheduler, "coscheduler", false, "Also run the coscheduling scheduler (bin/coscheduler) with the PodGroup CRD, and apply config/samples/gang")

	options := func() (Options, error) {
		root, err := filepath.Abs(o.Root)
		if err != nil {
			return o, err
		}
		if _, err := os.Stat(filepath.Join(root, "config", "crd")); err != nil {
			return o, fmt.Errorf("%s is not the trainjob-operator repository (no config/crd): run from it or pass --root", root)
		}
		opts := o
		opts.Root, opts.Out = root, out
		return opts, nil
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "up",
		Short: "Bring the local cluster and the manager up, and leave them running",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			return Up(cmd.Context(), opts)
		},
	}, &cobra.Command{
		Use:   "down",
		Short: "Stop the manager and delete the local cluster",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			return Down(cmd.Context(), opts)
		},
	}, &cobra.Command{
		Use:   "load-image ARCHIVE [REPOSITORY:TAG]",
		Short: "Import an OCI image archive into the real node's containerd (default name: " + TrainImage + ")",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			ref := TrainImage
			if len(args) == 2 {
				ref = args[1]
			}
			start := time.Now()
			if err := LoadImageArchive(cmd.Context(), opts, args[0], ref); err != nil {
				return err
			}
			step(opts, "loaded %s into the real node in %s", ref, time.Since(start).Round(100*time.Millisecond))
			return nil
		},
	}, &cobra.Command{
		Use:   "run",
		Short: "Bring everything up, apply the samples and show their lifecycles until Ctrl-C",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			return runLive(cmd.Context(), out, opts)
		},
	})
	return cmd
}

// runLive is `make dev`: up, samples, live view; Ctrl-C tears down.
func runLive(parent context.Context, out io.Writer, o Options) (err error) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Ctrl-C also ends whatever the output is piped to (tee, less): a write
	// to a closed pipe must not kill the command before it has torn down.
	signal.Ignore(syscall.SIGPIPE)
	defer func() {
		// Tear down whatever came up, even after a failure or Ctrl-C.
		fmt.Fprintln(out, "\ndev: tearing down")
		downCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		err = errors.Join(err, Down(downCtx, o))
	}()

	if err := Up(ctx, o); err != nil {
		return err
	}
	samples := []string{filepath.Join(o.Root, "config", "samples")}
	switch {
	case o.MultiKueue:
		samples = append(samples, filepath.Join(o.Root, "config", "samples", "multikueue"))
	case o.Kueue:
		samples = append(samples, filepath.Join(o.Root, "config", "samples", "kueue"))
	}
	if o.Coscheduler {
		samples = append(samples, filepath.Join(o.Root, "config", "samples", "gang"))
	}
	if o.Real {
		if err := loadTrainImage(ctx, out, o); err != nil {
			return err
		}
		samples = append(samples, filepath.Join(o.Root, "config", "samples", "real"))
	}
	for _, dir := range samples {
		fmt.Fprintf(out, "dev: applying the samples in %s\n", dir)
		apply := exec.CommandContext(ctx, filepath.Join(o.BinDir, "kubectl"), "--kubeconfig", o.Kubeconfig(), "apply", "-n", "default", "-f", dir)
		if output, err := apply.CombinedOutput(); err != nil {
			return fmt.Errorf("applying the samples: %w\n%s", err, output)
		}
	}
	fmt.Fprintf(out, "dev: watching; in another terminal: export KUBECONFIG=%s; bin/trainctl get; bin/trainctl describe NAME\n", o.Kubeconfig())
	if o.Kueue {
		fmt.Fprintf(out, "dev: Kueue's side: bin/kubectl get clusterqueues,localqueues,workloads -A (Kueue logs to %s)\n", o.KueueLog())
	}
	for _, name := range MultiKueueWorkers {
		if w := o.Worker(name); o.MultiKueue {
			fmt.Fprintf(out, "dev: worker cluster %s: KUBECONFIG=%s (its manager logs to %s, its Kueue to %s)\n", name, w.Kubeconfig(), w.ManagerLog(), w.KueueLog())
		}
	}
	if o.Coscheduler {
		fmt.Fprintf(out, "dev: the gangs: bin/kubectl get podgroups.scheduling.x-k8s.io -A (the coscheduling scheduler logs to %s)\n", o.CoschedulerLog())
	}
	if o.Real {
		fmt.Fprintf(out, "dev: the real job's output: bin/trainctl logs torch-real -f (the kubelet logs to %s)\n", o.KubeletLog())
	}
	if url, err := PrometheusURL(o); o.Prometheus && err == nil {
		fmt.Fprintf(out, "dev: Prometheus: %s (alerts: %s/alerts; it logs to %s)\n", url, url, o.PrometheusLog())
	}
	fmt.Fprintln(out, "dev: press Ctrl-C to stop and tear everything down")

	err = cli.LiveView(ctx, out, o.Kubeconfig(), "default", true)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

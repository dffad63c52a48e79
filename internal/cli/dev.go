package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

func newDevCommand(g *globals) *cobra.Command {
	o := dev.Options{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the product on a local control plane with simulated nodes",
		Long: `The local development cluster: etcd, kube-apiserver, kube-controller-manager
and kube-scheduler built from Go modules into bin/, simulated nodes (kwok), and
the manager running on this machine behind its validating webhook.

  trainctl dev run    bring it up, apply config/samples, show what happens
                      to each TrainJob, and tear it all down on Ctrl-C
  trainctl dev up     bring it up and leave it running (safe to repeat)
  trainctl dev down   stop the manager and delete the cluster

The kubeconfig is written to .dev/kubeconfig.`,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.Root, "root", ".", "The repository: config/ is read from it, bin/ and .dev/ are in it")
	f.IntVar(&o.Nodes, "nodes", 4, "Simulated nodes to create")
	f.StringVar(&o.Name, "cluster-name", "trainjob-dev", "Name of the local cluster")

	options := func() (dev.Options, error) {
		root, err := filepath.Abs(o.Root)
		if err != nil {
			return o, err
		}
		if _, err := os.Stat(filepath.Join(root, "config", "crd")); err != nil {
			return o, fmt.Errorf("%s is not the trainjob-operator repository (no config/crd): run from it or pass --root", root)
		}
		opts := o
		opts.Root, opts.Out = root, g.out
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
			return dev.Up(cmd.Context(), opts)
		},
	}, &cobra.Command{
		Use:   "down",
		Short: "Stop the manager and delete the local cluster",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			return dev.Down(cmd.Context(), opts)
		},
	}, &cobra.Command{
		Use:   "run",
		Short: "Bring everything up, apply the samples and show their lifecycles until Ctrl-C",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := options()
			if err != nil {
				return err
			}
			return runDev(cmd.Context(), g, opts)
		},
	})
	return cmd
}

// runDev is `make dev`: up, samples, live view; Ctrl-C tears down.
func runDev(parent context.Context, g *globals, o dev.Options) (err error) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Ctrl-C also ends whatever the output is piped to (tee, less): a write
	// to a closed pipe must not kill trainctl before it has torn down.
	signal.Ignore(syscall.SIGPIPE)
	defer func() {
		// Tear down whatever came up, even after a failure or Ctrl-C.
		fmt.Fprintln(g.out, "\ndev: tearing down")
		downCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		err = errors.Join(err, dev.Down(downCtx, o))
	}()

	if err := dev.Up(ctx, o); err != nil {
		return err
	}
	samples := filepath.Join(o.Root, "config", "samples")
	fmt.Fprintf(g.out, "dev: applying the samples in %s\n", samples)
	apply := exec.CommandContext(ctx, filepath.Join(o.BinDir, "kubectl"), "--kubeconfig", o.Kubeconfig(), "apply", "-n", "default", "-f", samples)
	if out, err := apply.CombinedOutput(); err != nil {
		return fmt.Errorf("applying the samples: %w\n%s", err, out)
	}
	fmt.Fprintf(g.out, "dev: watching; in another terminal: export KUBECONFIG=%s; bin/trainctl get; bin/trainctl describe NAME\n", o.Kubeconfig())
	fmt.Fprintln(g.out, "dev: press Ctrl-C to stop and tear everything down")

	g.kubeconfig, g.namespace = o.Kubeconfig(), "default"
	cl, ns, err := g.client()
	if err != nil {
		return err
	}
	err = watch(ctx, g, cl, ns, &suspendResumeDemo{out: g.out, now: g.now})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

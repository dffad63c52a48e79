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

// Package cli is trainctl: a command line for TrainJobs (a table of them,
// the timeline of one) and for the local development cluster.
package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/config"
	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
)

// globals are the flags every command shares.
type globals struct {
	// config is kubectl's flags for reaching a cluster (--kubeconfig,
	// --context, -n, --server, --token, --as, ...), read as kubectl reads them.
	config        *genericclioptions.ConfigFlags
	allNamespaces bool
	configFile    string
	out           io.Writer
	errOut        io.Writer
	now           func() time.Time
	// newClient makes the client of a configuration, and newLogs what
	// streams Pods' logs; tests give fakes.
	newClient func(*rest.Config) (client.WithWatch, error)
	newLogs   func(*rest.Config) (podLogs, error)
}

func newGlobals(out, errOut io.Writer) *globals {
	return &globals{
		config: genericclioptions.NewConfigFlags(true),
		out:    out,
		errOut: errOut,
		now:    time.Now,
		newClient: func(cfg *rest.Config) (client.WithWatch, error) {
			return client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme})
		},
		newLogs: clientsetLogs,
	}
}

// NewCommand returns the trainctl command.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	return newRootCommand(newGlobals(out, errOut))
}

// NewCommandAs returns the trainctl command as the binary argv0 runs it:
// as kubectl runs it when argv0 names a kubectl plugin (kubectl-trainjob),
// its usage says so (kubectl trainjob get ...).
func NewCommandAs(argv0 string, out, errOut io.Writer) *cobra.Command {
	root := NewCommand(out, errOut)
	if name := pluginCommandLine(argv0); name != "" {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: name}
		var rename func(*cobra.Command)
		rename = func(c *cobra.Command) {
			c.Example = strings.ReplaceAll(c.Example, "  trainctl ", "  "+name+" ")
			for _, sub := range c.Commands() {
				rename(sub)
			}
		}
		rename(root)
	}
	return root
}

// pluginCommandLine is how kubectl users run the plugin binary argv0
// (kubectl-trainjob: kubectl trainjob), or "" if argv0 is not one. kubectl
// turns the dashes of a plugin's file name into spaces and its
// underscores into dashes.
func pluginCommandLine(argv0 string) string {
	base := strings.TrimSuffix(filepath.Base(argv0), ".exe")
	name, ok := strings.CutPrefix(base, "kubectl-")
	if !ok || name == "" {
		return ""
	}
	words := strings.Split(name, "-")
	for i := range words {
		words[i] = strings.ReplaceAll(words[i], "_", "-")
	}
	return "kubectl " + strings.Join(words, " ")
}

func newRootCommand(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "trainctl",
		Short:         "Look after TrainJobs and run the local development cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(g.out)
	root.SetErr(g.errOut)
	f := root.PersistentFlags()
	g.config.AddFlags(f)
	f.BoolVarP(&g.allNamespaces, "all-namespaces", "A", false, "TrainJobs of every namespace")
	f.StringVar(&g.configFile, "manager-config", "", "The manager's Configuration file, for the retention policies (default: the "+config.ConfigMapName+" ConfigMap in "+config.Namespace+", if readable)")
	g.completeFlags(root)
	root.AddCommand(newGetCommand(g), newDescribeCommand(g), newWaitCommand(g), newLogsCommand(g))
	root.AddCommand(newUninstallCommand(g), newUpgradeCheckCommand(g), newVersionCommand(g.out))
	return root
}

// client returns a client of the cluster and the namespace to look in.
func (g *globals) client() (client.WithWatch, string, error) {
	return g.clientWith(nil)
}

// clientWith returns a client of the cluster, its configuration changed by
// edit if not nil, and the namespace to look in: -n, else the context's.
func (g *globals) clientWith(edit func(*rest.Config)) (client.WithWatch, string, error) {
	cfg, err := g.config.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no cluster to talk to: %w", err)
	}
	if edit != nil {
		edit(cfg)
	}
	ns, _, err := g.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", err
	}
	cl, err := g.newClient(cfg)
	return cl, ns, err
}

// retention returns the TrainJob retention policy of the manager: from
// --manager-config, else from its ConfigMap, else none.
func (g *globals) retention(ctx context.Context, cl client.Client) (*configv1alpha1.TrainJobRetentionPolicy, error) {
	if g.configFile != "" {
		cfg, err := config.Load(g.configFile)
		if err != nil {
			return nil, err
		}
		return policyOf(cfg), nil
	}
	var cm corev1.ConfigMap
	err := cl.Get(ctx, client.ObjectKey{Namespace: config.Namespace, Name: config.ConfigMapName}, &cm)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, nil // no policy known: show TTLs only
	}
	if err != nil {
		return nil, err
	}
	cfg, err := config.Decode([]byte(cm.Data[config.ConfigMapKey]))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %w", config.Namespace, config.ConfigMapName, err)
	}
	return policyOf(cfg), nil
}

func policyOf(cfg *configv1alpha1.Configuration) *configv1alpha1.TrainJobRetentionPolicy {
	if cfg.ObjectRetentionPolicies == nil {
		return nil
	}
	return cfg.ObjectRetentionPolicies.TrainJobs
}

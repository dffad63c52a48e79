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
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/config"
	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
)

// globals are the flags every command shares.
type globals struct {
	kubeconfig    string
	context       string
	namespace     string
	allNamespaces bool
	configFile    string
	out           io.Writer
	now           func() time.Time
}

// NewCommand returns the trainctl command.
func NewCommand(out, errOut io.Writer) *cobra.Command {
	g := &globals{out: out, now: time.Now}
	root := &cobra.Command{
		Use:           "trainctl",
		Short:         "Look after TrainJobs and run the local development cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(out)
	root.SetErr(errOut)
	f := root.PersistentFlags()
	f.StringVar(&g.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&g.context, "context", "", "The kubeconfig context to use")
	f.StringVarP(&g.namespace, "namespace", "n", "", "Namespace (default: the context's)")
	f.BoolVarP(&g.allNamespaces, "all-namespaces", "A", false, "TrainJobs of every namespace")
	f.StringVar(&g.configFile, "manager-config", "", "The manager's Configuration file, for the retention policies (default: the "+config.ConfigMapName+" ConfigMap in "+config.Namespace+", if readable)")
	root.AddCommand(newGetCommand(g), newDescribeCommand(g))
	root.AddCommand(newUninstallCommand(g), newUpgradeCheckCommand(g), newVersionCommand(out))
	return root
}

// client returns a client of the cluster and the namespace to look in.
func (g *globals) client() (client.Client, string, error) {
	return g.clientWith(nil)
}

// clientWith returns a client of the cluster, its configuration changed by
// edit if not nil, and the namespace to look in.
func (g *globals) clientWith(edit func(*rest.Config)) (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: g.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("no cluster to talk to: %w", err)
	}
	if edit != nil {
		edit(cfg)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", err
	}
	if g.namespace != "" {
		ns = g.namespace
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
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

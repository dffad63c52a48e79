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

package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
)

// completionTimeout bounds what a completion asks the cluster, so that a
// shell does not hang on one out of reach.
const completionTimeout = 5 * time.Second

// completeTrainJobs completes the names of the TrainJobs of the namespace
// (-n, or every one with -A), less those given already; at most is how
// many names the command takes (0: any number).
func (g *globals) completeTrainJobs(atMost int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if atMost > 0 && len(args) >= atMost {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cl, ns, err := g.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		tjs, _, err := listTrainJobs(ctx, cl, scope{namespace: ns, all: g.allNamespaces})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, tj := range tjs {
			if strings.HasPrefix(tj.Name, toComplete) && !slices.Contains(args, tj.Name) && !slices.Contains(names, tj.Name) {
				names = append(names, tj.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeFlags completes the values of the flags kubectl completes: the
// namespaces of the cluster, and the contexts, clusters and users of the
// kubeconfig.
func (g *globals) completeFlags(root *cobra.Command) {
	fromKubeconfig := func(names func() []string) cobra.CompletionFunc {
		return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return prefixed(names(), toComplete), cobra.ShellCompDirectiveNoFileComp
		}
	}
	raw := func() (names struct{ contexts, clusters, users []string }) {
		cfg, err := g.config.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return names
		}
		for n := range cfg.Contexts {
			names.contexts = append(names.contexts, n)
		}
		for n := range cfg.Clusters {
			names.clusters = append(names.clusters, n)
		}
		for n := range cfg.AuthInfos {
			names.users = append(names.users, n)
		}
		return names
	}
	must(root.RegisterFlagCompletionFunc("context", fromKubeconfig(func() []string { return raw().contexts })))
	must(root.RegisterFlagCompletionFunc("cluster", fromKubeconfig(func() []string { return raw().clusters })))
	must(root.RegisterFlagCompletionFunc("user", fromKubeconfig(func() []string { return raw().users })))
	must(root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cl, _, err := g.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		var list corev1.NamespaceList
		if err := cl.List(ctx, &list); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, ns := range list.Items {
			names = append(names, ns.Name)
		}
		return prefixed(names, toComplete), cobra.ShellCompDirectiveNoFileComp
	}))
}

// completeOutput completes -o with the formats that take no argument.
func completeOutput(cmd *cobra.Command, formats ...string) {
	must(cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp)))
}

// prefixed is those of names that start with prefix, sorted.
func prefixed(names []string, prefix string) []cobra.Completion {
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// must panics on an error that only a mistake in this package makes.
func must(err error) {
	if err != nil {
		panic(err)
	}
}

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
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

func newGetCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get [NAME...]",
		Short: "List TrainJobs with their state, deadline and deletion time",
		Long: `List TrainJobs: their state, when they started, when their active deadline
falls (DEADLINE IN) and when they will be deleted (DELETED IN), by their own
ttlSecondsAfterFinished or by the manager's retention policy, whichever applies.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cl, ns, err := g.client()
			if err != nil {
				return err
			}
			retention, err := g.retention(ctx, cl)
			if err != nil {
				return err
			}
			tjs, err := listTrainJobs(ctx, cl, ns, g.allNamespaces, args)
			if err != nil {
				return err
			}
			if len(tjs) == 0 {
				where := "in namespace " + ns
				if g.allNamespaces {
					where = "in any namespace"
				}
				fmt.Fprintf(g.out, "No TrainJobs %s.\n", where)
				return nil
			}
			return printTable(g.out, tjs, retention, g.allNamespaces, g.now())
		},
	}
}

func listTrainJobs(ctx context.Context, cl client.Client, ns string, all bool, names []string) ([]trainer.TrainJob, error) {
	var list trainer.TrainJobList
	var opts []client.ListOption
	if !all {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := cl.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing TrainJobs: %w", err)
	}
	items := list.Items
	if len(names) > 0 {
		items = slices.DeleteFunc(items, func(tj trainer.TrainJob) bool { return !slices.Contains(names, tj.Name) })
		if len(items) < len(names) {
			var missing []string
			for _, n := range names {
				if !slices.ContainsFunc(items, func(tj trainer.TrainJob) bool { return tj.Name == n }) {
					missing = append(missing, n)
				}
			}
			return nil, fmt.Errorf("TrainJob %s not found in namespace %s", strings.Join(missing, ", "), ns)
		}
	}
	slices.SortFunc(items, func(a, b trainer.TrainJob) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return items, nil
}

func printTable(out io.Writer, tjs []trainer.TrainJob, retention *configv1alpha1.TrainJobRetentionPolicy, withNamespace bool, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	header := "NAME\tSTATE\tNODES\tSTARTED\tDEADLINE IN\tDELETED IN\tAGE"
	if withNamespace {
		header = "NAMESPACE\t" + header
	}
	fmt.Fprintln(w, header)
	for i := range tjs {
		tj := &tjs[i]
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", tj.Name, state(tj), nodes(tj),
			agoOrDash(tj, now), deadlineIn(tj, now), deletedIn(tj, retention, now), ago(&tj.CreationTimestamp, now))
		if withNamespace {
			row = tj.Namespace + "\t" + row
		}
		fmt.Fprintln(w, row)
	}
	return w.Flush()
}

func agoOrDash(tj *trainer.TrainJob, now time.Time) string {
	if tj.Status.StartTime == nil {
		return "-"
	}
	return ago(tj.Status.StartTime, now) + " ago"
}

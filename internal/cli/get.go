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
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
)

func newGetCommand(g *globals) *cobra.Command {
	var (
		out                 *output
		selector            string
		watching, onlyWatch bool
		timeout             time.Duration
	)
	cmd := &cobra.Command{
		Use:   "get [NAME...]",
		Short: "List TrainJobs with their state, deadline and deletion time",
		Long: `List TrainJobs: their state, when they started, when their active deadline
falls (DEADLINE IN) and when they will be deleted (DELETED IN), by their own
ttlSecondsAfterFinished or by the manager's retention policy, whichever applies.
-o wide adds the runtime, the restarts and the Kueue queue.

-o json, yaml, name, jsonpath=..., go-template=... print the TrainJobs as
kubectl get does: the object for one NAME, a List of them otherwise.

--watch prints them, then a row (or an object) each time one changes, until
interrupted or --timeout passes.`,
		Example: `  trainctl get
  trainctl get -A -l team=nlp -o wide
  trainctl get my-job -o yaml
  trainctl get -o jsonpath='{.items[*].status.state}'
  trainctl get -o custom-columns=NAME:.metadata.name,STATE:.status.state
  trainctl get --watch`,
		ValidArgsFunction: g.completeTrainJobs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var p printers.ResourcePrinter
			if !out.table() {
				var err error
				if p, err = out.printer(); err != nil {
					return err
				}
			}
			sel, err := labels.Parse(selector)
			if err != nil {
				return fmt.Errorf("--selector: %w", err)
			}
			cl, ns, err := g.client()
			if err != nil {
				return err
			}
			s := scope{namespace: ns, all: g.allNamespaces, selector: sel, names: args}
			var t *table
			if p == nil {
				retention, err := g.retention(ctx, cl)
				if err != nil {
					return err
				}
				t = &table{rows: rows{out: g.out}, retention: retention, namespace: g.allNamespaces,
					wide: out.format() == outputWide, noHeaders: out.noHeaders}
			}
			if watching || onlyWatch {
				return g.watchTrainJobs(ctx, cl, s, t, p, onlyWatch, timeout)
			}
			tjs, _, err := listTrainJobs(ctx, cl, s)
			if err != nil {
				return err
			}
			if err := s.missing(tjs); err != nil {
				return err
			}
			switch {
			case p != nil:
				return out.print(p, trainJobObjects(tjs), len(args) == 1, g.out)
			case len(tjs) == 0:
				_, err := fmt.Fprintf(g.out, "No TrainJobs %s.\n", s.where())
				return err
			}
			if !g.allNamespaces {
				t.clusters = workerClusters(ctx, cl, ns, tjs)
			}
			return t.print(tjs, g.now())
		},
	}
	out = addOutputFlags(cmd, "a table of their state, deadline and deletion time", true)
	f := cmd.Flags()
	f.StringVarP(&selector, "selector", "l", "", "Label selector (key=value, key in (a,b), !key, ...) the TrainJobs must match")
	f.BoolVarP(&watching, "watch", "w", false, "After listing them, print the TrainJobs again as they change")
	f.BoolVar(&onlyWatch, "watch-only", false, "Print the TrainJobs as they change, without listing them first")
	f.DurationVar(&timeout, "timeout", 0, "With --watch: how long to watch (0: until interrupted)")
	return cmd
}

// watchTrainJobs prints the TrainJobs of s (unless only, changes only) and
// then each change to one of them, with t, or p if t is nil, until ctx ends
// or timeout passes, as kubectl get --watch.
func (g *globals) watchTrainJobs(ctx context.Context, cl client.WithWatch, s scope, t *table, p printers.ResourcePrinter, only bool, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	show := func(tjs []trainer.TrainJob) error {
		if t != nil {
			return t.print(tjs, g.now())
		}
		for i := range tjs {
			if err := p.PrintObj(typed(&tjs[i]), g.out); err != nil {
				return err
			}
		}
		return nil
	}
	first := true
	err := follow(ctx, cl, s, func(tjs []trainer.TrainJob) (bool, error) {
		if first {
			first = false
			if err := s.missing(tjs); err != nil {
				return true, err
			}
			if only {
				return false, nil
			}
		}
		return false, show(tjs)
	}, func(_ watch.EventType, tj *trainer.TrainJob) (bool, error) {
		return false, show([]trainer.TrainJob{*tj})
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil // interrupted, or the time asked for is up
	}
	return err
}

// scope is which TrainJobs a command reads.
type scope struct {
	namespace string
	all       bool // every namespace
	selector  labels.Selector
	names     []string // none: any
}

func (s scope) listOptions() []client.ListOption {
	var opts []client.ListOption
	if !s.all {
		opts = append(opts, client.InNamespace(s.namespace))
	}
	if s.selector != nil && !s.selector.Empty() {
		opts = append(opts, client.MatchingLabelsSelector{Selector: s.selector})
	}
	return opts
}

// has says whether tj is one of s: what a watch sends is filtered here
// too, as the server may not.
func (s scope) has(tj *trainer.TrainJob) bool {
	return (s.all || tj.Namespace == s.namespace) &&
		(s.selector == nil || s.selector.Matches(labels.Set(tj.Labels))) &&
		(len(s.names) == 0 || slices.Contains(s.names, tj.Name))
}

// where says where s looks.
func (s scope) where() string {
	if s.all {
		return "in any namespace"
	}
	return "in namespace " + s.namespace
}

// missing fails naming those of s' names that tjs lacks.
func (s scope) missing(tjs []trainer.TrainJob) error {
	var missing []string
	for _, n := range s.names {
		if !slices.ContainsFunc(tjs, func(tj trainer.TrainJob) bool { return tj.Name == n }) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("TrainJob %s not found %s", strings.Join(missing, ", "), s.where())
	}
	return nil
}

// listTrainJobs lists the TrainJobs of s, sorted, and the list's
// resourceVersion.
func listTrainJobs(ctx context.Context, cl client.Client, s scope) ([]trainer.TrainJob, string, error) {
	var list trainer.TrainJobList
	if err := cl.List(ctx, &list, s.listOptions()...); err != nil {
		return nil, "", fmt.Errorf("listing TrainJobs: %w", err)
	}
	items := slices.DeleteFunc(list.Items, func(tj trainer.TrainJob) bool { return !s.has(&tj) })
	slices.SortFunc(items, func(a, b trainer.TrainJob) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return items, list.ResourceVersion, nil
}

// table prints TrainJobs a row each, as trainctl get does by default.
type table struct {
	rows      rows
	retention *configv1alpha1.TrainJobRetentionPolicy
	// clusters are the worker clusters of TrainJobs MultiKueue dispatched
	// (workerClusters), shown with their state.
	clusters  map[types.UID]string
	namespace bool // a NAMESPACE column first
	wide      bool // the runtime, restarts and queue too
	noHeaders bool
	headed    bool
}

func printTable(out io.Writer, tjs []trainer.TrainJob, retention *configv1alpha1.TrainJobRetentionPolicy, clusters map[types.UID]string, withNamespace bool, now time.Time) error {
	t := &table{rows: rows{out: out}, retention: retention, clusters: clusters, namespace: withNamespace}
	return t.print(tjs, now)
}

// print prints a row for each of tjs, under the header the first time.
func (t *table) print(tjs []trainer.TrainJob, now time.Time) error {
	var cells [][]string
	if !t.headed && !t.noHeaders {
		cells = append(cells, t.row("NAMESPACE", []string{"NAME", "STATE", "NODES", "PROGRESS", "ETA", "STARTED", "DEADLINE IN", "DELETED IN", "AGE"},
			"RUNTIME", "RESTARTS", "QUEUE"))
	}
	t.headed = true
	for i := range tjs {
		tj := &tjs[i]
		queue := tj.Labels[trainer.KueueQueueNameLabel]
		if queue == "" {
			queue = "-"
		}
		cells = append(cells, t.row(tj.Namespace,
			[]string{tj.Name, stateOn(tj, t.clusters), nodes(tj), progress(tj), eta(tj, now), agoOrDash(tj, now), deadlineIn(tj, now), deletedIn(tj, t.retention, now), ago(&tj.CreationTimestamp, now)},
			jobplan.KindOf(tj)+"/"+tj.Spec.RuntimeRef.Name, fmt.Sprint(tj.Status.Restarts), queue))
	}
	return t.rows.print(cells...)
}

// row is the cells of a row: namespace, if shown, then cells, then wide's
// if wide.
func (t *table) row(namespace string, cells []string, wide ...string) []string {
	var row []string
	if t.namespace {
		row = append(row, namespace)
	}
	row = append(row, cells...)
	if t.wide {
		row = append(row, wide...)
	}
	return row
}

func agoOrDash(tj *trainer.TrainJob, now time.Time) string {
	if tj.Status.StartTime == nil {
		return "-"
	}
	return ago(tj.Status.StartTime, now) + " ago"
}

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
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/jsonpath"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

// defaultWaitTimeout is kubectl wait's.
const defaultWaitTimeout = 30 * time.Second

func newWaitCommand(g *globals) *cobra.Command {
	var (
		forArg, selector string
		all              bool
		timeout          = defaultWaitTimeout
	)
	cmd := &cobra.Command{
		Use:   "wait ([NAME...] | -l SELECTOR | --all) --for=CONDITION",
		Short: "Wait until TrainJobs are complete, failed, running, or meet another condition",
		Long: `Wait until each TrainJob named (or each matching -l, or every one with --all
or -A) meets the condition of --for, as kubectl wait does, and print
trainjob.trainer.kubeflow.org/NAME condition met for each:

  --for=condition=TYPE[=VALUE]  a condition of status.conditions (Complete,
                                Failed, Suspended, Created or any other)
                                has status VALUE: True unless given
  --for=running                 its state (status.state, as trainctl get
                                shows it) is Running
  --for=state=STATE             its state is STATE: Created, Running,
                                Suspending, Suspended, Complete or Failed
  --for=jsonpath=JSONPATH[=VALUE]
                                the field at JSONPATH has VALUE, or exists
  --for=delete                  it is deleted

It exits with status 1, saying which are not there yet, once --timeout has
passed (0: look once; negative: wait on), or when one is deleted while
waited for.`,
		Example: `  trainctl wait my-job --for=condition=Complete --timeout=1h
  trainctl wait -l team=nlp --for=running
  trainctl wait my-job --for=condition=Suspended=false
  trainctl wait my-job --for=jsonpath='{.status.jobsStatus[0].active}'=2`,
		ValidArgsFunction: g.completeTrainJobs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if forArg == "" {
				return errors.New("--for is required: condition=TYPE[=VALUE], running, state=STATE, jsonpath=JSONPATH[=VALUE] or delete")
			}
			cond, err := parseFor(forArg)
			if err != nil {
				return err
			}
			sel, err := labels.Parse(selector)
			if err != nil {
				return fmt.Errorf("--selector: %w", err)
			}
			if len(args) == 0 && sel.Empty() && !all && !g.allNamespaces {
				return errors.New("name the TrainJobs to wait for, or select them with -l, --all or -A")
			}
			cl, ns, err := g.client()
			if err != nil {
				return err
			}
			w := &waiter{g: g, cond: cond, scope: scope{namespace: ns, all: g.allNamespaces, selector: sel, names: args}, timeout: timeout}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			err = follow(ctx, cl, w.scope, w.listed, w.changed)
			switch {
			case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errLookedOnce):
				return w.timedOut()
			case errors.Is(err, context.Canceled):
				return fmt.Errorf("interrupted while waiting for %s", w.left())
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&forArg, "for", "", "The condition to wait for: condition=TYPE[=VALUE], running, state=STATE, jsonpath=JSONPATH[=VALUE] or delete")
	f.DurationVar(&timeout, "timeout", defaultWaitTimeout, "How long to wait for all of them before giving up (0: look once; negative: no limit)")
	f.StringVarP(&selector, "selector", "l", "", "Label selector of the TrainJobs to wait for")
	f.BoolVar(&all, "all", false, "Wait for every TrainJob of the namespace")
	return cmd
}

// errLookedOnce ends a wait with --timeout=0 after the first look.
var errLookedOnce = errors.New("looked once")

// waiter waits for the TrainJobs of scope to meet cond.
type waiter struct {
	g       *globals
	cond    *condition
	scope   scope
	timeout time.Duration
	// pending are the TrainJobs waited for that do not meet cond yet, as
	// last seen; nil before the first list.
	pending map[string]*trainer.TrainJob
}

func key(tj *trainer.TrainJob) string { return tj.Namespace + "/" + tj.Name }

// listed takes the TrainJobs of the scope: the first time, those to wait
// for; after, what became of them.
func (w *waiter) listed(tjs []trainer.TrainJob) (bool, error) {
	first := w.pending == nil
	if first {
		if err := w.scope.missing(tjs); err != nil && !w.cond.deleted {
			return true, err
		}
		for _, n := range w.scope.names {
			if !slices.ContainsFunc(tjs, func(tj trainer.TrainJob) bool { return tj.Name == n }) {
				if err := w.met(n); err != nil { // deleted already
					return true, err
				}
			}
		}
		if len(tjs) == 0 && len(w.scope.names) == 0 && !w.cond.deleted {
			return true, fmt.Errorf("no TrainJobs %s to wait for", w.scope.where())
		}
		w.pending = map[string]*trainer.TrainJob{}
		for i := range tjs {
			w.pending[key(&tjs[i])] = &tjs[i]
		}
	}
	present := map[string]bool{}
	for i := range tjs {
		tj := &tjs[i]
		present[key(tj)] = true
		if _, waited := w.pending[key(tj)]; waited {
			if err := w.seen(watch.Modified, tj); err != nil {
				return true, err
			}
		}
	}
	for k, tj := range w.pending {
		if !present[k] {
			if err := w.seen(watch.Deleted, tj); err != nil {
				return true, err
			}
		}
	}
	if len(w.pending) == 0 {
		return true, nil
	}
	if w.timeout == 0 {
		return true, errLookedOnce
	}
	return false, nil
}

func (w *waiter) changed(ev watch.EventType, tj *trainer.TrainJob) (bool, error) {
	if _, waited := w.pending[key(tj)]; !waited {
		return false, nil
	}
	if err := w.seen(ev, tj); err != nil {
		return true, err
	}
	return len(w.pending) == 0, nil
}

// seen takes what became of a TrainJob waited for: it meets the condition
// or not yet, or it was deleted.
func (w *waiter) seen(ev watch.EventType, tj *trainer.TrainJob) error {
	k := key(tj)
	switch {
	case ev == watch.Deleted && !w.cond.deleted:
		return fmt.Errorf("TrainJob %s was deleted while waiting for %s", k, w.cond.what)
	case ev == watch.Deleted:
	case w.cond.deleted:
		w.pending[k] = tj
		return nil
	default:
		met, err := w.cond.met(tj)
		if err != nil {
			return fmt.Errorf("TrainJob %s: %w", k, err)
		}
		if !met {
			w.pending[k] = tj
			return nil
		}
	}
	delete(w.pending, k)
	return w.met(tj.Name)
}

// met says that the TrainJob name meets the condition, as kubectl wait
// says it.
func (w *waiter) met(name string) error {
	_, err := fmt.Fprintf(w.g.out, "trainjob.%s/%s condition met\n", trainer.GroupVersion.Group, name)
	return err
}

// left says which TrainJobs do not meet the condition yet, and how they are.
func (w *waiter) left() string {
	keys := make([]string, 0, len(w.pending))
	for k := range w.pending {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s of ", w.cond.what)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		tj := w.pending[k]
		fmt.Fprintf(&b, "TrainJob %s (%s)", k, state(tj))
	}
	return b.String()
}

func (w *waiter) timedOut() error {
	if w.timeout <= 0 {
		return fmt.Errorf("not met: %s", w.left())
	}
	return fmt.Errorf("timed out after %s waiting for %s", w.timeout, w.left())
}

// condition is what --for waits for.
type condition struct {
	// what says it in words.
	what string
	// deleted: the TrainJob is deleted; met is not asked.
	deleted bool
	met     func(*trainer.TrainJob) (bool, error)
}

// parseFor reads --for.
func parseFor(s string) (*condition, error) {
	kind, arg, _ := strings.Cut(s, "=")
	switch strings.ToLower(kind) {
	case "delete":
		return &condition{what: "deletion", deleted: true}, nil
	case "running":
		return stateCondition(trainer.TrainJobStateRunning), nil
	case "state":
		states := []string{trainer.TrainJobStateCreated, trainer.TrainJobStateRunning, trainer.TrainJobStateSuspending,
			trainer.TrainJobStateSuspended, trainer.TrainJobStateComplete, trainer.TrainJobStateFailed}
		i := slices.IndexFunc(states, func(st string) bool { return strings.EqualFold(st, arg) })
		if i < 0 {
			return nil, fmt.Errorf("--for=%s: want state=%s", s, strings.Join(states, "|"))
		}
		return stateCondition(states[i]), nil
	case "condition":
		typ, value, hasValue := strings.Cut(arg, "=")
		if !hasValue {
			value = "True"
		}
		if typ == "" || value == "" {
			return nil, fmt.Errorf("--for=%s: want condition=TYPE or condition=TYPE=VALUE", s)
		}
		return &condition{
			what: fmt.Sprintf("condition %s=%s", typ, value),
			met: func(tj *trainer.TrainJob) (bool, error) {
				i := slices.IndexFunc(tj.Status.Conditions, func(c metav1.Condition) bool { return strings.EqualFold(c.Type, typ) })
				return i >= 0 && strings.EqualFold(string(tj.Status.Conditions[i].Status), value), nil
			},
		}, nil
	case "jsonpath":
		return jsonPathCondition(s, arg)
	}
	return nil, fmt.Errorf("--for=%s: want condition=TYPE[=VALUE], running, state=STATE, jsonpath=JSONPATH[=VALUE] or delete", s)
}

func stateCondition(want string) *condition {
	return &condition{
		what: "state " + want,
		met: func(tj *trainer.TrainJob) (bool, error) {
			got := lifecycle.State(tj)
			if lifecycle.ManagedElsewhere(tj) {
				got = tj.Status.State // as the controller that manages it wrote it
			}
			return got == want, nil
		},
	}
}

// jsonPathCondition is --for=jsonpath=PATH[=VALUE]: PATH in braces, or in
// kubectl's relaxed form (.a.b).
func jsonPathCondition(s, arg string) (*condition, error) {
	var path, value string
	var hasValue bool
	if strings.HasPrefix(arg, "{") {
		end := strings.LastIndex(arg, "}")
		if end < 0 {
			return nil, fmt.Errorf("--for=%s: unclosed {", s)
		}
		path, value = arg[:end+1], arg[end+1:]
		if value != "" {
			if value, hasValue = strings.CutPrefix(value, "="); !hasValue {
				return nil, fmt.Errorf("--for=%s: want jsonpath={PATH}=VALUE", s)
			}
		}
	} else {
		path, value, hasValue = strings.Cut(arg, "=")
		path = "{." + strings.TrimPrefix(path, ".") + "}"
	}
	if path == "{.}" || path == "{}" {
		return nil, fmt.Errorf("--for=%s: no JSONPath", s)
	}
	jp := jsonpath.New("for").AllowMissingKeys(true)
	if err := jp.Parse(path); err != nil {
		return nil, fmt.Errorf("--for=%s: %w", s, err)
	}
	what := "jsonpath " + path
	if hasValue {
		what += "=" + value
	}
	return &condition{
		what: what,
		met: func(tj *trainer.TrainJob) (bool, error) {
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
			if err != nil {
				return false, err
			}
			results, err := jp.FindResults(content)
			if err != nil {
				return false, err
			}
			var values []string
			for _, vs := range results {
				for _, v := range vs {
					values = append(values, fmt.Sprint(printable(v)))
				}
			}
			switch {
			case len(values) > 1:
				return false, fmt.Errorf("%s matches %d values, want one", path, len(values))
			case len(values) == 0:
				return false, nil
			case !hasValue:
				return true, nil
			}
			return values[0] == value, nil
		},
	}, nil
}

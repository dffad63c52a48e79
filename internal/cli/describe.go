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
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

func newDescribeCommand(g *globals) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show the timeline of a TrainJob, its Jobs and Pods, and its events",
		Long: `Show a TrainJob: its state, when its active deadline falls and when it will
be deleted, its timeline, its Jobs, Pods and events.

-o json, yaml, jsonpath=..., go-template=..., custom-columns=... print the
same as one object, which decodes back:

  apiVersion: ` + descriptionGroupVersion.String() + `
  kind: ` + descriptionKind + `
  trainJob:        the TrainJob as stored, with its apiVersion and kind
  state:           its state, as trainctl get shows it
  activeDeadline:  when its active deadline falls, while it runs
  deadlinePaused:  true while it is suspended with a deadline
  deletion:        {at, policy}: when it will be deleted, by which rule
  timeline:        [{at, what, upcoming}], in time order
  jobs, pods, events: its Jobs, Pods and events, as stored

-o name prints the TrainJob's name as kubectl does.`,
		Example: `  trainctl describe my-job
  trainctl describe my-job -o yaml
  trainctl describe my-job -o jsonpath='{.deletion.at}'`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeTrainJobs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var p printers.ResourcePrinter
			if out.format() != "" || !out.table() {
				var err error
				if p, err = out.printer(); err != nil {
					return err
				}
			}
			cl, ns, err := g.client()
			if err != nil {
				return err
			}
			retention, err := g.retention(ctx, cl)
			if err != nil {
				return err
			}
			var tj trainer.TrainJob
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, &tj); err != nil {
				return fmt.Errorf("TrainJob %s/%s: %w", ns, args[0], err)
			}
			if out.format() == "name" {
				return p.PrintObj(typed(&tj), g.out)
			}
			d, err := gather(ctx, cl, &tj)
			if err != nil {
				return err
			}
			if p != nil {
				return p.PrintObj(d.object(retention, g.now()), g.out)
			}
			return d.print(g.out, retention, g.now())
		},
	}
	out = addOutputFlags(cmd, "the TrainJob's timeline, Jobs, Pods and events", false)
	return cmd
}

// description is what describe shows of a TrainJob.
type description struct {
	tj     *trainer.TrainJob
	jobs   []batchv1.Job
	pods   []corev1.Pod
	events []corev1.Event
}

func gather(ctx context.Context, cl client.Client, tj *trainer.TrainJob) (*description, error) {
	d := &description{tj: tj}
	owned := client.MatchingLabels{trainer.TrainJobNameLabel: tj.Name}
	var jobs batchv1.JobList
	if err := cl.List(ctx, &jobs, client.InNamespace(tj.Namespace), owned); err != nil {
		return nil, fmt.Errorf("listing Jobs: %w", err)
	}
	var pods corev1.PodList
	if err := cl.List(ctx, &pods, client.InNamespace(tj.Namespace), owned); err != nil {
		return nil, fmt.Errorf("listing Pods: %w", err)
	}
	var events corev1.EventList
	if err := cl.List(ctx, &events, client.InNamespace(tj.Namespace), client.MatchingFields{
		"involvedObject.kind": trainer.TrainJobKind, "involvedObject.name": tj.Name,
	}); err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	d.jobs, d.pods = jobs.Items, pods.Items
	for _, e := range events.Items {
		if e.InvolvedObject.UID == tj.UID {
			d.events = append(d.events, e)
		}
	}
	slices.SortStableFunc(d.events, func(a, b corev1.Event) int { return eventTime(&a).Compare(eventTime(&b)) })
	slices.SortFunc(d.jobs, func(a, b batchv1.Job) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(d.pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return d, nil
}

// eventTime is when an event last happened.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// moment is one line of the timeline.
type moment struct {
	at   time.Time
	what string
}

func (d *description) timeline(retention *configv1alpha1.TrainJobRetentionPolicy, now time.Time) []moment {
	tj := d.tj
	ms := []moment{{tj.CreationTimestamp.Time, "created"}}
	for _, e := range d.events {
		ms = append(ms, moment{eventTime(&e), e.Reason + ": " + e.Message})
	}
	if tj.Status.StartTime != nil {
		ms = append(ms, moment{tj.Status.StartTime.Time, "started (startTime: the active deadline counts from here)"})
	}
	if c := tj.FinishedCondition(); c != nil && !slices.ContainsFunc(d.events, func(e corev1.Event) bool { return e.Reason == c.Reason || e.Reason == "Completed" }) {
		ms = append(ms, moment{c.LastTransitionTime.Time, fmt.Sprintf("finished: %s (%s) %s", c.Type, c.Reason, c.Message)})
	}
	if due, ok := lifecycle.ActiveDeadline(tj); ok {
		ms = append(ms, moment{due, fmt.Sprintf("active deadline (%ds), in %s", *tj.Spec.ActiveDeadlineSeconds, until(due, now))})
	}
	if exp := lifecycle.ExpiryOf(tj, retention); exp != nil {
		ms = append(ms, moment{exp.At, fmt.Sprintf("deletion due (%s), in %s", exp.Policy, until(exp.At, now))})
	}
	if tj.DeletionTimestamp != nil {
		ms = append(ms, moment{tj.DeletionTimestamp.Time, "deletion requested"})
	}
	slices.SortStableFunc(ms, func(a, b moment) int { return a.at.Compare(b.at) })
	return ms
}

func (d *description) print(out io.Writer, retention *configv1alpha1.TrainJobRetentionPolicy, now time.Time) error {
	tj := d.tj
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "Name:\t%s\n", tj.Name)
	fmt.Fprintf(w, "Namespace:\t%s\n", tj.Namespace)
	fmt.Fprintf(w, "Runtime:\t%s/%s\n", jobplan.KindOf(tj), tj.Spec.RuntimeRef.Name)
	fmt.Fprintf(w, "State:\t%s\n", state(tj))
	fmt.Fprintf(w, "Nodes:\t%s\n", nodes(tj))
	fmt.Fprintf(w, "Deadline in:\t%s\n", deadlineIn(tj, now))
	fmt.Fprintf(w, "Deleted in:\t%s\n", deletedIn(tj, retention, now))
	if p := tj.Status.FailurePolicy; p != nil {
		fmt.Fprintf(w, "Restarts:\t%d (%d of maxRestarts %d counted)\n", tj.Status.Restarts, tj.Status.RestartsCountTowardsMax, p.MaxRestarts)
	}
	if ts := tj.Status.TrainerStatus; ts != nil {
		fmt.Fprintf(w, "Progress:\t%s, ETA %s (reported %s ago)\n", progress(tj), eta(tj, now), ago(&ts.LastUpdatedTime, now))
		for _, m := range ts.Metrics {
			fmt.Fprintf(w, "Metric:\t%s = %s\n", m.Name, m.Value)
		}
	}
	for _, c := range tj.Status.Conditions {
		fmt.Fprintf(w, "Condition:\t%s=%s (%s) %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(out, "\nTimeline:")
	for _, m := range d.timeline(retention, now) {
		mark := " "
		if m.at.After(now) {
			mark = ">" // still to come
		}
		fmt.Fprintf(out, " %s %s  %s\n", mark, m.at.Local().Format("2006-01-02 15:04:05"), m.what)
	}

	fmt.Fprintln(out, "\nJobs:")
	if len(d.jobs) == 0 {
		fmt.Fprintln(out, "  none")
	} else {
		w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  NAME\tCOMPLETIONS\tACTIVE\tSUCCEEDED\tFAILED\tSUSPENDED\tSTATUS")
		for _, j := range d.jobs {
			fmt.Fprintf(w, "  %s\t%d\t%d\t%d\t%d\t%t\t%s\n", j.Name, ptr.Deref(j.Spec.Completions, 1), j.Status.Active,
				j.Status.Succeeded, j.Status.Failed, ptr.Deref(j.Spec.Suspend, false), jobStatus(&j))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(out, "\nPods:")
	if len(d.pods) == 0 {
		fmt.Fprintln(out, "  none")
	} else {
		w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "  NAME\tPHASE\tNODE\tSTARTED")
		for _, p := range d.pods {
			phase := string(p.Status.Phase)
			if p.DeletionTimestamp != nil {
				phase += " (terminating)"
			}
			fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", p.Name, phase, p.Spec.NodeName, ago(p.Status.StartTime, now))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintln(out, "\nEvents:")
	if len(d.events) == 0 {
		fmt.Fprintln(out, "  none")
		return nil
	}
	recent := d.events[max(0, len(d.events)-10):]
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "  AGE\tTYPE\tREASON\tMESSAGE")
	for _, e := range recent {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", ago(&metav1.Time{Time: eventTime(&e)}, now), e.Type, e.Reason, e.Message)
	}
	return w.Flush()
}

func jobStatus(j *batchv1.Job) string {
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed || c.Type == batchv1.JobSuspended) {
			if c.Reason != "" {
				return fmt.Sprintf("%s (%s)", c.Type, c.Reason)
			}
			return string(c.Type)
		}
	}
	return "Running"
}

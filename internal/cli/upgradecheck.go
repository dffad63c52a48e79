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
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

// The upgrade check reads a cluster that runs Kubeflow Trainer and says
// what trainjob-operator, once in its place, would do with each TrainJob
// and runtime: the controller's own rules, applied to what is there now.
// It writes nothing.

// jobSetKind is the JobSet of JobSet v0.12, which Kubeflow Trainer v2.3
// runs a TrainJob as.
var jobSetKind = schema.GroupVersionKind{Group: "jobset.x-k8s.io", Version: "v1alpha2", Kind: "JobSet"}

// Verdicts of the upgrade check.
const (
	verdictRuns      = "runs"
	verdictWaits     = "waits"
	verdictKept      = "kept"
	verdictLeftAlone = "left alone"
	verdictCannotRun = "cannot run"
	verdictRemove    = "remove"
)

// finding is what the check says of one TrainJob or runtime.
type finding struct {
	namespace, kind, name string
	now                   string
	verdict, why          string
}

func newUpgradeCheckCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "upgrade-check",
		Short: "Read-only: what switching from Kubeflow Trainer to trainjob-operator would do to each TrainJob and runtime",
		Long: `Read the TrainJobs, runtimes, JobSets, Jobs and Services of every namespace,
and say what trainjob-operator, in Kubeflow Trainer's place, would do with
each TrainJob and runtime, and why:

  runs        its Jobs are created (suspended ones, suspended)
  waits       Jobs or a Service of its names exist and are not its own (a
              JobSet's, when Kubeflow Trainer runs it): it creates nothing
              until they are gone (Created=False, NameTaken)
  kept        finished: its TTL or the retention policy deletes it
  left alone  another controller manages it (spec.managedBy)
  cannot run  its runtime is missing or cannot run it here (Created=False);
              or, for a runtime, no TrainJob can run on it
  remove      a webhook configuration of another controller for TrainJobs
              or runtimes (Kubeflow Trainer's): delete it when that
              controller stops, or the API server refuses their writes

and which fields of a TrainJob or runtime trainjob-operator's API drops.
Nothing is written. It exits with status 1 if something cannot run, or if
the check itself fails (its message says which).
It ignores --namespace: a switch is cluster-wide. See docs/install.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, _, err := g.client()
			if err != nil {
				return err
			}
			findings, err := upgradeCheck(cmd.Context(), cl)
			if err != nil {
				return err
			}
			printFindings(g.out, findings)
			for _, f := range findings {
				if f.verdict == verdictCannotRun {
					return errCannotRun
				}
			}
			return nil
		},
	}
}

var errCannotRun = errors.New("some TrainJobs or runtimes cannot run under trainjob-operator: see above")

// upgradeCheck is the check's findings: the runtimes, then the TrainJobs,
// in namespace and name order.
func upgradeCheck(ctx context.Context, cl client.Client) ([]finding, error) {
	var findings []finding
	for _, kind := range []string{trainer.ClusterTrainingRuntimeKind, trainer.TrainingRuntimeKind} {
		objs, err := listUnstructured(ctx, cl, trainer.GroupVersion.WithKind(kind))
		if err != nil {
			return nil, err
		}
		for _, obj := range objs {
			findings = append(findings, checkRuntime(&obj))
		}
	}
	webhooks, err := foreignWebhooks(ctx, cl)
	if err != nil {
		return nil, err
	}
	findings = append(findings, webhooks...)
	trainJobs, err := listUnstructured(ctx, cl, trainer.GroupVersion.WithKind(trainer.TrainJobKind))
	if err != nil {
		return nil, err
	}
	jobSets, err := listUnstructured(ctx, cl, jobSetKind)
	if meta.IsNoMatchError(err) {
		jobSets, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	jobSetOf := map[string]*unstructured.Unstructured{}
	for i := range jobSets {
		if ref := metav1.GetControllerOf(&jobSets[i]); ref != nil && ref.Kind == trainer.TrainJobKind {
			jobSetOf[string(ref.UID)] = &jobSets[i]
		}
	}
	for i := range trainJobs {
		f, err := checkTrainJob(ctx, cl, &trainJobs[i], jobSetOf[string(trainJobs[i].GetUID())])
		if err != nil {
			return nil, err
		}
		findings = append(findings, f)
	}
	return findings, nil
}

func listUnstructured(ctx context.Context, cl client.Client, gvk schema.GroupVersionKind) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := cl.List(ctx, list); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, err
		}
		return nil, fmt.Errorf("listing %ss: %w", gvk.Kind, err)
	}
	items := list.Items
	sort.Slice(items, func(i, j int) bool {
		if items[i].GetNamespace() != items[j].GetNamespace() {
			return items[i].GetNamespace() < items[j].GetNamespace()
		}
		return items[i].GetName() < items[j].GetName()
	})
	return items, nil
}

// ownWebhookConfiguration is the name of trainjob-operator's webhook
// configurations.
const ownWebhookConfiguration = "trainjob-operator"

// foreignWebhooks are the webhook configurations, not trainjob-operator's,
// with a webhook for the kinds of trainer.kubeflow.org.
func foreignWebhooks(ctx context.Context, cl client.Client) ([]finding, error) {
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := cl.List(ctx, &validating); err != nil {
		return nil, fmt.Errorf("listing ValidatingWebhookConfigurations: %w", err)
	}
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	if err := cl.List(ctx, &mutating); err != nil {
		return nil, fmt.Errorf("listing MutatingWebhookConfigurations: %w", err)
	}
	type webhook struct {
		rules         []admissionregistrationv1.RuleWithOperations
		failurePolicy *admissionregistrationv1.FailurePolicyType
	}
	configs := map[string][]webhook{}
	for _, c := range validating.Items {
		for _, w := range c.Webhooks {
			configs["ValidatingWebhookConfiguration/"+c.Name] = append(configs["ValidatingWebhookConfiguration/"+c.Name], webhook{w.Rules, w.FailurePolicy})
		}
	}
	for _, c := range mutating.Items {
		for _, w := range c.Webhooks {
			configs["MutatingWebhookConfiguration/"+c.Name] = append(configs["MutatingWebhookConfiguration/"+c.Name], webhook{w.Rules, w.FailurePolicy})
		}
	}
	var findings []finding
	for _, key := range slices.Sorted(maps.Keys(configs)) {
		kind, name, _ := strings.Cut(key, "/")
		if name == ownWebhookConfiguration {
			continue
		}
		seen, failClosed := false, false
		for _, w := range configs[key] {
			if slices.ContainsFunc(w.rules, func(r admissionregistrationv1.RuleWithOperations) bool {
				return slices.Contains(r.APIGroups, trainer.GroupVersion.Group)
			}) {
				seen = true
				failClosed = failClosed || ptr.Deref(w.failurePolicy, admissionregistrationv1.Fail) == admissionregistrationv1.Fail
			}
		}
		if !seen {
			continue
		}
		why := "another controller's webhooks for TrainJobs or runtimes: delete it when that controller stops"
		if failClosed {
			why += " (they fail closed: until then the API server refuses every write they see, the manager's status writes among them)"
		}
		findings = append(findings, finding{kind: kind, name: name, now: "-", verdict: verdictRemove, why: why})
	}
	return findings, nil
}

// decode reads obj into the typed into, and returns the fields of its spec
// the types do not have: what trainjob-operator's API drops.
func decode(obj *unstructured.Unstructured, into runtime.Object) ([]string, error) {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
		return nil, err
	}
	var dropped []string
	if spec, ok := jsonFields(reflect.TypeOf(into).Elem())["spec"]; ok {
		unknownFields(obj.Object["spec"], spec, "spec", &dropped)
	}
	return dropped, nil
}

func droppedNote(dropped []string) string {
	if len(dropped) == 0 {
		return ""
	}
	return "; dropped, not in trainjob-operator's API: " + strings.Join(dropped, ", ")
}

// probe is the TrainJob a runtime is checked with: no overrides.
func probe(namespace string) *trainer.TrainJob {
	return &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Name: "check", Namespace: namespace}}
}

func checkRuntime(obj *unstructured.Unstructured) finding {
	f := finding{namespace: obj.GetNamespace(), kind: obj.GetKind(), name: obj.GetName(), now: "-"}
	var spec *trainer.TrainingRuntimeSpec
	var dropped []string
	var err error
	if obj.GetKind() == trainer.TrainingRuntimeKind {
		var rt trainer.TrainingRuntime
		dropped, err = decode(obj, &rt)
		spec = &rt.Spec
	} else {
		var rt trainer.ClusterTrainingRuntime
		dropped, err = decode(obj, &rt)
		spec = &rt.Spec
	}
	if err != nil {
		f.verdict, f.why = verdictCannotRun, "does not decode: "+err.Error()
		return f
	}
	tj := probe(obj.GetNamespace())
	if _, err := jobplan.Build(tj, jobplan.Runtime{Kind: obj.GetKind(), Name: obj.GetName(), Spec: spec}); err != nil {
		f.verdict, f.why = verdictCannotRun, err.Error()+droppedNote(dropped)
		return f
	}
	f.verdict, f.why = verdictRuns, "TrainJobs run on it"+droppedNote(dropped)
	return f
}

func checkTrainJob(ctx context.Context, cl client.Client, obj *unstructured.Unstructured, jobSet *unstructured.Unstructured) (finding, error) {
	f := finding{namespace: obj.GetNamespace(), kind: trainer.TrainJobKind, name: obj.GetName()}
	var tj trainer.TrainJob
	dropped, err := decode(obj, &tj)
	if err != nil {
		f.now, f.verdict, f.why = "?", verdictCannotRun, "does not decode: "+err.Error()
		return f, nil
	}
	f.now = state(&tj)
	note := droppedNote(dropped)
	if tj.FinishedCondition() != nil {
		f.verdict = verdictKept
		if lifecycle.TTLAfterFinished(&tj) != nil {
			f.why = "finished: its ttlSecondsAfterFinished deletes it"
		} else {
			f.why = "finished, with no ttlSecondsAfterFinished: kept until deleted, or until a retention policy (objectRetentionPolicies) deletes it"
		}
		if jobSet != nil {
			f.why += "; its JobSet goes with it"
		}
		f.why += note
		return f, nil
	}
	if lifecycle.ManagedElsewhere(&tj) {
		f.verdict, f.why = verdictLeftAlone, fmt.Sprintf("managed by %s", *tj.Spec.ManagedBy)+note
		return f, nil
	}
	rt, err := jobplan.Resolve(ctx, cl, &tj)
	if apierrors.IsNotFound(err) {
		f.verdict, f.why = verdictCannotRun, fmt.Sprintf("%s %s%s not found (Created=False, %s)", rt.Kind, rt.Name, rt.Where(&tj), trainer.TrainJobRuntimeNotFoundReason)+note
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("reading the runtime of TrainJob %s/%s: %w", tj.Namespace, tj.Name, err)
	}
	plan, err := jobplan.Build(&tj, rt)
	if err != nil {
		f.verdict, f.why = verdictCannotRun, fmt.Sprintf("%s (Created=False, %s)", err, trainer.TrainJobInvalidRuntimeReason)+note
		return f, nil
	}
	taken, err := namesTaken(ctx, cl, &tj, plan)
	if err != nil {
		return f, err
	}
	switch {
	case len(taken) > 0 && jobSet != nil:
		f.verdict = verdictWaits
		f.why = fmt.Sprintf("its JobSet %s runs it (%s): nothing is created while they hold its names (Created=False, %s). Let it finish before the switch, or delete the JobSet (its Jobs and Pods go with it) to start it again from the beginning",
			jobSet.GetName(), strings.Join(taken, ", "), trainer.TrainJobNameTakenReason)
	case len(taken) > 0:
		f.verdict = verdictWaits
		f.why = fmt.Sprintf("not its own: %s (Created=False, %s)", strings.Join(taken, ", "), trainer.TrainJobNameTakenReason)
	case tj.Spec.Suspend != nil && *tj.Spec.Suspend:
		f.verdict, f.why = verdictRuns, fmt.Sprintf("suspended: %s created suspended, to run when it is resumed", jobsOf(plan))
	default:
		f.verdict, f.why = verdictRuns, fmt.Sprintf("%s created", jobsOf(plan))
	}
	if jobSet != nil && len(taken) == 0 {
		f.why += fmt.Sprintf("; its JobSet %s, which holds none of its names, stays until the TrainJob is deleted", jobSet.GetName())
	}
	f.why += note
	return f, nil
}

// jobsOf says how many Jobs and Pods plan makes.
func jobsOf(plan *jobplan.Plan) string {
	pods := int32(0)
	for _, job := range plan.Jobs {
		pods += ptr.Deref(job.Spec.Parallelism, 1)
	}
	podsOf := fmt.Sprintf("%d Pods", pods)
	if pods == 1 {
		podsOf = "1 Pod"
	}
	if len(plan.Jobs) == 1 {
		return fmt.Sprintf("its Job (%s) is", podsOf)
	}
	return fmt.Sprintf("its %d Jobs (%s) are", len(plan.Jobs), podsOf)
}

// namesTaken lists the Jobs and the Service of plan that exist and are not
// the TrainJob's, with their controller.
func namesTaken(ctx context.Context, cl client.Client, tj *trainer.TrainJob, plan *jobplan.Plan) ([]string, error) {
	var taken []string
	check := func(kind string, obj client.Object) error {
		err := cl.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
		}
		if !metav1.IsControlledBy(obj, tj) {
			holder := "no owner"
			if ref := metav1.GetControllerOf(obj); ref != nil {
				holder = ref.Kind + " " + ref.Name
			}
			taken = append(taken, fmt.Sprintf("%s %s of %s", kind, obj.GetName(), holder))
		}
		return nil
	}
	for _, job := range plan.Jobs {
		if err := check("Job", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name}}); err != nil {
			return nil, err
		}
	}
	if plan.Service != nil {
		if err := check("Service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: plan.Service.Namespace, Name: plan.Service.Name}}); err != nil {
			return nil, err
		}
	}
	return taken, nil
}

func printFindings(out io.Writer, findings []finding) {
	counts := map[string]int{}
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tNOW\tAFTER THE SWITCH\tWHY")
	for _, f := range findings {
		ns := f.namespace
		if ns == "" {
			ns = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.kind, ns, f.name, f.now, f.verdict, f.why)
		counts[f.verdict]++
	}
	_ = tw.Flush()
	var summary []string
	for _, v := range []string{verdictRuns, verdictWaits, verdictKept, verdictLeftAlone, verdictCannotRun, verdictRemove} {
		if counts[v] > 0 {
			summary = append(summary, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	if len(summary) == 0 {
		fmt.Fprintln(out, "Nothing to check: no TrainJob and no runtime.")
		return
	}
	fmt.Fprintf(out, "\n%s. Nothing was changed.\n", strings.Join(summary, ", "))
}

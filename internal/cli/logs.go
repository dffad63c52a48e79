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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// completionIndexLabel is the Job controller's label of an Indexed Job's
// Pod: its index, the node's rank in the trainer step.
const completionIndexLabel = "batch.kubernetes.io/job-completion-index"

// podLogs streams a Pod's logs; tests give a fake.
type podLogs func(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error)

func clientsetLogs(cfg *rest.Config) (podLogs, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, namespace, pod string, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
		return cs.CoreV1().Pods(namespace).GetLogs(pod, opts).Stream(ctx)
	}, nil
}

// sdkStep is a step as the Kubeflow SDK's get_job_logs names it: a
// replicated Job and a node index, "node-0".
var sdkStep = regexp.MustCompile(`^(.+)-([0-9]+)$`)

func newLogsCommand(g *globals) *cobra.Command {
	var (
		step, container string
		index           = -1
		follow          bool
		prefix          = true
		timestamps      bool
		tail            int64 = -1
		since           time.Duration
	)
	cmd := &cobra.Command{
		Use:   "logs NAME [--step STEP] [--index N] [-f]",
		Short: "Print the logs of a TrainJob's Pods",
		Long: `Print the logs of the Pods of a TrainJob's current attempt, as the Kubeflow
SDK's get_job_logs gives them: those of its trainer step unless --step
names another replicated Job (dataset-initializer, launcher, ...), every
node unless --index names one (--step node-0, as the SDK names steps, is
--step node --index 0). With more than one Pod, each line starts with
[STEP-INDEX]. --follow streams them until every Pod's container ends.
The container is the trainer's (node) or the Pod's first, unless -c.`,
		Example: `  trainctl logs my-job
  trainctl logs my-job --step node --index 0 -f
  trainctl logs my-job --step node-1 --tail 20
  trainctl logs my-job --step dataset-initializer`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: g.completeTrainJobs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			cl, ns, err := g.client()
			if err != nil {
				return err
			}
			var tj trainer.TrainJob
			if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: args[0]}, &tj); err != nil {
				return fmt.Errorf("TrainJob %s/%s: %w", ns, args[0], err)
			}
			step, index, err := resolveStep(&tj, step, index)
			if err != nil {
				return err
			}
			pods, err := logPods(ctx, cl, &tj, step, index)
			if err != nil {
				return err
			}
			cfg, err := g.config.ToRESTConfig()
			if err != nil {
				return fmt.Errorf("no cluster to talk to: %w", err)
			}
			logs, err := g.newLogs(cfg)
			if err != nil {
				return err
			}
			opts := &corev1.PodLogOptions{Container: container, Follow: follow, Timestamps: timestamps}
			if tail >= 0 {
				opts.TailLines = ptr.To(tail)
			}
			if since > 0 {
				opts.SinceSeconds = ptr.To(int64(since.Seconds()))
			}
			return printLogs(ctx, g.out, logs, pods, opts, prefix && len(pods) > 1)
		},
	}
	f := cmd.Flags()
	f.StringVar(&step, "step", "", "The replicated Job whose Pods to print (default: the trainer step); STEP-N also selects node N, as the Kubeflow SDK names steps.")
	f.IntVar(&index, "index", -1, "The node (the Pod's completion index) to print; all of them if unset.")
	f.BoolVarP(&follow, "follow", "f", false, "Stream the logs until the Pods' containers end.")
	f.BoolVar(&prefix, "prefix", true, "With more than one Pod, start each line with [STEP-INDEX].")
	f.BoolVar(&timestamps, "timestamps", false, "Start each line with its time (RFC3339), as kubectl logs --timestamps.")
	f.Int64Var(&tail, "tail", -1, "Lines of the end of each log to print; all if negative.")
	f.DurationVar(&since, "since", 0, "Only lines newer than this, e.g. 5m.")
	f.StringVarP(&container, "container", "c", "", "The container whose logs to print (default: node, or the Pod's first).")
	return cmd
}

// resolveStep returns the replicated Job and node index to print: step, or
// the trainer step of the TrainJob's jobsStatus; STEP-N as the SDK writes
// it when no replicated Job has that name.
func resolveStep(tj *trainer.TrainJob, step string, index int) (string, int, error) {
	var names []string
	trainerStep := ""
	for _, js := range tj.Status.JobsStatus {
		names = append(names, js.Name)
		if js.Trainer {
			trainerStep = js.Name
		}
	}
	switch {
	case step == "" && trainerStep == "":
		return "", 0, fmt.Errorf("TrainJob %s has no trainer step with Jobs yet (steps: %v): name one with --step", tj.Name, names)
	case step == "":
		return trainerStep, index, nil
	case slices.Contains(names, step) || len(names) == 0:
		return step, index, nil
	}
	if m := sdkStep.FindStringSubmatch(step); m != nil && slices.Contains(names, m[1]) {
		n, _ := strconv.Atoi(m[2])
		if index >= 0 && index != n {
			return "", 0, fmt.Errorf("--step %s names node %d, --index %d another", step, n, index)
		}
		return m[1], n, nil
	}
	return "", 0, fmt.Errorf("TrainJob %s has no step %q: its steps are %v", tj.Name, step, names)
}

// logPod is a Pod to print and the name its lines are prefixed with.
type logPod struct {
	pod    *corev1.Pod
	prefix string
}

// logPods are the Pods of the TrainJob's current restart attempt in step,
// of node index if not negative: for each node, the newest Pod (a failed
// Pod's replacement rather than the failed one), in index order.
func logPods(ctx context.Context, cl client.Client, tj *trainer.TrainJob, step string, index int) ([]logPod, error) {
	var list corev1.PodList
	sel := client.MatchingLabels{
		trainer.TrainJobNameLabel:            tj.Name,
		trainer.JobSetReplicatedJobNameLabel: step,
		trainer.JobSetRestartAttemptLabel:    strconv.Itoa(int(tj.Status.Restarts)),
	}
	if index >= 0 {
		sel[completionIndexLabel] = strconv.Itoa(index)
	}
	if err := cl.List(ctx, &list, client.InNamespace(tj.Namespace), sel); err != nil {
		return nil, err
	}
	newest := map[string]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		key := p.Labels[trainer.JobSetJobIndexLabel] + "/" + p.Labels[completionIndexLabel]
		if o, ok := newest[key]; !ok || o.CreationTimestamp.Before(&p.CreationTimestamp) {
			newest[key] = p
		}
	}
	var out []logPod
	for _, p := range newest {
		name := step
		if n := p.Labels[trainer.JobSetJobIndexLabel]; n != "" && n != "0" {
			name += "-" + n // a step of several Jobs: which one
		}
		if i := p.Labels[completionIndexLabel]; i != "" {
			name += "-" + i
		}
		out = append(out, logPod{pod: p, prefix: name})
	}
	slices.SortFunc(out, func(a, b logPod) int { return compareNatural(a.prefix, b.prefix) })
	if len(out) == 0 {
		what := "step " + step
		if index >= 0 {
			what += fmt.Sprintf(" node %d", index)
		}
		return nil, fmt.Errorf("TrainJob %s has no Pod of %s in restart attempt %d (yet)", tj.Name, what, tj.Status.Restarts)
	}
	return out, nil
}

// compareNatural orders names with their numbers by value: node-2 before
// node-10.
func compareNatural(a, b string) int {
	ma, mb := sdkStep.FindStringSubmatch(a), sdkStep.FindStringSubmatch(b)
	if ma != nil && mb != nil && ma[1] == mb[1] {
		na, _ := strconv.Atoi(ma[2])
		nb, _ := strconv.Atoi(mb[2])
		return na - nb
	}
	if a < b {
		return -1
	}
	if a > b {
		return 1
	}
	return 0
}

// printLogs prints the Pods' logs: one after the other, or, following,
// all at once, line by line. Lines are prefixed with the Pod's name when
// prefix.
func printLogs(ctx context.Context, out io.Writer, logs podLogs, pods []logPod, opts *corev1.PodLogOptions, prefix bool) error {
	var mu sync.Mutex
	copyLines := func(p logPod) error {
		o := *opts
		if o.Container == "" {
			o.Container = defaultLogContainer(p.pod)
		}
		r, err := logs(ctx, p.pod.Namespace, p.pod.Name, &o)
		if err != nil {
			return fmt.Errorf("logs of Pod %s (%s): %w", p.pod.Name, p.prefix, err)
		}
		defer func() { _ = r.Close() }()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			if prefix {
				_, err = fmt.Fprintf(out, "[%s] %s\n", p.prefix, sc.Text())
			} else {
				_, err = fmt.Fprintln(out, sc.Text())
			}
			mu.Unlock()
			if err != nil {
				return err
			}
		}
		return sc.Err()
	}
	if !opts.Follow {
		var errs []error
		for _, p := range pods {
			errs = append(errs, copyLines(p))
		}
		return errors.Join(errs...)
	}
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() { errs[i] = copyLines(p) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// defaultLogContainer is the trainer's container if the Pod has one, else
// its first.
func defaultLogContainer(p *corev1.Pod) string {
	for _, c := range p.Spec.Containers {
		if c.Name == trainer.TrainerContainerName {
			return c.Name
		}
	}
	if len(p.Spec.Containers) > 0 {
		return p.Spec.Containers[0].Name
	}
	return ""
}

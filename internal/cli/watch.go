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
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/lifecycle"
)

// watchInterval is how often the live view looks at the cluster.
const watchInterval = time.Second

// tableEvery is how often the live view prints the table of TrainJobs.
const tableEvery = 30 * time.Second

// seen is what the live view last showed of a TrainJob.
type seen struct {
	name    string
	state   string
	running int
	// dispatched: MultiKueue runs it on a worker cluster.
	dispatched bool
}

// LiveView prints, as they happen, what happens to the TrainJobs of
// namespace in the cluster of kubeconfig, until ctx ends: make dev's view.
// With demo, it suspends and resumes the TrainJobs annotated for the demo.
func LiveView(ctx context.Context, out io.Writer, kubeconfig, namespace string, demo bool) error {
	g := newGlobals(out, io.Discard)
	g.config.KubeConfig, g.config.Namespace = &kubeconfig, &namespace
	cl, ns, err := g.client()
	if err != nil {
		return err
	}
	var d *suspendResumeDemo
	if demo {
		d = &suspendResumeDemo{out: out, now: g.now}
	}
	return liveWatch(ctx, g, cl, ns, d)
}

// liveWatch prints, as they happen, what happens to the TrainJobs of ns: their
// state, their running Pods, the events about them, their deletion. demo,
// if not nil, acts on them as it goes.
func liveWatch(ctx context.Context, g *globals, cl client.Client, ns string, demo *suspendResumeDemo) error {
	retention, err := g.retention(ctx, cl)
	if err != nil {
		return err
	}
	known := map[types.UID]*seen{}
	events := map[types.UID]bool{}
	start := g.now().Add(-time.Minute)
	var lastTable time.Time
	line := func(at time.Time, name, what string) {
		fmt.Fprintf(g.out, "%s  %-22s %s\n", at.Local().Format("15:04:05"), name, what)
	}
	for {
		now := g.now()
		tjs, _, err := listTrainJobs(ctx, cl, scope{namespace: ns})
		if err != nil {
			return err
		}
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{trainer.TrainJobNameLabel}); err != nil {
			return err
		}
		running := map[string]int{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running[p.Labels[trainer.TrainJobNameLabel]]++
			}
		}
		var evs corev1.EventList
		if err := cl.List(ctx, &evs, client.InNamespace(ns), client.MatchingFields{"involvedObject.kind": trainer.TrainJobKind}); err != nil {
			return err
		}
		for _, e := range evs.Items {
			if t := eventTime(&e); !events[e.UID] && t.After(start) {
				events[e.UID] = true
				line(t, e.InvolvedObject.Name, fmt.Sprintf("%-17s %s", e.Reason, e.Message))
			}
		}

		clusters := workerClusters(ctx, cl, ns, tjs)
		present := map[types.UID]bool{}
		for i := range tjs {
			tj := &tjs[i]
			present[tj.UID] = true
			cur := &seen{name: tj.Name, state: stateOn(tj, clusters), running: running[tj.Name], dispatched: lifecycle.DispatchedByMultiKueue(tj)}
			prev := known[tj.UID]
			switch {
			case prev == nil:
				line(now, tj.Name, "state "+cur.state)
			case prev.state != cur.state:
				line(now, tj.Name, fmt.Sprintf("state %s -> %s", prev.state, cur.state))
			}
			if (prev == nil && cur.running > 0) || (prev != nil && prev.running != cur.running) {
				line(now, tj.Name, fmt.Sprintf("%d Pod(s) running", cur.running))
			}
			known[tj.UID] = cur
			if demo != nil {
				demo.step(ctx, cl, tj)
			}
		}
		for uid, s := range known {
			if !present[uid] {
				if s.dispatched {
					line(now, s.name, "deleted; Kueue deletes its copy on the worker cluster")
				} else {
					line(now, s.name, "deleted, with its Jobs, Pods and Service")
				}
				delete(known, uid)
			}
		}
		if len(tjs) > 0 && now.Sub(lastTable) >= tableEvery {
			lastTable = now
			fmt.Fprintln(g.out)
			if err := printTable(g.out, tjs, retention, clusters, false, now); err != nil {
				return err
			}
			fmt.Fprintln(g.out)
		}

		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(watchInterval):
		}
	}
}

// DemoAnnotation on a TrainJob asks `make dev` to show a suspend and resume
// on it.
const DemoAnnotation = "dev.trainjob-operator.io/demo"

// demoPause is how long the demo lets a TrainJob run before suspending it,
// and how long it leaves it suspended.
const demoPause = 10 * time.Second

// suspendResumeDemo suspends the TrainJobs annotated for it once they have
// run for a while, and resumes them a while after they are suspended.
type suspendResumeDemo struct {
	out  io.Writer
	now  func() time.Time
	done map[types.UID]int // 1: suspended, 2: resumed
}

func (d *suspendResumeDemo) step(ctx context.Context, cl client.Client, tj *trainer.TrainJob) {
	if tj.Annotations[DemoAnnotation] != "suspend-resume" || tj.FinishedCondition() != nil {
		return
	}
	if d.done == nil {
		d.done = map[types.UID]int{}
	}
	now := d.now()
	switch d.done[tj.UID] {
	case 0:
		if tj.Status.StartTime == nil || now.Sub(tj.Status.StartTime.Time) < demoPause || state(tj) != "Running" {
			return
		}
		if d.setSuspend(ctx, cl, tj, true) {
			d.done[tj.UID] = 1
		}
	case 1:
		for _, c := range tj.Status.Conditions {
			if c.Type == trainer.TrainJobSuspended && c.Status == metav1.ConditionTrue && now.Sub(c.LastTransitionTime.Time) >= demoPause {
				if d.setSuspend(ctx, cl, tj, false) {
					d.done[tj.UID] = 2
				}
			}
		}
	}
}

func (d *suspendResumeDemo) setSuspend(ctx context.Context, cl client.Client, tj *trainer.TrainJob, suspend bool) bool {
	patch := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend)
	if err := cl.Patch(ctx, tj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		fmt.Fprintf(d.out, "dev: could not set suspend=%t on %s: %v\n", suspend, tj.Name, err)
		return false
	}
	verb := "suspending"
	if !suspend {
		verb = "resuming"
	}
	fmt.Fprintf(d.out, "%s  %-22s dev: %s it (spec.suspend: %t)\n", d.now().Local().Format("15:04:05"), tj.Name, verb, suspend)
	return true
}

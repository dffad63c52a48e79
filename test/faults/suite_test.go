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

// Package faults puts the product through faults on the local cluster and
// counts what went wrong: deletions before their time, TrainJobs never
// deleted, deadlines never enforced, objects left behind. `make test` runs a
// short version; `make test-faults` the full one (FAULTS_TRAINJOBS=500).
package faults

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
	"github.com/trainjob-operator/trainjob-operator/test/framework"
)

var (
	// cluster is the suite's cluster.
	cluster *framework.Cluster
	// devOpts brought it up: the faults stop, kill and restart its
	// processes through them.
	devOpts dev.Options
)

func TestMain(m *testing.M) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	devOpts = dev.Options{
		Root:    root,
		WorkDir: filepath.Join(root, ".dev-faults"),
		Name:    "trainjob-faults",
		Nodes:   8,
		Out:     os.Stderr,
	}
	os.Exit(dev.RunTests(m, devOpts, func(cl client.WithWatch) {
		cluster = framework.DevCluster(devOpts, cl)
		cluster.NamespacePrefix = "faults-"
		// Each wait says how long it waits: the workloads' sizes vary.
		cluster.Timeout, cluster.Interval = 2*time.Minute, 200*time.Millisecond
		// A namespace holds up to hundreds of TrainJobs: the tests log
		// what they counted instead.
		cluster.Dump = nil
	}))
}

// envInt reads a size of the run from the environment.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// history is what the recorder saw of one TrainJob.
type history struct {
	last      *trainer.TrainJob // the last version seen
	deletedAt time.Time         // when the watch said it was gone
}

// recorder watches the TrainJobs of a namespace and keeps their history.
type recorder struct {
	mu   sync.Mutex
	jobs map[types.UID]*history
}

// record watches ns until ctx ends, starting over whenever the watch ends.
func record(ctx context.Context, t *testing.T, ns string) *recorder {
	r := &recorder{jobs: map[types.UID]*history{}}
	watchNamespace(ctx, t, ns, func() client.ObjectList { return &trainer.TrainJobList{} }, func(ev utiltesting.Event) {
		tj, ok := ev.Object.(*trainer.TrainJob)
		if !ok {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		h := r.jobs[tj.UID]
		if h == nil {
			h = &history{}
			r.jobs[tj.UID] = h
		}
		h.last = tj.DeepCopy()
		if ev.Type == watch.Deleted {
			h.deletedAt = ev.At
		}
	})
	return r
}

// watchNamespace calls fn for each change to the objects of newList's kind
// in ns from now until ctx ends (see utiltesting.Watch: deletions missed
// while a watch restarts from the current state are found by the final
// audit).
func watchNamespace(ctx context.Context, t *testing.T, ns string, newList func() client.ObjectList, fn func(utiltesting.Event)) {
	t.Helper()
	err := utiltesting.Watch(ctx, cluster.Client, ns, newList, fn, func(rv string) {
		if ctx.Err() == nil { // the test is still running
			t.Logf("the watch of %T in %s stalled; watching again from version %s", newList(), ns, rv)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot returns a copy of the histories.
func (r *recorder) snapshot() map[types.UID]history {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[types.UID]history, len(r.jobs))
	for uid, h := range r.jobs {
		out[uid] = *h
	}
	return out
}

// percentiles formats the 50th, 90th and 100th percentiles of ds.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return fmt.Sprintf("p50 %v, p90 %v, max %v (n=%d)", at(0.5).Round(10*time.Millisecond), at(0.9).Round(10*time.Millisecond), ds[len(ds)-1].Round(10*time.Millisecond), len(ds))
}

// jobCreations watches the Jobs of a namespace and records the UIDs each
// Job name had in each restart attempt (its label
// jobset.sigs.k8s.io/restart-attempt): a name with two UIDs in one attempt
// is a child created twice, work re-run.
type jobCreations struct {
	mu   sync.Mutex
	uids map[string]map[types.UID]bool
}

func watchJobCreations(ctx context.Context, t *testing.T, ns string) *jobCreations {
	c := &jobCreations{uids: map[string]map[types.UID]bool{}}
	watchNamespace(ctx, t, ns, func() client.ObjectList { return &batchv1.JobList{} }, func(ev utiltesting.Event) {
		if ev.Type != watch.Added {
			return
		}
		o := ev.Object
		key := o.GetName() + " attempt " + cmp.Or(o.GetLabels()[trainer.JobSetRestartAttemptLabel], "0")
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.uids[key] == nil {
			c.uids[key] = map[types.UID]bool{}
		}
		c.uids[key][o.GetUID()] = true
	})
	return c
}

// twice lists the Job names created more than once in one restart attempt,
// and counts the names in each attempt.
func (c *jobCreations) twice() (names []string, jobs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, uids := range c.uids {
		if len(uids) > 1 {
			names = append(names, fmt.Sprintf("%s (%d times)", name, len(uids)))
		}
	}
	return names, len(c.uids)
}

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

package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// owners watches the Jobs of a namespace and records, for every Job (by
// UID), each TrainJob UID that ever controlled it: a Job created for one
// TrainJob and later controlled by another is a Job claimed.
type owners struct {
	mu   sync.Mutex
	seen map[types.UID]map[types.UID]bool
	// created counts the Jobs created per controlling TrainJob and name.
	created map[string]int
}

func watchOwners(ctx context.Context, t *testing.T, ns string) *owners {
	o := &owners{seen: map[types.UID]map[types.UID]bool{}, created: map[string]int{}}
	watchNamespace(ctx, t, ns, func() client.ObjectList { return &batchv1.JobList{} }, func(ev utiltesting.Event) {
		job, ok := ev.Object.(*batchv1.Job)
		if !ok {
			return
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		ref := metav1.GetControllerOf(job)
		if ref == nil {
			return
		}
		if o.seen[job.UID] == nil {
			o.seen[job.UID] = map[types.UID]bool{}
			if ev.Type == watch.Added {
				o.created[string(ref.UID)+"/"+job.Name]++
			}
		}
		o.seen[job.UID][ref.UID] = true
	})
	return o
}

// claimed counts the Jobs controlled by more than one TrainJob in their
// lives, and the children created more than once for the same TrainJob.
func (o *owners) claimed() (claimed, twice int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, us := range o.seen {
		if len(us) > 1 {
			claimed++
		}
	}
	for _, n := range o.created {
		if n > 1 {
			twice++
		}
	}
	return claimed, twice
}

// A TrainJob deleted and applied again under the same name, while the Jobs
// of the one deleted are still there: with kubectl's default background
// cascade (the garbage collector has not removed them yet), and with
// --cascade=orphan (they stay until someone deletes them). The new
// TrainJob never takes them for its own: it waits with Created=False
// (NameTaken) and a Warning event naming the Job in the way, starts by
// itself once the name is free, and runs to completion.
func TestRecreatedUnderTheSameName(t *testing.T) {
	n := max(4, envInt("FAULTS_TRAINJOBS", 60)/10)
	ns := cluster.NewNamespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jobs := watchOwners(ctx, t, ns)

	cascade := func(i int) metav1.DeletionPropagation {
		if i%2 == 0 {
			return metav1.DeletePropagationBackground
		}
		return metav1.DeletePropagationOrphan
	}
	name := func(i int) string { return fmt.Sprintf("re-%03d", i) }
	newTJ := func(i int, run time.Duration) *trainer.TrainJob {
		return utiltesting.MakeTrainJob(name(i), ns).Command("torchrun", "train.py").NumNodes(2).
			Annotation("pod-complete.stage.kwok.x-k8s.io/delay", run.String()).Obj()
	}
	for i := range n {
		if err := cluster.Client.Create(ctx, newTJ(i, 10*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	old := map[string]types.UID{}
	cluster.EventuallyWithin(t, 2*time.Minute, "every first TrainJob to run", func() error {
		for i := range n {
			var tj trainer.TrainJob
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i)}, &tj); err != nil {
				return err
			}
			if len(tj.Status.JobsStatus) == 0 || tj.Status.JobsStatus[0].Active == 0 {
				return fmt.Errorf("%s not running yet", tj.Name)
			}
			old[tj.Name] = tj.UID
		}
		return nil
	})

	// Delete each, and apply it again at once (orphaned: once the old
	// TrainJob is gone, which the garbage collector's orphaning takes).
	start := time.Now()
	for i := range n {
		tj := &trainer.TrainJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}}
		if err := cluster.Client.Delete(ctx, tj, client.PropagationPolicy(cascade(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		cluster.EventuallyWithin(t, time.Minute, name(i)+" to be gone", func() error {
			var tj trainer.TrainJob
			err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i)}, &tj)
			if err == nil && tj.UID == old[name(i)] {
				return fmt.Errorf("still there")
			}
			return client.IgnoreNotFound(err)
		})
		if err := cluster.Client.Create(ctx, newTJ(i, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}

	// The orphaned names are held: those TrainJobs wait, and say why.
	cluster.EventuallyWithin(t, time.Minute, "the TrainJobs whose names are held to say so", func() error {
		for i := 1; i < n; i += 2 {
			var tj trainer.TrainJob
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i)}, &tj); err != nil {
				return err
			}
			c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobCreated)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != trainer.TrainJobNameTakenReason {
				return fmt.Errorf("%s: Created %+v, want False (%s)", tj.Name, c, trainer.TrainJobNameTakenReason)
			}
			var evs eventsv1.EventList
			if err := cluster.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
				return err
			}
			if !slices.ContainsFunc(evs.Items, func(e eventsv1.Event) bool {
				return e.Regarding.UID == tj.UID && e.Reason == trainer.TrainJobNameTakenReason && e.Type == "Warning"
			}) {
				return fmt.Errorf("%s: no Warning event %s", tj.Name, trainer.TrainJobNameTakenReason)
			}
		}
		return nil
	})
	time.Sleep(5 * time.Second) // held names stay held
	for i := 1; i < n; i += 2 {
		var tj trainer.TrainJob
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i)}, &tj); err != nil {
			t.Fatal(err)
		}
		if tj.Status.State != trainer.TrainJobStateCreated || tj.FinishedCondition() != nil {
			t.Errorf("%s: %+v while an orphaned Job holds its child's name", tj.Name, tj.Status.Conditions)
		}
	}
	// Whoever orphaned them deletes the orphaned Job and Service: the names
	// are free.
	freed := time.Now()
	for i := 1; i < n; i += 2 {
		for _, o := range []client.Object{
			&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i) + "-node-0"}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}},
		} {
			if err := cluster.Client.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
	}

	// Every new TrainJob runs to completion on Jobs of its own.
	var failed []string
	var background, orphan []time.Duration // until its Jobs were created
	for i := range n {
		cluster.EventuallyWithin(t, 3*time.Minute, name(i)+" to finish", func() error {
			var tj trainer.TrainJob
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i)}, &tj); err != nil {
				return err
			}
			c := tj.FinishedCondition()
			if c == nil {
				return fmt.Errorf("not finished: %+v", tj.Status.Conditions)
			}
			if c.Type != trainer.TrainJobComplete {
				failed = append(failed, fmt.Sprintf("%s: %s (%s) %s", tj.Name, c.Type, c.Reason, c.Message))
			}
			var job batchv1.Job
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i) + "-node-0"}, &job); err == nil && metav1.IsControlledBy(&job, &tj) {
				if i%2 == 0 {
					background = append(background, job.CreationTimestamp.Sub(tj.CreationTimestamp.Time))
				} else {
					orphan = append(orphan, job.CreationTimestamp.Sub(freed))
				}
			}
			return nil
		})
	}
	claimed, twice := jobs.claimed()
	t.Logf("%d TrainJobs deleted and applied again (%d background, %d orphan) in %s: failed %d, Jobs claimed from another TrainJob %d, children created twice %d; Jobs created: background cascade, after the TrainJob was applied again %s; orphaned, after the orphans were deleted %s (stamps of one second)",
		n, (n+1)/2, n/2, time.Since(start).Round(time.Second), len(failed), claimed, twice, percentiles(background), percentiles(orphan))
	if len(failed) > 0 {
		t.Errorf("failed: %v", failed)
	}
	if claimed > 0 || twice > 0 {
		t.Errorf("%d Job(s) claimed from another TrainJob, %d child(ren) created twice", claimed, twice)
	}

	cancel()
	deleteAll(t, ns)
	if left := audit(context.Background(), t, ns); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// afterSuspended, after an outage: TrainJobs resumed while the manager was
// down still show Suspended=True when it starts again. The retention policy
// must not delete them, nor TrainJobs that wait to be started or admitted
// (created suspended; queued in Kueue). TrainJobs that ran and were left
// suspended are deleted at their time.
func TestAfterSuspendedAfterAnOutage(t *testing.T) {
	const after = 20 * time.Second
	n := max(2, envInt("FAULTS_TRAINJOBS", 60)/20)
	ns := cluster.NewNamespace(t)
	ctx := context.Background()
	withRetention(t, after)
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	jobs := watchOwners(watchCtx, t, ns)

	groups := []string{"resumed", "left", "never-started", "queued"}
	name := func(g string, i int) string { return fmt.Sprintf("%s-%02d", g, i) }
	for _, g := range groups {
		for i := range n {
			w := utiltesting.MakeTrainJob(name(g, i), ns).Command("torchrun", "train.py").
				Annotation("pod-complete.stage.kwok.x-k8s.io/delay", "10m")
			switch g {
			case "never-started":
				w.Suspend(true)
			case "queued":
				w.Label(trainer.KueueQueueNameLabel, "team-a")
			}
			if err := cluster.Client.Create(ctx, w.Obj()); err != nil {
				t.Fatal(err)
			}
		}
	}
	cluster.EventuallyWithin(t, 2*time.Minute, "the TrainJobs to start", func() error {
		for _, g := range []string{"resumed", "left", "queued"} {
			for i := range n {
				var tj trainer.TrainJob
				if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(g, i)}, &tj); err != nil {
					return err
				}
				if tj.Status.StartTime == nil || len(tj.Status.JobsStatus) == 0 || tj.Status.JobsStatus[0].Active == 0 {
					return fmt.Errorf("%s not running", tj.Name)
				}
			}
		}
		return nil
	})
	for _, g := range []string{"resumed", "left", "queued"} {
		for i := range n {
			if cluster.SetSuspend(ctx, ns, name(g, i), true) != nil {
				t.Fatalf("suspending %s", name(g, i))
			}
		}
	}
	var lastSuspended time.Time
	cluster.EventuallyWithin(t, 2*time.Minute, "every TrainJob to be Suspended", func() error {
		for _, g := range groups {
			for i := range n {
				var tj trainer.TrainJob
				if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(g, i)}, &tj); err != nil {
					return err
				}
				c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended)
				if c == nil || c.Status != metav1.ConditionTrue {
					return fmt.Errorf("%s not Suspended: %+v", tj.Name, c)
				}
				lastSuspended = later(lastSuspended, c.LastTransitionTime.Time)
			}
		}
		return nil
	})

	// The outage: the manager goes down, and the first group is resumed
	// meanwhile, as Kueue or a user would. Another replica answers the
	// webhook during a failover; here, nothing does, so it is made to
	// fail open for the outage.
	if err := dev.KillManager(devOpts); err != nil {
		t.Fatal(err)
	}
	setWebhookFailurePolicy(t, admissionregistrationv1.Ignore)
	for i := range n {
		// The API server sees the new failure policy once its own watch
		// of webhook configurations has it: until then, a write still
		// waits on the dead webhook and is refused.
		cluster.EventuallyWithin(t, 30*time.Second, "resuming "+name("resumed", i), func() error {
			if cluster.SetSuspend(ctx, ns, name("resumed", i), false) != nil {
				return fmt.Errorf("refused")
			}
			return nil
		})
	}
	time.Sleep(time.Until(lastSuspended.Add(after + 3*time.Second))) // every one of them past its afterSuspended
	setWebhookFailurePolicy(t, admissionregistrationv1.Fail)
	restarted := time.Now()
	if err := dev.RestartManager(ctx, devOpts); err != nil {
		t.Fatal(err)
	}

	// The ones left suspended go; none of the others does.
	deleted := func(g string) (int, error) {
		count := 0
		for i := range n {
			var tj trainer.TrainJob
			err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(g, i)}, &tj)
			switch {
			case apierrors.IsNotFound(err):
				count++
			case err != nil:
				return 0, err
			case tj.DeletionTimestamp != nil:
				count++
			}
		}
		return count, nil
	}
	cluster.EventuallyWithin(t, time.Minute, "the TrainJobs left suspended to be deleted", func() error {
		d, err := deleted("left")
		if err != nil {
			return err
		}
		if d < n {
			return fmt.Errorf("%d of %d deleted", d, n)
		}
		return nil
	})
	leftGone := time.Since(restarted)
	time.Sleep(10 * time.Second) // time for a wrong deletion to happen
	wrong := map[string]int{}
	for _, g := range []string{"resumed", "never-started", "queued"} {
		d, err := deleted(g)
		if err != nil {
			t.Fatal(err)
		}
		wrong[g] = d
	}
	claimed, twice := jobs.claimed()
	t.Logf("afterSuspended %s, manager down while %d TrainJobs were resumed: deleted wrongly: resumed %d, never started %d, queued in Kueue %d; left suspended: %d of %d deleted, the last %s after the restart; Jobs claimed from another TrainJob %d, children created twice %d",
		after, n, wrong["resumed"], wrong["never-started"], wrong["queued"], n, n, leftGone.Round(100*time.Millisecond), claimed, twice)
	if claimed > 0 || twice > 0 {
		t.Errorf("%d Job(s) claimed from another TrainJob, %d child(ren) created twice", claimed, twice)
	}
	for g, d := range wrong {
		if d > 0 {
			t.Errorf("%d TrainJob(s) of group %s deleted by afterSuspended", d, g)
		}
	}
	// The resumed ones run again.
	cluster.EventuallyWithin(t, time.Minute, "the resumed TrainJobs to be Resumed", func() error {
		for i := range n {
			var tj trainer.TrainJob
			if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name("resumed", i)}, &tj); err != nil {
				return err
			}
			if c := meta.FindStatusCondition(tj.Status.Conditions, trainer.TrainJobSuspended); c == nil || c.Reason != trainer.TrainJobResumedReason {
				return fmt.Errorf("%s: %+v", tj.Name, c)
			}
		}
		return nil
	})

	deleteAll(t, ns)
	if left := audit(ctx, t, ns); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// withRetention runs the manager with afterSuspended set for the rest of
// the test, and restores its configuration after.
func withRetention(t *testing.T, afterSuspended time.Duration) {
	t.Helper()
	path := filepath.Join(devOpts.WorkDir, "config.yaml")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg configv1alpha1.Configuration
	if err := yaml.UnmarshalStrict(orig, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.ObjectRetentionPolicies = &configv1alpha1.ObjectRetentionPolicies{TrainJobs: &configv1alpha1.TrainJobRetentionPolicy{
		AfterSuspended: &metav1.Duration{Duration: afterSuspended},
	}}
	data, err := yaml.Marshal(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	restart := func(config []byte) error {
		if err := os.WriteFile(path, config, 0o600); err != nil {
			return err
		}
		if _, _, err := dev.Manager(devOpts); err == nil {
			if err := dev.KillManager(devOpts); err != nil {
				return err
			}
		}
		return dev.RestartManager(context.Background(), devOpts)
	}
	if err := restart(data); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		setWebhookFailurePolicy(t, admissionregistrationv1.Fail)
		if err := restart(orig); err != nil {
			t.Errorf("restoring the manager's configuration: %v", err)
		}
	})
}

// setWebhookFailurePolicy sets the failure policy of the TrainJob webhook.
func setWebhookFailurePolicy(t *testing.T, p admissionregistrationv1.FailurePolicyType) {
	t.Helper()
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	key := client.ObjectKey{Name: configv1alpha1.DefaultWebhookConfigurationName}
	for range 10 {
		if err := cluster.Client.Get(context.Background(), key, &cfg); err != nil {
			t.Fatal(err)
		}
		for i := range cfg.Webhooks {
			cfg.Webhooks[i].FailurePolicy = ptr.To(p)
		}
		err := cluster.Client.Update(context.Background(), &cfg)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	t.Fatal("the webhook configuration kept changing")
}

// deleteAll deletes the TrainJobs of ns, children first.
func deleteAll(t *testing.T, ns string) {
	t.Helper()
	var tjs trainer.TrainJobList
	if err := cluster.Client.List(context.Background(), &tjs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range tjs.Items {
		err := cluster.Client.Delete(context.Background(), &tjs.Items[i], client.PropagationPolicy(metav1.DeletePropagationForeground))
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
}

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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/controller/trainjob"
	"github.com/trainjob-operator/trainjob-operator/internal/controller/ttl"
	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

// Two manager replicas with leader election run the workload; the leader is
// SIGKILLed again and again, and started again a second later as a kubelet
// would. Measured: the time until a replica holds the Lease again (the
// standby, or the killed one back) and until it reconciles. Counted, besides the churn's counts: moments when
// both replicas said they led (sampled every 50ms), and child Jobs created
// twice (runChurn counts those in every scenario).
func TestLeaderKilled(t *testing.T) {
	pause := time.Duration(envInt("FAULTS_LEADER_KILL_EVERY_SECONDS", 10)) * time.Second
	runChurn(t, envInt("FAULTS_TRAINJOBS", 60), func(ctx context.Context, t *testing.T) string {
		replicas, err := dev.StartReplicas(ctx, devOpts, 2)
		defer func() {
			if t.Failed() {
				for _, r := range replicas {
					t.Logf("the end of %s's log:\n%s", r.Name, r.Log(40))
				}
			}
			if err := dev.StopReplicas(replicas); err != nil {
				t.Errorf("stopping the replicas: %v", err)
			}
		}()
		if err != nil {
			t.Errorf("starting two replicas: %v", err)
			return "starting replicas failed"
		}
		var toLead, toAct []time.Duration
		bothLeading, byStandby := 0, 0
		for {
			leader, follower, err := awaitLeader(ctx, replicas, &bothLeading)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("no leader: %v", err)
				}
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			if ctx.Err() != nil {
				break
			}
			before, err := follower.Reconciles(trainjob.ControllerName, ttl.ControllerName)
			if err != nil {
				t.Errorf("reading %s's metrics: %v", follower.Name, err)
				break
			}
			if before != 0 {
				t.Errorf("%s reconciled %v times while it did not lead", follower.Name, before)
			}
			if err := leader.Kill(); err != nil {
				t.Errorf("killing %s: %v", leader.Name, err)
				break
			}
			killed := time.Now()
			restarted := make(chan error, 1)
			go func() {
				time.Sleep(time.Second)
				restarted <- leader.Start(context.Background())
			}()
			// Either replica may win the Lease once it expires: the standby,
			// or the killed one started again.
			baseline := map[*dev.Replica]float64{follower: before, leader: 0}
			var led, acted time.Duration
			var winner *dev.Replica
			for (led == 0 || acted == 0) && time.Since(killed) < 2*time.Minute && ctx.Err() == nil {
				leading := 0
				for _, r := range replicas {
					if !r.Leading() {
						continue
					}
					leading++
					if led == 0 {
						led, winner = time.Since(killed), r
					}
				}
				if leading > 1 {
					bothLeading++
				}
				if winner != nil && acted == 0 {
					if n, err := winner.Reconciles(trainjob.ControllerName, ttl.ControllerName); err == nil && n > baseline[winner] {
						acted = time.Since(killed)
					}
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err := <-restarted; err != nil {
				t.Errorf("starting %s again: %v", leader.Name, err)
				break
			}
			if (led == 0 || acted == 0) && ctx.Err() != nil {
				// The last TrainJobs went while no replica led: the old
				// leader had released them and the garbage collector
				// finished their deletion. The new leader has nothing to
				// reconcile, so there is no takeover to measure.
				t.Logf("the workload ended %v after %s's death, before a new leader had work (lead %v); this kill is not counted",
					time.Since(killed).Round(time.Millisecond), leader.Name, led)
				break
			}
			if led == 0 || acted == 0 {
				t.Errorf("no replica took over within 2 minutes of %s's death (lead %v, act %v)", leader.Name, led, acted)
				break
			}
			if winner == follower {
				byStandby++
			}
			toLead, toAct = append(toLead, led), append(toAct, acted)
		}
		if len(toLead) == 0 && !t.Failed() {
			t.Error("the leader was never killed: the run proves nothing")
		}
		if bothLeading > 0 {
			t.Errorf("two replicas said they led at once in %d samples", bothLeading)
		}
		var lease coordinationv1.Lease
		transitions := "?"
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: configv1alpha1.DefaultNamespace, Name: configv1alpha1.DefaultLeaderElectionID}, &lease); err == nil && lease.Spec.LeaseTransitions != nil {
			transitions = fmt.Sprint(*lease.Spec.LeaseTransitions)
		}
		return fmt.Sprintf("2 replicas, the leader SIGKILLed %d times (%s after a leader took over) and started again 1s later; "+
			"taken over by the standby %d times, by the restarted replica %d times; lease transitions %s; both leading at once: %d samples; "+
			"kill → a replica holds the Lease: %s; kill → it reconciles: %s",
			len(toLead), pause, byStandby, len(toLead)-byStandby, transitions, bothLeading, percentiles(toLead), percentiles(toAct))
	})
}

// awaitLeader waits until one replica leads, and returns it and another.
func awaitLeader(ctx context.Context, rs []*dev.Replica, bothLeading *int) (leader, follower *dev.Replica, err error) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		var leading []*dev.Replica
		for _, r := range rs {
			if r.Leading() {
				leading = append(leading, r)
			}
		}
		switch len(leading) {
		case 1:
			for _, r := range rs {
				if r != leading[0] {
					return leading[0], r, nil
				}
			}
		case 0:
		default:
			*bothLeading++
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil, nil, fmt.Errorf("no replica leads after 2 minutes")
}

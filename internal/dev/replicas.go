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

package dev

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"
)

// Replica is one of several managers of a cluster with leader election on,
// as the replicas of config/default's Deployment are.
type Replica struct {
	Name                    string
	PID                     int
	MetricsPort, HealthPort int
	webhookPort, statusPort int
	o                       Options
	// exited is closed when the process ends.
	exited chan struct{}
}

// leaseNamespace holds the replicas' leader election Lease, as in a cluster.
const leaseNamespace = systemNamespace

// StartReplicas stops the cluster's manager and starts n managers with
// leader election in its place. The first serves the webhook on the port the
// webhook configuration names, the others on ports of their own (a Service
// would spread calls over all of them in a cluster). StopReplicas and then
// RestartManager bring the single manager back.
func StartReplicas(ctx context.Context, o Options, n int) ([]*Replica, error) {
	o.defaults()
	st, err := loadState(o)
	if err != nil {
		return nil, err
	}
	if st.ManagerPID != 0 {
		if err := stopProcess(st.ManagerPID); err != nil {
			return nil, err
		}
	}
	var rs []*Replica
	for i := range n {
		r := &Replica{Name: fmt.Sprintf("replica-%d", i), o: o, webhookPort: st.WebhookPort}
		if i > 0 {
			if r.webhookPort, err = FreePort(); err != nil {
				return rs, err
			}
		}
		if r.MetricsPort, err = FreePort(); err != nil {
			return rs, err
		}
		if r.statusPort, err = FreePort(); err != nil {
			return rs, err
		}
		if r.HealthPort, err = FreePort(); err != nil {
			return rs, err
		}
		if err := r.Start(ctx); err != nil {
			return rs, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// StopReplicas stops each replica with SIGTERM, so a leader releases its
// Lease.
func StopReplicas(rs []*Replica) error {
	for _, r := range rs {
		if err := stopProcess(r.PID); err != nil {
			return err
		}
	}
	return nil
}

// Start starts the replica (again, after Kill) on its ports and waits until
// it is ready: serving its webhook, leading or not.
func (r *Replica) Start(ctx context.Context) error {
	m := managerProcess{
		name: "manager " + r.Name, logPath: r.logPath(), configPath: filepath.Join(r.o.WorkDir, "config.yaml"),
		certDir:     filepath.Join(r.o.WorkDir, r.Name, "certs"),
		webhookPort: r.webhookPort, metricsPort: r.MetricsPort, healthPort: r.HealthPort, statusPort: r.statusPort,
		extraArgs: []string{"--leader-elect=true", "--leader-election-namespace", leaseNamespace},
	}
	pid, exited, err := m.launch(r.o)
	if err != nil {
		return err
	}
	r.PID, r.exited = pid, exited
	return m.waitReady(ctx, exited)
}

// Log returns the last lines of the replica's log.
func (r *Replica) Log(lines int) string {
	return tail(r.logPath(), lines)
}

func (r *Replica) logPath() string {
	return filepath.Join(r.o.WorkDir, "manager-"+r.Name+".log")
}

// Kill kills the replica with SIGKILL, as a crash or a lost node would: it
// does not release its Lease.
func (r *Replica) Kill() error {
	if err := syscall.Kill(r.PID, syscall.SIGKILL); err != nil {
		return err
	}
	<-r.exited
	return nil
}

// Leading reports whether the replica holds the leader Lease, from its
// leader_election_master_status metric. A replica that does not answer is
// not leading.
func (r *Replica) Leading() bool {
	v, err := r.metric("leader_election_master_status", nil)
	return err == nil && v > 0
}

// Reconciles is the number of reconciles the named controllers of the
// replica did (controller_runtime_reconcile_total, every result).
func (r *Replica) Reconciles(controllers ...string) (float64, error) {
	var total float64
	for _, c := range controllers {
		n, err := r.metric("controller_runtime_reconcile_total", map[string]string{"controller": c})
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// metric sums the samples of a metric the replica exposes whose labels
// include match (nil: every sample).
func (r *Replica) metric(name string, match map[string]string) (float64, error) {
	m, err := Scrape(context.Background(), fmt.Sprintf("http://127.0.0.1:%d/metrics", r.MetricsPort), 2*time.Second)
	if err != nil {
		return 0, fmt.Errorf("metrics of %s: %w", r.Name, err)
	}
	return m.Sum(name, match), nil
}

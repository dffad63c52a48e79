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
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// The coscheduling scheduler, with Options.Coscheduler: kube-scheduler with
// the coscheduling plugin of the Kubernetes scheduler-plugins, built into
// bin/coscheduler by `hack/build-tools.sh coscheduler` from the release
// hack/tools/coscheduling pins. It runs as a local process beside the
// cluster's kube-scheduler and schedules the Pods that name it
// (spec.schedulerName: CoschedulerName) a PodGroup at a time: the gang
// scheduler a runtime's podGroupPolicy coscheduling asks for. Its PodGroup
// CRD is read from that release's module in the Go module cache.
const (
	// CoschedulerName is the scheduler name of the coscheduling
	// scheduler's profile.
	CoschedulerName = "scheduler-plugins-scheduler"
	// coschedulingCRD is the PodGroup CRD in the scheduler-plugins module.
	coschedulingCRD = "manifests/coscheduling/crd.yaml"
)

// coschedulerConfiguration is the scheduler's configuration (format: the
// kubeconfig). A gang's Pods wait at most 10 seconds at Permit for the
// rest of their group before they are sent back to the queue.
const coschedulerConfiguration = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: %s
profiles:
  - schedulerName: ` + CoschedulerName + `
    plugins:
      multiPoint:
        enabled:
          - name: Coscheduling
      queueSort:
        enabled:
          - name: Coscheduling
        disabled:
          - name: "*"
    pluginConfig:
      - name: Coscheduling
        args:
          permitWaitingTimeSeconds: 10
`

// CoschedulerLog is the file the coscheduling scheduler logs to.
func (o Options) CoschedulerLog() string {
	o.defaults()
	return filepath.Join(o.WorkDir, "coscheduler.log")
}

// CoschedulingCRD returns the path of the scheduler-plugins' PodGroup CRD
// (scheduling.x-k8s.io), in the Go module cache, of the release
// hack/tools/coscheduling pins; it downloads the module if it must.
func CoschedulingCRD(ctx context.Context, o Options) (string, error) {
	o.defaults()
	dir, err := ModuleDir(ctx, filepath.Join(o.Root, "hack", "tools", "coscheduling"), "sigs.k8s.io/scheduler-plugins")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, coschedulingCRD), nil
}

// EnsureCoscheduler installs the PodGroup CRD and starts the coscheduling
// scheduler unless it runs and is ready. Running it twice is safe; Down
// stops it.
func EnsureCoscheduler(ctx context.Context, o Options) error {
	o.defaults()
	st, err := loadState(o)
	if err != nil {
		return err
	}
	err = ensureCoscheduler(ctx, o, &st)
	// Saved even on failure: Down stops the scheduler that started.
	if saveErr := saveState(o, st); err == nil {
		err = saveErr
	}
	return err
}

// StopCoscheduler stops the coscheduling scheduler, if it runs. Its CRD and
// PodGroups stay.
func StopCoscheduler(o Options) error {
	o.defaults()
	st, err := loadState(o)
	if err != nil {
		return err
	}
	if err := stopCoscheduler(o); err != nil {
		return err
	}
	st.CoschedulerPID, st.CoschedulerPort = 0, 0
	return saveState(o, st)
}

func ensureCoscheduler(ctx context.Context, o Options, st *state) error {
	if err := o.needCoscheduler(); err != nil {
		return err
	}
	crd, err := CoschedulingCRD(ctx, o)
	if err != nil {
		return err
	}
	step(o, "installing the scheduler-plugins' PodGroup CRD from %s", crd)
	if err := kubectl(ctx, o, "apply", "--server-side", "--force-conflicts", "-f", crd); err != nil {
		return err
	}
	// The plugin lists PodGroups at start, and its cache would not sync
	// without them served.
	if err := kubectl(ctx, o, "wait", "--for", "condition=Established", "--timeout", "60s", "-f", crd); err != nil {
		return err
	}
	if st.CoschedulerPID != 0 && slices.Contains(coschedulersOf(o), st.CoschedulerPID) && readySecure(st.CoschedulerPort) == nil {
		step(o, "the coscheduling scheduler is running (pid %d)", st.CoschedulerPID)
		return nil
	}
	if err := stopCoscheduler(o); err != nil {
		return err
	}
	st.CoschedulerPID = 0
	if st.CoschedulerPort == 0 || !portFree(st.CoschedulerPort) {
		if st.CoschedulerPort, err = FreePort(); err != nil {
			return err
		}
	}
	configPath := o.coschedulerConfig()
	if err := os.WriteFile(configPath, fmt.Appendf(nil, coschedulerConfiguration, o.Kubeconfig()), 0o644); err != nil {
		return err
	}
	// The plugin retries a gang on Pod and PodGroup events (in a full
	// install, also on the scheduler-plugins controller's updates of a
	// PodGroup's status; that controller does not run here). Room that
	// appears for a waiting gang is seen when the scheduler next retries
	// its unschedulable Pods: every 5 minutes by default, 10 seconds here.
	pid, exited, err := startDetached("the coscheduling scheduler", o.coschedulerBinary(), []string{
		"--config", configPath,
		"--secure-port", strconv.Itoa(st.CoschedulerPort),
		"--pod-max-in-unschedulable-pods-duration", "10s",
	}, o.CoschedulerLog())
	if err != nil {
		return err
	}
	st.CoschedulerPID = pid
	step(o, "started the coscheduling scheduler (pid %d) as %s, logging to %s", pid, CoschedulerName, o.CoschedulerLog())
	return waitReady(ctx, "the coscheduling scheduler", func() error { return readySecure(st.CoschedulerPort) }, o.CoschedulerLog(), exited)
}

func (o Options) coschedulerConfig() string { return filepath.Join(o.WorkDir, "coscheduler.yaml") }

func (o Options) coschedulerBinary() string { return filepath.Join(o.BinDir, "coscheduler") }

// needCoscheduler fails, saying how to build it, if bin/coscheduler is
// missing.
func (o Options) needCoscheduler() error {
	if _, err := os.Stat(o.coschedulerBinary()); err != nil {
		return fmt.Errorf("coscheduler is missing from %s: run 'make coscheduler' first (make dev COSCHEDULING=1 does)", o.BinDir)
	}
	return nil
}

// coschedulersOf lists the live processes of bin/coscheduler with o's
// configuration: the one Up recorded, and any an aborted run started and did
// not record. A recorded PID that is not among them is not ours.
func coschedulersOf(o Options) []int {
	exe, config := o.coschedulerBinary(), o.coschedulerConfig()
	return processesMatching(func(args []string) bool { return args[0] == exe && slices.Contains(args, config) })
}

// stopCoscheduler stops every coscheduling scheduler of o's.
func stopCoscheduler(o Options) error {
	for _, pid := range coschedulersOf(o) {
		step(o, "stopping the coscheduling scheduler (pid %d)", pid)
		if err := stopProcess(pid); err != nil {
			return err
		}
	}
	return nil
}

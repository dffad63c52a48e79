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
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// ensureManager starts the manager unless it already runs and is ready, and
// waits until it is ready.
func ensureManager(ctx context.Context, o Options, st *state, configPath string) error {
	if ours(o, "manager", st.ManagerPID) && ready(st.HealthPort) == nil {
		step(o, "the manager is running (pid %d)", st.ManagerPID)
		return nil
	}
	if ours(o, "manager", st.ManagerPID) {
		// Running but not ready: replace it.
		if err := stopProcess(st.ManagerPID); err != nil {
			return err
		}
	}
	webhookPort := st.WebhookPort
	if err := choosePorts(ctx, st); err != nil {
		return err
	}
	if webhookPort != 0 && st.WebhookPort != webhookPort {
		// Another program took the port: point the webhook at the new one.
		cl, err := o.client()
		if err != nil {
			return err
		}
		step(o, "the webhook moves to https://localhost:%d (port %d is taken)", st.WebhookPort, webhookPort)
		if err := applyWebhookConfiguration(ctx, cl, o, st.WebhookPort); err != nil {
			return err
		}
	}
	m := managerProcess{
		name: "the manager", logPath: o.ManagerLog(), configPath: configPath, certDir: filepath.Join(o.WorkDir, "certs"),
		webhookPort: st.WebhookPort, metricsPort: st.MetricsPort, healthPort: st.HealthPort, statusPort: st.StatusPort, extraArgs: o.managerArgs(),
	}
	pid, exited, err := m.launch(o)
	if err != nil {
		return err
	}
	st.ManagerPID = pid
	step(o, "started the manager (pid %d), logging to %s", st.ManagerPID, o.ManagerLog())
	if err := m.waitReady(ctx, exited); err != nil {
		return err
	}
	cl, err := o.client()
	if err != nil {
		return err
	}
	return waitReady(ctx, "the manager's webhook, called by the API server", func() error { return webhookServes(ctx, cl) }, m.logPath, exited)
}

// managerProcess is one manager process of the dev cluster: the manager Up
// starts, or a replica of StartReplicas.
type managerProcess struct {
	name                                 string // in messages: "the manager"
	logPath, configPath, certDir         string
	webhookPort, metricsPort, healthPort int
	statusPort                           int
	extraArgs                            []string
}

// launch starts the manager detached (see startDetached). exited is closed
// when it ends.
func (m managerProcess) launch(o Options) (pid int, exited chan struct{}, err error) {
	args := []string{
		"--config", m.configPath,
		"--kubeconfig", o.Kubeconfig(),
		"--webhook-port", strconv.Itoa(m.webhookPort),
		"--webhook-cert-dir", m.certDir,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", m.metricsPort),
		"--metrics-insecure",
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", m.healthPort),
		"--status-server-port", strconv.Itoa(m.statusPort),
	}
	return startDetached(m.name, filepath.Join(o.BinDir, "manager"), append(args, m.extraArgs...), m.logPath)
}

// startDetached starts bin in a session of its own, so it outlives
// `trainjob-dev up` and does not get the terminal's Ctrl-C, with its output
// appended to logPath and env added to its environment. exited is closed
// when it ends.
func startDetached(name, bin string, args []string, logPath string, env ...string) (pid int, exited chan struct{}, err error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, nil, fmt.Errorf("starting %s: %w", name, err)
	}
	exited = make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // reap it if it ends while we run
	return cmd.Process.Pid, exited, nil
}

// waitReady waits up to a minute until the manager answers ready on its
// health port, and fails at once if it exits.
func (m managerProcess) waitReady(ctx context.Context, exited <-chan struct{}) error {
	return waitReady(ctx, m.name, func() error { return ready(m.healthPort) }, m.logPath, exited)
}

// waitReady waits up to a minute until the process name answers ready (probe
// returns nil), and fails at once if it exits (closes exited).
func waitReady(ctx context.Context, name string, probe func() error, logPath string, exited <-chan struct{}) error {
	var notReady error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		if notReady = probe(); notReady == nil {
			return true, nil
		}
		select {
		case <-exited:
			return false, fmt.Errorf("%s exited; the end of %s:\n%s", name, logPath, tail(logPath, 20))
		default:
			return false, nil
		}
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("%s is not ready after a minute (%w); see %s", name, notReady, logPath)
	}
	return err
}

// choosePorts keeps the manager's ports that are free and picks new ones for
// the others. The webhook configuration names the webhook port, so that one
// is waited for a few seconds (a killed manager's connections may hold it
// briefly) before another is picked.
func choosePorts(ctx context.Context, st *state) error {
	if st.WebhookPort != 0 {
		// The poll's own timeout is no error: another port is picked below.
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return portFree(st.WebhookPort), nil
		})
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	for _, port := range []*int{&st.WebhookPort, &st.MetricsPort, &st.HealthPort, &st.StatusPort} {
		if *port != 0 && portFree(*port) {
			continue
		}
		p, err := FreePort()
		if err != nil {
			return err
		}
		*port = p
	}
	return nil
}

// ready asks http://127.0.0.1:port/readyz.
func ready(port int) error {
	return readyAt(http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
}

// loopbackTLS is a client of the components on this machine that serve
// HTTPS with a certificate they make for themselves at start, which
// nothing here can verify.
var loopbackTLS = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback only, readiness only

// readySecure asks https://127.0.0.1:port/readyz.
func readySecure(port int) error {
	return readyAt(loopbackTLS, fmt.Sprintf("https://127.0.0.1:%d/readyz", port))
}

func readyAt(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// processAlive reports whether pid runs (a zombie does not).
func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// stopGrace is how long a process has to exit after SIGTERM.
const stopGrace = 10 * time.Second

// stopProcess sends SIGTERM, and SIGKILL if pid still runs after stopGrace.
func stopProcess(pid int) error {
	if !processAlive(pid) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	// Not a caller's context: once sent SIGTERM, a process is killed after
	// stopGrace even if the caller is being cancelled.
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, stopGrace, true, func(context.Context) (bool, error) {
		return !processAlive(pid), nil
	})
	if err == nil {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func portFree(port int) bool {
	l, err := netListen(port)
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// waitNoProcess waits up to timeout until no process runs a program from
// under dir.
func waitNoProcess(ctx context.Context, dir string, timeout time.Duration) error {
	var pids []int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		pids = processesUnder(dir)
		return len(pids) == 0, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fmt.Errorf("processes %v of %s still run after %v", pids, dir, timeout)
	}
	return err
}

// managersOf lists the live manager processes that talk to o's cluster.
func managersOf(o Options) []int { return binaryProcessesOf(o, "manager") }

// ours reports whether pid, one recorded in the state, is a live process of
// bin/name that talks to o's cluster: after a reboot, a recorded PID may be
// another program's.
func ours(o Options, name string, pid int) bool {
	return pid != 0 && slices.Contains(binaryProcessesOf(o, name), pid)
}

// binaryProcessesOf lists the live processes of bin/name that talk to o's
// cluster (have its kubeconfig on their command line).
func binaryProcessesOf(o Options, name string) []int {
	exe := filepath.Join(o.BinDir, name)
	return processesMatching(func(args []string) bool {
		return args[0] == exe && slices.Contains(args, o.Kubeconfig())
	})
}

// processesUnder lists the live processes whose executable is under dir.
func processesUnder(dir string) []int {
	return processesMatching(func(args []string) bool {
		return strings.HasPrefix(args[0], dir+string(os.PathSeparator))
	})
}

// processesMatching lists the live processes whose command line matches.
func processesMatching(match func(args []string) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		if len(cmdline) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if match(args) && processAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killWait is how long KillManager waits for the manager to be gone after
// SIGKILL: moments, unless the process is stuck in the kernel.
const killWait = time.Minute

// KillManager kills the manager with SIGKILL, as a crash would, and waits
// until it is gone; Up starts it again.
func KillManager(o Options) error {
	o.defaults()
	st, err := loadState(o)
	if err != nil {
		return err
	}
	if !ours(o, "manager", st.ManagerPID) {
		return fmt.Errorf("no manager is running")
	}
	if err := syscall.Kill(st.ManagerPID, syscall.SIGKILL); err != nil {
		return err
	}
	// KillManager takes no context; killWait bounds the wait.
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, killWait, true, func(context.Context) (bool, error) {
		return !processAlive(st.ManagerPID), nil
	})
	if err != nil {
		return fmt.Errorf("the manager (pid %d) still runs %v after SIGKILL", st.ManagerPID, killWait)
	}
	return nil
}

// Manager reports the manager's process ID and metrics port (served over
// plain HTTP on 127.0.0.1), or an error if it does not run.
func Manager(o Options) (pid, metricsPort int, err error) {
	o.defaults()
	st, err := loadState(o)
	if err != nil {
		return 0, 0, err
	}
	if !ours(o, "manager", st.ManagerPID) {
		return 0, 0, fmt.Errorf("no manager is running for %s; run 'make dev-up'", o.WorkDir)
	}
	return st.ManagerPID, st.MetricsPort, nil
}

// StatusServerURL is where the manager's status server serves, on this
// machine: https://localhost:<port>, the name its certificate is made for.
func StatusServerURL(o Options) (string, error) {
	o.defaults()
	st, err := loadState(o)
	if err != nil {
		return "", err
	}
	if st.StatusPort == 0 {
		return "", fmt.Errorf("no status server port in %s; run 'make dev-up'", o.WorkDir)
	}
	return fmt.Sprintf("https://localhost:%d", st.StatusPort), nil
}

// RestartManager starts the manager of a cluster that is up, if it is not
// running, and waits until it is ready.
func RestartManager(ctx context.Context, o Options) error {
	o.defaults()
	st, err := loadState(o)
	if err != nil {
		return err
	}
	if err := ensureManager(ctx, o, &st, filepath.Join(o.WorkDir, "config.yaml")); err != nil {
		return err
	}
	return saveState(o, st)
}

// component is a running control-plane process and how to start it again.
type component struct {
	pid  int
	name string
	args []string
	env  []string
	cwd  string
}

func readComponent(pid int) (component, error) {
	c := component{pid: pid}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return c, err
	}
	c.name = filepath.Base(exe)
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return c, err
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return c, err
	}
	if c.cwd, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil {
		return c, err
	}
	c.args = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	c.env = strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	return c, nil
}

// start runs the component again, detached, logging to logDir/<name>.log.
func (c component) start(logDir string) error {
	logFile, err := os.OpenFile(filepath.Join(logDir, c.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logFile.Close() }()
	cmd := exec.Command(c.args[0], c.args[1:]...)
	cmd.Dir, cmd.Env = c.cwd, c.env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s again: %w", c.name, err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// StopAPIServer stops the cluster's kube-apiserver and returns a function
// that starts it again as it was (same command line, working directory and
// environment). That function also restarts the components that exited
// meanwhile — kube-controller-manager and kube-scheduler exit when they
// cannot renew their leader lease — as a kubelet restarts a control plane's
// static Pods.
func StopAPIServer(o Options) (start func() error, err error) {
	o.defaults()
	dir := filepath.Join(o.WorkDir, "kwok", "clusters", o.Name)
	var apiserver *component
	var others []component
	for _, pid := range processesUnder(dir) {
		c, err := readComponent(pid)
		if err != nil {
			return nil, err
		}
		if c.name == "kube-apiserver" {
			apiserver = &c
		} else {
			others = append(others, c)
		}
	}
	if apiserver == nil {
		return nil, fmt.Errorf("no kube-apiserver runs under %s", dir)
	}
	if err := stopProcess(apiserver.pid); err != nil {
		return nil, err
	}
	logDir := filepath.Join(dir, "logs")
	return func() error {
		if err := apiserver.start(logDir); err != nil {
			return err
		}
		for _, c := range others {
			if !processAlive(c.pid) {
				if err := c.start(logDir); err != nil {
					return err
				}
			}
		}
		return nil
	}, nil
}

// ComponentArgs returns the command line of the cluster's running
// control-plane component name (kube-controller-manager, for instance).
func ComponentArgs(o Options, name string) ([]string, error) {
	c, err := findComponent(o, name)
	if err != nil {
		return nil, err
	}
	return c.args, nil
}

// RestartComponent stops the cluster's control-plane component name and
// starts it again with the command line edit returns for its current one.
func RestartComponent(o Options, name string, edit func(args []string) []string) error {
	c, err := findComponent(o, name)
	if err != nil {
		return err
	}
	if err := stopProcess(c.pid); err != nil {
		return err
	}
	c.args = edit(slices.Clone(c.args))
	return c.start(filepath.Join(o.WorkDir, "kwok", "clusters", o.Name, "logs"))
}

// Components maps the name of each process of o's cluster — etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok-controller
// and the manager — to its process ID.
func Components(o Options) (map[string]int, error) {
	o.defaults()
	out := map[string]int{}
	for _, pid := range processesUnder(filepath.Join(o.WorkDir, "kwok", "clusters", o.Name)) {
		c, err := readComponent(pid)
		if err != nil {
			continue // ended meanwhile
		}
		out[c.name] = pid
	}
	if pid, _, err := Manager(o); err == nil {
		out["manager"] = pid
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no process of cluster %s runs; run 'make dev-up'", o.Name)
	}
	return out, nil
}

func findComponent(o Options, name string) (component, error) {
	o.defaults()
	dir := filepath.Join(o.WorkDir, "kwok", "clusters", o.Name)
	for _, pid := range processesUnder(dir) {
		c, err := readComponent(pid)
		if err != nil {
			return c, err
		}
		if c.name == name {
			return c, nil
		}
	}
	return component{}, fmt.Errorf("no %s runs under %s", name, dir)
}

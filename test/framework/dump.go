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

package framework

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// logLines is how many lines of a log a failed test shows.
const logLines = 40

// Dump is what a failed test logs of its namespace: its objects as kubectl
// lists and prints them, its events, and the end of the logs of the
// processes that run the cluster.
type Dump struct {
	// Listed are the resources of the namespace listed with kubectl get -o
	// wide.
	Listed []string
	// Printed are the resources of the namespace printed whole, as YAML.
	Printed []string
	// ClusterPrinted are cluster-scoped resources printed whole, as YAML.
	ClusterPrinted []string
	// Logs are the logs whose last lines are shown.
	Logs []Log
}

// Log is a process's log file.
type Log struct {
	// Name names the process.
	Name string
	// Path is the file it logs to.
	Path string
}

// TrainJobDump lists the TrainJobs, Jobs, Pods and Services of a
// namespace, prints its TrainJobs, and shows the end of logs.
func TrainJobDump(logs ...Log) *Dump {
	return &Dump{
		Listed:  []string{"trainjobs", "jobs", "pods", "services"},
		Printed: []string{"trainjobs"},
		Logs:    logs,
	}
}

// DumpNamespace logs what Dump says of namespace ns, and the namespace's
// events; nothing if Dump is nil.
func (c *Cluster) DumpNamespace(t testing.TB, ns string) {
	t.Helper()
	d := c.Dump
	if d == nil {
		return
	}
	var commands [][]string
	if len(d.Listed) > 0 {
		commands = append(commands, []string{"get", strings.Join(d.Listed, ","), "-n", ns, "-o", "wide"})
	}
	if len(d.Printed) > 0 {
		commands = append(commands, []string{"get", strings.Join(d.Printed, ","), "-n", ns, "-o", "yaml"})
	}
	if len(d.ClusterPrinted) > 0 {
		commands = append(commands, []string{"get", strings.Join(d.ClusterPrinted, ","), "-o", "yaml"})
	}
	commands = append(commands, []string{"get", "events", "-n", ns, "--sort-by=.lastTimestamp"})
	for _, args := range commands {
		out, _ := c.Kubectl(args...)
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
	for _, l := range d.Logs {
		if tail, err := LogTail(l.Path, logLines); err == nil {
			t.Logf("%s log (last lines):\n%s", l.Name, tail)
		}
	}
}

// LogTail returns the last n lines of the file at path.
func LogTail(path string, n int) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the log: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n"), nil
}

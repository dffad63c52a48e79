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
	"os/exec"
	"strings"
	"testing"
)

// KubectlCmd is the command kubectl args, on the cluster.
func (c *Cluster) KubectlCmd(args ...string) *exec.Cmd {
	return exec.Command(c.KubectlBinary, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
}

// Kubectl runs kubectl args on the cluster, and returns what it printed,
// errors and warnings included.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	out, err := c.KubectlCmd(args...).CombinedOutput()
	return string(out), err
}

// MustKubectl runs kubectl args on the cluster, and returns what it printed;
// an error fails the test.
func (c *Cluster) MustKubectl(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.Kubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// ApplyYAML applies a manifest in ns with kubectl, as a user would, and
// returns what kubectl said (warnings included); an error fails the test.
func (c *Cluster) ApplyYAML(t testing.TB, ns, manifest string) string {
	t.Helper()
	cmd := c.KubectlCmd("apply", "-n", ns, "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	return string(out)
}

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

package e2ereal

import (
	"bufio"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

// programs are the training programs the tests run in the training image,
// each checking its own result and exiting 1 if it is wrong.
//
//go:embed programs/*.py
var programs embed.FS

// program returns the source of programs/name.
func program(t *testing.T, name string) string {
	t.Helper()
	src, err := programs.ReadFile("programs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// scriptCommand is a container command, as JSON (which YAML reads), that
// writes programs/name to /tmp in the container and then execs run, as
// the Kubeflow SDK passes a training function to a TrainJob: the program
// travels in the TrainJob, not in the image. run replaces the shell, so
// that the program (or torchrun) gets the container's signals.
func scriptCommand(t *testing.T, name, run string) string {
	t.Helper()
	script := fmt.Sprintf("cat > /tmp/%s <<'PROGRAM'\n%sPROGRAM\nexec %s", name, program(t, name), run)
	return jsonString(t, []string{"bash", "-c", script})
}

// inlinePython is a python3 command line that runs programs/name without
// a file: mpirun starts it on hosts where only the launcher's command
// line arrives.
func inlinePython(t *testing.T, name string) string {
	t.Helper()
	return fmt.Sprintf(`python3 -c "exec(__import__('base64').b64decode('%s'))"`,
		base64.StdEncoding.EncodeToString([]byte(program(t, name))))
}

// jsonString marshals v.
func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// trainctl runs bin/trainctl on the suite's cluster in ns.
func trainctl(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(devOpts.Root, "bin", "trainctl"),
		append([]string{"--kubeconfig", devOpts.Kubeconfig(), "-n", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("trainctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// wantLogs fails the test unless the TrainJob's logs (trainctl logs, every
// node's) hold each of want, as often as want holds it.
func wantLogs(t *testing.T, ns, name string, want ...string) string {
	t.Helper()
	logs := trainctl(t, ns, "logs", name)
	counts := map[string]int{}
	for _, w := range want {
		counts[w]++
	}
	for w, n := range counts {
		if got := strings.Count(logs, w); got < n {
			t.Errorf("the logs of %s hold %q %d times, want %d:\n%s", name, w, got, n, logs)
		}
	}
	return logs
}

// holdLine is what a process of programs/hold.py said.
type holdLine struct {
	// Kind is start or sigterm.
	Kind, Host, Attempt string
	// At is when the test heard it.
	At   time.Time
	conn net.Conn
}

// holdServer is where the processes of programs/hold.py report, on this
// machine's address on the Pods' bridge, which every Pod reaches.
type holdServer struct {
	ln    net.Listener
	lines chan holdLine
	mu    sync.Mutex
	conns []net.Conn
}

// newHoldServer listens on the real node's gateway until the test ends.
func newHoldServer(t *testing.T) *holdServer {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(dev.RealGateway, "0"))
	if err != nil {
		t.Fatal(err)
	}
	s := &holdServer{ln: ln, lines: make(chan holdLine, 64)}
	go s.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.conns {
			_ = c.Close()
		}
	})
	return s
}

func (s *holdServer) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		go func() {
			_ = c.SetReadDeadline(time.Now().Add(time.Minute))
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return
			}
			f := strings.Fields(line)
			if len(f) == 3 {
				s.lines <- holdLine{Kind: f[0], Host: f[1], Attempt: f[2], At: time.Now(), conn: c}
			}
		}()
	}
}

// Addr is the address the processes report to (REPORT_ADDR).
func (s *holdServer) Addr() string { return s.ln.Addr().String() }

// holdNodes is how many nodes, each one process, a TrainJob of hold.py has.
const holdNodes = 2

// expect waits up to d for a line of kind from each of the holdNodes
// hosts, and fails the test on any other line or if they do not come.
func (s *holdServer) expect(t *testing.T, d time.Duration, kind string) []holdLine {
	t.Helper()
	var got []holdLine
	hosts := map[string]bool{}
	timer := time.NewTimer(d)
	defer timer.Stop()
	for len(got) < holdNodes {
		select {
		case l := <-s.lines:
			if l.Kind != kind || hosts[l.Host] {
				t.Fatalf("heard %s from %s (attempt %s), want %s from %d distinct hosts; so far %+v", l.Kind, l.Host, l.Attempt, kind, holdNodes, got)
			}
			hosts[l.Host] = true
			got = append(got, l)
		case <-timer.C:
			t.Fatalf("heard %d %s lines in %s, want %d: %+v", len(got), kind, d, holdNodes, got)
		}
	}
	return got
}

// finish tells the processes that said start to finish.
func finish(t *testing.T, started []holdLine) {
	t.Helper()
	for _, l := range started {
		if _, err := fmt.Fprintln(l.conn, "finish"); err != nil {
			t.Fatalf("telling %s to finish: %v", l.Host, err)
		}
	}
}

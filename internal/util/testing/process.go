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

package testing

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// processStopGrace is how long a process StartProcess started has to exit
// after SIGTERM before it is killed.
const processStopGrace = 15 * time.Second

// StartProcess runs bin with args for the rest of the test, its output in a
// file of the test's, and waits up to timeout until it answers 200 at
// readyURL (its /readyz). stop ends it (SIGTERM, SIGKILL after 15 s) and
// waits until it has; the end of the test calls it if the test did not. A
// failed test logs the end of the process's output, as does a process that
// exits before it is ready.
func StartProcess(t testing.TB, name, readyURL string, timeout time.Duration, bin string, args ...string) (stop func()) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "output.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(exited) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(processStopGrace):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	logTail := func() string {
		data, _ := os.ReadFile(logPath)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		return strings.Join(lines[max(0, len(lines)-60):], "\n")
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("the output of %s (last lines):\n%s", name, logTail())
		}
	})
	Eventually(t, timeout, 200*time.Millisecond, name+" to be ready", func() error {
		select {
		case <-exited:
			t.Fatalf("%s exited before it was ready:\n%s", name, logTail())
		default:
		}
		resp, err := http.Get(readyURL) //nolint:gosec // a URL of the test's
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	})
	return stop
}

// ReadyzURL is the readiness URL of a process whose health probes are
// served on 127.0.0.1:port.
func ReadyzURL(port int) string {
	return fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
}

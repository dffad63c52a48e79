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

package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainjob-operator/trainjob-operator/internal/config"
)

// expectation is what the header of a test/badinput manifest says must
// happen to it.
type expectation struct {
	want   []string // refused, with an error containing each of these
	warn   []string // accepted, with a warning containing each of these
	accept bool     // accepted
}

func readExpectation(t *testing.T, path string) expectation {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var e expectation
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "# ") {
			break
		}
		text := strings.TrimPrefix(line, "# ")
		switch {
		case strings.HasPrefix(text, "want: "):
			e.want = append(e.want, strings.TrimPrefix(text, "want: "))
		case strings.HasPrefix(text, "warn: "):
			e.warn = append(e.warn, strings.TrimPrefix(text, "warn: "))
		case text == "accept":
			e.accept = true
		}
	}
	if len(e.want) == 0 && len(e.warn) == 0 && !e.accept {
		t.Fatalf("%s says nothing of what must happen to it (# want:, # warn: or # accept)", path)
	}
	return e
}

// Every manifest a user could plausibly write wrong is refused with an
// error naming the field, or accepted and handled safely, by the real API
// server with the webhook; every bad configuration file stops the manager
// with an error naming the field.
func TestBadInputCorpus(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "test", "badinput", "*.yaml"))
	if err != nil || len(files) < 40 {
		t.Fatalf("the corpus has %d files (err %v), want at least 40", len(files), err)
	}
	ns := cluster.NewNamespace(t)
	// The TrainJobs reference the torch-distributed runtime: the webhook
	// checks them against it.
	if out, err := cluster.Kubectl("apply", "--server-side", "--force-conflicts", "-k", filepath.Join(repoRoot, "config", "runtimes")); err != nil {
		t.Fatalf("installing the runtimes: %v\n%s", err, out)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			e := readExpectation(t, f)
			var out string
			var err error
			if strings.HasPrefix(name, "config-") {
				_, err = config.Load(f)
				if err != nil {
					out = err.Error()
				}
			} else {
				out, err = cluster.Kubectl("apply", "--dry-run=server", "-n", ns, "-f", f)
			}
			switch {
			case len(e.want) > 0 && err == nil:
				t.Fatalf("accepted, want refused with %q:\n%s", e.want, out)
			case len(e.want) == 0 && err != nil:
				t.Fatalf("refused, want accepted: %v\n%s", err, out)
			}
			for _, w := range e.want {
				if !strings.Contains(out, w) {
					t.Errorf("the error does not say %q:\n%s", w, out)
				}
			}
			for _, w := range e.warn {
				if !strings.Contains(out, "Warning: ") || !strings.Contains(out, w) {
					t.Errorf("no warning saying %q:\n%s", w, out)
				}
			}
		})
	}
}

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

package certs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesOnlyWhatChanged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	w := &fileWriter{dir: dir}
	for i, step := range []struct {
		cert, key, ca string
		wantChanged   bool
	}{
		{"cert-1", "key-1", "ca-1", true},  // first write makes the directory
		{"cert-1", "key-1", "ca-1", false}, // same files: nothing to do
		{"cert-1", "key-2", "ca-1", true},  // renewed key
		{"cert-2", "key-2", "ca-1", true},  // renewed certificate
		{"cert-2", "key-2", "ca-2", true},  // new CA
	} {
		changed, err := w.write([]byte(step.cert), []byte(step.key), []byte(step.ca))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if changed != step.wantChanged {
			t.Errorf("step %d: changed = %t, want %t", i, changed, step.wantChanged)
		}
		for name, want := range map[string]string{certFile: step.cert, keyFile: step.key, caFile: step.ca} {
			got, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || string(got) != want {
				t.Errorf("step %d: %s = %q (%v), want %q", i, name, got, err, want)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("the directory holds %d files, want tls.crt, tls.key and ca.crt alone (no temporary file left)", len(entries))
	}
	info, err := os.Stat(filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("tls.key mode %o, want 600", perm)
	}
}

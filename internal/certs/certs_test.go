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
		cert, key   string
		wantChanged bool
	}{
		{"cert-1", "key-1", true},  // first write makes the directory
		{"cert-1", "key-1", false}, // same pair: nothing to do
		{"cert-1", "key-2", true},  // renewed key
		{"cert-2", "key-2", true},  // renewed certificate
	} {
		changed, err := w.write([]byte(step.cert), []byte(step.key))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if changed != step.wantChanged {
			t.Errorf("step %d: changed = %t, want %t", i, changed, step.wantChanged)
		}
		for name, want := range map[string]string{certFile: step.cert, keyFile: step.key} {
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
	if len(entries) != 2 {
		t.Errorf("the directory holds %d files, want tls.crt and tls.key alone (no temporary file left)", len(entries))
	}
	info, err := os.Stat(filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("tls.key mode %o, want 600", perm)
	}
}

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
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// WriteRelease writes, with the repository root's hack/release.sh (what
// make release runs, with its bin/kubectl and bin/helm), the release
// manifests of version into a temporary directory and returns it: their
// image is imageRepo@digest, as if make image had pushed it there. trainctl
// is built for this machine's platform only.
func WriteRelease(t *testing.T, root, version, imageRepo, digest string) (dist string) {
	t.Helper()
	dist = t.TempDir()
	if err := os.WriteFile(filepath.Join(dist, "image.digest"), []byte(digest+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "hack", "release.sh"))
	cmd.Env = append(os.Environ(), "VERSION="+version, "IMAGE_REPO="+imageRepo, "DIST="+dist,
		"KUBECTL="+filepath.Join(root, "bin", "kubectl"), "HELM="+filepath.Join(root, "bin", "helm"),
		"TRAINCTL_PLATFORMS="+runtime.GOOS+"/"+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/release.sh: %v\n%s", err, out)
	}
	return dist
}

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

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// root is the repository.
var root = filepath.Join("..", "..", "..")

// makeImage runs make image, as a user does, with its output in dist.
func makeImage(t *testing.T, dist string, vars ...string) v1.Hash {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-C", root, "image"}, vars...)...)
	cmd.Env = append(os.Environ(), "DIST="+dist)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Logf("make image:\n%s", out)
	data, err := os.ReadFile(filepath.Join(dist, "image.digest"))
	if err != nil {
		t.Fatal(err)
	}
	digest, err := v1.NewHash(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	return digest
}

// The image make image builds, pushed to a registry on this machine and
// pulled back by digest: one image per platform, each a static binary of
// that architecture, run as a non-root numeric user, labelled with the
// version and revision the binary reports; the same commit builds the same
// digest, in the registry, the OCI layout and its archive.
func TestImage(t *testing.T) {
	const (
		version  = "v9.8.7-test"
		revision = "0123456789abcdef0123456789abcdef01234567"
	)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/trainjob-operator"
	dist := t.TempDir()
	digest := makeImage(t, dist, "VERSION="+version, "REVISION="+revision, "IMAGE="+repo+":"+version)
	commitTime, err := exec.Command("git", "-C", root, "log", "-1", "--format=%ct").Output()
	if err != nil {
		t.Fatal(err)
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(string(commitTime)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Unix(secs, 0).UTC().Format(time.RFC3339)

	// The tag resolves to the digest, and the digest pulls.
	tagged, err := remote.Head(mustRef(t, repo+":"+version))
	if err != nil {
		t.Fatal(err)
	}
	if tagged.Digest != digest {
		t.Errorf("the tag resolves to %s, the build made %s", tagged.Digest, digest)
	}
	idx, err := remote.Index(mustRef(t, repo+"@"+digest.String()))
	if err != nil {
		t.Fatalf("pulling by digest: %v", err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, desc := range manifest.Manifests {
		platforms = append(platforms, desc.Platform.String())
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Fatalf("index platforms %v, want %v", platforms, want)
	}
	if manifest.Annotations["org.opencontainers.image.version"] != version {
		t.Errorf("index annotations %v, want the version", manifest.Annotations)
	}

	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, desc := range manifest.Manifests {
		arch := desc.Platform.Architecture
		t.Run(arch, func(t *testing.T) {
			img, err := idx.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != "linux" || cf.Architecture != arch {
				t.Errorf("config platform %s/%s, want linux/%s", cf.OS, cf.Architecture, arch)
			}
			if cf.Config.User != "65532:65532" || !slices.Equal(cf.Config.Entrypoint, []string{"/manager"}) {
				t.Errorf("user %q entrypoint %q, want 65532:65532 and /manager", cf.Config.User, cf.Config.Entrypoint)
			}
			for k, v := range map[string]string{
				"org.opencontainers.image.version":  version,
				"org.opencontainers.image.revision": revision,
				"org.opencontainers.image.source":   "https://github.com/trainjob-operator/trainjob-operator",
				"org.opencontainers.image.created":  created,
			} {
				if cf.Config.Labels[k] != v {
					t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
				}
			}
			layers, err := img.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("layers: %d, %v; want 1 on no base", len(layers), err)
			}
			files := extract(t, img)
			if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") {
				t.Errorf("/etc/passwd:\n%s", files["etc/passwd"].data)
			}
			if files["tmp"].mode != 0o1777 {
				t.Errorf("/tmp mode %o, want 1777", files["tmp"].mode)
			}
			bin := files["manager"]
			if bin.mode != 0o755 {
				t.Errorf("/manager mode %o, want 755", bin.mode)
			}
			path := filepath.Join(t.TempDir(), "manager")
			if err := os.WriteFile(path, bin.data, 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = f.Close() }()
			if f.Machine != machines[arch] {
				t.Errorf("/manager is for %s, want %s", f.Machine, machines[arch])
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("/manager is dynamically linked (%s): the image has no libc", p.Type)
				}
			}
			if arch != runtime.GOARCH {
				return
			}
			out, err := exec.Command(path, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("/manager --version: %v\n%s", err, out)
			}
			if want := "manager " + version + " (revision " + revision + ","; !strings.HasPrefix(string(out), want) {
				t.Errorf("/manager --version = %q, want it to start with %q", out, want)
			}
		})
	}

	// The layout names the index by its version, and its archive holds
	// it.
	fromLayout, err := layout.ImageIndexFromPath(filepath.Join(dist, "image"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := fromLayout.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].Digest != digest || top.Manifests[0].Annotations[refNameAnnotation] != version {
		t.Errorf("the layout's index.json holds %+v, want the index %s named %s", top.Manifests, digest, version)
	}
	names := tarNames(t, filepath.Join(dist, "image.tar"))
	for _, want := range []string{"oci-layout", "index.json", "blobs/sha256/" + digest.Hex} {
		if !slices.Contains(names, want) {
			t.Errorf("the archive lacks %s: %v", want, names)
		}
	}

	// Again, not pushed: the same digest.
	if again := makeImage(t, t.TempDir(), "VERSION="+version, "REVISION="+revision); again != digest {
		t.Errorf("the same inputs built %s, then %s", digest, again)
	}
}

// Another program of the project packed the same way (the dev cluster's
// pause, a test's program): the binary is where its entrypoint says, and
// the image is titled as asked.
func TestOtherProgram(t *testing.T) {
	img, cf := onlyImage(t, options{Binaries: map[string]string{"linux/amd64": os.Args[0]}, Entrypoint: "/pause", Title: "pause", Created: time.Unix(0, 0).UTC()})
	if !slices.Equal(cf.Config.Entrypoint, []string{"/pause"}) || cf.Config.Labels["org.opencontainers.image.title"] != "pause" {
		t.Errorf("entrypoint %q, title %q; want /pause and pause", cf.Config.Entrypoint, cf.Config.Labels["org.opencontainers.image.title"])
	}
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	files := extract(t, img)
	if f, ok := files["pause"]; !ok || f.mode != 0o755 || !bytes.Equal(f.data, bin) {
		t.Errorf("the image holds pause: %t, mode %o; want the binary, 0755", ok, f.mode)
	}
	if _, ok := files["manager"]; ok {
		t.Error("the image holds /manager too")
	}
}

// A whole root file system, packed as it is: owners, modes, symbolic and
// hard links; run as root with a PATH and no entrypoint.
func TestRootFS(t *testing.T) {
	dir := t.TempDir()
	for _, step := range []error{
		os.MkdirAll(filepath.Join(dir, "usr", "bin"), 0o755),
		os.WriteFile(filepath.Join(dir, "usr", "bin", "python3"), []byte("#!python"), 0o755),
		os.Link(filepath.Join(dir, "usr", "bin", "python3"), filepath.Join(dir, "usr", "bin", "python3.11")),
		os.Symlink("usr/bin", filepath.Join(dir, "bin")),
		os.WriteFile(filepath.Join(dir, "secret"), []byte("key"), 0o600),
	} {
		if step != nil {
			t.Fatal(step)
		}
	}
	img, cf := onlyImage(t, options{RootFS: map[string]string{"linux/amd64": dir}, Created: time.Unix(0, 0).UTC()})
	if cf.Config.User != "" || len(cf.Config.Entrypoint) != 0 || !slices.Contains(cf.Config.Env, rootPath) {
		t.Errorf("user %q, entrypoint %q, env %q; want root, none and a PATH", cf.Config.User, cf.Config.Entrypoint, cf.Config.Env)
	}
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	got := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		got[h.Name] = fmt.Sprintf("%c %o %s %s", h.Typeflag, h.Mode&0o7777, h.Linkname, data)
	}
	want := map[string]string{
		"bin":                fmt.Sprintf("%c 777 usr/bin ", tar.TypeSymlink),
		"secret":             fmt.Sprintf("%c 600  key", tar.TypeReg),
		"usr":                fmt.Sprintf("%c 755  ", tar.TypeDir),
		"usr/bin":            fmt.Sprintf("%c 755  ", tar.TypeDir),
		"usr/bin/python3":    fmt.Sprintf("%c 755  #!python", tar.TypeReg),
		"usr/bin/python3.11": fmt.Sprintf("%c 755 usr/bin/python3 ", tar.TypeLink),
	}
	if !maps.Equal(got, want) {
		t.Errorf("the layer holds\n%q\nwant\n%q", got, want)
	}
}

func TestRefusesBadInput(t *testing.T) {
	for name, o := range map[string]options{
		"entrypoint not in /": {Binaries: map[string]string{"linux/amd64": os.Args[0]}, Entrypoint: "/usr/bin/pause"},
		"binaries and rootfs": {Binaries: map[string]string{"linux/amd64": os.Args[0]}, RootFS: map[string]string{"linux/amd64": os.TempDir()}},
		"rootfs not a dir":    {RootFS: map[string]string{"linux/amd64": os.Args[0]}},
		"entrypoint relative": {Binaries: map[string]string{"linux/amd64": os.Args[0]}, Entrypoint: "pause"},
		"no binary":           {},
		"not linux":           {Binaries: map[string]string{"windows/amd64": "x"}},
		"bad platform":        {Binaries: map[string]string{"linux/amd64/v1/x": "x"}},
		"missing binary":      {Binaries: map[string]string{"linux/amd64": filepath.Join(t.TempDir(), "none")}},
		"bad push reference":  {Binaries: map[string]string{"linux/amd64": os.Args[0]}, Push: []string{"Not A Reference"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := run(context.Background(), o); err == nil {
				t.Error("no error")
			}
		})
	}
}

// onlyImage builds o's index, of one platform, and returns its image and
// the image's configuration.
func onlyImage(t *testing.T, o options) (v1.Image, *v1.ConfigFile) {
	t.Helper()
	idx, err := buildIndex(o)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil || len(manifest.Manifests) != 1 {
		t.Fatalf("index: %v, %v", manifest, err)
	}
	img, err := idx.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return img, cf
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

type file struct {
	mode int64
	data []byte
}

// extract reads the image's file system.
func extract(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = file{mode: h.Mode, data: data}
	}
}

func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var names []string
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
}

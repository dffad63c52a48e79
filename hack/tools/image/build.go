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
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: not root, with a numeric ID so that Kubernetes'
// runAsNonRoot can check it without reading /etc/passwd; the manifests
// run the manager as the same ID.
const (
	uid  = 65532
	user = "65532:65532"
	// The manager's image, unless options say otherwise.
	defaultEntrypoint = "/manager"
	defaultTitle      = "trainjob-operator"
)

// options is what run builds, and where it puts it.
type options struct {
	// Binaries are the manager's static binaries by platform
	// ("linux/amd64").
	Binaries map[string]string
	// RootFS, instead of Binaries, are whole root file systems by
	// platform, directories packed as they are into one layer each (the
	// real node's training image), run as root with no entrypoint.
	RootFS map[string]string
	// Entrypoint is where the binary is in the image, and what it runs;
	// /manager if empty. Title is the image's title label;
	// trainjob-operator if empty. Other static programs of the project
	// (the dev cluster's pause, a test's program) are packed the same way.
	Entrypoint, Title string
	Version           string
	Revision          string
	Source            string
	// Created is the image's creation time, and its files' modification
	// time.
	Created time.Time
	// Layout is a directory to write the OCI image layout to, Archive a
	// tar file to write it to; either may be empty.
	Layout, Archive string
	// DigestFile, if set, receives the index's digest.
	DigestFile string
	// Push are the references to push the image to.
	Push []string
	// Log receives one line per step.
	Log io.Writer
	// Remote are extra options of the pushes (tests: a transport).
	Remote []remote.Option

	// tempDir holds the layers of root file systems while run writes the
	// image; the system's temporary directory if empty.
	tempDir string
}

// run builds the image index, writes and pushes it, and returns its
// digest.
func run(ctx context.Context, o options) (v1.Hash, error) {
	tmp, err := os.MkdirTemp("", "imagebuild-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	o.tempDir = tmp
	idx, err := buildIndex(o)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	logf(o, "image %s: %d platforms, version %s, revision %s", digest, len(o.Binaries)+len(o.RootFS), o.Version, o.Revision)
	if o.Layout != "" || o.Archive != "" {
		dir := o.Layout
		if dir == "" {
			tmp, err := os.MkdirTemp("", "image-layout")
			if err != nil {
				return digest, err
			}
			defer func() { _ = os.RemoveAll(tmp) }()
			dir = tmp
		}
		if err := writeLayout(dir, idx, o.Version); err != nil {
			return digest, err
		}
		if o.Layout != "" {
			logf(o, "wrote the OCI image layout %s", o.Layout)
		}
		if o.Archive != "" {
			if err := archive(dir, o.Archive, o.Created); err != nil {
				return digest, err
			}
			logf(o, "wrote %s", o.Archive)
		}
	}
	if o.DigestFile != "" {
		if err := os.WriteFile(o.DigestFile, []byte(digest.String()+"\n"), 0o644); err != nil {
			return digest, err
		}
	}
	for _, r := range o.Push {
		ref, err := name.ParseReference(r)
		if err != nil {
			return digest, fmt.Errorf("--push %q: %w", r, err)
		}
		logf(o, "pushing to %s ...", ref)
		opts := append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, o.Remote...)
		if err := remote.WriteIndex(ref, idx, opts...); err != nil {
			return digest, fmt.Errorf("pushing to %s: %w", ref, err)
		}
		logf(o, "pushed %s@%s", ref.Context(), digest)
	}
	return digest, nil
}

func logf(o options, format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, "imagebuild: "+format+"\n", args...)
	}
}

// labels are the image's OCI labels, and its manifests' annotations.
func labels(o options) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":    cmp.Or(o.Title, defaultTitle),
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  o.Created.Format(time.RFC3339),
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.source":   o.Source,
	} {
		if v != "" {
			l[k] = v
		}
	}
	return l
}

// buildIndex is the image index of one image per platform, in platform
// order.
func buildIndex(o options) (v1.ImageIndex, error) {
	sources, build := o.Binaries, buildImage
	switch {
	case len(o.Binaries) > 0 && len(o.RootFS) > 0:
		return nil, errors.New("give binaries or root file systems, not both")
	case len(o.RootFS) > 0:
		sources, build = o.RootFS, buildRootFSImage
	case len(o.Binaries) == 0:
		return nil, errors.New("no binary: give --binary platform=path")
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var adds []mutate.IndexAddendum
	for _, p := range slices.Sorted(maps.Keys(sources)) {
		platform, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", p, err)
		}
		if platform.OS != "linux" {
			return nil, fmt.Errorf("platform %q: the manager runs on linux", p)
		}
		img, err := build(*platform, sources[p], o)
		if err != nil {
			return nil, fmt.Errorf("the %s image: %w", p, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: platform}})
	}
	idx = mutate.AppendManifests(idx, adds...)
	return mutate.Annotations(idx, labels(o)).(v1.ImageIndex), nil
}

// buildImage is the image of one platform: one layer, on no base.
func buildImage(platform v1.Platform, binary string, o options) (v1.Image, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	entrypoint := cmp.Or(o.Entrypoint, defaultEntrypoint)
	if !strings.HasPrefix(entrypoint, "/") || strings.HasSuffix(entrypoint, "/") || strings.Count(entrypoint, "/") != 1 {
		return nil, fmt.Errorf("entrypoint %q: want a file in /, such as /manager", entrypoint)
	}
	data, err := rootfs(bin, entrypoint, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	return assemble(layer, createdBy(entrypoint)+platform.String(), platform, o, func(c *v1.Config) {
		c.User = user
		c.Entrypoint = []string{entrypoint}
	})
}

// assemble is the image of one layer, on no base, for platform, with
// configure's settings, the working directory / and the labels.
func assemble(layer v1.Layer, createdBy string, platform v1.Platform, o options, configure func(*v1.Config)) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: o.Created},
		CreatedBy: createdBy,
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = v1.Time{Time: o.Created}
	cf.OS, cf.Architecture, cf.Variant = platform.OS, platform.Architecture, platform.Variant
	configure(&cf.Config)
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = labels(o)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels(o)).(v1.Image), nil
}

// createdBy begins the layer's history entry.
func createdBy(entrypoint string) string {
	if entrypoint == defaultEntrypoint {
		return "make image: the manager, "
	}
	return "imagebuild: " + entrypoint + ", "
}

// rootfs is the layer: the binary, the user and its group, and /tmp.
func rootfs(bin []byte, entrypoint string, mtime time.Time) ([]byte, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", uid, uid)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	entries := []struct {
		name string
		mode int64
		data []byte
		dir  bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true},
		{name: strings.TrimPrefix(entrypoint, "/"), mode: 0o755, data: bin},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if e.name == "home/nonroot/" {
			h.Uid, h.Gid = uid, uid
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// refNameAnnotation names an image in an OCI layout's index.json.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// writeLayout writes an OCI image layout in dir, replacing it, whose
// index.json names idx by version.
func writeLayout(dir string, idx v1.ImageIndex, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	var opts []layout.Option
	if version != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{refNameAnnotation: version}))
	}
	return p.AppendIndex(idx, opts...)
}

// archive writes the files under dir to a tar file, in name order, with
// mtime as their time: the OCI layout as one file (skopeo's and
// crane's oci-archive).
func archive(dir, file string, mtime time.Time) error {
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(out)
	walkErr := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatPAX, Mode: 0o644, Typeflag: tar.TypeReg}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		// Streamed: a root file system's layer is large.
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		h.Size = fi.Size()
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		return err
	})
	return errors.Join(walkErr, tw.Close(), out.Close())
}

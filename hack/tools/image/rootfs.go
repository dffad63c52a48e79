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
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// rootPath is the PATH of an image of a whole root file system.
const rootPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// buildRootFSImage is the image of one platform whose only layer is the
// root file system in dir, as it is: owners, modes, links, device files.
// It runs as root, with no entrypoint (a Pod names its command).
func buildRootFSImage(platform v1.Platform, dir string, o options) (v1.Image, error) {
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("root file system: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("root file system %q: not a directory", dir)
	}
	// The layer is read back from the file while the image is written:
	// run removes its directory afterwards.
	tmp, err := os.CreateTemp(o.tempDir, "imagebuild-layer-*.tar")
	if err != nil {
		return nil, err
	}
	if err := errors.Join(tarDir(dir, tmp), tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return nil, fmt.Errorf("packing %s: %w", dir, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return os.Open(tmp.Name()) },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, err
	}
	return assemble(layer, "imagebuild: a root file system, "+platform.String(), platform, o, func(c *v1.Config) {
		c.Env = []string{rootPath}
	})
}

// tarDir writes the files under dir to w as a tar stream, in name order,
// keeping owners, modes, times, symbolic and hard links and device files.
// Sockets and pipes are left out.
func tarDir(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	type inode struct{ dev, ino uint64 }
	seen := map[inode]string{}
	walkErr := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		if fi.Mode()&(fs.ModeSocket|fs.ModeNamedPipe) != 0 {
			return nil
		}
		var link string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name, h.Format = filepath.ToSlash(rel), tar.FormatPAX
		h.Uname, h.Gname = "", ""
		if fi.IsDir() {
			h.Name += "/"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && fi.Mode().IsRegular() && st.Nlink > 1 {
			key := inode{uint64(st.Dev), st.Ino} //nolint:unconvert // Dev's type differs by architecture
			if first, ok := seen[key]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			} else {
				seen[key] = h.Name
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = io.CopyN(tw, f, h.Size)
		return err
	})
	return errors.Join(walkErr, tw.Close())
}

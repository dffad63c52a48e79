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

// Command imagebuild builds the manager's OCI image from binaries built
// beforehand, one per platform, with no container engine and no base
// image: a layer holding the static binary as /manager, /etc/passwd and
// /etc/group naming the non-root user it runs as, and /tmp. It writes an
// OCI image layout (a directory), the same layout as a tar archive, and
// pushes the image to the registries it is given.
//
// The image of the same binaries, version, revision and creation time has
// the same digest: file times are the creation time, and nothing else
// varies.
//
//	imagebuild --binary linux/amd64=bin/image/linux_amd64/manager \
//	    --binary linux/arm64=bin/image/linux_arm64/manager \
//	    --version v0.3.0 --revision <commit> --created <unix seconds> \
//	    --layout dist/image --archive dist/image.tar \
//	    --push registry.example.com/trainjob-operator:v0.3.0
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		o        options
		binaries stringList
		rootfs   stringList
		push     stringList
		created  string
	)
	flag.Var(&binaries, "binary", "platform=path of the manager binary for that platform (linux/amd64=...); repeat for each platform")
	flag.Var(&rootfs, "rootfs", "platform=directory of a whole root file system, packed as it is (instead of --binary); repeat for each platform")
	flag.StringVar(&o.Entrypoint, "entrypoint", defaultEntrypoint, "Where the binary goes in the image, a file in /; the image runs it")
	flag.StringVar(&o.Title, "title", defaultTitle, "The image's title label")
	flag.StringVar(&o.Version, "version", "", "The version the image is labelled with")
	flag.StringVar(&o.Revision, "revision", "", "The source revision the image is labelled with")
	flag.StringVar(&o.Source, "source", "", "The source repository's URL, for the image's label")
	flag.StringVar(&created, "created", "", "Creation time, in Unix seconds (the commit's time, for a reproducible digest); now if empty")
	flag.StringVar(&o.Layout, "layout", "", "Write the image as an OCI image layout to this directory (replaced)")
	flag.StringVar(&o.Archive, "archive", "", "Also write the OCI image layout as this tar file")
	flag.StringVar(&o.DigestFile, "digest-file", "", "Write the image index's digest (sha256:...) to this file")
	flag.Var(&push, "push", "Push the image to this reference (registry/repository:tag); repeat for more")
	flag.Parse()

	o.Binaries = byPlatform("binary", binaries)
	o.RootFS = byPlatform("rootfs", rootfs)
	o.Created = time.Now().UTC().Truncate(time.Second)
	if created != "" {
		secs, err := strconv.ParseInt(created, 10, 64)
		if err != nil {
			fail(fmt.Errorf("--created %q: want Unix seconds", created))
		}
		o.Created = time.Unix(secs, 0).UTC()
	}
	o.Push = push
	o.Log = os.Stderr
	digest, err := run(context.Background(), o)
	if err != nil {
		fail(err)
	}
	fmt.Println(digest)
}

// byPlatform maps the platform=path values of flag name.
func byPlatform(name string, values []string) map[string]string {
	m := map[string]string{}
	for _, v := range values {
		platform, path, ok := strings.Cut(v, "=")
		if !ok {
			fail(fmt.Errorf("--%s %q: want platform=path", name, v))
		}
		m[platform] = path
	}
	return m
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "imagebuild:", err)
	os.Exit(1)
}

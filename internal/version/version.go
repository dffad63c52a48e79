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

// Package version is the version and source revision a binary was built
// from. `make build`, `make image` and `make release` stamp them:
//
//	-ldflags "-X github.com/trainjob-operator/trainjob-operator/internal/version.version=v0.3.0
//	          -X github.com/trainjob-operator/trainjob-operator/internal/version.revision=<commit>"
//
// A binary built otherwise (go build, go install) reports what the Go
// toolchain recorded: the module version, and the commit of the checkout it
// was built in.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped at build time; see the package comment.
var (
	version  string
	revision string
)

// Info is what a binary says of itself.
type Info struct {
	// Version is the release (v0.3.0), or what `git describe` says of a
	// commit between releases; "(devel)" if nothing recorded one.
	Version string `json:"version"`
	// Revision is the commit the binary was built from, with "-dirty" if
	// the checkout had changes; empty if unknown.
	Revision  string `json:"revision,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the version of this binary.
func Get() Info {
	info := Info{Version: version, Revision: revision, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	build, ok := debug.ReadBuildInfo()
	if !ok {
		if info.Version == "" {
			info.Version = "(devel)"
		}
		return info
	}
	if info.Version == "" {
		info.Version = build.Main.Version
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	if info.Revision == "" {
		var modified bool
		for _, s := range build.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && info.Revision != "" {
			info.Revision += "-dirty"
		}
	}
	return info
}

// String is the one line `--version` prints.
func (i Info) String() string {
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	}
	return fmt.Sprintf("%s (revision %s, %s, %s)", i.Version, rev, i.GoVersion, i.Platform)
}

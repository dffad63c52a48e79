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

package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	t.Cleanup(func() { version, revision = "", "" })

	// Built by go test: nothing stamped; the test binary's module has no
	// version of its own.
	if got := Get(); got.Version == "" || got.GoVersion != runtime.Version() || got.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("unstamped: %+v", got)
	}

	version, revision = "v1.2.3", "0123abcd"
	got := Get()
	if got.Version != "v1.2.3" || got.Revision != "0123abcd" {
		t.Errorf("stamped: %+v, want v1.2.3 and 0123abcd", got)
	}
	if s := got.String(); !strings.HasPrefix(s, "v1.2.3 (revision 0123abcd, go") {
		t.Errorf("String() = %q", s)
	}
	if s := (Info{Version: "v1.2.3", GoVersion: "go1.26.8", Platform: "linux/arm64"}).String(); s != "v1.2.3 (revision unknown, go1.26.8, linux/arm64)" {
		t.Errorf("String() without a revision = %q", s)
	}
}

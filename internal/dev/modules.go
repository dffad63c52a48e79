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

package dev

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
)

// ModuleDir downloads a Go module to the module cache, if it is not there
// yet, and returns its directory: the manifests other projects ship (CRDs,
// runtimes) are read from there, never copied into this repository. module
// is path@version, or a path alone for the version the go.mod of dir
// requires.
func ModuleDir(ctx context.Context, dir, module string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err == nil && mod.Error != "" {
		err = fmt.Errorf("%s", mod.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s in %s: %w\n%s", module, dir, err, stderr.String())
	}
	return mod.Dir, nil
}

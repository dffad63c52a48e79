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

package cli

import (
	"bytes"
	"strings"
	"testing"
)

// Named as a kubectl plugin, trainctl's usage says how kubectl runs it.
func TestPluginUsage(t *testing.T) {
	cases := map[string]struct {
		argv0 string
		want  string
	}{
		"trainctl":                {argv0: "/usr/local/bin/trainctl", want: "trainctl wait ([NAME...]"},
		"the plugin":              {argv0: "/home/me/.krew/bin/kubectl-trainjob", want: "kubectl trainjob wait ([NAME...]"},
		"the plugin on Windows":   {argv0: `kubectl-trainjob.exe`, want: "kubectl trainjob wait ([NAME...]"},
		"a plugin of two words":   {argv0: "kubectl-kubeflow-train_job", want: "kubectl kubeflow train-job wait ([NAME...]"},
		"not quite a plugin":      {argv0: "kubectl-", want: "trainctl wait ([NAME...]"},
		"kubectl itself, renamed": {argv0: "kubectl", want: "trainctl wait ([NAME...]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := NewCommandAs(tc.argv0, &out, &out)
			cmd.SetArgs([]string{"wait", "--help"})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "Usage:\n  "+tc.want) {
				t.Errorf("usage lacks %q:\n%s", tc.want, out.String())
			}
			if example := strings.TrimSuffix(tc.want, " ([NAME...]") + " my-job --for"; !strings.Contains(out.String(), example) {
				t.Errorf("examples lack %q:\n%s", example, out.String())
			}
		})
	}
}

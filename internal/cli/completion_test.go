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
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The shell asks trainctl __complete for the words that may follow: the
// TrainJobs of the namespace for get, describe and wait, and kubectl's
// flags' values.
func TestComplete(t *testing.T) {
	noFiles := ":4\n" // cobra.ShellCompDirectiveNoFileComp
	cases := map[string]struct {
		args []string
		want string
	}{
		"get":                       {args: []string{"get", ""}, want: "a\nb\n" + noFiles},
		"get, a prefix":             {args: []string{"get", "b"}, want: "b\n" + noFiles},
		"get, one given":            {args: []string{"get", "a", ""}, want: "b\n" + noFiles},
		"get -n":                    {args: []string{"-n", "other", "get", ""}, want: "c\n" + noFiles},
		"get -A":                    {args: []string{"get", "-A", ""}, want: "a\nb\nc\n" + noFiles},
		"describe":                  {args: []string{"describe", ""}, want: "a\nb\n" + noFiles},
		"describe, one given":       {args: []string{"describe", "a", ""}, want: noFiles},
		"wait":                      {args: []string{"wait", "--for=running", ""}, want: "a\nb\n" + noFiles},
		"wait, the other namespace": {args: []string{"wait", "--namespace", "other", ""}, want: "c\n" + noFiles},
		"-n":                        {args: []string{"get", "-n", ""}, want: "ns\nother\n" + noFiles},
		"--context":                 {args: []string{"get", "--context", ""}, want: "one\ntwo\n" + noFiles},
		"--cluster":                 {args: []string{"--cluster", "cluster-t"}, want: "cluster-two\n" + noFiles},
		"--user":                    {args: []string{"get", "--user", ""}, want: "user-one\nuser-two\n" + noFiles},
		"-o":                        {args: []string{"get", "-o", ""}, want: "json\nyaml\nname\nwide\n" + noFiles},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := append(someTrainJobs(),
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}})
			cl := utiltesting.NewClientBuilder(nil, objs...).Build()
			s, err := trainctl(context.Background(), t, cl, append([]string{"__complete"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, s.out.String()); diff != "" {
				t.Errorf("completions (-want +got):\n%s", diff)
			}
		})
	}
}

// trainctl completion writes the scripts that call __complete.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		t.Run(shell, func(t *testing.T) {
			cl := utiltesting.NewClientBuilder(nil).Build()
			s, err := trainctl(context.Background(), t, cl, "completion", shell)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(s.out.String(), "__complete") {
				t.Errorf("the %s script does not call __complete:\n%.400s", shell, s.out.String())
			}
		})
	}
}

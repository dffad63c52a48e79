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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// reached is what of a cluster configuration kubectl's flags decide.
type reached struct {
	Host, Token, As    string
	AsGroups           []string
	Insecure           bool
	TLSServerName      string
	Timeout            time.Duration
	DisableCompression bool
	Namespace          string
}

// Every flag kubectl takes to reach a cluster reaches the client trainctl
// makes, over the kubeconfig's current context.
func TestConfigFlags(t *testing.T) {
	cases := map[string]struct {
		args []string
		want reached
	}{
		"the current context": {
			want: reached{Host: "https://one.example:6443", Token: "token-one", Namespace: "ns"},
		},
		"--context": {
			args: []string{"--context", "two"},
			want: reached{Host: "https://two.example:6443", Token: "token-two", Namespace: "team"},
		},
		"--cluster and --user": {
			args: []string{"--cluster", "cluster-two", "--user", "user-two"},
			want: reached{Host: "https://two.example:6443", Token: "token-two", Namespace: "ns"},
		},
		"-n": {
			args: []string{"-n", "other"},
			want: reached{Host: "https://one.example:6443", Token: "token-one", Namespace: "other"},
		},
		"--namespace": {
			args: []string{"--namespace=other"},
			want: reached{Host: "https://one.example:6443", Token: "token-one", Namespace: "other"},
		},
		"--server, --token, --insecure-skip-tls-verify": {
			args: []string{"--server", "https://three.example", "--token", "t3", "--insecure-skip-tls-verify"},
			want: reached{Host: "https://three.example", Token: "t3", Insecure: true, Namespace: "ns"},
		},
		"-s, --tls-server-name": {
			args: []string{"-s", "https://10.0.0.1", "--tls-server-name", "api.example"},
			want: reached{Host: "https://10.0.0.1", Token: "token-one", TLSServerName: "api.example", Namespace: "ns"},
		},
		"--as, --as-group": {
			args: []string{"--as", "alice", "--as-group", "devs", "--as-group", "ml"},
			want: reached{Host: "https://one.example:6443", Token: "token-one", As: "alice", AsGroups: []string{"devs", "ml"}, Namespace: "ns"},
		},
		"--request-timeout, --disable-compression": {
			args: []string{"--request-timeout", "7s", "--disable-compression"},
			want: reached{Host: "https://one.example:6443", Token: "token-one", Timeout: 7 * time.Second, DisableCompression: true, Namespace: "ns"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			useKubeconfig(t)
			cl := utiltesting.NewClientBuilder(nil).Build()
			s, err := trainctl(context.Background(), t, cl, append(tc.args, "get")...)
			if err != nil {
				t.Fatal(err)
			}
			c := s.config
			got := reached{
				Host: c.Host, Token: c.BearerToken, As: c.Impersonate.UserName, AsGroups: c.Impersonate.Groups,
				Insecure: c.Insecure, TLSServerName: c.ServerName, Timeout: c.Timeout, DisableCompression: c.DisableCompression,
				Namespace: lastNamespace(s.out.String()),
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reached (-want +got):\n%s", diff)
			}
		})
	}
}

// lastNamespace is the namespace of get's "No TrainJobs in namespace NS."
func lastNamespace(out string) string {
	const prefix = "No TrainJobs in namespace "
	if len(out) > len(prefix) && out[:len(prefix)] == prefix {
		return out[len(prefix) : len(out)-2]
	}
	return "? " + out
}

// --kubeconfig names the file, over $KUBECONFIG.
func TestKubeconfigFlag(t *testing.T) {
	path := useKubeconfig(t)
	t.Setenv("KUBECONFIG", "/nonexistent")
	cl := utiltesting.NewClientBuilder(nil).Build()
	s, err := trainctl(context.Background(), t, cl, "--kubeconfig", path, "--context", "two", "get")
	if err != nil {
		t.Fatal(err)
	}
	if s.config.Host != "https://two.example:6443" {
		t.Errorf("host %q, want the kubeconfig's context two", s.config.Host)
	}
}

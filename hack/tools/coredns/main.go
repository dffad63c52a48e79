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

// Command coredns is CoreDNS with the few plugins the dev cluster's real
// node needs to answer cluster names as a cluster's DNS does: kubernetes
// (Services, headless Services' Pod names), bind (the address the Pods
// reach), ready (for trainjob-dev to wait on), errors and log. Nothing else is linked, so that it builds in a fraction
// of the time of CoreDNS with all its plugins.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives are the plugins a Corefile may use, in the order CoreDNS
// chains them (that of its plugin.cfg).
var directives = []string{"bind", "ready", "errors", "log", "kubernetes"}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}

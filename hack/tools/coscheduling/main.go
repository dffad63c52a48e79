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

// Command coscheduler is kube-scheduler with the coscheduling plugin of the
// Kubernetes scheduler-plugins: the gang scheduler a runtime's
// podGroupPolicy coscheduling asks for, run in the local cluster beside
// kube-scheduler, for the tests that need one.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	// The plugins' configuration types (CoschedulingArgs), in the
	// scheduler's configuration scheme.
	_ "sigs.k8s.io/scheduler-plugins/apis/config/scheme"
	"sigs.k8s.io/scheduler-plugins/pkg/coscheduling"
)

func main() {
	cmd := app.NewSchedulerCommand(app.WithPlugin(coscheduling.Name, coscheduling.New))
	os.Exit(cli.Run(cmd))
}

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

// Package framework holds what the test suites that run on a cluster share:
// namespaces of their own, kubectl, what a failed test logs of its
// namespace, waits, and reading and waiting on TrainJobs. A suite holds a
// *Cluster for each cluster it runs on (one, usually):
//
//	ns := cluster.NewNamespace(t)
//	cluster.Create(t, utiltesting.MakeTrainJob("tj", ns).Obj())
//	cluster.WaitCondition(t, ns, "tj", trainer.TrainJobComplete, metav1.ConditionTrue, trainer.TrainJobJobsCompletedReason)
//
// The objects the tests create are built with internal/util/testing's
// wrappers. Nothing here is linked into the product's binaries.
package framework

import (
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

// Cluster is a cluster the tests run on, and how they wait on it.
type Cluster struct {
	// Config is the configuration Client was made with, for a test that
	// starts a manager of its own against the cluster; nil if the suite
	// does not need it.
	Config *rest.Config
	// Client is a client of the API server, with the product's scheme.
	Client client.WithWatch
	// Kubeconfig is the path of a kubeconfig of the cluster.
	Kubeconfig string
	// KubectlBinary is the kubectl that Kubectl runs.
	KubectlBinary string

	// NamespacePrefix starts the names of the namespaces NewNamespace
	// creates.
	NamespacePrefix string
	// Timeout bounds Eventually; Interval is how often every wait polls.
	Timeout, Interval time.Duration
	// Dump is what a failed test logs of its namespace; nothing if nil.
	Dump *Dump
}

// DevCluster is the cluster internal/dev brought up with o, cl a client of
// it (what dev.RunTests hands to its ready function). A failed test logs
// its namespace's TrainJobs, Jobs, Pods, Services and events, and the end
// of the manager's log. The suite sets its namespace prefix and its waits.
func DevCluster(o dev.Options, cl client.WithWatch) *Cluster {
	bin := o.BinDir
	if bin == "" {
		bin = filepath.Join(o.Root, "bin")
	}
	// The kubeconfig was just written by Up, which made cl from it.
	config, _ := clientcmd.BuildConfigFromFlags("", o.Kubeconfig())
	return &Cluster{
		Client:        cl,
		Config:        config,
		Kubeconfig:    o.Kubeconfig(),
		KubectlBinary: filepath.Join(bin, "kubectl"),
		Dump:          TrainJobDump(Log{Name: "manager", Path: o.ManagerLog()}),
	}
}

// OpenDevCluster is DevCluster for a cluster internal/dev brought up with
// o that the suite has no client of yet (a MultiKueue worker cluster).
func OpenDevCluster(o dev.Options) (*Cluster, error) {
	cl, err := dev.NewClient(o)
	if err != nil {
		return nil, err
	}
	return DevCluster(o, cl), nil
}

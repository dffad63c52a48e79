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

// Command manager runs the trainjob-operator controllers.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/trainjob-operator/trainjob-operator/internal/config"
	"github.com/trainjob-operator/trainjob-operator/internal/manager"
	"github.com/trainjob-operator/trainjob-operator/internal/version"
)

func main() {
	var (
		configFile   string
		metricsAddr  string
		probeAddr    string
		pprofAddr    string
		leaderElect  bool
		leNamespace  string
		insecureMetr bool
		qps          float64
		burst        int
		webhooks     bool
		webhookPort  int
		statusPort   int
		certDir      string
		showVersion  bool
	)
	flag.StringVar(&configFile, "config", "", "Path to the Configuration file (config.trainer.kubeflow.org/v1alpha1). Flags set on the command line override it.")
	flag.StringVar(&metricsAddr, "metrics-bind-address", "", "Address the metrics endpoint binds to; \"0\" turns it off. Default :8443.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", "", "Address the health probes bind to. Default :8081.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "Address the Go runtime's profiles (net/http/pprof) are served on, without authentication; empty serves none.")
	flag.BoolVar(&leaderElect, "leader-elect", true, "Elect a leader among manager replicas.")
	flag.StringVar(&leNamespace, "leader-election-namespace", "", "Namespace of the leader election Lease when the configuration sets none (needed outside a cluster).")
	flag.BoolVar(&insecureMetr, "metrics-insecure", false, "Serve metrics over plain HTTP without authentication (local development only).")
	flag.Float64Var(&qps, "kube-api-qps", 0, "Sustained requests per second to the API server. Default 50.")
	flag.IntVar(&burst, "kube-api-burst", 0, "Requests allowed above the QPS for a short time. Default 100.")
	flag.BoolVar(&webhooks, "webhook", true, "Serve the validating admission webhook (needs a serving certificate in --webhook-cert-dir).")
	flag.IntVar(&webhookPort, "webhook-port", 0, "Port of the webhook server. Default 9443.")
	flag.StringVar(&certDir, "webhook-cert-dir", "", "Directory with the webhook's tls.crt and tls.key. Default /tmp/k8s-webhook-server/serving-certs.")
	flag.IntVar(&statusPort, "status-server-port", 0, "Port of the status server trainer Pods report progress to. Default 10443.")
	flag.BoolVar(&showVersion, "version", false, "Print the version and source revision, and exit.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if showVersion {
		fmt.Println("manager", version.Get())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	v := version.Get()
	log.Info("trainjob-operator manager", "version", v.Version, "revision", v.Revision)

	cfg, err := config.Load(configFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	flag.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "metrics-bind-address":
			cfg.Metrics.BindAddress = metricsAddr
		case "health-probe-bind-address":
			cfg.Health.HealthProbeBindAddress = probeAddr
		case "pprof-bind-address":
			cfg.PprofBindAddress = pprofAddr
		case "leader-elect":
			cfg.LeaderElection.LeaderElect = ptr.To(leaderElect)
		case "metrics-insecure":
			cfg.Metrics.SecureServing = ptr.To(!insecureMetr)
		case "kube-api-qps":
			cfg.ClientConnection.QPS = ptr.To(float32(qps))
		case "kube-api-burst":
			cfg.ClientConnection.Burst = ptr.To(int32(burst))
		case "webhook":
			cfg.Webhook.Enable = ptr.To(webhooks)
		case "webhook-port":
			cfg.Webhook.Port = ptr.To(int32(webhookPort))
		case "webhook-cert-dir":
			cfg.Webhook.CertDir = certDir
		case "status-server-port":
			cfg.StatusServer.Port = ptr.To(int32(statusPort))
		}
	})
	if errs := config.Validate(cfg); len(errs) > 0 {
		fmt.Fprintln(os.Stderr, "error: invalid settings:", errs.ToAggregate())
		os.Exit(1)
	}

	restConfig, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error: no cluster to talk to:", err)
		os.Exit(1)
	}
	mgr, err := manager.New(restConfig, cfg, manager.Options{LeaderElectionNamespace: leNamespace})
	if err != nil {
		log.Error(err, "Unable to set up the manager")
		os.Exit(1)
	}
	log.Info("Starting manager", "qps", *cfg.ClientConnection.QPS, "burst", *cfg.ClientConnection.Burst,
		"leaderElection", *cfg.LeaderElection.LeaderElect, "metrics", cfg.Metrics.BindAddress)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "Manager stopped with an error")
		os.Exit(1)
	}
}

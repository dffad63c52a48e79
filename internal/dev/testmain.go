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
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
)

// RunTests runs a test binary's tests (m.Run) on a local cluster of its own,
// and returns their exit code. It clears a cluster an aborted run left,
// brings one up, hands a client of it to ready, and always tears it down.
func RunTests(m interface{ Run() int }, o Options, ready func(client.WithWatch)) (code int) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	o.defaults()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer func() {
		downCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := Down(downCtx, o); err != nil {
			fmt.Fprintln(os.Stderr, "tearing down:", err)
			code = 1
		}
	}()
	// A run that was killed (a test timeout skips deferred functions) may
	// have left its cluster: start from a clean slate.
	if err := Down(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "clearing a previous run:", err)
		return 1
	}
	start := time.Now()
	if err := Up(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bringing the cluster up:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "cluster %s ready in %s\n", o.Name, time.Since(start).Round(time.Millisecond))
	cl, err := NewClient(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ready(cl)
	return m.Run()
}

// NewClient is a client of the cluster o brought up, with the product's
// scheme, for tests and benchmarks: they make many requests quickly.
func NewClient(o Options) (client.WithWatch, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig())
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme})
}

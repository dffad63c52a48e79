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

package ttl

import (
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/event"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

func TestEventFilter(t *testing.T) {
	base := utiltesting.MakeTrainJob("tj", "ns").UID("uid-1")
	running := base.Clone().Obj()
	done := base.Clone().Condition(complete(now.Add(-time.Minute))).Obj()
	doneTTL := base.Clone().Condition(complete(now.Add(-time.Minute))).TTL(60).Obj()
	runningTTL := base.Clone().TTL(60).Obj()
	for name, tc := range map[string]struct {
		old, new  *trainer.TrainJob
		retention *configv1alpha1.TrainJobRetentionPolicy
		want      bool
	}{
		"no TTL, before and after":       {old: running, new: done, want: false},
		"TTL, not finished yet":          {old: running, new: runningTTL, want: false},
		"finishes with a TTL":            {old: runningTTL, new: doneTTL, want: true},
		"TTL removed after it finished":  {old: doneTTL, new: done, want: true},
		"finishes under retention":       {old: running, new: done, retention: &configv1alpha1.TrainJobRetentionPolicy{AfterFinished: dur(time.Hour)}, want: true},
		"no retention for what it is in": {old: running, new: done, retention: &configv1alpha1.TrainJobRetentionPolicy{AfterSuspended: dur(time.Hour)}, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			p := NewReconciler(nil, nil, nil, WithRetention(tc.retention)).eventFilter()
			if got := p.Update(event.TypedUpdateEvent[*trainer.TrainJob]{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("update let through: %v, want %v", got, tc.want)
			}
			// Whatever the TrainJob, creations, deletions and generic
			// events come through: they may start or end a wait.
			if !p.Create(event.TypedCreateEvent[*trainer.TrainJob]{Object: tc.new}) ||
				!p.Delete(event.TypedDeleteEvent[*trainer.TrainJob]{Object: tc.new}) ||
				!p.Generic(event.TypedGenericEvent[*trainer.TrainJob]{Object: tc.new}) {
				t.Error("a create, delete or generic event was turned away")
			}
		})
	}
}

// TestLogConstructor checks the keys of the reconciles' loggers are those
// controller-runtime's builder gives the controller of For(&TrainJob{}).
func TestLogConstructor(t *testing.T) {
	var lines []string
	base := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{})
	newLog := logConstructor(base)
	for _, tc := range []struct {
		req  *reconcile.Request
		want string
	}{
		{nil, `"controller"="trainjob-ttl-after-finished" "controllerGroup"="trainer.kubeflow.org" "controllerKind"="TrainJob"`},
		{&reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "tj"}},
			`"controller"="trainjob-ttl-after-finished" "controllerGroup"="trainer.kubeflow.org" "controllerKind"="TrainJob" "TrainJob"={"name"="tj" "namespace"="ns"} "namespace"="ns" "name"="tj"`},
	} {
		lines = nil
		log := newLog(tc.req)
		log.Info("x")
		if len(lines) != 1 || !strings.HasSuffix(lines[0], tc.want) {
			t.Errorf("logged %q, want the keys %s", lines, tc.want)
		}
	}
}

func TestSetupWithManager(t *testing.T) {
	// Nothing listens there: registering the controller does not call the
	// API server.
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// go test -count=N registers it N times in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := NewReconciler(mgr.GetClient(), mgr.GetAPIReader(), nil).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
}

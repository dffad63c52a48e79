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

package statusserver

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The CA publisher keeps a ConfigMap in every namespace with TrainJobs.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update

const (
	// CAConfigMap is the ConfigMap, in every namespace with TrainJobs, that
	// holds the status server's CA certificate for the trainer Pods (as
	// kube-root-ca.crt holds the API server's).
	CAConfigMap = "trainjob-operator-status-ca"
	// CAKey is the certificate's key in the ConfigMap, and its file name
	// in the webhook's certificate directory.
	CAKey = "ca.crt"
	// caResync is how often each namespace's copy is compared with the
	// certificate directory's, to carry a new CA everywhere.
	caResync = 10 * time.Minute
)

// CACache is the cache option the manager needs for the CA publisher: its
// ConfigMap informer holds the publisher's ConfigMaps and nothing else.
func CACache() cache.ByObject {
	return cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", CAConfigMap)}
}

// caPublisher writes the CA certificate of certDir into the CAConfigMap
// of each namespace that has TrainJobs. One write per namespace, not per
// TrainJob: a TrainJob adds no write for it.
type caPublisher struct {
	client  client.Client
	certDir string
}

// SetupCAPublisher adds the CA publisher to mgr; it runs on the leader.
// The manager's cache must hold the ConfigMaps (see CACache).
func SetupCAPublisher(mgr ctrl.Manager, certDir string) error {
	p := &caPublisher{client: mgr.GetClient(), certDir: certDir}
	byNamespace := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetNamespace()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("status-server-ca").
		Watches(&trainer.TrainJob{}, byNamespace, builder.WithPredicates(predicate.Funcs{
			// A namespace needs the ConfigMap from its first TrainJob on.
			UpdateFunc: func(event.UpdateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Watches(&corev1.ConfigMap{}, byNamespace, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == CAConfigMap
		}))).
		Complete(p)
}

func (p *caPublisher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ns := req.Name
	var tjs trainer.TrainJobList
	if err := p.client.List(ctx, &tjs, client.InNamespace(ns), client.Limit(1)); err != nil {
		return reconcile.Result{}, err
	}
	if len(tjs.Items) == 0 {
		return reconcile.Result{}, nil
	}
	ca, err := os.ReadFile(filepath.Join(p.certDir, CAKey))
	if err != nil {
		// No CA yet: the certificate is being made.
		ctrl.LoggerFrom(ctx).V(1).Info("No CA certificate to publish yet", "error", err.Error())
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	var cm corev1.ConfigMap
	err = p.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: CAConfigMap}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = corev1.ConfigMap{Data: map[string]string{CAKey: string(ca)}}
		cm.Namespace, cm.Name = ns, CAConfigMap
		cm.Labels = map[string]string{"app.kubernetes.io/managed-by": "trainjob-operator"}
		if err := p.client.Create(ctx, &cm); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("creating ConfigMap %s/%s: %w", ns, CAConfigMap, err)
		}
	case err != nil:
		return reconcile.Result{}, err
	case !bytes.Equal([]byte(cm.Data[CAKey]), ca):
		cm.Data = map[string]string{CAKey: string(ca)}
		if err := p.client.Update(ctx, &cm); err != nil {
			return reconcile.Result{}, fmt.Errorf("updating ConfigMap %s/%s: %w", ns, CAConfigMap, err)
		}
	}
	return reconcile.Result{RequeueAfter: caResync}, nil
}

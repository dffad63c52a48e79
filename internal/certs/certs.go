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

// Package certs gives the webhook server a serving certificate with no
// manual step. cert-controller's rotator makes a CA and a serving
// certificate in a Secret shared by every replica, renews them before they
// expire and keeps the webhook configuration's caBundle current; a small
// controller of this package writes the Secret's certificate into the
// webhook server's certificate directory, which the server reloads on
// change. Writing the files ourselves, rather than mounting the Secret,
// takes the kubelet's volume sync delay out of a rotation and works the same
// for a manager that runs outside the cluster.
package certs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
)

// The rotator reads and updates the one Secret (its cache lists the
// namespace's Secrets; RBAC cannot narrow a list by name) and keeps the
// caBundle of the one webhook configuration. The names are the defaults of
// the Configuration; config/rbac must change with them.
// +kubebuilder:rbac:groups="",namespace=trainjob-system,resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=trainjob-system,resources=secrets,resourceNames=trainjob-operator-webhook-certs,verbs=update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,resourceNames=trainjob-operator,verbs=update

// Files written into the certificate directory, where controller-runtime's
// webhook server looks for them.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
	// caFile is the CA that signed the certificate: the status server's
	// clients verify it by it.
	caFile = "ca.crt"
)

// SecretCache is the cache option the manager needs for Setup: its Secret
// informer holds the one Secret of cfg and nothing else.
func SecretCache(cfg *configv1alpha1.WebhookCertManagement) cache.ByObject {
	return cache.ByObject{Namespaces: map[string]cache.Config{
		cfg.SecretNamespace: {FieldSelector: fields.OneTermEqualSelector("metadata.name", cfg.SecretName)},
	}}
}

// Setup adds the rotator and the file writer to mgr. The returned channel
// closes once the certificate is in certDir and its CA in the webhook
// configuration: start the webhook server only then. Every replica runs
// both, leader or not, because every replica serves the webhook. The
// manager's cache must hold the Secret (see SecretCache).
func Setup(mgr manager.Manager, cfg *configv1alpha1.WebhookCertManagement, certDir string) (<-chan struct{}, error) {
	ready := make(chan struct{})
	secret := types.NamespacedName{Namespace: cfg.SecretNamespace, Name: cfg.SecretName}
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      secret,
		CertDir:        certDir,
		CAName:         "trainjob-operator-ca",
		CAOrganization: "trainjob-operator",
		DNSName:        cfg.DNSName,
		ExtraDNSNames:  cfg.ExtraDNSNames,
		IsReady:        ready,
		// Both configurations have the same name: one is validating, the
		// other mutating.
		Webhooks: []rotator.WebhookInfo{
			{Name: cfg.WebhookConfigurationName, Type: rotator.Validating},
			{Name: cfg.WebhookConfigurationName, Type: rotator.Mutating},
		},
		RequireLeaderElection: false,
		FieldOwner:            "trainjob-operator",
	})
	if err != nil {
		return nil, fmt.Errorf("setting up the certificate rotator: %w", err)
	}
	w := &fileWriter{client: mgr.GetClient(), secret: secret, dir: certDir}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("webhook-certificate-files").
		For(&corev1.Secret{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == secret.Namespace && o.GetName() == secret.Name
		}))).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false), MaxConcurrentReconciles: 1}).
		Complete(w)
	if err != nil {
		return nil, fmt.Errorf("setting up the certificate file writer: %w", err)
	}
	return ready, nil
}

// fileWriter copies the Secret's serving certificate and key into dir.
type fileWriter struct {
	client client.Client
	secret types.NamespacedName
	dir    string
}

func (w *fileWriter) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var s corev1.Secret
	if err := w.client.Get(ctx, w.secret, &s); err != nil {
		if apierrors.IsNotFound(err) {
			ctrl.LoggerFrom(ctx).Error(err, "The webhook certificate Secret does not exist; create it empty (config/webhook ships it) and the manager fills it")
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	cert, key := s.Data[certFile], s.Data[keyFile]
	if len(cert) == 0 || len(key) == 0 {
		return reconcile.Result{}, nil // not made yet; the update that fills it brings us back
	}
	changed, err := w.write(cert, key, s.Data[caFile])
	if err != nil {
		return reconcile.Result{}, err
	}
	if changed {
		ctrl.LoggerFrom(ctx).Info("Wrote the webhook serving certificate", "dir", w.dir, "resourceVersion", s.ResourceVersion)
	}
	return reconcile.Result{}, nil
}

// write puts cert, key and the CA into dir unless they are there already.
// Each file is replaced by a rename, so the server never reads half a
// file; the CA and the key go first, and the server only reloads once the
// pair matches.
func (w *fileWriter) write(cert, key, ca []byte) (bool, error) {
	oldCert, errCert := os.ReadFile(filepath.Join(w.dir, certFile))
	oldKey, errKey := os.ReadFile(filepath.Join(w.dir, keyFile))
	oldCA, errCA := os.ReadFile(filepath.Join(w.dir, caFile))
	if errCert == nil && errKey == nil && bytes.Equal(oldCert, cert) && bytes.Equal(oldKey, key) &&
		(len(ca) == 0 || errCA == nil && bytes.Equal(oldCA, ca)) {
		return false, nil
	}
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return false, err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{caFile, ca}, {keyFile, key}, {certFile, cert}} {
		if len(f.data) == 0 {
			continue
		}
		if err := replaceFile(filepath.Join(w.dir, f.name), f.data); err != nil {
			return false, err
		}
	}
	return true, nil
}

func replaceFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

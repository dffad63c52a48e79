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

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

var certSecretKey = client.ObjectKey{Namespace: configv1alpha1.DefaultNamespace, Name: configv1alpha1.DefaultWebhookSecretName}

// A serving certificate about to expire is renewed by the manager, from the
// same CA, while the webhook keeps answering: no call fails.
func TestWebhookCertificateRenewedBeforeExpiry(t *testing.T) {
	ctx := context.Background()
	ns := cluster.NewNamespace(t)
	var secret corev1.Secret
	if err := cluster.Client.Get(ctx, certSecretKey, &secret); err != nil {
		t.Fatal(err)
	}
	caBundle := webhookCABundle(t)
	ca, caKey := parseCA(t, secret.Data["ca.crt"], secret.Data["ca.key"])

	// Put in a certificate of the same CA that expires tomorrow, well
	// inside the renewal window.
	expiring, expiringKey := signServingCert(t, ca, caKey, 24*time.Hour)
	probe := startProbe(t, ns)
	secret.Data["tls.crt"], secret.Data["tls.key"] = expiring, expiringKey
	if err := cluster.Client.Update(ctx, &secret); err != nil {
		t.Fatal(err)
	}
	start := time.Now()

	// The manager renews it and serves the renewed one.
	var served *x509.Certificate
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		if err := cluster.Client.Get(ctx, certSecretKey, &secret); err != nil {
			return false, err
		}
		inSecret := parseCert(t, secret.Data["tls.crt"])
		if time.Until(inSecret.NotAfter) < 300*24*time.Hour {
			return false, nil
		}
		served = servedCert(t, secret.Data["ca.crt"])
		return served != nil && served.SerialNumber.Cmp(inSecret.SerialNumber) == 0, nil
	})
	if err != nil {
		t.Fatalf("the expiring certificate was not renewed and served within %s: %v", timeout, err)
	}
	renewed := time.Since(start)
	time.Sleep(2 * time.Second) // calls on the renewed certificate count too
	ok, failed := probe()
	t.Logf("renewed and served in %s; serving certificate valid until %s; webhook calls meanwhile: %d answered, %d failed",
		renewed.Round(time.Millisecond), served.NotAfter.Format(time.DateOnly), ok, failed)
	if failed > 0 {
		t.Errorf("%d webhook calls failed while the certificate was renewed", failed)
	}
	if ok == 0 {
		t.Error("no webhook call was made during the renewal: the probe proves nothing")
	}
	if got := webhookCABundle(t); string(got) != string(caBundle) {
		t.Error("renewing the serving certificate changed the caBundle; the CA should have stayed")
	}
}

// A wiped Secret is filled again with a new CA and certificate, the
// caBundle follows, and the webhook answers again with no one stepping in.
func TestWebhookCertificateRemadeWhenSecretWiped(t *testing.T) {
	ctx := context.Background()
	ns := cluster.NewNamespace(t)
	var secret corev1.Secret
	if err := cluster.Client.Get(ctx, certSecretKey, &secret); err != nil {
		t.Fatal(err)
	}
	oldCA := webhookCABundle(t)
	probe := startProbe(t, ns)
	secret.Data = nil
	if err := cluster.Client.Update(ctx, &secret); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		if err := cluster.Client.Get(ctx, certSecretKey, &secret); err != nil {
			return false, err
		}
		newCA := secret.Data["ca.crt"]
		if len(newCA) == 0 || string(newCA) == string(oldCA) || string(webhookCABundle(t)) != string(newCA) {
			return false, nil
		}
		return servedCert(t, newCA) != nil, nil
	})
	if err != nil {
		t.Fatalf("no new CA in the Secret, the caBundle and the server within %s: %v", timeout, err)
	}
	remade := time.Since(start)
	// Calls made from now on must be answered.
	if err := cluster.Client.Create(ctx, utiltesting.MakeTrainJob("after-wipe", ns).Command("true").Obj(), client.DryRunAll); err != nil {
		t.Fatalf("the webhook does not answer after the new certificate is in place: %v", err)
	}
	time.Sleep(2 * time.Second)
	ok, failed := probe()
	t.Logf("new CA and certificate made, injected and served in %s; webhook calls meanwhile: %d answered, %d failed",
		remade.Round(time.Millisecond), ok, failed)
}

// startProbe calls the webhook (a dry-run create) every 100ms until the
// returned function is called, which reports the calls answered and failed.
func startProbe(t *testing.T, ns string) func() (ok, failed int64) {
	t.Helper()
	var okN, failedN atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			err := cluster.Client.Create(ctx, utiltesting.MakeTrainJob("probe", ns).Command("true").Obj(), client.DryRunAll)
			switch {
			case ctx.Err() != nil:
			case err != nil:
				failedN.Add(1)
				t.Logf("webhook call failed: %v", err)
			default:
				okN.Add(1)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	stop := func() (int64, int64) {
		cancel()
		<-done
		return okN.Load(), failedN.Load()
	}
	t.Cleanup(func() { stop() })
	return stop
}

// webhookURL is where the API server calls the manager's webhook.
func webhookURL(t *testing.T) (*url.URL, []byte) {
	t.Helper()
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: configv1alpha1.DefaultWebhookConfigurationName}, &vwc); err != nil {
		t.Fatal(err)
	}
	cc := vwc.Webhooks[0].ClientConfig
	if cc.URL == nil {
		t.Fatal("the dev webhook configuration has no URL")
	}
	u, err := url.Parse(*cc.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u, cc.CABundle
}

func webhookCABundle(t *testing.T) []byte {
	_, ca := webhookURL(t)
	return ca
}

// servedCert connects to the webhook as the API server does, trusting caPEM
// alone, and returns the certificate it serves, or nil if it does not verify.
func servedCert(t *testing.T, caPEM []byte) *x509.Certificate {
	t.Helper()
	u, _ := webhookURL(t)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: pool, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0]
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func parseCA(t *testing.T, certPEM, keyPEM []byte) (*x509.Certificate, *rsa.PrivateKey) {
	t.Helper()
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		t.Fatal("no PEM CA key")
	}
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return parseCert(t, certPEM), key
}

// signServingCert makes a certificate for localhost, signed by ca, valid for d.
func signServingCert(t *testing.T, ca *x509.Certificate, caKey *rsa.PrivateKey, d time.Duration) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(d),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

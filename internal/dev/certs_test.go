package dev

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"
)

// The certificate serves 127.0.0.1 and is trusted through the CA that goes
// into the webhook configuration; a second call reuses it.
func TestEnsureCerts(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, err := ensureCerts(dir, now)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, certFile), filepath.Join(dir, keyFile))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("the CA bundle does not parse")
	}
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now}); err != nil {
			t.Errorf("certificate for %s: %v", name, err)
		}
	}
	again, err := ensureCerts(dir, now.Add(time.Hour))
	if err != nil || string(again) != string(ca) {
		t.Errorf("second call made a new CA (err %v)", err)
	}
	renewed, err := ensureCerts(dir, now.Add(29*24*time.Hour+time.Hour))
	if err != nil || string(renewed) == string(ca) {
		t.Errorf("a certificate expiring within a day was not renewed (err %v)", err)
	}
}

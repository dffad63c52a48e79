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

// Package statusserver serves Kubeflow Trainer's TrainJob status protocol:
// trainer Pods post their progress (UpdateTrainJobStatusRequest) to
// POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status
// over HTTPS, with a projected ServiceAccount token for that TrainJob, and
// the server writes it into the TrainJob's status.trainerStatus, at most
// once per interval per TrainJob (Writer). jobplan's progress plugin gives
// the trainer containers the URL, the CA certificate and the token; the
// CA publisher puts the certificate in every namespace with TrainJobs.
package statusserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/metrics"
)

// Timeouts of a connection: a report is small, and a client that sends
// it slowly must not hold the server.
const (
	readTimeout     = 10 * time.Second
	writeTimeout    = 30 * time.Second
	idleTimeout     = 2 * time.Minute
	shutdownTimeout = 5 * time.Second
)

// Server is the status server: a manager Runnable that every replica runs,
// leader or not, as the manager's Service sends Pods to any of them.
type Server struct {
	addr    string
	certDir string
	auth    *Authenticator
	writer  *Writer
	clock   clock.PassiveClock
	log     logr.Logger
	// serving is set while the server listens.
	serving atomic.Bool
}

// NewServer returns a server on addr, serving with the certificate of
// certDir (tls.crt and tls.key, reloaded when they change).
func NewServer(addr, certDir string, auth *Authenticator, writer *Writer, clk clock.PassiveClock, log logr.Logger) *Server {
	return &Server{addr: addr, certDir: certDir, auth: auth, writer: writer, clock: clk, log: log}
}

// Handler serves the protocol's one endpoint, and 404 for anything else.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+trainer.StatusServerPath("{namespace}", "{name}"), s.report)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("no such endpoint: %s %s; trainer Pods POST to %s", r.Method, r.URL.Path, trainer.StatusServerPath("<namespace>", "<name>")))
	})
	return mux
}

// report takes one progress report.
func (s *Server) report(w http.ResponseWriter, r *http.Request) {
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if r.ContentLength > MaxBodyBytes {
		s.fail(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, errTooLarge.Error())
		return
	}
	tj, err := s.auth.Authenticate(r.Context(), r.Header.Get("Authorization"), key)
	if err != nil {
		var ref *refusal
		if errors.As(err, &ref) {
			s.fail(w, ref.code, reasonOf(ref.code), ref.message)
			return
		}
		s.log.Error(err, "Authenticating a progress report", "trainJob", key)
		s.fail(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the token could not be checked: "+err.Error())
		return
	}
	status, err := Decode(r.Body, s.clock.Now())
	if err != nil {
		if errors.Is(err, errTooLarge) {
			s.fail(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, err.Error())
			return
		}
		s.fail(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error())
		return
	}
	if status != nil {
		if err := s.writer.Submit(r.Context(), key, tj.UID, status); err != nil {
			switch {
			case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsInvalid(err) && tj.DeletionTimestamp != nil:
				s.fail(w, http.StatusNotFound, metav1.StatusReasonNotFound, fmt.Sprintf("TrainJob %s not found", key))
			case apierrors.IsInvalid(err):
				s.fail(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err.Error())
			default:
				s.log.Error(err, "Writing a progress report", "trainJob", key)
				s.fail(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the report could not be written: "+err.Error())
			}
			return
		}
	}
	metrics.StatusRequests.WithLabelValues("200").Inc()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(trainer.UpdateTrainJobStatusRequest{TrainerStatus: status})
}

// fail answers with a metav1.Status, as the API server does.
func (s *Server) fail(w http.ResponseWriter, code int, reason metav1.StatusReason, message string) {
	metrics.StatusRequests.WithLabelValues(strconv.Itoa(code)).Inc()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: message, Reason: reason, Code: int32(code),
	})
}

func reasonOf(code int) metav1.StatusReason {
	switch code {
	case http.StatusUnauthorized:
		return metav1.StatusReasonUnauthorized
	case http.StatusForbidden:
		return metav1.StatusReasonForbidden
	case http.StatusNotFound:
		return metav1.StatusReasonNotFound
	}
	return metav1.StatusReasonBadRequest
}

// Start serves until ctx ends.
// The certificate may not be there yet: with certificate management,
// the manager is making it, and the server waits for it.
func (s *Server) Start(ctx context.Context) error {
	certFile, keyFile := filepath.Join(s.certDir, "tls.crt"), filepath.Join(s.certDir, "tls.key")
	waiting := false
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		_, errCert := os.Stat(certFile)
		_, errKey := os.Stat(keyFile)
		if errCert != nil || errKey != nil {
			if !waiting {
				s.log.Info("Waiting for the serving certificate before serving progress reports", "certFile", certFile, "keyFile", keyFile)
				waiting = true
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil // stopped before the certificate came
	}
	watcher, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("reading the status server's certificate: %w", err)
	}
	go func() {
		if err := watcher.Start(ctx); err != nil {
			s.log.Error(err, "Watching the status server's certificate")
		}
	}()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("status server: %w", err)
	}
	srv := &http.Server{
		Handler:           http.MaxBytesHandler(s.Handler(), MaxBodyBytes+1),
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: watcher.GetCertificate},
		ReadHeaderTimeout: readTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
	}
	forget := time.NewTicker(time.Minute)
	defer forget.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				shutdown, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
				defer cancel()
				_ = srv.Shutdown(shutdown)
				return
			case <-forget.C:
				s.writer.Forget()
			}
		}
	}()
	s.serving.Store(true)
	defer s.serving.Store(false)
	s.log.Info("Serving progress reports", "address", ln.Addr().String())
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("status server: %w", err)
	}
	return nil
}

// Serving is a readiness check: a replica is ready once its status server
// listens, so the Service sends reports to it only then.
func (s *Server) Serving(*http.Request) error {
	if !s.serving.Load() {
		return errors.New("the status server is not serving yet")
	}
	return nil
}

// NeedLeaderElection is false: every replica serves.
func (s *Server) NeedLeaderElection() bool { return false }

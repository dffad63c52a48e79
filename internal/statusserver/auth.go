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
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// The status server asks the API server who a token is, and reads the
// token's Pod.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=pods,verbs=get

const (
	// identityTTL is how long an accepted token is trusted without asking
	// the API server again: a report every few seconds from every Pod of a
	// wide TrainJob then costs one token review per Pod per minute. A
	// deleted Pod's token stops working within it; a deleted TrainJob's at
	// once (the TrainJob's UID is checked on every request).
	identityTTL = time.Minute
	// identities bounds the tokens remembered.
	identities = 16384
)

// A refusal is an authentication or authorization failure, with the HTTP
// status and the message the client gets.
type refusal struct {
	code    int
	message string
}

func (r *refusal) Error() string { return r.message }

func unauthorized(format string, args ...any) *refusal {
	return &refusal{http.StatusUnauthorized, fmt.Sprintf(format, args...)}
}

func forbidden(format string, args ...any) *refusal {
	return &refusal{http.StatusForbidden, fmt.Sprintf(format, args...)}
}

// Authenticator accepts a request for a TrainJob only with a token that
// the API server validates (TokenReview) for that TrainJob's audience
// (trainer.StatusTokenAudience), bound to a Pod that exists, runs as the
// token's ServiceAccount and belongs to a Job the TrainJob controls. A
// token of TrainJob A is thus refused for B (another audience, and its
// Pod is not B's), and one of a TrainJob deleted and created again under
// the same name is refused for the new one (its Pod's Job is owned by the
// old TrainJob's UID).
type Authenticator struct {
	// client creates TokenReviews and reads Pods from the API server;
	// cache reads TrainJobs and Jobs from the manager's cache.
	client client.Client
	cache  client.Reader
	clock  clock.PassiveClock
	// accepted maps a token and TrainJob to the UID of the TrainJob the
	// token was accepted for.
	accepted *cache.LRUExpireCache
}

// NewAuthenticator returns an Authenticator that asks the API server
// through c and reads TrainJobs and Jobs through reader (the manager's cache).
func NewAuthenticator(c client.Client, reader client.Reader, clk clock.PassiveClock) *Authenticator {
	return &Authenticator{client: c, cache: reader, clock: clk, accepted: cache.NewLRUExpireCacheWithClock(identities, clk)}
}

// Authenticate returns the TrainJob namespace/name that the request's
// Authorization header may write, or a *refusal (or another error, for a
// failure to ask).
func (a *Authenticator) Authenticate(ctx context.Context, header string, key types.NamespacedName) (*trainer.TrainJob, error) {
	token, ok := bearer(header)
	if !ok {
		return nil, unauthorized("an Authorization header with a bearer token is required: the trainer container's token is in the file KUBEFLOW_TRAINER_SERVER_TOKEN names")
	}
	id := tokenID(token, key)
	uid, known := a.accepted.Get(id)
	var who *identity
	if !known {
		// The token first, so that whether a TrainJob exists is told only
		// to a caller with a token for it.
		var err error
		if who, err = a.review(ctx, token, key); err != nil {
			return nil, err
		}
	}
	var tj trainer.TrainJob
	if err := a.cache.Get(ctx, key, &tj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &refusal{http.StatusNotFound, fmt.Sprintf("TrainJob %s not found", key)}
		}
		return nil, err
	}
	if known {
		if uid.(types.UID) != tj.UID {
			return nil, forbidden("the token was issued for a Pod of an earlier TrainJob %s, deleted since", key)
		}
		return &tj, nil
	}
	if err := a.checkPod(ctx, who, &tj); err != nil {
		return nil, err
	}
	ttl := identityTTL
	if exp, ok := expiry(token); ok {
		ttl = min(ttl, exp.Sub(a.clock.Now()))
	}
	if ttl > 0 {
		a.accepted.Add(id, tj.UID, ttl)
	}
	return &tj, nil
}

// identity is who the API server says a token is: a ServiceAccount, and
// the Pod the token is bound to.
type identity struct {
	namespace, serviceAccount, pod, podUID string
}

// review asks the API server whether token is valid for the TrainJob
// key's audience, and whose it is: a ServiceAccount of the TrainJob's
// namespace, bound to a Pod.
func (a *Authenticator) review(ctx context.Context, token string, key types.NamespacedName) (*identity, error) {
	audience := trainer.StatusTokenAudience(key.Namespace, key.Name)
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}}}
	if err := a.client.Create(ctx, tr); err != nil {
		return nil, fmt.Errorf("reviewing the token: %w", err)
	}
	st := tr.Status
	if !st.Authenticated {
		msg := "the token is not valid for TrainJob " + key.String()
		if st.Error != "" {
			msg += ": " + st.Error
		}
		return nil, unauthorized("%s", msg)
	}
	if !slices.Contains(st.Audiences, audience) {
		return nil, forbidden("the token's audiences %v do not include %s", st.Audiences, audience)
	}
	ns, sa, err := serviceaccount.SplitUsername(st.User.Username)
	if err != nil {
		return nil, forbidden("the token is %s's, not a ServiceAccount's", st.User.Username)
	}
	if ns != key.Namespace {
		return nil, forbidden("the token is of ServiceAccount %s/%s, not of namespace %s", ns, sa, key.Namespace)
	}
	podName, podUID := extra(st.User, serviceaccount.PodNameKey), extra(st.User, serviceaccount.PodUIDKey)
	if podName == "" || podUID == "" {
		return nil, forbidden("the token is not bound to a Pod: use the projected token of a Pod of TrainJob %s", key)
	}
	return &identity{namespace: ns, serviceAccount: sa, pod: podName, podUID: podUID}, nil
}

// checkPod checks that the token's Pod exists, runs as the token's
// ServiceAccount and belongs to tj.
func (a *Authenticator) checkPod(ctx context.Context, who *identity, tj *trainer.TrainJob) error {
	ns, sa, podName, podUID := who.namespace, who.serviceAccount, who.pod, who.podUID
	var pod corev1.Pod
	if err := a.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: podName}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return forbidden("the token's Pod %s/%s does not exist", ns, podName)
		}
		return fmt.Errorf("reading the token's Pod: %w", err)
	}
	if string(pod.UID) != podUID {
		return forbidden("the token's Pod %s/%s was deleted", ns, podName)
	}
	if pod.Spec.ServiceAccountName != sa {
		return forbidden("Pod %s/%s runs as ServiceAccount %s, not as the token's %s", ns, podName, pod.Spec.ServiceAccountName, sa)
	}
	if !a.ownedBy(ctx, &pod, tj) {
		return forbidden("Pod %s/%s is not a Pod of TrainJob %s/%s", ns, podName, tj.Namespace, tj.Name)
	}
	return nil
}

// ownedBy reports whether pod's controller is a Job that tj controls.
func (a *Authenticator) ownedBy(ctx context.Context, pod *corev1.Pod, tj *trainer.TrainJob) bool {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
		return false
	}
	var job batchv1.Job
	if err := a.cache.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, &job); err != nil || job.UID != ref.UID {
		return false
	}
	owner := metav1.GetControllerOf(&job)
	return owner != nil && owner.UID == tj.UID
}

// bearer returns the credentials of an Authorization header of scheme
// Bearer (any case, RFC 7235), and whether it is one.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// tokenID is what the accepted tokens are remembered by: a digest, so the
// tokens themselves are not kept.
func tokenID(token string, key types.NamespacedName) string {
	sum := sha256.Sum256([]byte(key.String() + "\x00" + token))
	return string(sum[:])
}

// expiry reads the exp claim of a JWT, unverified: it only shortens how
// long an accepted token is remembered.
func expiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == 0 {
		return time.Time{}, false
	}
	return time.Unix(claims.Exp, 0), true
}

func extra(u authenticationv1.UserInfo, key string) string {
	if v := u.Extra[key]; len(v) == 1 {
		return v[0]
	}
	return ""
}

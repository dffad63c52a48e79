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

package webhook

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
)

const (
	// acceptedShapeTTL is how long the API server's acceptance of a Job
	// shape stands in for asking it again. Admission webhooks, policies
	// and quotas are watched (jobAdmission); what is not, a change of the
	// API server's own validation (an upgrade) or of a namespace's Pod
	// Security level, is seen at admission after at most this long. The
	// controller reports a refusal when it creates the Jobs either way.
	acceptedShapeTTL = time.Minute
	// maxAcceptedShapes bounds the shapes remembered.
	maxAcceptedShapes = 1024
)

// shapeUID stands for a TrainJob's UID in its shape: any UID the API server
// gives is a valid label value and owner reference, as this one is.
const shapeUID types.UID = "00000000-0000-4000-8000-000000000000"

// A shape is what decides whether the API server accepts a TrainJob's Jobs:
// the Jobs dry-run (dryRunJobsOf), as the TrainJob's plan builds them,
// in the TrainJob's namespace, for a TrainJob of the same spec whose name
// has the same length and the same kind of character at each place (each
// letter 'a', each digit '0', the rest as they are) and a UID of its own.
//
// TrainJobs of one shape differ only in values that the plan derives from
// their names and UIDs: names, label values, hostnames, environment
// variables, hashes. Kubernetes' validation of Jobs and Pods checks such
// values by their length and the classes of their characters (DNS labels
// and subdomains, label values), never by the letters they hold, so the API
// server gives TrainJobs of one shape the same answer. A TrainJob whose
// Jobs carry random values (a policy's fresh key) has a shape of its own,
// never found again.
type shape [sha256.Size]byte

// shapeOf returns the shape of tj on rt, and false when its plan cannot be
// built for the name's stand-in.
func shapeOf(tj *trainer.TrainJob, rt jobplan.Runtime) (shape, bool) {
	standIn := tj.DeepCopy()
	standIn.Name = nameShape(tj.Name)
	if standIn.UID != "" {
		standIn.UID = shapeUID
	}
	plan, err := jobplan.Build(standIn, rt)
	if err != nil {
		return shape{}, false
	}
	data, err := json.Marshal(struct {
		Namespace string
		UIDSet    bool
		Jobs      any
	}{tj.Namespace, tj.UID != "", dryRunJobsOf(plan)})
	if err != nil {
		return shape{}, false
	}
	return sha256.Sum256(data), true
}

// nameShape maps each letter of name to 'a' and each digit to '0'.
func nameShape(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return 'a'
		case r >= '0' && r <= '9':
			return '0'
		}
		return r
	}, name)
}

// acceptedShapes remembers, for acceptedShapeTTL, the shapes whose Jobs the
// API server accepted in a dry run.
type acceptedShapes struct {
	now func() time.Time

	mu      sync.Mutex
	expires map[shape]time.Time
}

func newAcceptedShapes(now func() time.Time) *acceptedShapes {
	return &acceptedShapes{now: now, expires: map[shape]time.Time{}}
}

// accepted reports whether s was accepted less than acceptedShapeTTL ago.
func (a *acceptedShapes) accepted(s shape) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.expires[s]
	if ok && !a.now().Before(exp) {
		delete(a.expires, s)
		return false
	}
	return ok
}

// accept remembers that the API server accepted s, making room by dropping
// the shapes that expired, or, if none did, the one that expires first.
func (a *acceptedShapes) accept(s shape) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	if _, ok := a.expires[s]; !ok && len(a.expires) >= maxAcceptedShapes {
		var first shape
		var firstExp time.Time
		for k, exp := range a.expires {
			if !now.Before(exp) {
				delete(a.expires, k)
			} else if firstExp.IsZero() || exp.Before(firstExp) {
				first, firstExp = k, exp
			}
		}
		if len(a.expires) >= maxAcceptedShapes {
			delete(a.expires, first)
		}
	}
	a.expires[s] = now.Add(acceptedShapeTTL)
}

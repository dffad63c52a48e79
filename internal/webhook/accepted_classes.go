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
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/jobplan"
)

const (
	// acceptedClassTTL is how long the API server's acceptance of the Jobs
	// of a class stands in for asking it again. Admission webhooks,
	// policies and quotas are watched (jobAdmission); what is not, a
	// change of the API server's own validation (an upgrade) or of a
	// namespace's Pod Security level, is seen at admission after at most
	// this long. The controller reports a refusal when it creates the
	// Jobs either way.
	acceptedClassTTL = time.Minute
	// maxAcceptedClasses bounds the classes remembered.
	maxAcceptedClasses = 1024
)

// classUID stands for a TrainJob's UID in its class: any UID the API server
// gives is a valid label value and owner reference, as this one is.
const classUID types.UID = "00000000-0000-4000-8000-000000000000"

// A jobsClass is what decides whether the API server accepts a TrainJob's
// Jobs: the TrainJob as its plan reads it (jobplan.Planned) and its
// runtime, for a TrainJob whose name has the same length and the same kind
// of character at each place (each letter 'a', each digit '0', the rest as
// they are) and a UID of its own.
//
// TrainJobs of one class have plans that differ only in values derived from
// their names and UIDs: names, label values, hostnames, environment
// variables, hashes. Kubernetes' validation of Jobs and Pods checks such
// values by their length and the classes of their characters (DNS labels
// and subdomains, label values), never by the letters they hold, so the API
// server gives TrainJobs of one class the same answer. Who patched the
// runtime and when is not part of a plan, so not of a class either.
type jobsClass [sha256.Size]byte

// classOf returns the class of tj on rt, and false when it cannot be told.
func classOf(tj *trainer.TrainJob, rt jobplan.Runtime) (jobsClass, bool) {
	standIn := jobplan.Planned(tj)
	standIn.Name = nameClass(tj.Name)
	if standIn.UID != "" {
		standIn.UID = classUID
	}
	data, err := json.Marshal(struct {
		TrainJob                 *trainer.TrainJob
		RuntimeKind, RuntimeName string
		Runtime                  *trainer.TrainingRuntimeSpec
	}{standIn, rt.Kind, rt.Name, rt.Spec})
	if err != nil {
		return jobsClass{}, false
	}
	return sha256.Sum256(data), true
}

// nameClass maps each letter of name to 'a' and each digit to '0'.
func nameClass(name string) string {
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

// acceptedClasses remembers, for acceptedClassTTL, the classes whose Jobs
// the API server accepted in a dry run; the least recently used go first
// when there are too many.
type acceptedClasses struct {
	cache *cache.LRUExpireCache
}

func newAcceptedClasses(clock cache.Clock) *acceptedClasses {
	return &acceptedClasses{cache: cache.NewLRUExpireCacheWithClock(maxAcceptedClasses, clock)}
}

// accepted reports whether c was accepted at most acceptedClassTTL ago.
func (a *acceptedClasses) accepted(c jobsClass) bool {
	_, ok := a.cache.Get(c)
	return ok
}

// accept remembers that the API server accepted c.
func (a *acceptedClasses) accept(c jobsClass) {
	a.cache.Add(c, struct{}{}, acceptedClassTTL)
}

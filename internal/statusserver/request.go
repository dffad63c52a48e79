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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

// Bounds of a report, those of status.trainerStatus in the CRD: a report
// the server accepts is one the API server accepts.
const (
	// MaxBodyBytes bounds a request's body: 256 metrics of 64-character
	// names and values take about 40 KiB of JSON.
	MaxBodyBytes = 64 << 10
	// MaxMetrics is the most metrics one report may carry.
	MaxMetrics = 256
	// MaxMetricLength is the most characters of a metric's name or value.
	MaxMetricLength = 64
)

// errTooLarge is a body over MaxBodyBytes.
var errTooLarge = errors.New("the request body is larger than 64 KiB")

// Decode reads an UpdateTrainJobStatusRequest from body and checks it as
// the CRD's schema would: it returns the trainerStatus to write (nil for a
// request without one, which changes nothing) or an error that says what
// is wrong. A report without lastUpdatedTime is stamped with now. Fields
// the request type does not have are ignored, as the API server ignores
// them; anything but one JSON object is refused.
func Decode(body io.Reader, now time.Time) (*trainer.TrainerStatus, error) {
	data, err := io.ReadAll(io.LimitReader(body, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	if len(data) > MaxBodyBytes {
		return nil, errTooLarge
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var req trainer.UpdateTrainJobStatusRequest
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("the body is not an UpdateTrainJobStatusRequest: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("the body holds more than one JSON value")
	}
	s := req.TrainerStatus
	if s == nil {
		return nil, nil
	}
	if errs := validate(s, field.NewPath("trainerStatus")); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if s.LastUpdatedTime.IsZero() {
		s.LastUpdatedTime = metav1.NewTime(now)
	}
	// Stored to the second, as the API server stores it.
	s.LastUpdatedTime = metav1.NewTime(s.LastUpdatedTime.Truncate(time.Second))
	return s, nil
}

// validate checks s against the bounds of status.trainerStatus.
func validate(s *trainer.TrainerStatus, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if p := s.ProgressPercentage; p != nil && (*p < 0 || *p > 100) {
		errs = append(errs, field.Invalid(path.Child("progressPercentage"), *p, "must be from 0 to 100"))
	}
	if e := s.EstimatedRemainingSeconds; e != nil && *e < 0 {
		errs = append(errs, field.Invalid(path.Child("estimatedRemainingSeconds"), *e, "must be 0 or more"))
	}
	if n := len(s.Metrics); n > MaxMetrics {
		errs = append(errs, field.TooMany(path.Child("metrics"), n, MaxMetrics))
	}
	for i, m := range s.Metrics {
		if i == MaxMetrics {
			break
		}
		p := path.Child("metrics").Index(i)
		for _, f := range []struct{ name, value string }{{"name", m.Name}, {"value", m.Value}} {
			switch n := utf8.RuneCountInString(f.value); {
			case n == 0:
				errs = append(errs, field.Required(p.Child(f.name), ""))
			case n > MaxMetricLength:
				errs = append(errs, field.TooLong(p.Child(f.name), "", MaxMetricLength))
			}
		}
	}
	return errs
}

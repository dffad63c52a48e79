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
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
)

var now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func metricsJSON(n int, name, value string) string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf(`{"name":%q,"value":%q}`, fmt.Sprintf(name, i), value)
	}
	return "[" + strings.Join(ms, ",") + "]"
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       *trainer.TrainerStatus
		wantErr    string
	}{{
		name: "the SDK's report",
		body: `{"trainerStatus":{"progressPercentage":45,"estimatedRemainingSeconds":120,"metrics":[{"name":"loss","value":"0.15"}],"lastUpdatedTime":"2026-11-27T11:59:58.123456+00:00"}}`,
		want: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](45), EstimatedRemainingSeconds: ptr.To[int32](120),
			Metrics: []trainer.Metric{{Name: "loss", Value: "0.15"}}, LastUpdatedTime: mt(now.Add(-2 * time.Second))},
	}, {
		name: "no lastUpdatedTime: stamped when received",
		body: `{"trainerStatus":{"progressPercentage":0}}`,
		want: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](0), LastUpdatedTime: mt(now)},
	}, {
		name: "no trainerStatus: nothing to write",
		body: `{}`,
	}, {
		name: "fields of a later protocol are ignored",
		body: `{"trainerStatus":{"progressPercentage":100,"lastUpdatedTime":"2026-11-27T12:00:00Z","epoch":3},"initializerStatus":{}}`,
		want: &trainer.TrainerStatus{ProgressPercentage: ptr.To[int32](100), LastUpdatedTime: mt(now)},
	}, {
		name: "256 metrics of 64 characters",
		body: `{"trainerStatus":{"metrics":` + metricsJSON(256, "m%061d", strings.Repeat("é", 64)) + `}}`,
	}, {
		name: "not JSON", body: `progress=45`, wantErr: "not an UpdateTrainJobStatusRequest",
	}, {
		name: "two values", body: `{} {}`, wantErr: "more than one JSON value",
	}, {
		name: "a string for a number", body: `{"trainerStatus":{"progressPercentage":"45"}}`, wantErr: "not an UpdateTrainJobStatusRequest",
	}, {
		name: "progress over 100", body: `{"trainerStatus":{"progressPercentage":101}}`, wantErr: "trainerStatus.progressPercentage: Invalid value: 101: must be from 0 to 100",
	}, {
		name: "negative progress", body: `{"trainerStatus":{"progressPercentage":-1}}`, wantErr: "trainerStatus.progressPercentage",
	}, {
		name: "negative time left", body: `{"trainerStatus":{"estimatedRemainingSeconds":-5}}`, wantErr: "trainerStatus.estimatedRemainingSeconds",
	}, {
		name: "time left past int32", body: `{"trainerStatus":{"estimatedRemainingSeconds":3000000000}}`, wantErr: "not an UpdateTrainJobStatusRequest",
	}, {
		name: "257 metrics", body: `{"trainerStatus":{"metrics":` + metricsJSON(257, "m%d", "1") + `}}`, wantErr: "Too many: 257: must have at most 256 items",
	}, {
		name: "a metric without a name", body: `{"trainerStatus":{"metrics":[{"value":"1"}]}}`, wantErr: "trainerStatus.metrics[0].name: Required value",
	}, {
		name: "a value of 65 characters", body: `{"trainerStatus":{"metrics":[{"name":"loss","value":"` + strings.Repeat("1", 65) + `"}]}}`,
		wantErr: "trainerStatus.metrics[0].value: Too long",
	}, {
		name: "a bad time", body: `{"trainerStatus":{"lastUpdatedTime":"yesterday"}}`, wantErr: "not an UpdateTrainJobStatusRequest",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(strings.NewReader(tc.body), now)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Decode() error = %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode(): %v", err)
			}
			if tc.want == nil && tc.name != "256 metrics of 64 characters" {
				if got != nil {
					t.Fatalf("Decode() = %+v, want nil", got)
				}
				return
			}
			if tc.want != nil {
				gotJSON, _ := json.Marshal(got)
				wantJSON, _ := json.Marshal(tc.want)
				if !bytes.Equal(gotJSON, wantJSON) {
					t.Errorf("Decode() = %s, want %s", gotJSON, wantJSON)
				}
			}
		})
	}
}

func TestDecodeRefusesBodiesOverTheBound(t *testing.T) {
	body := `{"trainerStatus":{"metrics":[{"name":"loss","value":"` + strings.Repeat("1", MaxBodyBytes) + `"}]}}`
	if _, err := Decode(strings.NewReader(body), now); !errors.Is(err, errTooLarge) {
		t.Fatalf("Decode() error = %v, want %v", err, errTooLarge)
	}
}

// FuzzDecode checks that no body makes Decode panic, and that what it
// accepts is within the CRD's bounds and reads back the same.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"trainerStatus":{"progressPercentage":45,"estimatedRemainingSeconds":120,"metrics":[{"name":"loss","value":"0.15"}],"lastUpdatedTime":"2026-11-27T11:59:58Z"}}`,
		`{}`, `null`, `{"trainerStatus":null}`, `{"trainerStatus":{"metrics":[{"name":"","value":""}]}}`, `[]`, `{"trainerStatus":{"progressPercentage":1e3}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := Decode(bytes.NewReader(body), now)
		if err != nil || s == nil {
			return
		}
		if p := s.ProgressPercentage; p != nil && (*p < 0 || *p > 100) {
			t.Fatalf("accepted progressPercentage %d", *p)
		}
		if e := s.EstimatedRemainingSeconds; e != nil && *e < 0 {
			t.Fatalf("accepted estimatedRemainingSeconds %d", *e)
		}
		if len(s.Metrics) > MaxMetrics {
			t.Fatalf("accepted %d metrics", len(s.Metrics))
		}
		for _, m := range s.Metrics {
			for _, v := range []string{m.Name, m.Value} {
				if n := utf8.RuneCountInString(v); n == 0 || n > MaxMetricLength {
					t.Fatalf("accepted a metric name or value of %d characters: %q", n, v)
				}
			}
		}
		if s.LastUpdatedTime.IsZero() {
			t.Fatal("accepted a report without lastUpdatedTime")
		}
		out, err := json.Marshal(trainer.UpdateTrainJobStatusRequest{TrainerStatus: s})
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(bytes.NewReader(out), now)
		if err != nil {
			t.Fatalf("what Decode accepted, encoded again, is refused: %v\n%s", err, out)
		}
		if a, _ := json.Marshal(again); !bytes.Equal(a, mustJSON(s)) {
			t.Fatalf("decoded again as %s, want %s", a, mustJSON(s))
		}
	})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func mt(t time.Time) metav1.Time { return metav1.NewTime(t) }

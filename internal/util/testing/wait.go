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

package testing

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls check every interval until it returns nil, and fails the
// test with the last error if that takes longer than timeout.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, check func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("waited %v for %s; last: %v", timeout, what, last)
	}
}

// Consistently polls check every interval for d, and fails the test as soon
// as it returns an error.
func Consistently(t testing.TB, d, interval time.Duration, what string, check func() error) {
	t.Helper()
	var failed error
	_ = wait.PollUntilContextTimeout(context.Background(), interval, d, true, func(context.Context) (bool, error) {
		failed = check()
		return failed != nil, nil
	})
	if failed != nil {
		t.Fatalf("%s: %v", what, failed)
	}
}

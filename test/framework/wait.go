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

package framework

import (
	"testing"
	"time"

	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// Eventually polls check every Interval until it returns nil, and fails
// the test with what it waited for and the last error after Timeout.
func (c *Cluster) Eventually(t testing.TB, what string, check func() error) {
	t.Helper()
	utiltesting.Eventually(t, c.Timeout, c.Interval, what, check)
}

// EventuallyWithin is Eventually with timeout d.
func (c *Cluster) EventuallyWithin(t testing.TB, d time.Duration, what string, check func() error) {
	t.Helper()
	utiltesting.Eventually(t, d, c.Interval, what, check)
}

// Consistently polls check every Interval for d, and fails the test as
// soon as it returns an error.
func (c *Cluster) Consistently(t testing.TB, d time.Duration, what string, check func() error) {
	t.Helper()
	utiltesting.Consistently(t, d, c.Interval, what, check)
}

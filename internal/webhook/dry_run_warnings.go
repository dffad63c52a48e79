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
	"context"
	"sync"

	"k8s.io/client-go/rest"
)

// DryRunWarnings is the warning handler of the client the TrainJob webhook
// dry-runs Jobs with (rest.Config.WarningHandlerWithContext). It hands the
// warnings of the API server's answer (Pod Security admission's on the Pod
// template, a deprecation, an admission policy's) to the dry run that
// asked, through its context, for the webhook to give them with its own
// answer; client-go's default handler would only log them.
type DryRunWarnings struct{}

var _ rest.WarningHandlerWithContext = DryRunWarnings{}

// HandleWarningHeaderWithContext keeps text in the collector of ctx, if it
// has one. Like client-go's handlers, it takes warnings of code 299 only:
// those the API server gives.
func (DryRunWarnings) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	if c, ok := ctx.Value(warningsKey{}).(*warningCollector); ok {
		c.add(text)
	}
}

type warningsKey struct{}

// warningCollector keeps the warnings of one request.
type warningCollector struct {
	mu    sync.Mutex
	texts []string
}

// collectWarnings returns a context whose requests' warnings c keeps.
func collectWarnings(ctx context.Context) (context.Context, *warningCollector) {
	c := &warningCollector{}
	return context.WithValue(ctx, warningsKey{}, c), c
}

func (c *warningCollector) add(text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.texts = append(c.texts, text)
}

// all returns the warnings kept.
func (c *warningCollector) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.texts
}

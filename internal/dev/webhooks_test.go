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

package dev

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The generated manifest decodes into its two configurations, each webhook
// with the path of the manager's handler; keep drops the others.
func TestWebhookConfigurations(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	configs, err := webhookConfigurations(data)
	if err != nil {
		t.Fatal(err)
	}
	// One configuration of each kind: Up registers them, and the switch to
	// Kubeflow Trainer (deleteOurWebhookConfigurations) removes them, by
	// name; a webhook in a third one would stay behind, failing closed.
	if len(configs) != 2 {
		t.Errorf("%d webhook configurations, want one validating and one mutating", len(configs))
	}
	got := map[string]string{}
	for _, c := range configs {
		for _, w := range webhooksOf(c, nil) {
			got[w.name] = w.path()
		}
	}
	want := map[string]string{
		"vtrainjob.trainer.kubeflow.org":               "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
		"mtrainjob.trainer.kubeflow.org":               "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
		"vtrainingruntime.trainer.kubeflow.org":        "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime",
		"vclustertrainingruntime.trainer.kubeflow.org": "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("webhooks (-want +got):\n%s", diff)
	}
	for _, c := range configs {
		if ws := webhooksOf(c, func(string) bool { return false }); len(ws) != 0 || len(webhooksOf(c, nil)) != 0 {
			t.Errorf("%T: keep refusing every webhook left %d", c, len(ws))
		}
	}
	if _, err := webhookConfigurations([]byte("kind: Service\napiVersion: v1\n")); err == nil {
		t.Error("a manifest with another kind decoded without error")
	}
}

// FreePort never hands out a port twice within a minute, though the
// kernel, asked for a free port, may answer the same one again.
func TestFreePortHandsEachPortOutOnce(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}

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
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// webhookConfigurations decodes the validating and mutating webhook
// configurations of a manifest (this project's generated one, Kueue's).
// Objects of the kinds in skip are left out; any other kind is an error.
func webhookConfigurations(data []byte, skip ...string) ([]client.Object, error) {
	var out []client.Object
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc json.RawMessage
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 || string(bytes.TrimSpace(doc)) == "null" {
			continue
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(doc, &tm); err != nil {
			return nil, err
		}
		var obj client.Object
		switch tm.Kind {
		case "MutatingWebhookConfiguration":
			obj = &admissionregistrationv1.MutatingWebhookConfiguration{}
		case "ValidatingWebhookConfiguration":
			obj = &admissionregistrationv1.ValidatingWebhookConfiguration{}
		default:
			if slices.Contains(skip, tm.Kind) {
				continue
			}
			return nil, fmt.Errorf("unexpected kind %q", tm.Kind)
		}
		strict := json.NewDecoder(bytes.NewReader(doc))
		strict.DisallowUnknownFields()
		if err := strict.Decode(obj); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
}

// webhook is one webhook of a configuration, whose client configuration
// and namespace selector are changed in place.
type webhook struct {
	name              string
	clientConfig      *admissionregistrationv1.WebhookClientConfig
	namespaceSelector **metav1.LabelSelector
}

// path is the path the webhook's Service reference names, / if none.
func (w webhook) path() string {
	if s := w.clientConfig.Service; s != nil && s.Path != nil {
		return *s.Path
	}
	return "/"
}

// webhooksOf returns the webhooks of configuration c (validating or
// mutating), after dropping from it those keep refuses (none if keep is
// nil).
func webhooksOf(c client.Object, keep func(name string) bool) []webhook {
	var out []webhook
	switch c := c.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		if keep != nil {
			c.Webhooks = slices.DeleteFunc(c.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return !keep(w.Name) })
		}
		for i := range c.Webhooks {
			w := &c.Webhooks[i]
			out = append(out, webhook{w.Name, &w.ClientConfig, &w.NamespaceSelector})
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		if keep != nil {
			c.Webhooks = slices.DeleteFunc(c.Webhooks, func(w admissionregistrationv1.MutatingWebhook) bool { return !keep(w.Name) })
		}
		for i := range c.Webhooks {
			w := &c.Webhooks[i]
			out = append(out, webhook{w.Name, &w.ClientConfig, &w.NamespaceSelector})
		}
	}
	return out
}

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

// Package config loads and validates the manager's Configuration file.
package config

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	configv1alpha1 "github.com/trainjob-operator/trainjob-operator/api/config/v1alpha1"
)

// ConfigMapName is the ConfigMap, in the manager's namespace, that holds its
// Configuration under the key ConfigMapKey when it is deployed
// (config/manager); trainctl reads the retention policies from it.
const (
	ConfigMapName = "trainjob-operator-config"
	ConfigMapKey  = "config.yaml"
	// Namespace is the namespace config/default deploys the manager in.
	Namespace = "trainjob-system"
)

var (
	scheme = runtime.NewScheme()
	// codecs decode strictly: an unknown or duplicate field is an error.
	codecs = serializer.NewCodecFactory(scheme, serializer.EnableStrict)
)

func init() {
	utilruntime.Must(configv1alpha1.AddToScheme(scheme))
}

// Load reads the Configuration at path, or the defaults when path is empty.
// Unknown or duplicate fields, a wrong apiVersion or kind, and invalid
// values are errors that name the field.
func Load(path string) (*configv1alpha1.Configuration, error) {
	cfg := &configv1alpha1.Configuration{}
	if path == "" {
		scheme.Default(cfg)
	} else {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading configuration: %w", err)
		}
		if cfg, err = Decode(data); err != nil {
			return nil, fmt.Errorf("configuration %s: %w", path, err)
		}
	}
	if errs := Validate(cfg); len(errs) > 0 {
		return nil, fmt.Errorf("configuration %s is invalid: %w", path, errs.ToAggregate())
	}
	return cfg, nil
}

// Decode decodes a Configuration, YAML or JSON, strictly, and fills in its
// defaults.
func Decode(data []byte) (*configv1alpha1.Configuration, error) {
	obj, _, err := codecs.UniversalDecoder(configv1alpha1.GroupVersion).Decode(data, nil, nil)
	if err != nil {
		return nil, decodeError(data, err)
	}
	cfg, ok := obj.(*configv1alpha1.Configuration)
	if !ok {
		return nil, fmt.Errorf("decoded a %T, not a Configuration", obj)
	}
	return cfg, nil
}

// decodeError names the fields a decoding error is about, where the
// decoder's error does not.
func decodeError(data []byte, err error) error {
	var errs field.ErrorList
	switch {
	case runtime.IsStrictDecodingError(err):
		return err // it names the unknown or duplicate field
	case runtime.IsNotRegisteredError(err), runtime.IsMissingKind(err), runtime.IsMissingVersion(err):
		errs = typeErrors(data)
	default:
		errs = valueErrors(data)
	}
	if len(errs) == 0 {
		return err
	}
	return errs.ToAggregate()
}

// typeErrors names the apiVersion or kind that is not the Configuration's.
func typeErrors(data []byte) field.ErrorList {
	var tm metav1.TypeMeta
	_ = yaml.Unmarshal(data, &tm) // the decoder has read it already
	var errs field.ErrorList
	if want := configv1alpha1.GroupVersion.String(); tm.APIVersion != want {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), tm.APIVersion, "must be "+want))
	}
	if tm.Kind != configv1alpha1.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), tm.Kind, "must be "+configv1alpha1.Kind))
	}
	return errs
}

// parsedTypes are the types that parse their own value, and what that value
// must be: the decoder reports their errors without the field's path.
var parsedTypes = map[reflect.Type]string{
	reflect.TypeFor[metav1.Duration](): "must be a duration such as 90s, 30m or 24h",
}

// valueErrors names every field of data whose value its type does not parse.
func valueErrors(data []byte) field.ErrorList {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil
	}
	return parseErrors(raw, reflect.TypeFor[configv1alpha1.Configuration](), nil)
}

// parseErrors walks value, decoded from YAML, along the Go type t, and
// tries each value of a type in parsedTypes.
func parseErrors(value any, t reflect.Type, path *field.Path) field.ErrorList {
	if value == nil {
		return nil // null: left unset
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if detail, ok := parsedTypes[t]; ok {
		data, err := json.Marshal(value)
		if err == nil {
			err = json.Unmarshal(data, reflect.New(t).Interface())
		}
		if err != nil {
			return field.ErrorList{field.Invalid(path, value, detail)}
		}
		return nil
	}
	m, isMap := value.(map[string]any)
	if t.Kind() != reflect.Struct || !isMap {
		return nil
	}
	var errs field.ErrorList
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if v, ok := m[name]; ok && name != "" {
			errs = append(errs, parseErrors(v, f.Type, path.Child(name))...)
		}
	}
	return errs
}

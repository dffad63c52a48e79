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

package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Whether a field is in trainjob-operator's API is read from the Go types
// the CRDs are generated from, by JSON name: a field written with its zero
// value (maxRestarts: 0, labels: {}) is in the API even though the typed
// object, having omitempty, would not write it back.

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	objectMetaType  = reflect.TypeFor[metav1.ObjectMeta]()
)

// embeddedObjectMetaFields are the fields of an ObjectMeta inside a spec (a
// template's metadata) that the CRDs keep: controller-gen's
// generateEmbeddedObjectMeta writes only these into the schema, and the API
// server prunes the others.
var embeddedObjectMetaFields = []string{"name", "namespace", "labels", "annotations", "finalizers"}

// unknownFields appends to out the paths of the fields of v, a value decoded
// from JSON, that the Go type t has no field for, at any depth. A field
// whose value is null is not reported: there is nothing to drop. t's own
// metadata, if it has one, is taken as a template's (see
// embeddedObjectMetaFields): unknownFields is meant for specs.
func unknownFields(v any, t reflect.Type, path string, out *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if opaque(t) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			ft, ok := fields[k]
			switch {
			case ok:
				unknownFields(obj[k], ft, path+"."+k, out)
			case obj[k] != nil:
				*out = append(*out, path+"."+k)
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			unknownFields(obj[k], t.Elem(), path+"."+k, out)
		}
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return
		}
		for i, item := range list {
			unknownFields(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// opaque says whether values of t are read whole, by their own JSON
// decoding (Time, Quantity, IntOrString, RawExtension), or are scalars: no
// field inside them can be unknown.
func opaque(t reflect.Type) bool {
	if t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Array:
		return false
	case reflect.Slice:
		return t.Elem().Kind() == reflect.Uint8 // []byte is a base64 string
	}
	return true
}

// jsonFields are the fields of the struct type t by JSON name, those of
// inlined structs included, with their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported() || name == "-" && opts == "":
		case name == "" && (f.Anonymous || slices.Contains(strings.Split(opts, ","), "inline")):
			inner := f.Type
			for inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			maps.Copy(fields, jsonFields(inner))
		case name == "":
			fields[f.Name] = f.Type
		default:
			fields[name] = f.Type
		}
	}
	if t == objectMetaType {
		maps.DeleteFunc(fields, func(name string, _ reflect.Type) bool {
			return !slices.Contains(embeddedObjectMetaFields, name)
		})
	}
	return fields
}

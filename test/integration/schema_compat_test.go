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

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	utiltesting "github.com/trainjob-operator/trainjob-operator/internal/util/testing"
)

// The CRDs' schemas are compared with Kubeflow Trainer v2.3's, field by
// field, from the root (spec and status), and every way they differ is
// named by an aspect:
//
//	missing            Kubeflow has the field, this API does not
//	type               type, format, int-or-string, unknown fields kept
//	default            another default (or none)
//	required           required here, optional in Kubeflow
//	maxLength, maxItems, maxProperties, maximum  lower here, or only here
//	minLength, minItems, minProperties, minimum  higher here, or only here
//	pattern            another pattern, or one only here
//	enum               values only here, or fewer of them
//	listType           another list type (atomic when unset)
//	rule               a CEL rule Kubeflow's schema does not have
//	no Kubeflow rule   a CEL rule of Kubeflow's this API does not have
//
// Rules are compared by their text (white space aside) on the same schema
// node, and named at the field their fieldPath names, else at the node; a
// field with several counts them (rule ×3). A rule of a field only this API
// has is part of that addition. A limit only Kubeflow has (an empty spec,
// a failure policy rule without a name) is not a difference: it makes this
// API accept more, never refuse what Kubeflow accepts; a rule only Kubeflow
// has is one, since most make a field immutable, which changes what an
// update does. Fields only this API has (the TTL, status.startTime, ...)
// are additions, not differences.

// The aspects, in the order they are written.
var schemaAspects = []string{"missing", "type", "default", "required", "maxLength", "maxItems", "maxProperties", "maximum",
	"minLength", "minItems", "minProperties", "minimum", "pattern", "enum", "listType", "rule", "no Kubeflow rule"}

// schemaDiffs are the aspects in which fields differ, by field path, with
// what each is (for the failure message).
type schemaDiffs map[string]map[string][]string

func (d schemaDiffs) add(path, aspect, format string, args ...any) {
	if d[path] == nil {
		d[path] = map[string][]string{}
	}
	d[path][aspect] = append(d[path][aspect], fmt.Sprintf(format, args...))
}

// counts are d's aspects and their counts, as the page writes them.
func (d schemaDiffs) counts(path string) map[string]int {
	c := map[string]int{}
	for aspect, what := range d[path] {
		c[aspect] = len(what)
	}
	return c
}

// diffSchema adds to d how ours differs from Kubeflow's kf at path.
func diffSchema(kf, ours *apiextensionsv1.JSONSchemaProps, path string, d schemaDiffs) {
	type shape struct {
		typ, format                                   string
		intOrString, preserveUnknown, embedded, nulls bool
		mapOfValues                                   bool
	}
	shapeOf := func(s *apiextensionsv1.JSONSchemaProps) shape {
		return shape{s.Type, s.Format, s.XIntOrString, s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields,
			s.XEmbeddedResource, s.Nullable, s.AdditionalProperties != nil}
	}
	if k, o := shapeOf(kf), shapeOf(ours); k != o {
		d.add(path, "type", "%+v here, %+v in Kubeflow", o, k)
	}
	if k, o := jsonText(kf.Default), jsonText(ours.Default); k != o {
		d.add(path, "default", "%s here, %s in Kubeflow", orNone(o), orNone(k))
	}
	lower := func(aspect string, o, k *int64) {
		if o != nil && (k == nil || *o < *k) {
			d.add(path, aspect, "%d here, %s in Kubeflow", *o, int64OrNone(k))
		}
	}
	higher := func(aspect string, o, k *int64) {
		if o != nil && (k == nil || *o > *k) {
			d.add(path, aspect, "%d here, %s in Kubeflow", *o, int64OrNone(k))
		}
	}
	lower("maxLength", ours.MaxLength, kf.MaxLength)
	lower("maxItems", ours.MaxItems, kf.MaxItems)
	lower("maxProperties", ours.MaxProperties, kf.MaxProperties)
	higher("minLength", ours.MinLength, kf.MinLength)
	higher("minItems", ours.MinItems, kf.MinItems)
	higher("minProperties", ours.MinProperties, kf.MinProperties)
	if ours.Maximum != nil && (kf.Maximum == nil || *ours.Maximum < *kf.Maximum) {
		d.add(path, "maximum", "%v here, %s in Kubeflow", *ours.Maximum, floatOrNone(kf.Maximum))
	}
	if ours.Minimum != nil && (kf.Minimum == nil || *ours.Minimum > *kf.Minimum) {
		d.add(path, "minimum", "%v here, %s in Kubeflow", *ours.Minimum, floatOrNone(kf.Minimum))
	}
	if ours.Pattern != "" && ours.Pattern != kf.Pattern {
		d.add(path, "pattern", "%s here, %s in Kubeflow", ours.Pattern, orNone(kf.Pattern))
	}
	if len(ours.Enum) > 0 {
		var values []string
		for _, v := range ours.Enum {
			values = append(values, string(v.Raw))
		}
		lacking := len(kf.Enum) == 0
		for _, v := range kf.Enum {
			lacking = lacking || !slices.Contains(values, string(v.Raw))
		}
		if lacking {
			d.add(path, "enum", "%s here, %d values in Kubeflow (none: any)", strings.Join(values, ", "), len(kf.Enum))
		}
	}
	if kf.Type == "array" && ours.Type == "array" {
		if k, o := listType(kf), listType(ours); k != o {
			d.add(path, "listType", "%s here, %s in Kubeflow", o, k)
		}
	}
	for _, r := range rulesOnlyIn(ours, kf) {
		// A rule of a field only this API has is part of that addition.
		if hasField(kf, r.FieldPath) {
			d.add(path+r.FieldPath, "rule", "%q", r.Message)
		}
	}
	for _, r := range rulesOnlyIn(kf, ours) {
		d.add(path+r.FieldPath, "no Kubeflow rule", "%q: %s", r.Message, r.Rule)
	}
	for _, name := range ours.Required {
		if _, inKubeflow := kf.Properties[name]; inKubeflow && !slices.Contains(kf.Required, name) {
			d.add(path+"."+name, "required", "required here")
		}
	}
	for _, name := range slices.Sorted(maps.Keys(kf.Properties)) {
		k := kf.Properties[name]
		o, ok := ours.Properties[name]
		switch {
		case ok:
			diffSchema(&k, &o, path+"."+name, d)
		case ours.XPreserveUnknownFields == nil || !*ours.XPreserveUnknownFields:
			d.add(path+"."+name, "missing", "pruned here")
		}
	}
	if kf.Items != nil && kf.Items.Schema != nil && ours.Items != nil && ours.Items.Schema != nil {
		diffSchema(kf.Items.Schema, ours.Items.Schema, path+"[]", d)
	}
	if kf.AdditionalProperties != nil && kf.AdditionalProperties.Schema != nil && ours.AdditionalProperties != nil && ours.AdditionalProperties.Schema != nil {
		diffSchema(kf.AdditionalProperties.Schema, ours.AdditionalProperties.Schema, path+".*", d)
	}
}

// rulesOnlyIn are the rules of a that b does not have, by their text.
func rulesOnlyIn(a, b *apiextensionsv1.JSONSchemaProps) []apiextensionsv1.ValidationRule {
	text := func(r apiextensionsv1.ValidationRule) string { return strings.Join(strings.Fields(r.Rule), "") }
	var only []apiextensionsv1.ValidationRule
	for _, r := range a.XValidations {
		if !slices.ContainsFunc(b.XValidations, func(o apiextensionsv1.ValidationRule) bool { return text(o) == text(r) }) {
			only = append(only, r)
		}
	}
	return only
}

// hasField says whether s has the field at fieldPath (.a.b), a rule's.
func hasField(s *apiextensionsv1.JSONSchemaProps, fieldPath string) bool {
	for _, name := range strings.Split(strings.TrimPrefix(fieldPath, "."), ".") {
		if name == "" {
			continue
		}
		child, ok := s.Properties[name]
		if !ok {
			return false
		}
		s = &child
	}
	return true
}

func listType(s *apiextensionsv1.JSONSchemaProps) string {
	t := "atomic"
	if s.XListType != nil {
		t = *s.XListType
	}
	if len(s.XListMapKeys) > 0 {
		t += " " + strings.Join(s.XListMapKeys, ",")
	}
	return t
}

func jsonText(j *apiextensionsv1.JSON) string {
	if j == nil {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, j.Raw); err != nil {
		return string(j.Raw)
	}
	return buf.String()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func int64OrNone(p *int64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatInt(*p, 10)
}

func floatOrNone(p *float64) string {
	if p == nil {
		return "none"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}

// schemaDifferencesHeader is the header of docs/compatibility.md's table of
// the schemas' differences.
const schemaDifferencesHeader = "| field | differs in | why |"

// documentedSchemaDiffs reads that table: the aspects of each field path.
func documentedSchemaDiffs(t *testing.T, page string) map[string]map[string]int {
	t.Helper()
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := slices.Index(lines, schemaDifferencesHeader)
	if start < 0 {
		t.Fatalf("%s has no table with the header %q", page, schemaDifferencesHeader)
	}
	counted := regexp.MustCompile(`^(.+?) ×(\d+)$`)
	documented := map[string]map[string]int{}
	for _, line := range lines[start+2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.SplitN(line, "|", 4)
		if len(cells) < 4 {
			t.Fatalf("%s: a row of the schema differences without three cells: %s", page, line)
		}
		path := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if documented[path] != nil {
			t.Errorf("%s lists %s twice", page, path)
		}
		documented[path] = map[string]int{}
		for _, a := range strings.Split(cells[2], ",") {
			aspect, n := strings.Trim(strings.TrimSpace(a), "`"), 1
			if m := counted.FindStringSubmatch(aspect); m != nil {
				aspect = m[1]
				n, _ = strconv.Atoi(m[2])
			}
			if !slices.Contains(schemaAspects, aspect) {
				t.Errorf("%s: %s: %q is not an aspect (%s)", page, path, aspect, strings.Join(schemaAspects, ", "))
			}
			documented[path][aspect] = n
		}
	}
	return documented
}

// The way the CRDs' schemas differ from Kubeflow Trainer v2.3's is the way
// docs/compatibility.md says they do: each field that differs is listed
// there, with the aspects in which it differs, and nothing else is. The
// two runtime kinds share their rows (runtime.spec...).
func TestCompatDocListsEverySchemaDifference(t *testing.T) {
	kubeflow := moduleDir(t, kubeflowTrainerModule)
	diffs := schemaDiffs{}
	runtimes := map[string]schemaDiffs{}
	for kind, file := range map[string]string{
		trainer.TrainJobKind:               "trainer.kubeflow.org_trainjobs.yaml",
		trainer.TrainingRuntimeKind:        "trainer.kubeflow.org_trainingruntimes.yaml",
		trainer.ClusterTrainingRuntimeKind: "trainer.kubeflow.org_clustertrainingruntimes.yaml",
	} {
		kf := utiltesting.CRDSchema(t, filepath.Join(kubeflow, "manifests", "base", "crds", file), trainer.GroupVersion.Version)
		ours := utiltesting.CRDSchema(t, filepath.Join(repoRoot, "config", "crd", "bases", file), trainer.GroupVersion.Version)
		if kind == trainer.TrainJobKind {
			diffSchema(kf, ours, kind, diffs)
			continue
		}
		runtimes[kind] = schemaDiffs{}
		diffSchema(kf, ours, "runtime", runtimes[kind])
	}
	if namespaced, cluster := runtimes[trainer.TrainingRuntimeKind], runtimes[trainer.ClusterTrainingRuntimeKind]; equalDiffs(namespaced, cluster) {
		maps.Copy(diffs, namespaced)
	} else {
		for kind, d := range runtimes {
			for path, aspects := range d {
				diffs[kind+strings.TrimPrefix(path, "runtime")] = aspects
			}
		}
	}

	page := filepath.Join(repoRoot, "docs", "compatibility.md")
	documented := documentedSchemaDiffs(t, page)
	for _, path := range slices.Sorted(maps.Keys(diffs)) {
		if got := diffs.counts(path); !maps.Equal(got, documented[path]) {
			var what []string
			for _, aspect := range schemaAspects {
				for _, w := range diffs[path][aspect] {
					what = append(what, "  "+aspect+": "+w)
				}
			}
			t.Errorf("%s differs from Kubeflow Trainer v2.3's schema in %s, and docs/compatibility.md lists %s:\n%s\nthe row: | `%s` | %s | why |",
				path, aspectList(got), aspectList(documented[path]), strings.Join(what, "\n"), path, aspectList(got))
		}
	}
	for _, path := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := diffs[path]; !ok {
			t.Errorf("docs/compatibility.md lists %s, which does not differ from Kubeflow Trainer v2.3's schema (any more): remove its row", path)
		}
	}
}

func equalDiffs(a, b schemaDiffs) bool {
	return maps.EqualFunc(a, b, func(x, y map[string][]string) bool {
		return maps.EqualFunc(x, y, slices.Equal)
	})
}

// aspectList writes aspects as the page does: `maxLength`, `rule ×2`.
func aspectList(aspects map[string]int) string {
	if len(aspects) == 0 {
		return "nothing"
	}
	var list []string
	for _, aspect := range schemaAspects {
		switch n := aspects[aspect]; {
		case n == 1:
			list = append(list, "`"+aspect+"`")
		case n > 1:
			list = append(list, fmt.Sprintf("`%s ×%d`", aspect, n))
		}
	}
	return strings.Join(list, ", ")
}

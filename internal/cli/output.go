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
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"

	trainer "github.com/trainjob-operator/trainjob-operator/api/trainer/v1alpha1"
	"github.com/trainjob-operator/trainjob-operator/internal/scheme"
)

// Output formats trainctl prints itself rather than through cli-runtime's
// printers: its tables, as kubectl prints its own.
const (
	outputWide          = "wide"
	outputCustomColumns = "custom-columns="
)

// output is a command's -o and the flags of cli-runtime's printers
// (--template, --allow-missing-template-keys, --show-managed-fields).
type output struct {
	flags     *genericclioptions.PrintFlags
	noHeaders bool
	// formats are those -o takes, for its help and errors.
	formats []string
}

// addOutputFlags adds -o and the printers' flags to cmd; table says what
// the default output is.
func addOutputFlags(cmd *cobra.Command, table string, wide bool) *output {
	o := &output{flags: genericclioptions.NewPrintFlags("")}
	o.flags.AddFlags(cmd)
	formats := o.flags.AllowedFormats()
	simple := []string{"json", "yaml", "name"}
	if wide {
		formats = append(formats, outputWide)
		simple = append(simple, outputWide)
	}
	completeOutput(cmd, simple...)
	formats = append(formats, outputCustomColumns+"HEADER:JSONPATH,...")
	o.formats = formats
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format, one of: %s. Without it: %s.", strings.Join(formats, ", "), table)
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "Print tables (the default, wide, custom-columns) without their header")
	return o
}

// format is -o as given.
func (o *output) format() string { return *o.flags.OutputFormat }

// table says whether -o asks for trainctl's own table (none or wide).
func (o *output) table() bool {
	template := o.flags.TemplatePrinterFlags.TemplateArgument
	return (o.format() == "" && (template == nil || *template == "")) || o.format() == outputWide
}

// print prints objs with p: the object for one, a List otherwise; -o name
// a line for each.
func (o *output) print(p printers.ResourcePrinter, objs []runtime.Object, one bool, w io.Writer) error {
	if one && len(objs) == 1 {
		return p.PrintObj(objs[0], w)
	}
	if o.format() == "name" {
		for _, obj := range objs {
			if err := p.PrintObj(obj, w); err != nil {
				return err
			}
		}
		return nil
	}
	return p.PrintObj(listOf(objs), w)
}

// printer returns the printer -o names, other than trainctl's own table.
func (o *output) printer() (printers.ResourcePrinter, error) {
	if spec, ok := strings.CutPrefix(o.format(), outputCustomColumns); ok {
		return newCustomColumns(spec, o.noHeaders)
	}
	p, err := o.flags.ToPrinter()
	if genericclioptions.IsNoCompatiblePrinterError(err) {
		return nil, fmt.Errorf("--output %q: want one of %s", o.format(), strings.Join(o.formats, ", "))
	}
	return p, err
}

// typed is a copy of obj with its apiVersion and kind, which the client
// leaves empty and kubectl prints.
func typed[T runtime.Object](obj T) T {
	c := obj.DeepCopyObject().(T)
	gvks, _, err := scheme.Scheme.ObjectKinds(c)
	if err == nil && len(gvks) > 0 {
		c.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	return c
}

// listOf is objs as kubectl prints several: a List, each item typed.
func listOf(objs []runtime.Object) *corev1.List {
	l := &corev1.List{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("List"))
	l.Items = make([]runtime.RawExtension, 0, len(objs))
	for _, o := range objs {
		l.Items = append(l.Items, runtime.RawExtension{Object: typed(o)})
	}
	return l
}

// trainJobObjects are tjs' items, typed.
func trainJobObjects(tjs []trainer.TrainJob) []runtime.Object {
	objs := make([]runtime.Object, len(tjs))
	for i := range tjs {
		objs[i] = typed(&tjs[i])
	}
	return objs
}

// rows prints rows of cells in columns, as tabwriter would, but keeps the
// widths of what it printed before: rows a watch prints one at a time line
// up with those above them, as far as they fit.
type rows struct {
	out    io.Writer
	widths []int
}

func (r *rows) print(cells ...[]string) error {
	for _, row := range cells {
		for i, c := range row {
			if i == len(r.widths) {
				r.widths = append(r.widths, 0)
			}
			r.widths[i] = max(r.widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, row := range cells {
		for i, c := range row {
			b.WriteString(c)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", r.widths[i]-utf8.RuneCountInString(c)+3))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(r.out, b.String())
	return err
}

// customColumns prints -o custom-columns=HEADER:JSONPATH,...: a column per
// JSONPath, a row per object (per item of a list).
type customColumns struct {
	headers   []string
	paths     []*jsonpath.JSONPath
	noHeaders bool
	rows      map[io.Writer]*rows
}

func newCustomColumns(spec string, noHeaders bool) (*customColumns, error) {
	p := &customColumns{noHeaders: noHeaders, rows: map[io.Writer]*rows{}}
	if spec == "" {
		return nil, fmt.Errorf("custom-columns: no columns: want HEADER:JSONPATH,... such as NAME:.metadata.name")
	}
	for col := range strings.SplitSeq(spec, ",") {
		header, path, ok := strings.Cut(col, ":")
		if !ok || header == "" || path == "" {
			return nil, fmt.Errorf("custom-columns: %q: want HEADER:JSONPATH", col)
		}
		// kubectl's relaxed form: .a.b, a.b and {.a.b} alike.
		if !strings.HasPrefix(path, "{") {
			path = "{." + strings.TrimPrefix(path, ".") + "}"
		}
		jp := jsonpath.New(header).AllowMissingKeys(true)
		if err := jp.Parse(path); err != nil {
			return nil, fmt.Errorf("custom-columns: %s: %w", header, err)
		}
		p.headers = append(p.headers, header)
		p.paths = append(p.paths, jp)
	}
	return p, nil
}

// PrintObj prints obj's row, or its items' rows; the header with the
// first rows it prints to w.
func (p *customColumns) PrintObj(obj runtime.Object, w io.Writer) error {
	objs := []runtime.Object{obj}
	if meta.IsListType(obj) {
		items, err := meta.ExtractList(obj)
		if err != nil {
			return err
		}
		objs = items
	}
	r, seen := p.rows[w]
	if !seen {
		r = &rows{out: w}
		p.rows[w] = r
	}
	var table [][]string
	if !seen && !p.noHeaders {
		table = append(table, p.headers)
	}
	for _, o := range objs {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return err
		}
		row := make([]string, len(p.paths))
		for i, jp := range p.paths {
			results, err := jp.FindResults(content)
			if err != nil {
				return fmt.Errorf("custom-columns: %s: %w", p.headers[i], err)
			}
			var values []string
			for _, vs := range results {
				for _, v := range vs {
					values = append(values, fmt.Sprint(printable(v)))
				}
			}
			row[i] = strings.Join(slices.DeleteFunc(values, func(v string) bool { return v == "" }), ",")
			if row[i] == "" {
				row[i] = "<none>"
			}
		}
		table = append(table, row)
	}
	return r.print(table...)
}

// printable is the value v holds, nil for none.
func printable(v reflect.Value) any {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return ""
	}
	return v.Interface()
}

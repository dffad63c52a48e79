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

// Command dashboard draws the panels of the Helm chart's Grafana dashboard
// (charts/trainjob-operator/monitoring/dashboard.json) into a PNG, from the
// range queries of the Prometheus of a local cluster brought up with
// `make dev-up PROMETHEUS=1`: the picture in docs/observability.md.
//
//	cd bench && go run ./cmd/dashboard -root .. -range 10m -out ../docs/observability-dashboard.png
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/trainjob-operator/trainjob-operator/internal/dev"
)

func main() {
	root := flag.String("root", "..", "The repository")
	workDir := flag.String("workdir", "", "The local cluster's directory; default ROOT/.dev")
	span := flag.Duration("range", 10*time.Minute, "How far back from now to draw")
	out := flag.String("out", "dashboard.png", "The PNG to write")
	flag.Parse()
	if err := run(*root, *workDir, *span, *out); err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}

// dashboard is what is drawn of the dashboard's JSON.
type dashboard struct {
	Panels []struct {
		Title       string
		FieldConfig struct{ Defaults struct{ Unit string } }
		Targets     []struct{ Expr, LegendFormat string }
	}
}

func run(root, workDir string, span time.Duration, out string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	base, err := dev.PrometheusURL(dev.Options{Root: root, WorkDir: workDir})
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(root, "charts", "trainjob-operator", "monitoring", "dashboard.json"))
	if err != nil {
		return err
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	end := time.Now()
	start := end.Add(-span)
	step := dev.PrometheusInterval
	// Grafana's $__rate_interval at this resolution: four scrapes.
	rateInterval := (4 * dev.PrometheusInterval).String()

	const cols = 2
	rows := (len(d.Panels) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, panel := range d.Panels {
		p := plot.New()
		p.Title.Text = panel.Title
		p.Y.Label.Text = panel.FieldConfig.Defaults.Unit
		p.X.Tick.Marker = plot.TimeTicks{Format: "15:04"}
		p.X.Min, p.X.Max = float64(start.Unix()), float64(end.Unix())
		p.Y.Min = 0
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.Left = true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		n := 0
		for _, target := range panel.Targets {
			lines, err := queryRange(base, strings.ReplaceAll(target.Expr, "$__rate_interval", rateInterval), start, end, step)
			if err != nil {
				return fmt.Errorf("panel %q: %w", panel.Title, err)
			}
			for _, l := range lines {
				if len(l.points) == 0 {
					continue
				}
				line, err := plotter.NewLine(l.points)
				if err != nil {
					return err
				}
				line.Color = plotutil.Color(n)
				line.Width = vg.Points(1.5)
				p.Add(line)
				p.Legend.Add(legend(target.LegendFormat, l.labels), line)
				p.Y.Max = max(p.Y.Max, maxY(l.points)*1.15)
				n++
			}
		}
		// An empty or flat-zero panel still gets an axis.
		p.Y.Max = max(p.Y.Max, 1)
		plots[i/cols][i%cols] = p
	}

	img := vgimg.New(vg.Length(cols)*7*vg.Inch, vg.Length(rows)*3*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j, p := range plots[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// line is one series of a range query.
type line struct {
	labels map[string]string
	points plotter.XYs
}

// queryRange runs a range query, and returns its series with the NaN
// points left out.
func queryRange(base, expr string, start, end time.Time, step time.Duration) ([]line, error) {
	params := url.Values{"query": {expr}, "start": {strconv.FormatInt(start.Unix(), 10)},
		"end": {strconv.FormatInt(end.Unix(), 10)}, "step": {step.String()}}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.PostForm(base+"/api/v1/query_range", params)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var answer struct {
		Status, Error string
		Data          struct {
			Result []struct {
				Metric map[string]string
				Values [][2]any
			}
		}
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, fmt.Errorf("%s: %w", resp.Status, err)
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("%s: %s", expr, answer.Error)
	}
	var lines []line
	for _, r := range answer.Data.Result {
		l := line{labels: r.Metric}
		for _, v := range r.Values {
			t, _ := v[0].(float64)
			y, err := strconv.ParseFloat(fmt.Sprint(v[1]), 64)
			if err != nil || math.IsNaN(y) { // no data at that step
				continue
			}
			l.points = append(l.points, plotter.XY{X: t, Y: y})
		}
		lines = append(lines, l)
	}
	slices.SortFunc(lines, func(a, b line) int { return strings.Compare(fmt.Sprint(a.labels), fmt.Sprint(b.labels)) })
	return lines, nil
}

var legendLabel = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

// legend fills Grafana's {{label}} placeholders.
func legend(format string, labels map[string]string) string {
	return legendLabel.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendLabel.FindStringSubmatch(m)[1]]
	})
}

func maxY(pts plotter.XYs) float64 {
	m := 0.0
	for _, p := range pts {
		m = max(m, p.Y)
	}
	return m
}

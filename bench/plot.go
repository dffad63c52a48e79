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

package main

import (
	"image/color"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// series is a named line of (x, y) points.
type series struct {
	name   string
	points plotter.XYs
}

// cdfPlot draws the cumulative distribution of each sample set.
func cdfPlot(path, title, xLabel string, samples map[string][]float64) error {
	var ss []series
	for name, s := range samples {
		sorted := slices.Clone(s)
		slices.Sort(sorted)
		pts := make(plotter.XYs, len(sorted))
		for i, v := range sorted {
			pts[i] = plotter.XY{X: v, Y: float64(i+1) / float64(len(sorted))}
		}
		ss = append(ss, series{name, pts})
	}
	return linePlot(path, title, xLabel, "fraction of objects", ss)
}

// linePlot draws lines, one per series, with points marked, sorted by name
// so colours stay the same from run to run.
func linePlot(path, title, xLabel, yLabel string, ss []series) error {
	slices.SortFunc(ss, func(a, b series) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = false
	for i, s := range ss {
		if len(s.points) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.points)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		if len(s.points) <= 30 {
			sc, err := plotter.NewScatter(s.points)
			if err != nil {
				return err
			}
			sc.Color = plotutil.Color(i)
			sc.Shape = plotutil.Shape(i)
			p.Add(sc)
		}
		p.Legend.Add(s.name, l)
	}
	p.BackgroundColor = color.White
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

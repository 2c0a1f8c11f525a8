package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"emclust/atomicfile"
	"emclust/train"
)

// ReadMetrics reads RUN/metrics.jsonl, one train.EpochMetrics a line. It is the
// history as the run wrote it after each epoch, so it also serves a run that is still
// training or was stopped.
func ReadMetrics(runDir string) ([]train.EpochMetrics, error) {
	path := filepath.Join(runDir, "metrics.jsonl")
	b, err := atomicfile.ReadFile(path, 1<<30)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	var out []train.EpochMetrics
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var m train.EpochMetrics
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if m.Epoch < 1 || m.Epoch > 1<<24 || (len(out) > 0 && m.Epoch <= out[len(out)-1].Epoch) {
			return nil, fmt.Errorf("%s:%d: epoch %d: want 1 to %d, after the line before's", path, line, m.Epoch, 1<<24)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// curveW and curveH are the size of one training-curve chart.
var curveW, curveH = 5.2 * vg.Inch, 3.2 * vg.Inch

// lossPlot charts one per-epoch loss.
func lossPlot(hist []train.EpochMetrics, title, name string, get func(train.EpochMetrics) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "epoch"
	p.Y.Label.Text = name
	p.Add(plotter.NewGrid())
	xys := make(plotter.XYs, len(hist))
	for i, m := range hist {
		xys[i] = plotter.XY{X: float64(m.Epoch), Y: get(m)}
	}
	line, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return nil, fmt.Errorf("%s curve: %w", name, err)
	}
	line.Color = tab20[0]
	line.Width = vg.Points(1.5)
	pts.Color = tab20[0]
	pts.Radius = vg.Points(2)
	if len(hist) > 40 {
		pts.Radius = 0 // a long run's points would only blur the line
	}
	p.Add(line, pts)
	integerTicks(p, hist)
	p.Y.Tick.Marker = preciseTicks{}
	return p, nil
}

// preciseTicks are gonum's default ticks labelled with enough digits to tell them
// apart: a loss that falls from 1.31 to 1.17 would otherwise read 1.3, 1.2, 1.2.
type preciseTicks struct{}

func (preciseTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := defaultTicks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', 6, 64)
		}
	}
	return ticks
}

// defaultTicks are gonum's default ticks, or one tick where the range is empty to
// float64: gonum panics there ("illegal range"), as a constant loss of 1e20 makes it.
func defaultTicks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) || hi-lo <= math.Abs(lo)*1e-12 {
		return []plot.Tick{{Value: lo, Label: strconv.FormatFloat(lo, 'g', 6, 64)}}
	}
	return (plot.DefaultTicks{}).Ticks(lo, hi)
}

// scorePlot charts ACC, NMI and ARI at the epochs that were evaluated; nil when none
// was (no labels).
func scorePlot(hist []train.EpochMetrics) (*plot.Plot, error) {
	var acc, nmi, ari plotter.XYs
	for _, m := range hist {
		if m.ACC == nil {
			continue
		}
		x := float64(m.Epoch)
		acc = append(acc, plotter.XY{X: x, Y: *m.ACC})
		nmi = append(nmi, plotter.XY{X: x, Y: *m.NMI})
		ari = append(ari, plotter.XY{X: x, Y: *m.ARI})
	}
	return evaluatedPlot(hist, "Clustering scores against the labels", []series{{"ACC", acc}, {"NMI", nmi}, {"ARI", ari}})
}

// criteriaPlot charts what judges an epoch without labels: its agreement with the
// evaluations before it (which picks the chosen epoch) and its mean max posterior;
// nil when no epoch was evaluated.
func criteriaPlot(hist []train.EpochMetrics) (*plot.Plot, error) {
	var agree, post plotter.XYs
	for _, m := range hist {
		x := float64(m.Epoch)
		if m.Agreement != nil {
			agree = append(agree, plotter.XY{X: x, Y: *m.Agreement})
		}
		if m.Criteria != nil {
			post = append(post, plotter.XY{X: x, Y: m.Criteria.MaxPosterior})
		}
	}
	var ss []series
	if len(agree) > 0 {
		ss = append(ss, series{"agreement with the evaluations before", agree})
	}
	if len(post) > 0 {
		ss = append(ss, series{"mean max posterior", post})
	}
	return evaluatedPlot(hist, "Label-free criteria", ss)
}

// headsPlot draws each head's ACC at the evaluated epochs of a run with several heads,
// or without labels its agreement with the other heads, beside what the run predicted
// with: the head that agreed most. Nil for one head.
func headsPlot(hist []train.EpochMetrics) (*plot.Plot, error) {
	var ss []series
	var selected plotter.XYs
	labels := false
	for _, m := range hist {
		if m.Head == nil {
			continue
		}
		x := float64(m.Epoch)
		for len(ss) < len(m.Heads) {
			ss = append(ss, series{name: fmt.Sprintf("head %d", len(ss))})
		}
		labels = m.Heads[*m.Head].ACC != nil
		for i, h := range m.Heads {
			y := h.Agreement
			if h.ACC != nil {
				y = *h.ACC
			}
			ss[i].xys = append(ss[i].xys, plotter.XY{X: x, Y: y})
		}
		selected = append(selected, ss[*m.Head].xys[len(ss[*m.Head].xys)-1])
	}
	if len(selected) == 0 {
		return nil, nil
	}
	title := "Each head's agreement with the other heads"
	if labels {
		title = "Each head's ACC against the labels"
	}
	return evaluatedPlot(hist, title, append([]series{{"selected head", selected}}, ss...))
}

type series struct {
	name string
	xys  plotter.XYs
}

// evaluatedPlot draws series of scores (at most 1) over the evaluated epochs; nil when
// there are none.
func evaluatedPlot(hist []train.EpochMetrics, title string, ss []series) (*plot.Plot, error) {
	if len(ss) == 0 || len(ss[0].xys) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "epoch"
	p.Y.Label.Text = "score"
	p.Y.Min, p.Y.Max = 0, 1
	for _, s := range ss {
		for _, xy := range s.xys {
			p.Y.Min = min(p.Y.Min, math.Floor(xy.Y*10)/10) // an ARI may fall below 0
		}
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top = false
	p.Legend.Left = false
	for i, s := range ss {
		line, pts, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return nil, fmt.Errorf("%s curve: %w", s.name, err)
		}
		c := tab20[i%len(tab20)]
		line.Color, line.Width = c, vg.Points(1.5)
		pts.Color, pts.Radius = c, vg.Points(2)
		pts.Shape = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}}[i%3]
		if len(s.xys) > 40 {
			pts.Radius = 0
		}
		p.Add(line, pts)
		p.Legend.Add(s.name, line, pts)
	}
	integerTicks(p, hist)
	return p, nil
}

// integerTicks labels only whole epochs, and widens a one-epoch axis so the lone
// point is not drawn on the frame.
func integerTicks(p *plot.Plot, hist []train.EpochMetrics) {
	if len(hist) == 0 {
		return
	}
	first, last := float64(hist[0].Epoch), float64(hist[len(hist)-1].Epoch)
	if last-first < 1 {
		p.X.Min, p.X.Max = first-1, last+1
	}
	p.X.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ticks []plot.Tick
		for _, t := range defaultTicks(lo, hi) {
			if t.Label != "" && t.Value != float64(int(t.Value)) {
				continue
			}
			ticks = append(ticks, t)
		}
		return ticks
	})
}

// gray is the colour of reference lines.
var gray = color.RGBA{120, 120, 120, 255}

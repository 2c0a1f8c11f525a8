package report

import (
	"fmt"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/palette/brewer"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"emclust/eval"
)

// sizesPlot is a bar chart of the cluster sizes with the balanced size N/K as a
// reference line: collapse and imbalance show at a glance.
func sizesPlot(sizes []int) (*plot.Plot, error) {
	k := len(sizes)
	vals := make(plotter.Values, k)
	n := 0
	for j, c := range sizes {
		vals[j] = float64(c)
		n += c
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Cluster sizes (%d rows, %d clusters)", n, k)
	p.X.Label.Text = "cluster"
	p.Y.Label.Text = "members"
	width := vg.Length(300/float64(max(k, 10))) * vg.Points(1)
	bars, err := plotter.NewBarChart(vals, width)
	if err != nil {
		return nil, fmt.Errorf("sizes chart: %w", err)
	}
	bars.Color = tab20[0]
	bars.LineStyle.Width = 0
	p.Add(plotter.NewGrid(), bars)
	if k > 0 {
		even := float64(n) / float64(k)
		ref, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: even}, {X: float64(k) - 0.5, Y: even}})
		if err != nil {
			return nil, fmt.Errorf("sizes chart: %w", err)
		}
		ref.Color = gray
		ref.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ref)
	}
	p.Y.Min = 0
	p.NominalX(clusterNames(k, 30)...)
	return p, nil
}

// clusterNames labels clusters 0..k-1, leaving gaps when there are more than fit.
func clusterNames(k, fit int) []string {
	step := max(1, (k+fit-1)/fit)
	names := make([]string, k)
	for j := range names {
		if j%step == 0 {
			names[j] = strconv.Itoa(j)
		}
	}
	return names
}

// contingency is the class × cluster count table, with rows and columns put in the
// order of the Hungarian match (the one ACC uses): cell (i, i) is a class and the
// cluster matched to it. Unmatched classes and clusters come last, in index order.
type contingency struct {
	counts   [][]int // counts[r][c] for row r, column c in display order
	rowFrac  [][]float64
	classes  []int // class of each row
	clusters []int // cluster of each column
	matched  int   // how many leading rows/columns are matched pairs
}

func newContingency(labels, pred []int, k int) (*contingency, error) {
	nc := 0
	for _, l := range labels {
		nc = max(nc, l+1)
	}
	for _, c := range pred {
		k = max(k, c+1)
	}
	table := make([][]int, nc)
	cost := make([][]float64, nc)
	for i := range table {
		table[i] = make([]int, k)
		cost[i] = make([]float64, k)
	}
	for n, l := range labels {
		if l >= 0 { // not data.Unlabelled
			table[l][pred[n]]++
		}
	}
	for i := range table {
		for j, v := range table[i] {
			cost[i][j] = -float64(v)
		}
	}
	assign, _, err := eval.Hungarian(cost)
	if err != nil {
		return nil, fmt.Errorf("contingency: %w", err)
	}
	ct := &contingency{}
	usedRow := make([]bool, nc)
	usedCol := make([]bool, k)
	for i, j := range assign {
		if j >= 0 {
			ct.classes = append(ct.classes, i)
			ct.clusters = append(ct.clusters, j)
			usedRow[i], usedCol[j] = true, true
		}
	}
	ct.matched = len(ct.classes)
	for i := range usedRow {
		if !usedRow[i] {
			ct.classes = append(ct.classes, i)
		}
	}
	for j := range usedCol {
		if !usedCol[j] {
			ct.clusters = append(ct.clusters, j)
		}
	}
	for _, i := range ct.classes {
		row := make([]int, len(ct.clusters))
		frac := make([]float64, len(ct.clusters))
		total := 0
		for c, j := range ct.clusters {
			row[c] = table[i][j]
			total += row[c]
		}
		for c := range row {
			if total > 0 {
				frac[c] = float64(row[c]) / float64(total)
			}
		}
		ct.counts = append(ct.counts, row)
		ct.rowFrac = append(ct.rowFrac, frac)
	}
	return ct, nil
}

// Dims, Z, X and Y make the table a plotter.GridXYZ: column c at x = c, row r at
// y = −r so that the first class is at the top, coloured by the row fraction.
func (ct *contingency) Dims() (c, r int)   { return len(ct.clusters), len(ct.classes) }
func (ct *contingency) Z(c, r int) float64 { return ct.rowFrac[len(ct.classes)-1-r][c] }
func (ct *contingency) X(c int) float64    { return float64(c) }
func (ct *contingency) Y(r int) float64    { return float64(r) }

// contingencyPlot draws the table as a heat map coloured by the fraction of each
// class that went to each cluster (so small classes read as clearly as large
// ones), with the counts written in the cells when there are at most 20 clusters.
func contingencyPlot(ct *contingency, classNames []string) (*plot.Plot, error) {
	blues, err := brewer.GetPalette(brewer.TypeSequential, "Blues", 9)
	if err != nil {
		return nil, err
	}
	hm := plotter.NewHeatMap(ct, fade(blues, 1, 256))
	hm.Min, hm.Max = 0, 1
	hm.Rasterized = len(ct.classes)*len(ct.clusters) > 2500

	p := plot.New()
	p.Title.Text = "Contingency table"
	p.X.Label.Text = "cluster (reordered)"
	p.Y.Label.Text = "true class"
	p.Add(hm)

	nr, ncol := len(ct.classes), len(ct.clusters)
	xnames := make([]string, ncol)
	for c, j := range ct.clusters {
		xnames[c] = strconv.Itoa(j)
	}
	if ncol > 30 {
		xnames = thin(xnames, 30)
	}
	ynames := make([]string, nr)
	for r, i := range ct.classes {
		ynames[nr-1-r] = categoryName(i, classNames)
	}
	if nr > 30 {
		ynames = thin(ynames, 30)
	}
	p.NominalX(xnames...)
	p.NominalY(ynames...)
	p.X.Tick.Label.Rotation = 0
	if ncol <= 20 {
		var lab plotter.XYLabels
		var styles []text.Style
		fnt := font.From(plot.DefaultFont, vg.Points(max(7, 13-float64(ncol)/3)))
		for r := range nr {
			for c := range ncol {
				v := ct.counts[r][c]
				if v == 0 {
					continue
				}
				lab.XYs = append(lab.XYs, plotter.XY{X: float64(c), Y: float64(nr - 1 - r)})
				lab.Labels = append(lab.Labels, strconv.Itoa(v))
				col := color.Color(color.Black)
				if ct.rowFrac[r][c] > 0.55 {
					col = color.White
				}
				styles = append(styles, text.Style{Color: col, Font: fnt, XAlign: draw.XCenter, YAlign: draw.YCenter,
					Handler: p.TextHandler})
			}
		}
		if len(lab.XYs) > 0 {
			labels, err := plotter.NewLabels(lab)
			if err != nil {
				return nil, fmt.Errorf("contingency labels: %w", err)
			}
			labels.TextStyle = styles
			p.Add(labels)
		}
	}
	return p, nil
}

// thin blanks all but about fit evenly spaced names.
func thin(names []string, fit int) []string {
	step := (len(names) + fit - 1) / fit
	for i := range names {
		if i%step != 0 {
			names[i] = ""
		}
	}
	return names
}

package report

import (
	"fmt"
	"image/color"
	"math"
	"math/rand/v2"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/brewer"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"emclust/model"
	"emclust/torch"
)

// gridXYZ is a function sampled on a rectangular grid: z[r*len(xs)+c] at (xs[c], ys[r]).
type gridXYZ struct {
	xs, ys, z []float64
}

func (g gridXYZ) Dims() (c, r int)   { return len(g.xs), len(g.ys) }
func (g gridXYZ) Z(c, r int) float64 { return g.z[r*len(g.xs)+c] }
func (g gridXYZ) X(c int) float64    { return g.xs[c] }
func (g gridXYZ) Y(r int) float64    { return g.ys[r] }

// bounds is the data's bounding box widened by 5% on each side, so the contours
// around the outermost points are not cut off.
func bounds(pts []float32) (x0, x1, y0, y1 float64) {
	x0, y0 = math.Inf(1), math.Inf(1)
	x1, y1 = math.Inf(-1), math.Inf(-1)
	for i := 0; i+1 < len(pts); i += 2 {
		x, y := float64(pts[i]), float64(pts[i+1])
		x0, x1, y0, y1 = min(x0, x), max(x1, x), min(y0, y), max(y1, y)
	}
	dx, dy := max(x1-x0, 1e-6)*0.05, max(y1-y0, 1e-6)*0.05
	return x0 - dx, x1 + dx, y0 - dy, y1 + dy
}

// distributionGrids evaluates the cluster distributions h_j(x) = sigmoid(a*_j(x)/γ)
// of a 2-input network on a size×size grid over the box, in eval mode: with the
// running statistics, as at inference, so the surface is a fixed function of x and
// not of which batch x came in. It returns one grid per cluster in clusters.
func distributionGrids(net *model.Net, gamma float64, x0, x1, y0, y1 float64, size int, clusters []int) ([]gridXYZ, error) {
	if net.Spec.Arch != "mlp" || net.Spec.In != 2 {
		return nil, fmt.Errorf("distributions: the network takes %d-feature input, not 2-d points", net.Spec.In)
	}
	xs, ys := make([]float64, size), make([]float64, size)
	for i := range size {
		t := float64(i) / float64(size-1)
		xs[i] = x0 + t*(x1-x0)
		ys[i] = y0 + t*(y1-y0)
	}
	in := make([]float32, 0, 2*size*size)
	for r := range size {
		for c := range size {
			in = append(in, float32(xs[c]), float32(ys[r]))
		}
	}
	s := torch.NoGrad()
	defer s.Close()
	h := s.Float32s(s.Sigmoid(s.DivScalar(net.Forward(s, s.FromFloat32(in, []int{size * size, 2}, net.Device), false), gamma)))
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("distributions: %w", err)
	}
	k := net.Spec.K
	out := make([]gridXYZ, len(clusters))
	for i, j := range clusters {
		z := make([]float64, size*size)
		for p := range z {
			z[p] = float64(h[p*k+j])
		}
		out[i] = gridXYZ{xs: xs, ys: ys, z: z}
	}
	return out, nil
}

// distributionPlot draws h_j as a shaded surface with contour lines, and the data
// points on top coloured by their cluster (members of j drawn larger), like the
// paper's Fig. distributions. Shading and levels span the panel's own range of h,
// as a contour plot's automatic levels do, so the shape shows even where h varies
// little; the title gives the range.
func distributionPlot(g gridXYZ, title string, pts []float32, cluster []int, j, k int) (*plot.Plot, error) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, z := range g.z {
		lo, hi = min(lo, z), max(hi, z)
	}
	if !(hi > lo) {
		hi = lo + 1e-9
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s\nh from %.3f to %.3f", title, lo, hi)
	p.Title.TextStyle.Font.Size = vg.Points(10)
	shade, err := brewer.GetPalette(brewer.TypeSequential, "Greys", 9)
	if err != nil {
		return nil, err
	}
	hm := plotter.NewHeatMap(g, fade(shade, 0.45, 64))
	hm.Min, hm.Max = lo, hi
	hm.Rasterized = true
	var levels []float64
	for _, t := range (plot.DefaultTicks{}).Ticks(lo, hi) {
		if t.Value > lo && t.Value < hi {
			levels = append(levels, t.Value)
		}
	}
	if len(levels) < 4 {
		// Too few round numbers in the range: use even steps instead.
		levels = levels[:0]
		for i := 1; i < 8; i++ {
			levels = append(levels, lo+(hi-lo)*float64(i)/8)
		}
	}
	p.Add(hm)
	if len(levels) > 0 {
		ct := plotter.NewContour(g, levels, moreland.Kindlmann().Palette(len(levels)+2))
		ct.Min, ct.Max = levels[0], levels[len(levels)-1]
		ct.LineStyles = []draw.LineStyle{{Width: vg.Points(1)}}
		p.Add(ct)
	}
	sc, err := clusterScatter(pts, cluster, k, j)
	if err != nil {
		return nil, err
	}
	p.Add(sc)
	p.X.Min, p.X.Max = g.xs[0], g.xs[len(g.xs)-1]
	p.Y.Min, p.Y.Max = g.ys[0], g.ys[len(g.ys)-1]
	p.X.Padding, p.Y.Padding = 0, 0 // the surface fills the frame
	return p, nil
}

// fade spreads a palette over n steps and blends it towards white, so that points
// drawn over a surface stay visible.
func fade(p palette.Palette, keep float64, n int) palette.Palette {
	src := p.Colors()
	out := make([]color.Color, n)
	for i := range out {
		t := float64(i) / float64(n-1) * float64(len(src)-1)
		a, b := src[int(t)], src[min(int(t)+1, len(src)-1)]
		f := t - math.Floor(t)
		ar, ag, ab, _ := a.RGBA()
		br, bg, bb, _ := b.RGBA()
		mix := func(x, y uint32) uint8 {
			v := (1-f)*float64(x>>8) + f*float64(y>>8)
			return uint8(math.Round(keep*v + (1-keep)*255))
		}
		out[i] = color.RGBA{mix(ar, br), mix(ag, bg), mix(ab, bb), 255}
	}
	return plainPalette(out)
}

type plainPalette []color.Color

func (p plainPalette) Colors() []color.Color { return p }

// clusterScatter draws points coloured by cluster, or by class with rows without
// one (negative) grey beneath the rest; when focus ≥ 0 that cluster's points are
// drawn larger and on top.
func clusterScatter(pts []float32, cluster []int, k, focus int) (*plotter.Scatter, error) {
	// Rows without a class (negative) are drawn first, under the rest, and the focus
	// cluster's last, over them.
	n := len(cluster)
	order := make([]int, 0, n)
	for _, first := range []func(c int) bool{
		func(c int) bool { return c < 0 },
		func(c int) bool { return c >= 0 && c != focus },
		func(c int) bool { return c >= 0 && c == focus },
	} {
		for i, c := range cluster {
			if first(c) {
				order = append(order, i)
			}
		}
	}
	xys := make(plotter.XYs, n)
	for o, i := range order {
		xys[o] = plotter.XY{X: float64(pts[2*i]), Y: float64(pts[2*i+1])}
	}
	sc, err := plotter.NewScatter(xys)
	if err != nil {
		return nil, fmt.Errorf("scatter: %w", err)
	}
	radius := vg.Points(math.Max(0.6, math.Min(2, 40/math.Sqrt(float64(n)))))
	sc.GlyphStyleFunc = func(o int) draw.GlyphStyle {
		c := cluster[order[o]]
		r := radius
		if focus >= 0 && c == focus {
			r *= 1.6
		}
		return draw.GlyphStyle{Color: categoryColor(c, k), Radius: r, Shape: draw.CircleGlyph{}}
	}
	return sc, nil
}

// subsample returns at most m indices of 0..n-1, a seeded random choice, in order.
func subsample(n, m int, seed uint64) []int {
	if m <= 0 || m >= n {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	rng := rand.New(rand.NewPCG(seed, 0x5b5))
	perm := rng.Perm(n)[:m]
	mark := make([]bool, n)
	for _, i := range perm {
		mark[i] = true
	}
	idx := make([]int, 0, m)
	for i, ok := range mark {
		if ok {
			idx = append(idx, i)
		}
	}
	return idx
}

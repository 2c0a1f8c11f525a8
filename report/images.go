package report

import (
	"image"
	"image/color"
	"image/draw"
	"math"
	"sort"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"emclust/data"
	"emclust/model"
	"emclust/torch"
	"emclust/train"
)

// relevances returns the raw relevance scores a = g_θ(x) of every row (N×K,
// row-major), in eval mode like train.Predict, 512 rows at a time.
func relevances(net *model.Net, src train.Source) ([]float32, error) {
	n, k := src.Len(), net.Spec.K
	out := make([]float32, 0, n*k)
	all := torch.NoGrad()
	defer all.Close()
	rows := all.Arange(n, torch.Int64, src.IndexDevice())
	if err := all.Err(); err != nil {
		return nil, err
	}
	const chunk = 512
	for lo := 0; lo < n; lo += chunk {
		s := torch.NoGrad()
		x, _ := src.Batch(s, s.Narrow(rows, 0, lo, min(chunk, n-lo)), nil)
		out = append(out, s.Float32s(net.Relevance(s, x, false))...)
		if err := s.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// bestMembers returns, for each cluster, up to m of its members ordered by their
// relevance score for that cluster, highest first: the paper's Fig. best10. Ranking
// by a_j or by a*_j gives the same order, since a*_j is an increasing affine map of a_j.
func bestMembers(rel []float32, cluster []int, k, m int) [][]int {
	members := make([][]int, k)
	for i, c := range cluster {
		members[c] = append(members[c], i)
	}
	for j := range members {
		mj := members[j]
		sort.SliceStable(mj, func(a, b int) bool { return rel[mj[a]*k+j] > rel[mj[b]*k+j] })
		if len(mj) > m {
			members[j] = mj[:m]
		}
	}
	return members
}

// displayScale is the integer upscaling that makes small images readable: ×2 up to
// 32×32 (MNIST, CIFAR), none for larger ones.
func displayScale(h int) int {
	if h <= 32 {
		return 2
	}
	return 1
}

// byteImage turns image i of a set (planar uint8, 1 or 3 planes) into an image
// upscaled by scale with nearest-neighbour sampling.
func byteImage(im *data.Images, i, scale int) image.Image {
	plane := im.H * im.W
	pix := im.Pix[i*im.C*plane : (i+1)*im.C*plane]
	return planarImage(im.C, im.H, im.W, scale, func(c, y, x int) uint8 { return pix[c*plane+y*im.W+x] })
}

// floatImage turns a planar C×H×W float image into an image, stretching its values
// to the full range: a synthesised input's contrast is arbitrary, its pattern is
// what matters.
func floatImage(vals []float32, c, h, w, scale int) image.Image {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		lo, hi = min(lo, float64(v)), max(hi, float64(v))
	}
	span := hi - lo
	if span <= 0 {
		span = 1
	}
	plane := h * w
	return planarImage(c, h, w, scale, func(ch, y, x int) uint8 {
		return uint8(math.Round(255 * (float64(vals[ch*plane+y*w+x]) - lo) / span))
	})
}

func planarImage(c, h, w, scale int, at func(c, y, x int) uint8) image.Image {
	r := image.Rect(0, 0, w*scale, h*scale)
	if c == 1 {
		img := image.NewGray(r)
		for y := range h * scale {
			for x := range w * scale {
				img.Pix[y*img.Stride+x] = at(0, y/scale, x/scale)
			}
		}
		return img
	}
	img := image.NewRGBA(r)
	for y := range h * scale {
		for x := range w * scale {
			o := y*img.Stride + 4*x
			img.Pix[o] = at(0, y/scale, x/scale)
			img.Pix[o+1] = at(1, y/scale, x/scale)
			img.Pix[o+2] = at(2, y/scale, x/scale)
			img.Pix[o+3] = 255
		}
	}
	return img
}

// tileGrid lays images out in rows on a white sheet with pad pixels between them,
// each row headed by its label. A nil image leaves a light gray slot, so a cluster
// with fewer members than columns still lines up.
func tileGrid(rows [][]image.Image, labels []string, pad int) *image.RGBA {
	cw, ch, cols := 1, 1, 0
	for _, row := range rows {
		cols = max(cols, len(row))
		for _, img := range row {
			if img != nil {
				cw, ch = max(cw, img.Bounds().Dx()), max(ch, img.Bounds().Dy())
			}
		}
	}
	face := basicfont.Face7x13
	labelW := 0
	for _, l := range labels {
		labelW = max(labelW, font.MeasureString(face, l).Ceil()+2*pad)
	}
	width := labelW + cols*(cw+pad) + pad
	height := len(rows)*(ch+pad) + pad
	sheet := image.NewRGBA(image.Rect(0, 0, width, height))
	draw.Draw(sheet, sheet.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	empty := image.NewUniform(color.RGBA{235, 235, 235, 255})
	for r, row := range rows {
		y := pad + r*(ch+pad)
		if r < len(labels) {
			d := font.Drawer{Dst: sheet, Src: image.NewUniform(color.Black), Face: face,
				Dot: fixed.P(pad, y+ch/2+face.Ascent/2)}
			d.DrawString(labels[r])
		}
		for c := 0; c < cols; c++ {
			x := labelW + pad + c*(cw+pad)
			cell := image.Rect(x, y, x+cw, y+ch)
			if c >= len(row) || row[c] == nil {
				draw.Draw(sheet, cell, empty, image.Point{}, draw.Src)
				continue
			}
			b := row[c].Bounds()
			draw.Draw(sheet, image.Rect(x, y, x+b.Dx(), y+b.Dy()), row[c], b.Min, draw.Src)
		}
	}
	return sheet
}

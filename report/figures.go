package report

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"emclust/atomicfile"
)

// pngDPI renders raster plots at twice the 96 dpi of a browser's CSS pixel, so they
// stay sharp on high-density screens; the page shows them at their nominal size.
const pngDPI = 192

// figure is one image of the page: a file beside index.html and how to show it.
type figure struct {
	Title   string // shown above, when set
	File    string // relative to the report folder
	Caption string
	Width   int  // display width in CSS pixels
	Pixels  bool // an image grid: scale without smoothing
}

// writer saves the report's files into one folder, each atomically, and remembers
// what it wrote so that a test can check every link.
type writer struct {
	dir   string
	files []string
}

func (w *writer) write(name string, fill func(io.Writer) error) error {
	if err := atomicfile.Write(filepath.Join(w.dir, name), fill); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	w.files = append(w.files, name)
	return nil
}

// cssPx converts a plot length in points to CSS pixels.
func cssPx(l vg.Length) int { return int(math.Round(float64(l) * 96 / 72)) }

// savePlot draws p into name, as SVG or PNG by the extension: SVG for line and bar
// charts (small and crisp at any zoom), PNG for plots with thousands of marks.
func (w *writer) savePlot(p *plot.Plot, width, height vg.Length, name, caption string) (figure, error) {
	return w.savePanels([][]*plot.Plot{{p}}, width, height, name, caption)
}

// savePanels draws a grid of plots (rows of equal length, nil for an empty tile) into
// one file, aligning their axes.
func (w *writer) savePanels(rows [][]*plot.Plot, width, height vg.Length, name, caption string) (figure, error) {
	fig := figure{File: name, Caption: caption, Width: cssPx(width)}
	var c vg.CanvasWriterTo
	switch ext := filepath.Ext(name); ext {
	case ".svg":
		c = vgsvg.New(width, height)
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(pngDPI))}
	default:
		return fig, fmt.Errorf("figure %s: unknown format %q", name, ext)
	}
	dc := draw.New(c)
	if len(rows) == 1 && len(rows[0]) == 1 {
		rows[0][0].Draw(dc)
	} else {
		tiles := draw.Tiles{Rows: len(rows), Cols: len(rows[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
			PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
		for _, row := range rows {
			for j, p := range row {
				if p == nil {
					row[j] = plot.New()
					row[j].HideAxes()
				}
			}
		}
		canvases := plot.Align(rows, tiles, dc)
		for i, row := range rows {
			for j, p := range row {
				p.Draw(canvases[i][j])
			}
		}
	}
	return fig, w.write(name, func(out io.Writer) error {
		_, err := c.WriteTo(out)
		return err
	})
}

// saveImage writes an image as PNG, shown at its pixel size.
func (w *writer) saveImage(img image.Image, name, caption string) (figure, error) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return figure{}, fmt.Errorf("encode %s: %w", name, err)
	}
	err := w.write(name, func(out io.Writer) error {
		_, err := out.Write(buf.Bytes())
		return err
	})
	return figure{File: name, Caption: caption, Width: img.Bounds().Dx(), Pixels: true}, err
}

// tab20 is a qualitative palette (Tableau's 20 colours, dark and light pairs
// reordered so that the first ten are the strong ones): neighbouring cluster ids get
// colours that are easy to tell apart.
var tab20 = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}, {148, 103, 189, 255},
	{140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}, {188, 189, 34, 255}, {23, 190, 207, 255},
	{174, 199, 232, 255}, {255, 187, 120, 255}, {152, 223, 138, 255}, {255, 152, 150, 255}, {197, 176, 213, 255},
	{196, 156, 148, 255}, {247, 182, 210, 255}, {199, 199, 199, 255}, {219, 219, 141, 255}, {158, 218, 229, 255},
}

// categoryColor is the colour of cluster or class i of k: tab20 up to 20, else hues
// spread around the colour wheel; a grey paler than tab20's for a negative i, a row
// without a class (data.Unlabelled).
func categoryColor(i, k int) color.RGBA {
	if i < 0 {
		return color.RGBA{R: 225, G: 225, B: 225, A: 255}
	}
	if k <= len(tab20) {
		return tab20[i%len(tab20)]
	}
	return hsv(float64(i)/float64(k), 0.75, 0.85)
}

func hsv(h, s, v float64) color.RGBA {
	h = math.Mod(h, 1) * 6
	c := v * s
	x := c * (1 - math.Abs(math.Mod(h, 2)-1))
	var r, g, b float64
	switch int(h) {
	case 0:
		r, g, b = c, x, 0
	case 1:
		r, g, b = x, c, 0
	case 2:
		r, g, b = 0, c, x
	case 3:
		r, g, b = 0, x, c
	case 4:
		r, g, b = x, 0, c
	default:
		r, g, b = c, 0, x
	}
	m := v - c
	u8 := func(f float64) uint8 { return uint8(math.Round(255 * (f + m))) }
	return color.RGBA{u8(r), u8(g), u8(b), 255}
}

// FigureNames lists every figure a report may write: what a report's --out may
// hold besides index.html, so that other images there (a data set's, say) are
// known for the user's and never written over.
var FigureNames = []string{
	"loss.svg", "loss_kl.svg", "scores.svg", "criteria.svg", "heads.svg", "sizes.svg",
	"contingency.svg", "contingency.png", "best10.png", "actmax.png", "filters_first.png",
	"filters_last.png", "tsne.png", "sample_space.png", "distributions.png",
	"distributions_compare.png",
}

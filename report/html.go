package report

import (
	"html/template"
	"image"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// page is what the HTML template renders.
type page struct {
	Title     string
	Facts     [][2]string
	Scores    []scoreRow
	Sections  []section
	Generated string
}

type scoreRow struct {
	What, ACC, NMI, ARI, Empty string
}

// section is one part of the page: paragraphs, rows of figures and tables, in order.
type section struct {
	ID, Title string
	Blocks    []block
}

// block is one paragraph (Text, trusted HTML written by this package), one row of
// figures shown side by side, or one table.
type block struct {
	Text      template.HTML
	Figures   []figure
	Table     *table
	Collapsed bool // the table starts folded away
	Pair      bool // figures share the row equally, scaled down if need be
}

type table struct {
	Caption string
	Head    []string
	Rows    [][]string
}

func (s *section) text(html string) {
	s.Blocks = append(s.Blocks, block{Text: template.HTML(html)})
}

// pageTemplate is the whole page; styles are inline so the folder needs nothing else.
var pageTemplate = template.Must(template.New("index").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #222;
       max-width: 1180px; margin: 0 auto; padding: 16px 24px 48px; background: #fff; }
h1 { font-size: 24px; margin: 8px 0 12px; }
h2 { font-size: 19px; margin: 32px 0 8px; padding-top: 8px; border-top: 1px solid #ddd; }
p { margin: 6px 0 10px; max-width: 980px; }
nav { margin: 4px 0 16px; font-size: 14px; }
nav a { margin-right: 14px; color: #1f5fa8; text-decoration: none; }
.head { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
table { border-collapse: collapse; font-size: 14px; margin: 6px 0 12px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e4e4e4; text-align: left; vertical-align: top; }
th { background: #f4f6f8; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
table.facts th { background: none; font-weight: 600; color: #555; }
caption { caption-side: top; text-align: left; font-size: 13px; color: #555; padding: 2px 0 4px; }
.figs { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; margin: 8px 0 14px; }
figure { margin: 0; }
.pair > figure { flex: 1 1 0; min-width: 0; }
figure img { display: block; max-width: 100%; height: auto; image-rendering: auto; }
figure img.pixels { image-rendering: pixelated; }
.ftitle { font-weight: 600; font-size: 15px; margin-bottom: 4px; }
figcaption { font-size: 13px; color: #555; margin-top: 4px; max-width: 560px; }
details { margin: 4px 0 12px; font-size: 14px; }
footer { margin-top: 40px; font-size: 12px; color: #888; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<nav>{{range .Sections}}<a href="#{{.ID}}">{{.Title}}</a>{{end}}</nav>
<div class="head">
<table class="facts">
{{range .Facts}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</table>
<table>
<caption>Final scores against the labels</caption>
<tr><th></th><th class="num">ACC</th><th class="num">NMI</th><th class="num">ARI</th><th class="num">empty clusters</th></tr>
{{range .Scores}}<tr><td>{{.What}}</td><td class="num">{{or .ACC "–"}}</td><td class="num">{{or .NMI "–"}}</td><td class="num">{{or .ARI "–"}}</td><td class="num">{{.Empty}}</td></tr>
{{end}}</table>
</div>
{{range .Sections}}
<section id="{{.ID}}">
<h2>{{.Title}}</h2>
{{range .Blocks}}{{if .Text}}<p>{{.Text}}</p>
{{end}}{{if .Figures}}<div class="figs{{if .Pair}} pair{{end}}">
{{range .Figures}}<figure>{{if .Title}}<div class="ftitle">{{.Title}}</div>{{end}}<img src="{{.File}}" width="{{.Width}}" alt="{{.Caption}}"{{if .Pixels}} class="pixels"{{end}}><figcaption>{{.Caption}}</figcaption></figure>
{{end}}</div>
{{end}}{{if .Table}}{{if .Collapsed}}<details><summary>{{.Table.Caption}}</summary>
{{template "table" .Table}}</details>
{{else}}{{template "table" .Table}}{{end}}{{end}}{{end}}
</section>
{{end}}
<footer>Written by emclust report on {{.Generated}}. Figures are the files beside this page.</footer>
</body>
</html>
{{define "table"}}<table>
<caption>{{.Caption}}</caption>
<tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>
{{end}}`))

// kernelGrid draws the 3×3 kernels of the first count filters of a conv weight
// (out×in×3×3), each filter's input planes side by side, perRow filters a row, on a
// diverging scale: red positive, blue negative, white zero, per filter up to its
// largest magnitude (a filter's pattern matters, not its overall gain, which the
// BatchNorm after it undoes).
func kernelGrid(w []float32, shape []int, count, perRow int) *image.RGBA {
	out, in, kh, kw := shape[0], shape[1], shape[2], shape[3]
	count = min(count, out)
	const cell, gap = 14, 2
	var rows [][]image.Image
	var labels []string
	for f := range count {
		if f%perRow == 0 {
			rows = append(rows, nil)
			// ASCII only: the grid's bitmap font has no en dash.
			labels = append(labels, strconv.Itoa(f)+"-"+strconv.Itoa(min(f+perRow, count)-1))
		}
		k := w[f*in*kh*kw : (f+1)*in*kh*kw]
		scale := 0.0
		for _, v := range k {
			scale = max(scale, math.Abs(float64(v)))
		}
		if scale == 0 {
			scale = 1
		}
		// Each plane sits in a gray frame, so a white (zero) weight still reads as part
		// of its kernel and the two planes of a filter stay apart.
		img := image.NewRGBA(image.Rect(0, 0, in*(kw*cell+2)+(in-1)*gap, kh*cell+2))
		for i := range img.Pix {
			img.Pix[i] = 255
		}
		frame := color.RGBA{150, 150, 150, 255}
		for p := range in {
			x0 := p * (kw*cell + 2 + gap)
			for x := x0; x < x0+kw*cell+2; x++ {
				img.SetRGBA(x, 0, frame)
				img.SetRGBA(x, kh*cell+1, frame)
			}
			for y := 0; y < kh*cell+2; y++ {
				img.SetRGBA(x0, y, frame)
				img.SetRGBA(x0+kw*cell+1, y, frame)
			}
		}
		for p := range in {
			for y := range kh {
				for x := range kw {
					c := diverging(float64(k[p*kh*kw+y*kw+x]) / scale)
					x0 := p*(kw*cell+2+gap) + 1 + x*cell
					for dy := range cell {
						for dx := range cell {
							img.SetRGBA(x0+dx, 1+y*cell+dy, c)
						}
					}
				}
			}
		}
		rows[len(rows)-1] = append(rows[len(rows)-1], img)
	}
	return tileGrid(rows, labels, 10)
}

// diverging maps v in [−1, 1] to blue (−1), white (0) and red (1).
func diverging(v float64) color.RGBA {
	v = max(-1, min(1, v))
	blue := color.RGBA{33, 102, 172, 255}
	red := color.RGBA{178, 24, 43, 255}
	to := red
	if v < 0 {
		to, v = blue, -v
	}
	mix := func(a uint8) uint8 { return uint8(math.Round(255 + v*(float64(a)-255))) }
	return color.RGBA{mix(to.R), mix(to.G), mix(to.B), 255}
}

// legendDot is a legend entry's filled circle.
type legendDot color.RGBA

func (d legendDot) Thumbnail(c *draw.Canvas) {
	centre := vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: (c.Min.Y + c.Max.Y) / 2}
	c.DrawGlyph(draw.GlyphStyle{Color: color.RGBA(d), Radius: vg.Points(3), Shape: draw.CircleGlyph{}}, centre)
}

// Package report writes a self-contained HTML page about a trained run: its training
// curves, the clusters it found against the labels, what its clusters and filters
// respond to (the paper's §8.3 visualisations), a t-SNE map of its final-layer
// responses, and, for 2-d data, the cluster distributions of §8.1.
//
// Every figure is a PNG or SVG file beside index.html, linked relatively, so the
// folder can be copied, archived or opened without a network. Plots are drawn with
// gonum/plot; image grids are plain tiled images.
package report

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"emclust/atomicfile"
	"emclust/data"
	"emclust/eval"
	"emclust/model"
	"emclust/torch"
	"emclust/train"
)

// Run is a trained run as the report needs it: its network (with the running
// statistics it infers with), config and per-epoch history.
type Run struct {
	Dir     string
	Cfg     *train.Config
	Net     *model.Net
	Prior   *torch.Tensor // learned prior π (1×K), nil for uniform
	History []train.EpochMetrics
}

// Options says what to draw and where.
type Options struct {
	// Out is the report folder; empty means RUN/report.
	Out string
	// TSNEPoints is how many rows, drawn at random, the t-SNE map shows; 0: no map.
	TSNEPoints int
	// Seed fixes every random choice: subsets, t-SNE layout, starting images.
	Seed uint64
	// ActMax tunes the activation maximisation of clusters and filters.
	ActMax ActMaxConfig
	// Clusters are the clusters whose 2-d distributions are drawn; nil: all (at
	// most the first 12).
	Clusters []int
	// Compare is a second run on the same 2-d data (say, trained without the
	// relevance normalisation) whose distributions are drawn beside Run's.
	Compare *Run
	// Log receives one line per slow step; nil for none.
	Log io.Writer
	// Progress, when set, starts a display of a long step's total units (t-SNE's
	// iterations: minutes for thousands of points) and returns what advances it to
	// done units; the step ends it by reaching total.
	Progress func(total int, unit string) (advance func(done int))
	// Replaces names the figures of an earlier report in Out that this one
	// replaces: those it does not write again (a t-SNE map left out) are removed
	// once its index.html is written.
	Replaces []string
}

// CheckPlane refuses, before any work, what the 2-d distributions of a network of
// spec would not draw: --clusters of no cluster of it, and --clusters or a compared
// run where the network does not take 2-d points. compare says whether a run is
// compared.
func CheckPlane(spec model.Spec, clusters []int, compare bool) error {
	if spec.Arch != "mlp" || spec.In != 2 {
		switch {
		case compare:
			return fmt.Errorf("--compare-run draws 2-d cluster distributions, but the run's network takes %d features", spec.In)
		case clusters != nil:
			return fmt.Errorf("--clusters picks the 2-d cluster distributions drawn, but the run's network takes %d features", spec.In)
		}
		return nil
	}
	for i, j := range clusters {
		if j < 0 || j >= spec.K {
			return fmt.Errorf("--clusters: cluster %d: the run has clusters 0..%d", j, spec.K-1)
		}
		if slices.Contains(clusters[:i], j) {
			return fmt.Errorf("--clusters: cluster %d is named twice", j)
		}
	}
	return nil
}

// CheckCompare refuses, before any work, a compared run whose distributions could not
// stand beside run's: another K, input other than 2-d points, or other input
// scaling, which would predict it on features it was not trained on and draw it in
// other coordinates.
func CheckCompare(run, other *Run) error {
	if err := checkCompareSpec(run, other); err != nil {
		return err
	}
	ca, cb := run.Cfg, other.Cfg
	if ca.Standardize != cb.Standardize || !slices.Equal(ca.InputMean, cb.InputMean) || !slices.Equal(ca.InputStd, cb.InputStd) {
		scaled := func(c *train.Config) string {
			if c.Standardize {
				return "standardized features"
			}
			return "raw features"
		}
		what := scaled(cb) + ", " + run.Dir + " " + scaled(ca)
		if ca.Standardize == cb.Standardize {
			what = "features standardized by other statistics than " + run.Dir + "'s"
		}
		return fmt.Errorf("--compare-run %s was trained on %s: its clusters would be drawn on input it never saw; compare runs trained on the same features", other.Dir, what)
	}
	return nil
}

// checkCompareSpec refuses a compared network that does not take 2-d points or has
// another K than run's.
func checkCompareSpec(run, other *Run) error {
	a, b := run.Net.Spec, other.Net.Spec
	switch {
	case b.Arch != "mlp":
		// Was "takes 0 features": a CNN's input is an image.
		return fmt.Errorf("--compare-run %s is a %s network of images, not one of 2-d points", other.Dir, b.Arch)
	case b.In != 2:
		return fmt.Errorf("--compare-run %s takes %d features, not 2-d points", other.Dir, b.In)
	case b.K != a.K:
		return fmt.Errorf("--compare-run %s has K = %d, %s has %d", other.Dir, b.K, run.Dir, a.K)
	}
	return nil
}

// maxPanels bounds the default number of 2-d distribution panels.
const maxPanels = 12

// Write renders the report of run on src's data into opt.Out and returns the path
// of index.html. src must be the data the network takes (same features or image
// size); its labels, when present, are scored against.
func Write(run *Run, src train.Source, opt Options) (string, error) {
	if run == nil || run.Net == nil || run.Cfg == nil {
		return "", errors.New("report: no run")
	}
	if opt.Out == "" {
		opt.Out = filepath.Join(run.Dir, "report")
	}
	if err := os.MkdirAll(opt.Out, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	b := &builder{run: run, src: src, opt: opt, w: &writer{dir: opt.Out}}
	b.page.Title = "emclust report: " + filepath.Base(filepath.Clean(run.Dir))
	steps := []struct {
		name string
		f    func() error
	}{
		{"predict", b.predict},
		{"header", b.header},
		{"training curves", b.curves},
		{"clusters", b.clusters},
		{"images", b.images},
		{"t-SNE", b.tsne},
		{"2-d distributions", b.plane},
	}
	for _, st := range steps {
		if err := st.f(); err != nil {
			return "", fmt.Errorf("report: %s: %w", st.name, err)
		}
	}
	b.page.Generated = time.Now().Format("2006-01-02 15:04:05")
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, &b.page); err != nil {
		return "", fmt.Errorf("report: render: %w", err)
	}
	index := filepath.Join(opt.Out, "index.html")
	if err := atomicfile.WriteBytes(index, buf.Bytes()); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	for _, name := range opt.Replaces {
		if !slices.Contains(b.w.files, name) && filepath.Base(name) == name {
			os.Remove(filepath.Join(opt.Out, name))
		}
	}
	return index, nil
}

// builder carries what the sections share while the page is put together.
type builder struct {
	run  *Run
	src  train.Source
	opt  Options
	w    *writer
	page page

	pred   *train.Prediction
	sizes  []int
	rel    []float32 // raw relevance a, N×K; computed once, lazily
	scores *eval.Scores
}

func (b *builder) logf(format string, args ...any) {
	if b.opt.Log != nil {
		fmt.Fprintf(b.opt.Log, "emclust: report: "+format+"\n", args...)
	}
}

func (b *builder) predict() error {
	b.logf("clustering %s", b.src.Describe())
	pred, err := train.Predict(b.run.Net, b.src, b.run.Net.Device, b.run.Prior)
	if err != nil {
		return err
	}
	b.pred = pred
	b.sizes = eval.ClusterSizes(pred.Cluster, pred.K)
	if labels := b.src.Labels(); labels != nil {
		sc, err := eval.ScoreLabelled(labels, pred.Cluster)
		if err != nil {
			return err
		}
		b.scores = &sc
	}
	return nil
}

func (b *builder) relevance() ([]float32, error) {
	if b.rel == nil {
		rel, err := relevances(b.run.Net, b.src)
		if err != nil {
			return nil, err
		}
		b.rel = rel
	}
	return b.rel, nil
}

func (b *builder) header() error {
	cfg, spec := b.run.Cfg, b.run.Net.Spec
	norm := "on (a* = batch-normalised a)"
	if !spec.Norm {
		norm = "off (raw a: the paper's ablation)"
	}
	gamma := strconv.FormatFloat(cfg.GammaVal, 'g', 4, 64)
	if cfg.Gamma == "auto" {
		gamma += " (auto)"
	}
	lr := strconv.FormatFloat(cfg.LR, 'g', -1, 64)
	if o, err := train.LookupObjective(cfg.Objective); err == nil && o.KLStep {
		lr += ", KL step " + strconv.FormatFloat(cfg.LRKL, 'g', -1, 64)
	}
	arch := spec.Layers()
	if h := spec.NumHeads(); h > 1 {
		arch += fmt.Sprintf(", %d heads of K (predicting with head %d)", h, b.run.Net.Head())
	}
	b.page.Facts = [][2]string{
		{"Run folder", b.run.Dir},
		{"Data", b.src.Describe()},
		{"Network", fmt.Sprintf("%s, %s parameters", arch, thousands(b.run.Net.NumParams()))},
		{"Clusters K", strconv.Itoa(spec.K)},
		{"Objective", cfg.Objective},
		{"γ", gamma},
		{"Relevance normalisation", norm},
		{"Epochs", fmt.Sprintf("%d of %d", len(b.run.History), cfg.Epochs)},
		{"Batch size, learning rate", fmt.Sprintf("%d, %s", cfg.BatchSize, lr)},
		{"Prior, seed", fmt.Sprintf("%s, %d", cfg.Prior, cfg.Seed)},
	}
	if o, err := train.LookupObjective(cfg.Objective); err == nil && o.Supervised {
		// Cross-entropy on the labels: no γ, no relevance normalisation, no prior.
		b.page.Facts = slices.DeleteFunc(b.page.Facts, func(f [2]string) bool {
			return f[0] == "γ" || f[0] == "Relevance normalisation"
		})
	}
	for i := len(b.run.History) - 1; i >= 0; i-- {
		m := b.run.History[i]
		if m.Sizes == nil {
			continue
		}
		row := scoreRow{What: fmt.Sprintf("last evaluation in metrics.jsonl (epoch %d)", m.Epoch), Empty: strconv.Itoa(m.Empty)}
		if m.ACC != nil {
			row.ACC, row.NMI, row.ARI = f4(*m.ACC), f4(*m.NMI), f4(*m.ARI)
		}
		b.page.Scores = append(b.page.Scores, row)
		break
	}
	empty := 0
	for _, c := range b.sizes {
		if c == 0 {
			empty++
		}
	}
	row := scoreRow{What: "this report's prediction (eval mode)", Empty: strconv.Itoa(empty)}
	if b.scores != nil && b.scores.Scored > 0 {
		row.What += fmt.Sprintf(", scored on %d labelled rows of %d", b.scores.Scored, len(b.pred.Cluster))
	}
	if b.scores != nil {
		row.ACC, row.NMI, row.ARI = f4(b.scores.ACC), f4(b.scores.NMI), f4(b.scores.ARI)
	}
	b.page.Scores = append(b.page.Scores, row)
	return nil
}

func (b *builder) curves() error {
	sec := section{ID: "curves", Title: "Training curves"}
	hist := b.run.History
	if len(hist) == 0 {
		sec.text("metrics.jsonl holds no finished epoch yet.")
		b.page.Sections = append(b.page.Sections, sec)
		return nil
	}
	hasKL := false
	for _, m := range hist {
		hasKL = hasKL || m.LossKL != 0
	}
	intro := "Per-epoch means over the training steps, from metrics.jsonl: the loss of the training objective (" +
		b.run.Cfg.Objective + ")"
	if hasKL {
		intro += " and the KL loss of the two-fold objective's consistency step"
	}
	sec.text(intro + ". Scores are drawn at the epochs that were evaluated against the labels (every row with a class, eval mode).")
	var figs []figure
	p, err := lossPlot(hist, "Loss ("+b.run.Cfg.Objective+")", "loss", func(m train.EpochMetrics) float64 { return m.Loss })
	if err != nil {
		return err
	}
	f, err := b.w.savePlot(p, curveW, curveH, "loss.svg", "Mean loss per epoch")
	if err != nil {
		return err
	}
	figs = append(figs, f)
	if hasKL {
		p, err := lossPlot(hist, "KL loss (consistency step)", "KL loss", func(m train.EpochMetrics) float64 { return m.LossKL })
		if err != nil {
			return err
		}
		f, err := b.w.savePlot(p, curveW, curveH, "loss_kl.svg", "Mean KL loss per epoch")
		if err != nil {
			return err
		}
		figs = append(figs, f)
	}
	p, err = scorePlot(hist)
	if err != nil {
		return err
	}
	if p != nil {
		f, err := b.w.savePlot(p, curveW, curveH, "scores.svg", "ACC, NMI and ARI at evaluated epochs")
		if err != nil {
			return err
		}
		figs = append(figs, f)
	}
	p, err = criteriaPlot(hist)
	if err != nil {
		return err
	}
	if p != nil {
		f, err := b.w.savePlot(p, curveW, curveH, "criteria.svg",
			fmt.Sprintf("Without labels, at evaluated epochs: the mean ARI with the %d evaluations before, whose highest, of those leaving the fewest clusters empty, is the chosen epoch where a run keeps one (chosen.safetensors), and the mean max posterior", train.AgreementWindow))
		if err != nil {
			return err
		}
		figs = append(figs, f)
	}
	p, err = headsPlot(hist)
	if err != nil {
		return err
	}
	if p != nil {
		f, err := b.w.savePlot(p, curveW, curveH, "heads.svg",
			"The heads at evaluated epochs (ACC with labels, else the mean ARI with the other heads); the run predicts with the head that agrees most with the others")
		if err != nil {
			return err
		}
		figs = append(figs, f)
	}
	sec.Blocks = append(sec.Blocks, block{Figures: figs})
	b.page.Sections = append(b.page.Sections, sec)
	return nil
}

func (b *builder) clusters() error {
	sec := section{ID: "clusters", Title: "Clusters"}
	sec.text("The final clustering: every row of the data assigned to its most probable cluster by the trained " +
		"network in eval mode (the relevance normalisation uses its running statistics).")
	k := b.pred.K
	p, err := sizesPlot(b.sizes)
	if err != nil {
		return err
	}
	w := vg.Length(min(11, 4+0.25*float64(k))) * vg.Inch
	f, err := b.w.savePlot(p, w, 3.4*vg.Inch, "sizes.svg",
		fmt.Sprintf("Members per cluster; dashed: a balanced clustering, N/K = %.1f", float64(len(b.pred.Cluster))/float64(k)))
	if err != nil {
		return err
	}
	sec.Blocks = append(sec.Blocks, block{Figures: []figure{f}})
	labels := b.src.Labels()
	if labels == nil {
		sec.text("The data have no labels, so there is no contingency table.")
		b.page.Sections = append(b.page.Sections, sec)
		return nil
	}
	ct, err := newContingency(labels, b.pred.Cluster, k)
	if err != nil {
		return err
	}
	p, err = contingencyPlot(ct, b.classNames())
	if err != nil {
		return err
	}
	ncol, nrow := len(ct.clusters), len(ct.classes)
	cw := vg.Length(min(12, 2.5+0.45*float64(ncol))) * vg.Inch
	ch := vg.Length(min(12, 1.3+0.38*float64(nrow))) * vg.Inch
	name := "contingency.svg"
	if ncol*nrow > 2500 {
		name = "contingency.png"
	}
	f, err = b.w.savePlot(p, cw, ch, name, "Rows: true classes; columns: clusters in the order of the Hungarian match")
	if err != nil {
		return err
	}
	sec.text(fmt.Sprintf("Columns are put in the order of the one-to-one match between classes and clusters "+
		"that ACC uses (Hungarian algorithm), so the matched pairs lie on the diagonal; %d pairs are matched. "+
		"Colour is the fraction of each class's rows that fell in each cluster; numbers are counts.", ct.matched))
	if n := len(labels) - data.CountLabelled(labels); n > 0 {
		what := fmt.Sprintf("%d rows without a class (an empty label cell) are", n)
		if n == 1 {
			what = "1 row without a class (an empty label cell) is"
		}
		sec.text(what + " clustered but left out of the table and the scores.")
	}
	sec.Blocks = append(sec.Blocks, block{Figures: []figure{f}})
	b.page.Sections = append(b.page.Sections, sec)
	return nil
}

// classNames returns the data's class names when it has them: an image set's or
// folder's, or a table's label cells, by label id (was the images' alone, so a
// table's classes showed as their ids, which follow the names' sorted order).
func (b *builder) classNames() []string {
	if c, ok := b.src.(interface{ Classes() []string }); ok {
		return c.Classes()
	}
	return nil
}

func (b *builder) images() error {
	is, ok := b.src.(*train.ImageSource)
	if !ok || len(b.run.Net.ConvLayers()) == 0 {
		return nil
	}
	im := is.Images()
	net, k := b.run.Net, b.run.Net.Spec.K
	scale := displayScale(im.H)
	sec := section{ID: "images", Title: "What the clusters and filters respond to"}

	rel, err := b.relevance()
	if err != nil {
		return err
	}
	best := bestMembers(rel, b.pred.Cluster, k, 10)
	rows := make([][]image.Image, k)
	labels := make([]string, k)
	for j, idx := range best {
		labels[j] = "c" + strconv.Itoa(j)
		rows[j] = make([]image.Image, 10)
		for c, i := range idx {
			rows[j][c] = byteImage(im, i, scale)
		}
	}
	bestFig, err := b.w.saveImage(tileGrid(rows, labels, 2), "best10.png", "Ten members with the highest relevance")
	if err != nil {
		return err
	}
	b.logf("activation maximisation of %d clusters (%d steps)", k, b.actMax().Steps)
	targets := make([]int, k)
	for j := range targets {
		targets[j] = j
	}
	am, err := MaximizeRelevance(net, im.C, im.H, im.W, targets, b.actMax())
	if err != nil {
		return err
	}
	synth := make([][]image.Image, k)
	plane := am.C * am.H * am.W
	for j := range synth {
		synth[j] = []image.Image{floatImage(am.Images[j*plane:(j+1)*plane], am.C, am.H, am.W, scale)}
	}
	synthFig, err := b.w.saveImage(tileGrid(synth, labels, 2), "actmax.png", "Synthesised")
	if err != nil {
		return err
	}
	sec.text(fmt.Sprintf("Left, the paper's Fig. best10: one row per cluster c<i>j</i>, its ten members with the "+
		"highest relevance score a<sub>j</sub> (ranking by a*<sub>j</sub> gives the same order), best first; gray "+
		"slots mean the cluster has fewer members. Right, the input synthesised for each cluster by "+
		"activation maximisation: starting from a faint random image (uniform in [0.45, 0.55]), %d steps of "+
		"Adam (learning rate %g) raise a*<sub>j</sub> of the network in eval mode, which sees the image "+
		"through the same grayscale and Sobel preprocessing as in training, minus an L2 penalty %g·Σ(x−½)² "+
		"that keeps pixels the cluster ignores at mid-gray; pixels are clamped to [0, 1] after each step%s. "+
		"Each image is shown contrast-stretched.", b.actMax().Steps, b.actMax().LR, b.actMax().L2, blurNote(b.actMax())))
	sec.Blocks = append(sec.Blocks, block{Figures: []figure{bestFig, synthFig}})
	tab := &table{Caption: "a*_j of the synthesised input, at the random start and after the ascent",
		Head: []string{"cluster", "members", "a*_j at start", "a*_j after"}}
	for j := range k {
		tab.Rows = append(tab.Rows, []string{strconv.Itoa(j), strconv.Itoa(b.sizes[j]), f3(am.Before[j]), f3(am.After[j])})
	}
	sec.Blocks = append(sec.Blocks, block{Table: tab, Collapsed: true})

	// First layer: the kernels themselves, which act on the two Sobel planes.
	if w := net.FirstConv(); w != nil {
		s := torch.NoGrad()
		shape := w.Shape()
		vals := s.Float32s(w)
		if err := s.Close(); err != nil {
			return err
		}
		img := kernelGrid(vals, shape, 16, 8)
		f, err := b.w.saveImage(img, "filters_first.png", "First convolution layer: 3×3 kernels of filters 0–15")
		if err != nil {
			return err
		}
		sec.text("The paper's Fig. filters. First convolution layer: the 3×3 weights of its first 16 filters, " +
			"each as its two input planes side by side (left: horizontal Sobel gradient G<sub>x</sub>, right: " +
			"vertical G<sub>y</sub>), red positive, blue negative, white zero, scaled per filter to its largest " +
			"weight.")
		sec.Blocks = append(sec.Blocks, block{Figures: []figure{f}})
	}
	conv := net.ConvLayers()
	last := conv[len(conv)-1]
	b.logf("activation maximisation of 8 filters of the last convolution layer")
	chans := []int{0, 1, 2, 3, 4, 5, 6, 7}
	fm, err := MaximizeChannels(net, last, im.C, im.H, im.W, chans, b.actMax())
	if err != nil {
		return err
	}
	plane = fm.C * fm.H * fm.W
	row := make([]image.Image, len(chans))
	for i := range chans {
		row[i] = floatImage(fm.Images[i*plane:(i+1)*plane], fm.C, fm.H, fm.W, 2*scale)
	}
	f, err := b.w.saveImage(tileGrid([][]image.Image{row}, []string{"0-7"}, 4), "filters_last.png",
		"Last convolution layer: inputs that maximise filters 0–7")
	if err != nil {
		return err
	}
	var gains []string
	for i := range chans {
		gains = append(gains, fmt.Sprintf("%s→%s", f3(fm.Before[i]), f3(fm.After[i])))
	}
	sec.text(fmt.Sprintf("Last convolution layer (block %d of %d): the inputs synthesised, as above, to "+
		"maximise the mean activation (after BatchNorm and ReLU) of each of its first 8 filters; mean activation "+
		"at start → after: %s.", len(conv), len(conv), strings.Join(gains, ", ")))
	sec.Blocks = append(sec.Blocks, block{Figures: []figure{f}})
	b.page.Sections = append(b.page.Sections, sec)
	return nil
}

// blurNote describes the smoothing of the ascent, if any.
func blurNote(c ActMaxConfig) string {
	if c.BlurEvery <= 0 {
		return ""
	}
	return fmt.Sprintf(", and every %d steps the image is smoothed with a 3×3 Gaussian (σ = ½ pixel) so that "+
		"the shapes the unit responds to win over pixel-level noise", c.BlurEvery)
}

func (b *builder) actMax() ActMaxConfig {
	c := b.opt.ActMax
	if c.Seed == 0 {
		c.Seed = b.opt.Seed
	}
	c.defaults()
	return c
}

func (b *builder) tsne() error {
	if b.opt.TSNEPoints <= 0 {
		return nil
	}
	rel, err := b.relevance()
	if err != nil {
		return err
	}
	n, k := b.src.Len(), b.run.Net.Spec.K
	idx := subsample(n, b.opt.TSNEPoints, b.opt.Seed)
	if len(idx) < 5 {
		return nil
	}
	x := make([]float64, 0, len(idx)*k)
	for _, i := range idx {
		for j := range k {
			x = append(x, float64(rel[i*k+j]))
		}
	}
	b.logf("t-SNE of %d points", len(idx))
	start := time.Now()
	cfg := TSNEConfig{Seed: b.opt.Seed}
	if b.opt.Progress != nil {
		cfg.defaults()
		cfg.Step = b.opt.Progress(cfg.Iterations, "iteration")
	}
	y, err := TSNE(x, len(idx), k, cfg)
	if err != nil {
		return err
	}
	pts := make([]float32, len(y))
	for i, v := range y {
		pts[i] = float32(v)
	}
	clusters := make([]int, len(idx))
	for o, i := range idx {
		clusters[o] = b.pred.Cluster[i]
	}
	byCluster, err := scatterPlot(pts, clusters, k, nil, "coloured by cluster")
	if err != nil {
		return err
	}
	panels := []*plot.Plot{byCluster}
	if labels := b.src.Labels(); labels != nil {
		cls := make([]int, len(idx))
		nc := 0
		for o, i := range idx {
			cls[o] = labels[i]
			nc = max(nc, labels[i]+1)
		}
		byClass, err := scatterPlot(pts, cls, nc, b.classNames(), "coloured by true class")
		if err != nil {
			return err
		}
		panels = append(panels, byClass)
	}
	for _, p := range panels {
		p.HideAxes()
	}
	f, err := b.w.savePanels([][]*plot.Plot{panels}, vg.Length(5.2*float64(len(panels)))*vg.Inch, 5.2*vg.Inch,
		"tsne.png", "t-SNE map of the final-layer responses")
	if err != nil {
		return err
	}
	sec := section{ID: "tsne", Title: "t-SNE map of the final-layer responses"}
	sec.text(fmt.Sprintf("As in the paper's Fig. tsne: the K = %d raw relevance scores a (the network's "+
		"response before the normalisation and softmax, eval mode) of %d rows drawn at random (seed %d) are "+
		"mapped to the plane with exact t-SNE (van der Maaten and Hinton, 2008), implemented here: Gaussian "+
		"affinities whose widths are set by binary search to perplexity 30, symmetrised; Student-t affinities in "+
		"the plane; 1000 steps of gradient descent with learning rate 200, adaptive per-coordinate gains, "+
		"momentum 0.5 for the first 250 steps and 0.8 after, and P exaggerated ×12 during those first 250 "+
		"steps. Axes have no units: only neighbourhoods and the separation of groups mean something "+
		"(computed in %.0f s).", k, len(idx), b.opt.Seed, time.Since(start).Seconds()))
	sec.Blocks = append(sec.Blocks, block{Figures: []figure{f}})
	b.page.Sections = append(b.page.Sections, sec)
	return nil
}

// scatterPlot draws 2-d points coloured by category, named in the legend by names
// where it has them; a negative category is a row without a class (data.Unlabelled).
func scatterPlot(pts []float32, cat []int, k int, names []string, title string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	sc, err := clusterScatter(pts, cat, k, -1)
	if err != nil {
		return nil, err
	}
	p.Add(sc)
	if k <= 20 {
		for j := range k {
			p.Legend.Add(categoryName(j, names), legendDot(categoryColor(j, k)))
		}
		if slices.ContainsFunc(cat, func(c int) bool { return c < 0 }) {
			p.Legend.Add("no class", legendDot(categoryColor(-1, k)))
		}
		p.Legend.Top = true
		p.Legend.Left = false
		p.Legend.ThumbnailWidth = vg.Points(8)
		p.Legend.TextStyle.Font.Size = vg.Points(8)
	}
	return p, nil
}

// categoryName names category j by names[j] where it has one, as "name (j)" where
// the two differ, so that the legend and the contingency table's rows agree.
func categoryName(j int, names []string) string {
	id := strconv.Itoa(j)
	if j < len(names) && names[j] != "" && names[j] != id {
		return fmt.Sprintf("%s (%d)", names[j], j)
	}
	return id
}

func (b *builder) plane() error {
	spec := b.run.Net.Spec
	if err := CheckPlane(spec, b.opt.Clusters, b.opt.Compare != nil); err != nil {
		return err
	}
	if spec.Arch != "mlp" || spec.In != 2 {
		return nil
	}
	k := spec.K
	clusters := b.opt.Clusters
	if clusters == nil {
		for j := range min(k, maxPanels) {
			clusters = append(clusters, j)
		}
	}
	s := torch.NoGrad()
	all := s.Float32s(b.src.Features(s))
	if err := s.Close(); err != nil {
		return err
	}
	x0, x1, y0, y1 := bounds(all)
	show := subsample(b.src.Len(), 4000, b.opt.Seed)
	pts := make([]float32, 0, 2*len(show))
	for _, i := range show {
		pts = append(pts, all[2*i], all[2*i+1])
	}
	pick := func(v []int) []int {
		out := make([]int, len(show))
		for o, i := range show {
			out[o] = v[i]
		}
		return out
	}
	sec := section{ID: "plane", Title: "Cluster distributions in the plane"}

	// The sample space, as in the paper's Fig. sample_spaces.
	var spaces []*plot.Plot
	if labels := b.src.Labels(); labels != nil {
		nc := 0
		for _, l := range labels {
			nc = max(nc, l+1)
		}
		p, err := scatterPlot(pts, pick(labels), nc, b.classNames(), "input space, coloured by true class")
		if err != nil {
			return err
		}
		spaces = append(spaces, p)
	}
	p, err := scatterPlot(pts, pick(b.pred.Cluster), k, nil, "categorised space, coloured by cluster")
	if err != nil {
		return err
	}
	spaces = append(spaces, p)
	f, err := b.w.savePanels([][]*plot.Plot{spaces}, vg.Length(4.6*float64(len(spaces)))*vg.Inch, 4.6*vg.Inch,
		"sample_space.png", "The 2-d data and their clustering")
	if err != nil {
		return err
	}
	sec.text(fmt.Sprintf("The paper's Fig. sample_spaces: the data (%d of %d points shown) and the clusters "+
		"the network assigns them to.", len(show), b.src.Len()))
	sec.Blocks = append(sec.Blocks, block{Figures: []figure{f}})

	runs := []*Run{b.run}
	preds := []*train.Prediction{b.pred}
	if c := b.opt.Compare; c != nil {
		if err := checkCompareSpec(b.run, c); err != nil {
			return err
		}
		cp, err := train.Predict(c.Net, b.src, c.Net.Device, c.Prior)
		if err != nil {
			return fmt.Errorf("compare run: %w", err)
		}
		runs = append(runs, c)
		preds = append(preds, cp)
	}
	cols := 4
	if len(runs) > 1 {
		cols = 2
	}
	cols = min(cols, len(clusters))
	var figs []figure
	tab := &table{Caption: "Table avg_dist: batch mean of h_j over the last epoch's batches (metrics.jsonl h_mean)",
		Head: []string{"run"}}
	for _, j := range clusters {
		tab.Head = append(tab.Head, "cluster "+strconv.Itoa(j))
	}
	for r, run := range runs {
		gamma := run.Cfg.GammaVal
		grids, err := distributionGrids(run.Net, gamma, x0, x1, y0, y1, 120, clusters)
		if err != nil {
			return err
		}
		var rows [][]*plot.Plot
		for i, j := range clusters {
			if i%cols == 0 {
				rows = append(rows, make([]*plot.Plot, cols))
			}
			p, err := distributionPlot(grids[i], fmt.Sprintf("cluster %d (%d members)", j, eval.ClusterSizes(preds[r].Cluster, k)[j]),
				pts, pick(preds[r].Cluster), j, k)
			if err != nil {
				return err
			}
			rows[len(rows)-1][i%cols] = p
		}
		name := "distributions.png"
		if r > 0 {
			name = "distributions_compare.png"
		}
		label := normLabel(run)
		panel := 3.0 * vg.Inch
		f, err := b.w.savePanels(rows, vg.Length(cols)*panel, vg.Length(len(rows))*panel, name,
			"h_j(x) of "+run.Dir)
		if err != nil {
			return err
		}
		f.Title = strings.ToUpper(label[:1]) + label[1:]
		figs = append(figs, f)
		row := []string{label + " — " + filepath.Base(filepath.Clean(run.Dir))}
		var last []float64
		if n := len(run.History); n > 0 {
			last = run.History[n-1].HMean
		}
		for _, j := range clusters {
			if j < len(last) {
				row = append(row, f3(last[j]))
			} else {
				row = append(row, "–")
			}
		}
		tab.Rows = append(tab.Rows, row)
	}
	intro := "The paper's Fig. distributions: the cluster distributions h<sub>j</sub>(x) = sigmoid(a*<sub>j</sub>(x)/γ) " +
		"over a 120×120 grid spanning the data's bounding box (5% margin), evaluated in eval mode with the " +
		"running statistics of the relevance normalisation (raw a<sub>j</sub> for a run without it). Shading " +
		"(darker: higher) and contour lines (at round values, from dark purple, low, to yellow, high) show " +
		"h<sub>j</sub> over each panel's own range, given in its title; points are coloured by cluster, the " +
		"members of cluster j drawn larger."
	if len(runs) > 1 {
		intro += " Side by side, with and without the relevance normalisation: without it one cluster's h tends " +
			"to cover every point while others stay low; with it each h<sub>j</sub> has a common mean of about ½ " +
			"over a batch and rises over one group of points."
	}
	sec.text(intro)
	sec.Blocks = append(sec.Blocks, block{Figures: figs, Pair: len(figs) > 1})
	sec.text("The paper's Table avg_dist: with the normalisation every cluster's h averages about 0.5 over a " +
		"batch (so the h<sub>j</sub> share a common integral and act like densities); without it they drift apart.")
	sec.Blocks = append(sec.Blocks, block{Table: tab})
	b.page.Sections = append(b.page.Sections, sec)
	return nil
}

// normLabel names a run by whether it normalises its relevance scores.
func normLabel(r *Run) string {
	if r.Net.Spec.Norm {
		return "with normalisation (a*)"
	}
	return "without normalisation (a)"
}

func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func f4(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

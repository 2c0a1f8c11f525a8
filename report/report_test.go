package report

import (
	"bytes"
	"context"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"emclust/data"
	"emclust/model"
	"emclust/torch"
	"emclust/train"
)

// trainRun trains cfg on src for real, in a run folder, and returns it as the report
// reads it back (history from metrics.jsonl).
func trainRun(t *testing.T, cfg train.Config, src train.Source) *Run {
	t.Helper()
	dir := t.TempDir()
	r, err := train.New(cfg, src, testDevice, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	hist, err := ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != cfg.Epochs {
		t.Fatalf("metrics.jsonl has %d epochs, want %d", len(hist), cfg.Epochs)
	}
	return &Run{Dir: dir, Cfg: &r.Cfg, Net: r.Net, Prior: r.Prior(), History: hist}
}

// checkPage checks that index.html exists, links only relative files, and that each
// linked file is a valid PNG or SVG. It returns the page and the linked names.
func checkPage(t *testing.T, index string) (string, []string) {
	t.Helper()
	b, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if !strings.Contains(page, "</html>") {
		t.Fatal("index.html is cut short")
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"#][^"]*)"`).FindAllStringSubmatch(page, -1) {
		name := m[1]
		if strings.Contains(name, "://") || filepath.IsAbs(name) {
			t.Errorf("link %q is not relative", name)
			continue
		}
		names = append(names, name)
		if !slices.Contains(FigureNames, name) {
			t.Errorf("%s is not among FigureNames, which report --out guards", name)
		}
		f, err := os.ReadFile(filepath.Join(filepath.Dir(index), name))
		if err != nil {
			t.Errorf("linked file: %v", err)
			continue
		}
		switch filepath.Ext(name) {
		case ".png":
			if _, err := png.Decode(bytes.NewReader(f)); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		case ".svg":
			if !bytes.Contains(f[:min(len(f), 512)], []byte("<svg")) || !bytes.HasSuffix(bytes.TrimSpace(f), []byte("</svg>")) {
				t.Errorf("%s is not a whole SVG document", name)
			}
		default:
			t.Errorf("unexpected linked file %s", name)
		}
	}
	return page, names
}

func has(names []string, want ...string) []string {
	var missing []string
	for _, w := range want {
		found := false
		for _, n := range names {
			found = found || n == w
		}
		if !found {
			missing = append(missing, w)
		}
	}
	return missing
}

// A report of a tiny digits run (2 epochs) has every section a labelled vector run
// gets, and every figure it links is there and decodes.
func TestReportDigits(t *testing.T) {
	v, err := data.Digits()
	if err != nil {
		t.Fatal(err)
	}
	v.Standardize()
	src, err := train.NewVectorSource(v, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, tc := range []struct {
		name    string
		heads   int
		hidden  []int
		network string // the Network fact starts so
	}{
		{"heads=1", 1, []int{32, 32}, "mlp 64→32→32→10,"},
		{"heads=3", 3, []int{32, 32}, "mlp 64→32→32→10, 3 heads of K"},
		{"linear", 1, nil, "linear 64→10,"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := train.VectorDefaults()
			cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
			cfg.Epochs = 2
			cfg.KMeans = false
			cfg.Heads = tc.heads
			cfg.Hidden = tc.hidden
			run := trainRun(t, cfg, src)

			out := filepath.Join(t.TempDir(), "report")
			var total, last int
			progress := func(n int, unit string) func(int) {
				total = n
				return func(done int) { last = done }
			}
			index, err := Write(run, src, Options{Out: out, TSNEPoints: 200, Seed: 3, Progress: progress})
			if err != nil {
				t.Fatal(err)
			}
			if total != 1000 || last != total {
				t.Errorf("t-SNE's progress: %d of %d iterations reported, want 1000 of 1000", last, total)
			}
			if index != filepath.Join(out, "index.html") {
				t.Errorf("index at %s", index)
			}
			page, names := checkPage(t, index)
			if m := has(names, "loss.svg", "scores.svg", "criteria.svg", "sizes.svg", "contingency.svg", "tsne.png"); m != nil {
				t.Errorf("page lacks %v (has %v)", m, names)
			}
			for _, s := range []string{"ACC", "perplexity 30", "Hungarian"} {
				if !strings.Contains(page, s) {
					t.Errorf("page does not mention %q", s)
				}
			}
			if strings.Contains(page, "loss_kl.svg") {
				t.Error("an em run has no KL curve")
			}
			drawn := has(names, "heads.svg") == nil
			if !strings.Contains(page, tc.network) {
				t.Errorf("page does not describe the network as %q", tc.network)
			}
			if drawn != (tc.heads > 1) || strings.Contains(page, "3 heads of K") != (tc.heads == 3) {
				t.Errorf("%d heads: heads.svg drawn %v, page names the heads %v", tc.heads, drawn, strings.Contains(page, "3 heads of K"))
			}
		})
	}
}

// blobs2d is a 2-d data set of three well-separated Gaussian groups, labelled.
func blobs2d(n int) *data.Vectors {
	rng := rand.New(rand.NewPCG(5, 5))
	centres := [][2]float64{{-3, 0}, {3, 0}, {0, 4}}
	v := &data.Vectors{X: make([]float32, 2*n), N: n, D: 2, Labels: make([]int, n), Source: "blobs"}
	for i := range n {
		c := i % 3
		v.Labels[i] = c
		v.X[2*i] = float32(centres[c][0] + 0.6*rng.NormFloat64())
		v.X[2*i+1] = float32(centres[c][1] + 0.6*rng.NormFloat64())
	}
	return v
}

// The 2-d path draws the distributions of a run and of a comparison run without the
// normalisation, with their avg_dist rows, and the t-SNE map can be left out.
func TestReportPlaneCompare(t *testing.T) {
	src, err := train.NewVectorSource(blobs2d(384), testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg := train.VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	cfg.K, cfg.Epochs, cfg.Hidden, cfg.KMeans = 3, 2, []int{16, 16}, false
	run := trainRun(t, cfg, src)
	cfg.Norm = false
	other := trainRun(t, cfg, src)

	index, err := Write(run, src, Options{Out: filepath.Join(t.TempDir(), "r"), Compare: other})
	if err != nil {
		t.Fatal(err)
	}
	page, names := checkPage(t, index)
	if m := has(names, "sample_space.png", "distributions.png", "distributions_compare.png"); m != nil {
		t.Errorf("page lacks %v (has %v)", m, names)
	}
	if has(names, "tsne.png") == nil {
		t.Error("t-SNE drawn with TSNEPoints 0")
	}
	for _, s := range []string{"with normalisation", "without normalisation", "avg_dist", "Relevance normalisation"} {
		if !strings.Contains(page, s) {
			t.Errorf("page does not mention %q", s)
		}
	}
	// A supervised run's header had γ and "Relevance normalisation: off (the paper's
	// ablation)", neither of which its cross-entropy has.
	sup := *run
	supCfg := *run.Cfg
	supCfg.Objective = "supervised"
	sup.Cfg = &supCfg
	index, err = Write(&sup, src, Options{Out: filepath.Join(t.TempDir(), "s")})
	if err != nil {
		t.Fatal(err)
	}
	if page, _ := checkPage(t, index); strings.Contains(page, "Relevance normalisation") || strings.Contains(page, "<th>γ</th>") {
		t.Error("a supervised run's report names γ or the relevance normalisation")
	}

	// Another K, or another scaling of the features, is refused before any work:
	// the compared run was predicted on this run's features and drawn in its axes.
	k4 := *other
	c4 := *other.Cfg
	k4.Cfg = &c4
	k4.Net, err = model.New(model.Spec{Arch: "mlp", In: 2, Hidden: []int{8}, K: 4, Norm: true}, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer k4.Net.Close()
	if err := CheckCompare(run, &k4); err == nil || !strings.Contains(err.Error(), "K = 4") {
		t.Errorf("compare run of K 4: %v, want an error naming K", err)
	}
	scaled := *other
	sc := *other.Cfg
	sc.Standardize, sc.InputMean, sc.InputStd = true, []float64{0.5, -1}, []float64{2, 3}
	scaled.Cfg = &sc
	if err := CheckCompare(run, &scaled); err == nil || !strings.Contains(err.Error(), "standardized features") {
		t.Errorf("compare run on standardized features: %v, want an error", err)
	}
	if err := CheckCompare(run, other); err != nil {
		t.Errorf("compare run on the same features: %v", err)
	}

	// A compare run needs 2-d data.
	v, _ := data.Digits()
	dsrc, err := train.NewVectorSource(v, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer dsrc.Close()
	dcfg := train.VectorDefaults()
	dcfg.MinSteps, dcfg.MaxSteps = 0, 0 // the epochs as set
	dcfg.Epochs, dcfg.KMeans = 1, false
	drun := trainRun(t, dcfg, dsrc)
	if _, err := Write(drun, dsrc, Options{Out: t.TempDir(), Compare: drun}); err == nil {
		t.Error("compare run on 64-d data accepted")
	}
}

// A table's class names label the contingency table's rows, with their ids: the ids
// alone (were all a table's report showed) follow the names' sorted order, c10
// before c2, and read as the wrong classes.
func TestReportNamesTableClasses(t *testing.T) {
	v := blobs2d(96)
	v.Classes = []string{"c0", "c1", "c10"}
	src, err := train.NewVectorSource(v, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg := train.VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	cfg.K, cfg.Epochs, cfg.Hidden, cfg.KMeans = 3, 1, []int{8}, false
	out := filepath.Join(t.TempDir(), "r")
	if _, err := Write(trainRun(t, cfg, src), src, Options{Out: out}); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(filepath.Join(out, "contingency.svg"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"c0 (0)", "c1 (1)", "c10 (2)"} {
		if !bytes.Contains(svg, []byte(">"+name+"<")) {
			t.Errorf("contingency.svg does not name class %q", name)
		}
	}
	for j, want := range []string{"c0 (0)", "c1 (1)", "c10 (2)", "3"} {
		if got := categoryName(j, v.Classes); got != want {
			t.Errorf("category %d named %q, want %q", j, got, want)
		}
	}
	if got := categoryName(1, []string{"0", "1"}); got != "1" {
		t.Errorf("a class named as its id: %q, want it once", got)
	}
}

// h_j is a sigmoid, so the grids lie in (0, 1), and the grid spans the box given.
func TestDistributionGrids(t *testing.T) {
	torch.ManualSeed(1)
	net, err := model.New(model.Spec{Arch: "mlp", In: 2, Hidden: []int{8}, K: 4, Norm: true}, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	grids, err := distributionGrids(net, 5, -1, 2, -3, 4, 20, []int{0, 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(grids) != 2 {
		t.Fatalf("%d grids", len(grids))
	}
	g := grids[1]
	if c, r := g.Dims(); c != 20 || r != 20 {
		t.Errorf("grid %d×%d", c, r)
	}
	if g.X(0) != -1 || g.X(19) != 2 || g.Y(0) != -3 || g.Y(19) != 4 {
		t.Errorf("grid spans x %v..%v y %v..%v", g.X(0), g.X(19), g.Y(0), g.Y(19))
	}
	for _, z := range g.z {
		if !(z > 0 && z < 1) {
			t.Fatalf("h = %v outside (0, 1)", z)
		}
	}
	wide, _ := model.New(model.Spec{Arch: "mlp", In: 3, Hidden: []int{8}, K: 2, Norm: true}, testDevice)
	defer wide.Close()
	if _, err := distributionGrids(wide, 5, 0, 1, 0, 1, 4, []int{0}); err == nil {
		t.Error("3-feature network accepted")
	}
}

// synthImages is a small labelled image set: two classes of stripes, horizontal and
// vertical, with noise.
func synthImages(n, c, size int) *data.Images {
	rng := rand.New(rand.NewPCG(9, 9))
	im := &data.Images{Pix: make([]uint8, n*c*size*size), N: n, C: c, H: size, W: size,
		Labels: make([]int, n), Classes: []string{"hstripes", "vstripes"}, Source: "synthetic"}
	for i := range n {
		im.Labels[i] = i % 2
		for ch := range c {
			for y := range size {
				for x := range size {
					u := y
					if i%2 == 1 {
						u = x
					}
					v := 40 + 60*rng.Float64()
					if (u/3)%2 == 0 {
						v += 140
					}
					im.Pix[((i*c+ch)*size+y)*size+x] = uint8(v)
				}
			}
		}
	}
	return im
}

// An image run's report adds the best-10 grid, the synthesised inputs and both filter
// figures. The network here is untrained: the path, not the pictures, is under test.
func TestReportImages(t *testing.T) {
	im := synthImages(48, 3, 28)
	src, err := train.NewImageSource(im, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	torch.ManualSeed(2)
	net, err := model.New(model.Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 3, Norm: true}, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	cfg := train.ImageDefaults()
	cfg.K, cfg.Arch, cfg.GammaVal = 3, "mnist", 5
	run := &Run{Dir: t.TempDir(), Cfg: &cfg, Net: net}
	index, err := Write(run, src, Options{TSNEPoints: 40, ActMax: ActMaxConfig{Steps: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if index != filepath.Join(run.Dir, "report", "index.html") {
		t.Errorf("default report folder: index at %s", index)
	}
	page, names := checkPage(t, index)
	if m := has(names, "best10.png", "actmax.png", "filters_first.png", "filters_last.png", "sizes.svg", "contingency.svg", "tsne.png"); m != nil {
		t.Errorf("page lacks %v (has %v)", m, names)
	}
	if svg, _ := os.ReadFile(filepath.Join(filepath.Dir(index), "contingency.svg")); !bytes.Contains(svg, []byte("hstripes")) {
		t.Error("contingency table does not name the classes")
	}
	if !strings.Contains(page, "no finished epoch") {
		t.Error("an empty history is not explained")
	}
}

// A step whose gradient is not finite does not reach the image: with a unit that
// gives NaN gradients on some calls (as libtorch 2.6 sometimes does, see ascend), the
// ascent still ends finite and higher. Without the check, Adam turns the whole image
// to NaN.
func TestActMaxSkipsNonFiniteGradients(t *testing.T) {
	net := randomMNISTNet(t)
	for _, tc := range []struct {
		name string
		bad  func(call int) bool // the call's gradient is NaN
	}{
		{"once, then retried", func(call int) bool { return call == 6 }},
		{"every try of some steps", func(call int) bool { return call >= 6 && call < 12 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			unit := func(s *torch.Scope, x *torch.Tensor) *torch.Tensor {
				calls++
				y := net.Forward(s, x, false)
				if tc.bad(calls) {
					// sqrt at 0 has an infinite slope: the value is y, the gradient NaN.
					y = s.Add(y, s.Sqrt(s.MulScalar(s.Sum(x, false), 0)))
				}
				return y
			}
			am, err := ascend(net, 1, 28, 28, 3, 3, []int{0, 1, 2}, ActMaxConfig{Steps: 10, Seed: 1}, unit)
			if err != nil {
				t.Fatal(err)
			}
			wantRise(t, am, "cluster", "a*")
		})
	}
}

// randomMNISTNet is a freshly initialised 3-cluster mnist CNN, closed with the test.
func randomMNISTNet(t *testing.T) *model.Net {
	t.Helper()
	torch.ManualSeed(4)
	net, err := model.New(model.Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 3, Norm: true}, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(net.Close)
	return net
}

// wantRise checks an ascent: every target's score (what, of each unit) ends higher
// than it started, and every pixel is in [0, 1] (NaN is not).
func wantRise(t *testing.T, am *ActMax, unit, what string) {
	t.Helper()
	for j := range am.After {
		if !(am.After[j] > am.Before[j]) {
			t.Errorf("%s %d: %s %v → %v, want a finite rise", unit, j, what, am.Before[j], am.After[j])
		}
	}
	for _, v := range am.Images {
		if !(v >= 0 && v <= 1) {
			t.Fatalf("pixel %v, want one in [0, 1]", v)
		}
	}
}

// Gradient ascent raises what it maximises: each cluster's a*_j and each filter's
// mean activation end higher than at the random start, and the images stay in [0,1].
// How much higher depends on the initial weights, which libtorch 1.13 and 2.6 draw
// differently from one seed (on 2.6 each a* rose by about 0.025, not 0.1), so only
// the rise is asserted.
func TestActMaxIncreases(t *testing.T) {
	net := randomMNISTNet(t)
	cfg := ActMaxConfig{Steps: 25, Seed: 1}
	am, err := MaximizeRelevance(net, 1, 28, 28, []int{0, 1, 2}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantRise(t, am, "cluster", "a*")
	if len(am.After) != 3 || len(am.Images) != 3*28*28 {
		t.Errorf("%d scores and %d pixels, want 3 and 3 images of 28×28", len(am.After), len(am.Images))
	}
	conv := net.ConvLayers()
	fm, err := MaximizeChannels(net, conv[len(conv)-1], 3, 28, 28, []int{0, 5}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantRise(t, fm, "filter", "mean activation")
	if len(fm.After) != 2 {
		t.Errorf("%d filters scored, want 2", len(fm.After))
	}
	// The weights were only frozen for the ascent.
	for _, p := range net.Params() {
		if !p.Tensor.RequiresGrad() {
			t.Fatalf("%s left frozen", p.Name)
		}
	}
	if _, err := MaximizeRelevance(net, 1, 28, 28, []int{3}, cfg); err == nil {
		t.Error("cluster 3 of 3 accepted")
	}
}

// CheckPlane refuses what the 2-d distributions would not draw, before any work.
func TestCheckPlane(t *testing.T) {
	plane := model.Spec{Arch: "mlp", In: 2, Hidden: []int{8}, K: 4}
	wide := model.Spec{Arch: "mlp", In: 4, Hidden: []int{8}, K: 4}
	for _, tc := range []struct {
		name     string
		spec     model.Spec
		clusters []int
		compare  bool
		want     string // "" for none
	}{
		{"all clusters", plane, nil, false, ""},
		{"some clusters", plane, []int{0, 3}, true, ""},
		{"cluster past K", plane, []int{4}, false, "cluster 4: the run has clusters 0..3"},
		{"cluster twice", plane, []int{1, 2, 1}, false, "cluster 1 is named twice"},
		{"clusters of 4 features", wide, []int{1}, false, "--clusters picks"},
		{"compare of 4 features", wide, nil, true, "--compare-run draws"},
		{"4 features alone", wide, nil, false, ""},
	} {
		err := CheckPlane(tc.spec, tc.clusters, tc.compare)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A constant curve far from zero (a loss of 1e20 every epoch) gets one tick, not
// gonum's "illegal range" panic; metrics.jsonl's epochs must rise from 1.
func TestDegenerateCurves(t *testing.T) {
	for _, r := range [][2]float64{{1e20, 1e20}, {1e20, 1e20 * (1 + 1e-15)}, {5, 5}, {math.Inf(-1), math.Inf(1)}} {
		if ticks := defaultTicks(r[0], r[1]); len(ticks) == 0 {
			t.Errorf("no ticks for [%g, %g]", r[0], r[1])
		}
	}
	dir := t.TempDir()
	for _, tc := range []struct{ lines, want string }{
		{`{"epoch":1,"loss":1}` + "\n" + `{"epoch":1,"loss":1}`, "metrics.jsonl:2: epoch 1"},
		{`{"epoch":100000000000000000,"loss":1}`, "metrics.jsonl:1: epoch 100000000000000000"},
		{`{"epoch":0,"loss":1}`, "metrics.jsonl:1: epoch 0"},
	} {
		os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte(tc.lines+"\n"), 0o644)
		if _, err := ReadMetrics(dir); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.lines, err, tc.want)
		}
	}
}

// --compare-run names what the other run is: a CNN's was "takes 0 features".
func TestCheckCompareSpec(t *testing.T) {
	run := &Run{Dir: "a", Net: &model.Net{Spec: model.Spec{Arch: "mlp", In: 2, K: 10}}}
	for _, tc := range []struct {
		spec model.Spec
		want string
	}{
		{model.Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 10}, "b is a mnist network of images"},
		{model.Spec{Arch: "mlp", In: 4, K: 10}, "b takes 4 features, not 2-d points"},
		{model.Spec{Arch: "mlp", In: 2, K: 3}, "b has K = 3, a has 10"},
		{model.Spec{Arch: "mlp", In: 2, K: 10}, ""},
	} {
		err := checkCompareSpec(run, &Run{Dir: "b", Net: &model.Net{Spec: tc.spec}})
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.spec, err, tc.want)
		}
	}
}

// Rows without a class are drawn grey and first, beneath the classes; a focus
// cluster's rows last, over the rest.
func TestClusterScatterOrder(t *testing.T) {
	pts := []float32{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}
	cat := []int{1, -1, 0, -1, 1}
	for _, tc := range []struct {
		focus int
		want  []int // the rows in drawing order
	}{
		{-1, []int{1, 3, 0, 2, 4}},
		{1, []int{1, 3, 2, 0, 4}},
	} {
		sc, err := clusterScatter(pts, cat, 2, tc.focus)
		if err != nil {
			t.Fatal(err)
		}
		for o, i := range tc.want {
			if sc.XYs[o].X != float64(i) {
				t.Fatalf("focus %d: point %d drawn is row %v, want row %d (order %v)", tc.focus, o, sc.XYs[o].X, i, tc.want)
			}
			if c, want := sc.GlyphStyleFunc(o).Color, categoryColor(cat[i], 2); c != want {
				t.Errorf("focus %d: row %d coloured %v, want %v", tc.focus, i, c, want)
			}
		}
	}
	if grey := categoryColor(-1, 2); grey == categoryColor(0, 2) || grey == categoryColor(1, 2) || slices.Contains(tab20, grey) {
		t.Errorf("no class coloured %v, a class's colour", grey)
	}
}

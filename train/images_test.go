package train

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"emclust/data"
	"emclust/data/datatest"
	"emclust/model"
	"emclust/torch"
)

// Integration tests over every image loader: each writes a small data set of
// synthetic classes in the official byte layout, loads it through the real loader and
// trains the real network on it on the CPU.

// synthClasses are the K = 4 classes of the synthetic images, chosen so that their
// Sobel gradients differ plainly: horizontal stripes (vertical gradients only),
// vertical stripes (horizontal gradients only), a centred blob (radial gradients) and
// a checkerboard (both).
var synthClasses = []string{"hstripes", "vstripes", "blob", "checker"}

const synthK = 4

// synthImages draws n images of c planes of size×size bytes, channel-planar and
// row-major like data.Images, with balanced labels i mod 4 in a shuffled order. Every
// image has its own phase, blob position, tint and pixel noise, all from seed.
func synthImages(seed uint64, n, c, size int) *data.Images {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	im := &data.Images{
		Pix: make([]uint8, n*c*size*size), N: n, C: c, H: size, W: size,
		Labels: make([]int, n), Classes: synthClasses, Source: "synthetic",
	}
	for i, p := range rng.Perm(n) {
		im.Labels[i] = p % synthK
	}
	half := max(2, size/8) // stripe and checker cell width
	plane := size * size
	for i := range n {
		cls := im.Labels[i]
		px, py := rng.IntN(2*half), rng.IntN(2*half)
		cx := float64(size)/2 + (rng.Float64()-0.5)*float64(size)/5
		cy := float64(size)/2 + (rng.Float64()-0.5)*float64(size)/5
		sigma := float64(size) / 6 * (0.8 + 0.4*rng.Float64())
		var tint [3]float64
		for ch := range tint {
			tint[ch] = 0.7 + 0.3*rng.Float64()
		}
		for y := range size {
			for x := range size {
				var v float64
				switch cls {
				case 0:
					v = 40 + 170*float64(((y+py)/half)%2)
				case 1:
					v = 40 + 170*float64(((x+px)/half)%2)
				case 2:
					dx, dy := float64(x)+0.5-cx, float64(y)+0.5-cy
					v = 40 + 170*math.Exp(-(dx*dx+dy*dy)/(2*sigma*sigma))
				case 3:
					v = 40 + 170*float64(((x+px)/half+(y+py)/half)%2)
				}
				for ch := range c {
					u := v*tint[ch] + 12*rng.NormFloat64()
					im.Pix[(i*c+ch)*plane+y*size+x] = uint8(math.Round(math.Max(0, math.Min(255, u))))
				}
			}
		}
	}
	return im
}

// imageBytes returns the bytes of image i.
func imageBytes(im *data.Images, i int) []uint8 { return fixture(im).Image(i) }

// fixture is im for package datatest's writers.
func fixture(im *data.Images) datatest.Images {
	return datatest.Images{N: im.N, C: im.C, H: im.H, W: im.W, Pix: im.Pix, Labels: im.Labels}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := datatest.WriteFile(path, b); err != nil {
		t.Fatal(err)
	}
}

// check fails the test on a fixture writer's error.
func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// cifarFine is the fine label written for image i of class cls in the CIFAR-100
// files: one of five fine classes under each coarse one.
func cifarFine(cls, i int) int { return 5*cls + i%5 }

// folderClass names the class folder of label cls so that the loader, which numbers
// classes in sorted name order, gives it back as cls.
func folderClass(cls int) string { return fmt.Sprintf("%d-%s", cls, synthClasses[cls]) }

// writePNGFolder writes gray images as PNGs in one sub-folder per class.
func writePNGFolder(t *testing.T, dir string, im *data.Images) {
	t.Helper()
	for i := range im.N {
		g := image.NewGray(image.Rect(0, 0, im.W, im.H))
		copy(g.Pix, imageBytes(im, i))
		var buf bytes.Buffer
		if err := png.Encode(&buf, g); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, folderClass(im.Labels[i]), fmt.Sprintf("img%04d.png", i)), buf.Bytes())
	}
}

// checkLoaded asserts that a loader returned exactly the images and labels written.
func checkLoaded(t *testing.T, got, want *data.Images) {
	t.Helper()
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
	if got.N != want.N || got.C != want.C || got.H != want.H || got.W != want.W {
		t.Fatalf("loaded %dx%dx%dx%d, wrote %dx%dx%dx%d", got.N, got.C, got.H, got.W, want.N, want.C, want.H, want.W)
	}
	for i := range want.N {
		if got.Labels[i] != want.Labels[i] {
			t.Fatalf("image %d: label %d, wrote %d", i, got.Labels[i], want.Labels[i])
		}
	}
	if !bytes.Equal(got.Pix, want.Pix) {
		t.Fatal("loaded pixels differ from the ones written")
	}
}

// imageConfig is the paper's image setting scaled down to a test: K = 4, a few
// epochs of small batches, a learning rate high enough to move in a few dozen steps,
// and one evaluation at the end.
func imageConfig(objective string, epochs, batch int) Config {
	cfg := ImageDefaults()
	cfg.K = synthK
	cfg.Objective = objective
	cfg.Epochs = epochs
	cfg.BatchSize = batch
	cfg.LR = 1e-3
	cfg.LRKL = 1e-3
	cfg.EvalEvery = 0
	return cfg
}

// imageSource is im on the test device, closed when the test ends.
func imageSource(t *testing.T, im *data.Images) *ImageSource {
	t.Helper()
	src, err := NewImageSource(im, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	return src
}

// trainImages trains cfg on im in a fresh run folder and returns the run.
func trainImages(t *testing.T, im *data.Images, cfg Config) *Run {
	t.Helper()
	src := imageSource(t, im)
	r := newRun(t, cfg, src, t.TempDir())
	start, cpu0 := time.Now(), cpuSeconds()
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for _, m := range r.History {
		losses = append(losses, m.Loss)
	}
	last := r.History[len(r.History)-1]
	t.Logf("%s %s on %d %dx%dx%d images, batch %d: %d epochs in %.1fs (%.1f CPU s), loss %.4f, sizes %v, ACC %.3f",
		cfg.Objective, r.Spec.Arch, im.N, im.C, im.H, im.W, r.Cfg.BatchSize, cfg.Epochs,
		time.Since(start).Seconds(), cpuSeconds()-cpu0, losses, last.Sizes, deref(last.ACC))
	return r
}

// cpuSeconds is the process's user and system time so far, for the logs: the wall
// time of these tests depends on what else the machine runs.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return math.NaN()
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// checkRun asserts what every image run must show: finite losses, a clustering of all
// n images into K clusters scored against the written labels, and a metrics.jsonl with
// one line per epoch. With strict set, the run must also have learned: the last
// epoch's mean loss is below the first's, and no cluster takes 90% of the images.
func checkRun(t *testing.T, r *Run, n int, strict bool) {
	t.Helper()
	if len(r.History) != r.Cfg.Epochs {
		t.Fatalf("%d epochs of history, want %d", len(r.History), r.Cfg.Epochs)
	}
	for _, m := range r.History {
		if !finite(m.Loss) || (r.Cfg.Objective == "twofold" && !finite(m.LossKL)) {
			t.Fatalf("epoch %d: loss %v, KL %v", m.Epoch, m.Loss, m.LossKL)
		}
		if m.Steps != n/r.Cfg.BatchSize {
			t.Errorf("epoch %d: %d steps, want %d", m.Epoch, m.Steps, n/r.Cfg.BatchSize)
		}
		if len(m.HMean) != synthK {
			t.Errorf("epoch %d: h_mean %v, want %d values", m.Epoch, m.HMean, synthK)
		}
	}
	first, last := r.History[0], r.History[len(r.History)-1]
	if strict && !(last.Loss < first.Loss) {
		t.Errorf("%s: loss did not fall: epoch 1 %v, epoch %d %v", r.Cfg.Objective, first.Loss, last.Epoch, last.Loss)
	}
	if len(last.Sizes) != synthK {
		t.Fatalf("last epoch: sizes %v, want %d clusters", last.Sizes, synthK)
	}
	total, big := 0, 0
	for _, c := range last.Sizes {
		total += c
		big = max(big, c)
	}
	if total != n {
		t.Errorf("sizes %v add up to %d, want %d", last.Sizes, total, n)
	}
	if strict && 10*big >= 9*n {
		t.Errorf("%s: one cluster took %d of %d images (sizes %v)", r.Cfg.Objective, big, n, last.Sizes)
	}
	if last.ACC == nil || !(*last.ACC > 0 && *last.ACC <= 1) {
		t.Errorf("ACC %v: want a score in (0, 1] against the written labels", last.ACC)
	}

	f, err := os.Open(filepath.Join(r.Dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		var m EpochMetrics
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("metrics.jsonl line %d: %v", lines+1, err)
		}
		if m.Epoch != lines+1 || m.Loss != r.History[lines].Loss {
			t.Errorf("metrics.jsonl line %d: epoch %d loss %v, want epoch %d loss %v",
				lines+1, m.Epoch, m.Loss, lines+1, r.History[lines].Loss)
		}
		lines++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if lines != r.Cfg.Epochs {
		t.Errorf("metrics.jsonl: %d lines, want %d", lines, r.Cfg.Epochs)
	}
}

// mnistSet writes and loads the MNIST-like set shared by the 28×28 tests.
func mnistSet(t *testing.T, n int) *data.Images {
	t.Helper()
	want := synthImages(1, n, 1, 28)
	dir := t.TempDir()
	check(t, datatest.WriteMNISTLike(dir, fixture(want), n*3/4))
	im, err := data.LoadImages("mnist", dir)
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, im, want)
	return im
}

func TestImageLoaderMNISTLike(t *testing.T) {
	im := mnistSet(t, 256)
	for _, obj := range []string{"twofold", "em-aug", "iic"} {
		t.Run(obj, func(t *testing.T) {
			r := trainImages(t, im, imageConfig(obj, 2, 32))
			checkRun(t, r, im.N, true)
		})
	}
}

func TestImageLoaderCIFAR10(t *testing.T) {
	want := synthImages(2, 128, 3, 32)
	dir := t.TempDir()
	check(t, datatest.WriteCIFAR(filepath.Join(dir, "cifar-10-batches-bin"), fixture(want), datatest.CIFAR10Batches(),
		func(i int) []byte { return []byte{byte(want.Labels[i])} }))
	im, err := data.LoadImages("cifar10", dir)
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, im, want)
	r := trainImages(t, im, imageConfig("twofold", 2, 32))
	checkRun(t, r, im.N, true)
}

func TestImageLoaderCIFAR100(t *testing.T) {
	want := synthImages(3, 128, 3, 32)
	dir := t.TempDir()
	check(t, datatest.WriteCIFAR(dir, fixture(want), []string{"train.bin", "test.bin"}, func(i int) []byte {
		return []byte{byte(want.Labels[i]), byte(cifarFine(want.Labels[i], i))}
	}))
	im, err := data.LoadImages("cifar100", dir)
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, im, want)
	if len(im.Classes) != 20 || len(im.Fine) != im.N {
		t.Fatalf("%d coarse classes and %d fine labels, want 20 and %d", len(im.Classes), len(im.Fine), im.N)
	}
	for i, f := range im.Fine {
		if f != cifarFine(want.Labels[i], i) {
			t.Fatalf("image %d: fine label %d, wrote %d", i, f, cifarFine(want.Labels[i], i))
		}
	}
	r := trainImages(t, im, imageConfig("twofold", 2, 32))
	checkRun(t, r, im.N, true)
}

func TestImageLoaderSTL10(t *testing.T) {
	want := synthImages(4, 16, 3, 96)
	dir := t.TempDir()
	check(t, datatest.WriteSTL10(filepath.Join(dir, "stl10_binary"), fixture(want), 12))
	im, err := data.LoadImages("stl10", dir)
	if err != nil {
		t.Fatal(err)
	}
	checkLoaded(t, im, want)
	// The 96×96 network costs about 0.3 CPU seconds per image and twofold step, so
	// this run is two steps of 8: too short to learn, and at evaluation the running
	// statistics of two batches still leave most images in one cluster. It checks that
	// the loaded set trains and predicts; the other loaders check learning.
	r := trainImages(t, im, imageConfig("twofold", 1, 8))
	if r.Spec.Arch != "stl10" || r.Spec.InC != 2 || r.Spec.H != 96 || r.Spec.W != 96 {
		t.Fatalf("spec %s, want stl10 on 2×96×96 Sobel planes", r.Spec.JSON())
	}
	checkRun(t, r, im.N, false)
	for j, h := range r.History[0].HMean {
		if !(h > 0 && h < 1) {
			t.Errorf("cluster %d: mean h %v, want in (0, 1)", j, h)
		}
	}
	pred, err := Predict(r.Net, r.Src, r.Dev, r.Prior())
	if err != nil {
		t.Fatal(err)
	}
	if len(pred.Cluster) != im.N || len(pred.Posterior) != im.N*synthK || pred.K != synthK {
		t.Fatalf("prediction: %d clusters, %d posteriors, K %d; want %d, %d, %d",
			len(pred.Cluster), len(pred.Posterior), pred.K, im.N, im.N*synthK, synthK)
	}
	for i := range im.N {
		row := pred.Posterior[i*synthK : (i+1)*synthK]
		sum, best := 0.0, 0
		for j, p := range row {
			if !(p >= 0 && p <= 1) {
				t.Fatalf("image %d: posterior %v", i, row)
			}
			sum += float64(p)
			if p > row[best] {
				best = j
			}
		}
		if math.Abs(sum-1) > 1e-5 || pred.Cluster[i] != best {
			t.Fatalf("image %d: posterior %v (sum %v), cluster %d", i, row, sum, pred.Cluster[i])
		}
	}
}

// The folder loader gets 56×56 gray PNGs and resizes them to 28×28, which by bilinear
// sampling at pixel centres is the mean of each 2×2 block.
func TestImageLoaderFolder(t *testing.T) {
	big := synthImages(5, 192, 1, 56)
	dir := t.TempDir()
	writePNGFolder(t, dir, big)
	im, err := data.LoadImageFolder(dir, 28, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Validate(); err != nil {
		t.Fatal(err)
	}
	if im.N != big.N || im.C != 1 || im.H != 28 || im.W != 28 {
		t.Fatalf("loaded %dx%dx%dx%d, want %dx1x28x28", im.N, im.C, im.H, im.W, big.N)
	}
	// Files are listed by path, so by class folder, then by the index in the name.
	if len(im.Classes) != synthK {
		t.Fatalf("classes %q, want %d", im.Classes, synthK)
	}
	for cls, name := range im.Classes {
		if name != folderClass(cls) {
			t.Fatalf("classes %q: class %d is %q, want %q", im.Classes, cls, name, folderClass(cls))
		}
	}
	seen := 0
	for cls := range synthK {
		for j := range big.N {
			if big.Labels[j] != cls {
				continue
			}
			if im.Labels[seen] != cls {
				t.Fatalf("image %d: label %d, want %d", seen, im.Labels[seen], cls)
			}
			src, got := imageBytes(big, j), imageBytes(im, seen)
			for y := range 28 {
				for x := range 28 {
					s := int(src[2*y*56+2*x]) + int(src[2*y*56+2*x+1]) + int(src[(2*y+1)*56+2*x]) + int(src[(2*y+1)*56+2*x+1])
					if d := 4*int(got[y*28+x]) - s; d < -4 || d > 4 {
						t.Fatalf("image %d pixel (%d,%d) = %d, want the 2×2 mean %.2f", seen, y, x, got[y*28+x], float64(s)/4)
					}
				}
			}
			seen++
		}
	}
	r := trainImages(t, im, imageConfig("twofold", 2, 32))
	checkRun(t, r, im.N, true)
}

// An image run stopped after one epoch and resumed for a second matches a straight
// two-epoch run bit for bit: augmentation and shuffles are drawn from generators
// re-seeded per epoch, so nothing depends on the process's history. That holds in
// bf16 with channels-last weights too, whose layout the checkpoint does not keep.
// On CUDA it takes --deterministic: an H100 without it ended 2e-5 apart (cuDNN's
// fastest weight gradients sum in a varying order).
func TestImageResumeIsExact(t *testing.T) {
	im := mnistSet(t, 128)
	src := imageSource(t, im)
	for _, comp := range []model.Compute{{Precision: "fp32"}, {Precision: "bf16", ChannelsLast: true}} {
		t.Run(fmt.Sprintf("%s-cl=%v", comp.Precision, comp.ChannelsLast), func(t *testing.T) {
			cfg := imageConfig("twofold", 2, 32)
			cfg.Precision, cfg.ChannelsLast = comp.Precision, comp.ChannelsLast
			cfg.Deterministic = true
			checkImageResume(t, im, cfg, src)
		})
	}
}

func checkImageResume(t *testing.T, im *data.Images, cfg Config, src Source) {
	straight, resumed := straightAndResumed(t, cfg, src, 1)
	if got, want := resumed.Net.Compute(), cfg.Compute(); got != want {
		t.Fatalf("resumed run computes %+v, want %+v as saved", got, want)
	}
	if cfg.ChannelsLast && !resumed.Net.FirstConv().ChannelsLast() {
		t.Fatal("resumed run's conv weights are not channels-last")
	}

	s := torch.NoGrad()
	defer s.Close()
	type tensorSet struct {
		what string
		a, b []torch.Named
	}
	sets := []tensorSet{
		{"parameter", straight.Net.Params(), resumed.Net.Params()},
		{"buffer", straight.Net.Buffers(), resumed.Net.Buffers()},
	}
	steps := int64(2 * (im.N / cfg.BatchSize))
	for _, o := range []struct {
		name string
		a, b *torch.Adam
	}{{"optA", straight.optA, resumed.optA}, {"optB", straight.optB, resumed.optB}} {
		var ma, mb []torch.Named
		for i := 0; i < o.a.Len(); i++ {
			m, v, n := o.a.State(s, i)
			m2, v2, n2 := o.b.State(s, i)
			if n != steps || n2 != steps {
				t.Fatalf("%s state %d: %d steps straight, %d resumed, want %d", o.name, i, n, n2, steps)
			}
			name := fmt.Sprintf("%s.%d", o.name, i)
			ma = append(ma, torch.Named{Name: name + ".exp_avg", Tensor: m}, torch.Named{Name: name + ".exp_avg_sq", Tensor: v})
			mb = append(mb, torch.Named{Name: name + ".exp_avg", Tensor: m2}, torch.Named{Name: name + ".exp_avg_sq", Tensor: v2})
		}
		sets = append(sets, tensorSet{"optimiser moment", ma, mb})
	}
	for _, set := range sets {
		sameBits(t, s, set.what, "resumed", set.a, set.b)
	}
	sameLosses(t, straight, resumed, 2, "resumed")
	if fmt.Sprint(straight.History[1].Sizes) != fmt.Sprint(resumed.History[1].Sizes) {
		t.Errorf("cluster sizes %v straight vs %v resumed", straight.History[1].Sizes, resumed.History[1].Sizes)
	}
}

// sameBits fails t unless the tensors of a and b (a run trained straight through, and
// one trained as how says) hold the same values to the bit.
func sameBits(t *testing.T, s *torch.Scope, what, how string, a, b []torch.Named) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d %ss straight, %d %s", len(a), what, len(b), how)
	}
	for i := range a {
		x, y := s.Float32s(a[i].Tensor), s.Float32s(b[i].Tensor)
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if len(x) == 0 || len(x) != len(y) {
			t.Fatalf("%s %s: %d vs %d values", what, a[i].Name, len(x), len(y))
		}
		for k := range x {
			if math.Float32bits(x[k]) != math.Float32bits(y[k]) {
				t.Fatalf("%s %s[%d]: %v straight vs %v %s", what, a[i].Name, k, x[k], y[k], how)
			}
		}
	}
}

// sameLosses fails t unless run b trained epochs epochs (as how says) with the losses
// of run a, trained straight through.
func sameLosses(t *testing.T, a, b *Run, epochs int, how string) {
	t.Helper()
	if len(a.History) != epochs || len(b.History) != epochs {
		t.Fatalf("%d epochs of history straight, %d %s; want %d", len(a.History), len(b.History), how, epochs)
	}
	for e := range epochs {
		x, y := a.History[e], b.History[e]
		if x.Loss != y.Loss || x.LossKL != y.LossKL {
			t.Errorf("epoch %d: loss %v/%v straight vs %v/%v %s", e+1, x.Loss, x.LossKL, y.Loss, y.LossKL, how)
		}
	}
}

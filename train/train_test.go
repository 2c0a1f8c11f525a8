package train

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"emclust/data"
	"emclust/torch"
)

func digitsSource(t testing.TB) *VectorSource { return digitsSourceOn(t, testDevice) }

func digitsSourceOn(t testing.TB, dev torch.Device) *VectorSource {
	t.Helper()
	v, err := data.Digits()
	if err != nil {
		t.Fatal(err)
	}
	v.Standardize()
	src, err := NewVectorSource(v, dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	return src
}

func newRun(t *testing.T, cfg Config, src Source, dir string) *Run {
	t.Helper()
	return newRunOn(t, cfg, src, dir, testDevice)
}

func newRunOn(t *testing.T, cfg Config, src Source, dir string, dev torch.Device) *Run {
	t.Helper()
	r, err := New(cfg, src, dev, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// The paper's vector setting learns the digits: the loss falls, no cluster is empty,
// and the clustering agrees with the labels far beyond chance (ACC 0.1).
func TestTrainDigitsLearns(t *testing.T) {
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	cfg.Epochs = 8
	r := newRun(t, cfg, digitsSource(t), t.TempDir())
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	first, last := r.History[0], r.History[len(r.History)-1]
	if !(last.Loss < first.Loss) {
		t.Errorf("loss did not fall: %v → %v", first.Loss, last.Loss)
	}
	if last.Empty != 0 {
		t.Errorf("%d empty clusters: %v", last.Empty, last.Sizes)
	}
	if last.ACC == nil || last.NMI == nil {
		t.Fatal("the last epoch was not scored")
	}
	if *last.ACC < 0.45 || *last.NMI < 0.45 {
		t.Errorf("ACC %v NMI %v: not learning", *last.ACC, *last.NMI)
	}
	// Normalised relevances keep the batch mean of h at ≈ 0.5 (Table avg_dist).
	for j, h := range last.HMean {
		if h < 0.45 || h > 0.55 {
			t.Errorf("cluster %d: mean h %v, want ≈ 0.5", j, h)
		}
	}
	for _, f := range []string{"config.json", "metrics.jsonl", "checkpoint.safetensors"} {
		if _, err := os.Stat(filepath.Join(r.Dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// Without the normalisation one cluster takes (nearly) everything: the paper's ablation.
func TestNoNormCollapses(t *testing.T) {
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	cfg.Epochs = 8
	cfg.Norm = false
	r := newRun(t, cfg, digitsSource(t), "")
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := r.History[len(r.History)-1]
	big := 0
	for _, n := range last.Sizes {
		big = max(big, n)
	}
	if big < 1797*8/10 {
		t.Errorf("largest cluster %d of 1797: expected collapse without normalisation (sizes %v)", big, last.Sizes)
	}
}

// A run stopped after 2 epochs and resumed to 4 matches a straight 4-epoch run bit
// for bit: weights, optimiser moments and history.
func TestResumeIsExact(t *testing.T) {
	src := digitsSource(t)
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	cfg.Epochs = 4
	cfg.Prior = "learned"
	straight, resumed := straightAndResumed(t, cfg, src, 2)
	s := torch.NoGrad()
	defer s.Close()
	a, b := straight.Net.Params(), resumed.Net.Params()
	for i := range a {
		x, y := s.Float32s(a[i].Tensor), s.Float32s(b[i].Tensor)
		for k := range x {
			if x[k] != y[k] {
				t.Fatalf("%s[%d]: %v straight vs %v resumed", a[i].Name, k, x[k], y[k])
			}
		}
	}
	if len(resumed.History) != 4 || resumed.History[3].Loss != straight.History[3].Loss {
		t.Fatalf("history differs: %+v vs %+v", resumed.History, straight.History)
	}
	px, py := s.Float32s(straight.Prior()), s.Float32s(resumed.Prior())
	for j := range px {
		if px[j] != py[j] {
			t.Fatalf("learned prior differs: %v vs %v", px, py)
		}
	}
}

// straightAndResumed trains cfg.Epochs epochs in one go, and again as split epochs
// then a resume from the checkpoint for the rest, for comparing the two.
func straightAndResumed(t *testing.T, cfg Config, src Source, split int) (straight, resumed *Run) {
	t.Helper()
	// OpenMP's thread count is the calling OS thread's, and a test's goroutine may
	// move to a thread another test left at another count: the two runs must sum
	// their gradients on one count to agree to the bit.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := torch.SetNumThreads(runtime.NumCPU()); err != nil {
		t.Fatal(err)
	}
	straight = newRun(t, cfg, src, t.TempDir())
	if err := straight.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	half := cfg
	half.Epochs = split
	first := newRun(t, half, src, dir)
	if err := first.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	first.Close()
	f, saved, _, err := ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	saved.Epochs = cfg.Epochs
	resumed = newRun(t, *saved, src, dir)
	if err := resumed.Restore(f); err != nil {
		t.Fatal(err)
	}
	if resumed.EpochsDone() != split {
		t.Fatalf("resumed at epoch %d, want %d", resumed.EpochsDone(), split)
	}
	if err := resumed.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	return straight, resumed
}

func rssBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

type countingProgress struct {
	t         *testing.T
	live      []int64
	rss       []int64
	stepsSeen int
}

func (c *countingProgress) Start(epoch, epochs, steps int) {}
func (c *countingProgress) Step(done int, loss float64, read bool) {
	c.stepsSeen++
}
func (c *countingProgress) End(m EpochMetrics) {
	c.live = append(c.live, torch.LiveTensors())
	c.rss = append(c.rss, rssBytes(c.t))
}

// Thousands of steps keep the number of live tensors constant and RSS flat: every
// step's temporaries are freed when its scope closes, not by the GC.
func TestMemoryStaysFlat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	v := &data.Vectors{N: 128 * 100, D: 16, Source: "random"}
	v.X = make([]float32, v.N*v.D)
	for i := range v.X {
		v.X[i] = float32(rng.NormFloat64())
	}
	src, err := NewVectorSource(v, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	// With a folder the run also keeps the chosen epoch's tensors and checkpoints.
	for _, dir := range []string{"", t.TempDir()} {
		cfg := VectorDefaults()
		cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
		cfg.Epochs = 30                   // 3000 steps
		cfg.EvalEvery = 1
		cfg.Prior = "learned"
		r := newRun(t, cfg, src, dir)
		p := &countingProgress{t: t}
		r.Progress = p
		if err := r.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		if p.stepsSeen != 3000 {
			t.Fatalf("folder %q: %d steps, want 3000", dir, p.stepsSeen)
		}
		for i, n := range p.live {
			if n != p.live[0] {
				t.Fatalf("folder %q: live tensors after epoch %d: %d, after epoch 1: %d (leak)", dir, i+1, n, p.live[0])
			}
		}
		// Allow the allocator some slack, but not growth per step: a leak of one 128×16
		// float tensor per step alone would add 24 MB over these 2900 steps.
		if grow := p.rss[len(p.rss)-1] - p.rss[2]; grow > 8<<20 {
			t.Fatalf("folder %q: RSS grew by %d MB from epoch 3 to 30", dir, grow>>20)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	src := digitsSource(t)
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.K = 5000 }, "larger than the 1797 rows"},
		{func(c *Config) { c.K = 0 }, "at least 2 clusters"},
		{func(c *Config) { c.K = 1 }, "--k 1: want at least 2"},
		{func(c *Config) { c.Objective = "kmeans" }, "objective"},
		{func(c *Config) { c.BatchSize = 1 }, "--batch-size"},
		{func(c *Config) { c.Gamma = "-2" }, "gamma"},
		{func(c *Config) { c.Arch = "mnist" }, "arch mnist"},
		{func(c *Config) { c.Prior = "zipf" }, "prior"},
		{func(c *Config) { c.MinSteps, c.MaxSteps = 1000, 999 }, "max steps 999"},
		{func(c *Config) { c.MaxSteps = -1 }, "max steps -1"},
		// Was an integer divide by zero: the batch cut to a multiple of the ranks was 0.
		{func(c *Config) { c.WorldSize = 2000 }, "1797 rows of data make no batch for 2000 processes"},
	} {
		cfg := VectorDefaults()
		cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
		tc.mod(&cfg)
		_, err := New(cfg, src, testDevice, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want error with %q, got %v", tc.want, err)
		}
	}
	// Objectives that augment need images.
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	cfg.Objective = "twofold"
	if _, err := New(cfg, src, testDevice, ""); err == nil || !strings.Contains(err.Error(), "needs images") {
		t.Errorf("twofold on vectors: %v", err)
	}
}

func TestRestoreRejectsOtherModel(t *testing.T) {
	src := digitsSource(t)
	dir := t.TempDir()
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	cfg.Epochs = 1
	r := newRun(t, cfg, src, dir)
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	f, _, _, err := ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.K = 7
	o := newRun(t, other, src, "")
	if err := o.Restore(f); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("restore into K=7: %v", err)
	}
}

// Images kept on the host and copied per batch train exactly like images on the device.
func TestHostImageSourceMatchesDevice(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	im := &data.Images{N: 128, C: 1, H: 28, W: 28, Source: "random"}
	im.Pix = make([]uint8, im.N*28*28)
	for i := range im.Pix {
		im.Pix[i] = uint8(rng.IntN(256))
	}
	dev, err := NewImageSource(im, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	host, err := NewHostImageSource(im, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	cfg := ImageDefaults()
	cfg.Epochs, cfg.BatchSize, cfg.K, cfg.Objective = 1, 64, 4, "em-aug"
	// Both runs on one OS thread and one thread count, to sum alike (OpenMP's count
	// is the OS thread's; see straightAndResumed). Unlocked, they once differed in
	// the seventh digit.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := torch.SetNumThreads(runtime.NumCPU()); err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for _, src := range []Source{dev, host} {
		r := newRun(t, cfg, src, "")
		if err := r.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		losses = append(losses, r.History[0].Loss)
	}
	if losses[0] != losses[1] {
		t.Fatalf("host-resident loss %v differs from device-resident %v", losses[1], losses[0])
	}
}

// The supervised mode learns labels through the 2-unit bottleneck of §8.1's network.
func TestSupervisedBottleneck(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Two classes: bright top half or bright bottom half.
	im := &data.Images{N: 256, C: 1, H: 28, W: 28, Source: "halves"}
	im.Pix = make([]uint8, im.N*28*28)
	im.Labels = make([]int, im.N)
	for i := 0; i < im.N; i++ {
		im.Labels[i] = i % 2
		for y := 0; y < 28; y++ {
			for x := 0; x < 28; x++ {
				v := rng.IntN(40)
				if (y < 14) == (i%2 == 0) {
					v += 180
				}
				im.Pix[i*784+y*28+x] = uint8(v)
			}
		}
	}
	src, err := NewImageSource(im, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg := ImageDefaults()
	cfg.Arch, cfg.Objective, cfg.K, cfg.Epochs, cfg.BatchSize, cfg.LR = "mnist2d", "supervised", 2, 3, 64, 1e-3
	r := newRun(t, cfg, src, "")
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := r.History[len(r.History)-1]
	if *last.ACC < 0.95 {
		t.Fatalf("supervised ACC %v on two trivially separable classes", *last.ACC)
	}
	s := torch.NoGrad()
	defer s.Close()
	x, _ := src.Batch(s, s.Arange(4, torch.Int64, testDevice), nil)
	if sh := r.Net.Bottleneck(s, x).Shape(); sh[1] != 2 {
		t.Fatalf("bottleneck shape %v", sh)
	}
	// Without labels, supervised training is refused.
	im.Labels = nil
	nolab, _ := NewImageSource(im, testDevice)
	defer nolab.Close()
	if _, err := New(cfg, nolab, testDevice, ""); err == nil || !strings.Contains(err.Error(), "needs labels") {
		t.Fatalf("supervised without labels: %v", err)
	}
}

// A step too small to share runs on one thread when the config leaves the count to
// emclust; an explicit count, and a large step, keep every thread.
func TestOneThreadForSmallSteps(t *testing.T) {
	// OpenMP keeps the thread count per OS thread; the binary makes every libtorch
	// call from its main thread, and this test from one thread too.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := torch.SetNumThreads(2); err != nil {
		t.Fatal(err)
	}
	images, err := NewImageSource(synthImages(13, 256, 1, 28), torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer images.Close()
	explicit := VectorDefaults()
	explicit.MinSteps, explicit.MaxSteps = 0, 0 // the epochs as set
	explicit.Threads = 2
	for _, tc := range []struct {
		name   string
		cfg    Config
		src    Source
		during int
	}{
		{"digits mlp, auto", VectorDefaults(), digitsSourceOn(t, torch.CPU), 1},
		{"digits mlp, --threads 2", explicit, digitsSourceOn(t, torch.CPU), 2},
		{"mnist cnn, auto", imageConfig("em", 1, 128), images, 2},
	} {
		r, err := New(tc.cfg, tc.src, torch.CPU, "")
		if err != nil {
			t.Fatal(err)
		}
		restore := r.oneThreadForSmallSteps()
		during := torch.NumThreads()
		restore()
		r.Close()
		if during != tc.during || torch.NumThreads() != 2 {
			t.Errorf("%s: %d threads during the steps, %d after; want %d, then 2", tc.name, during, torch.NumThreads(), tc.during)
		}
	}
	// Train keeps the one thread through its evaluations too, instead of setting the
	// count anew around each (which started a thread each time).
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps, cfg.Epochs, cfg.EvalEvery = 0, 0, 3, 1
	r := newRunOn(t, cfg, digitsSourceOn(t, torch.CPU), "", torch.CPU)
	p := &threadsSeen{count: torch.NumThreads}
	r.Progress = p
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.atStart, []int{1, 1, 1}) || !slices.Equal(p.afterEval, []int{1, 1, 1}) || torch.NumThreads() != 2 {
		t.Errorf("threads at each epoch's start %v, after its evaluation %v, after Train %d; want 1s, 1s, then 2", p.atStart, p.afterEval, torch.NumThreads())
	}
}

// threadsSeen records a thread count as each epoch starts and after it is evaluated
// (End follows the evaluation).
type threadsSeen struct {
	count              func() int
	atStart, afterEval []int
}

func (p *threadsSeen) Start(int, int, int)     { p.atStart = append(p.atStart, p.count()) }
func (p *threadsSeen) Step(int, float64, bool) {}
func (p *threadsSeen) End(EpochMetrics)        { p.afterEval = append(p.afterEval, p.count()) }

// twoThreads keeps the test on its OS thread with libtorch's count at 2, until the
// test ends, and returns OpenBLAS's count then (pool) and once set to 1 (one: the
// pool's count where OpenBLAS has no pool of its own).
func twoThreads(t *testing.T) (pool, one int) {
	runtime.LockOSThread()
	prev := torch.NumThreads()
	t.Cleanup(func() {
		torch.SetNumThreads(prev)
		runtime.UnlockOSThread()
	})
	if err := torch.SetNumThreads(2); err != nil {
		t.Fatal(err)
	}
	pool = torch.BLASThreads()
	torch.SetBLASThreads(1)
	one = torch.BLASThreads()
	torch.SetBLASThreads(pool)
	return pool, one
}

// A CNN trains and is evaluated with OpenBLAS on one thread, and its count is
// restored after; libtorch's count is kept, and so is OpenBLAS's for an MLP. Where
// OpenBLAS has no pool of its own (MKL, a serial or an OpenMP OpenBLAS), nothing
// changes.
func TestOneBLASThreadForConvolutions(t *testing.T) {
	pool, want := twoThreads(t)
	if want != 1 {
		t.Logf("OpenBLAS's count is %d with libtorch's at 2: no pool of its own to leave alone", pool)
	}
	images, err := NewImageSource(synthImages(13, 256, 1, 28), torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer images.Close()
	cfg := imageConfig("em", 2, 128)
	cfg.EvalEvery = 1
	r := newRunOn(t, cfg, images, "", torch.CPU)
	// libtorch's own threads stay, seen beside OpenBLAS's: the convolutions use them.
	var libtorch []int
	p := &threadsSeen{count: func() int {
		libtorch = append(libtorch, torch.NumThreads())
		return torch.BLASThreads()
	}}
	r.Progress = p
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.atStart, []int{want, want}) || !slices.Equal(p.afterEval, []int{want, want}) || torch.BLASThreads() != pool {
		t.Errorf("OpenBLAS threads at each epoch's start %v, after its evaluation %v, after Train %d; want %d, %d, then %d",
			p.atStart, p.afterEval, torch.BLASThreads(), want, want, pool)
	}
	if !slices.Equal(libtorch, []int{2, 2, 2, 2}) {
		t.Errorf("libtorch threads at each epoch's start and end %v, want 2 throughout", libtorch)
	}

	mlp := VectorDefaults()
	mlp.MinSteps, mlp.MaxSteps, mlp.Epochs, mlp.Threads = 0, 0, 1, 2
	r = newRunOn(t, mlp, digitsSourceOn(t, torch.CPU), "", torch.CPU)
	p = &threadsSeen{count: torch.BLASThreads}
	r.Progress = p
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.atStart, []int{pool}) {
		t.Errorf("MLP: OpenBLAS threads at the epoch's start %v, want %d", p.atStart, pool)
	}
}

// An MLP whose chunks are small products predicts with OpenBLAS on one thread (its
// pool slowed them), a wide one with its pool; the count is restored after.
func TestPredictBLASThreads(t *testing.T) {
	pool, one := twoThreads(t)
	src := digitsSourceOn(t, torch.CPU)
	for _, tc := range []struct {
		hidden []int
		want   int
	}{{[]int{32, 32}, one}, {[]int{1024, 1024}, pool}} {
		cfg := VectorDefaults()
		cfg.Hidden = tc.hidden
		r := newRunOn(t, cfg, src, "", torch.CPU)
		var seen []int
		if _, err := PredictProgress(r.Net, src, torch.CPU, nil, func(int) { seen = append(seen, torch.BLASThreads()) }); err != nil {
			t.Fatal(err)
		}
		if len(seen) != 2 || seen[0] != tc.want || seen[1] != tc.want || torch.BLASThreads() != pool {
			t.Errorf("hidden %v: OpenBLAS threads after each chunk %v, after %d; want %d, then %d", tc.hidden, seen, torch.BLASThreads(), tc.want, pool)
		}
	}
}

// The criteria of PredictWithCriteria match the formulas of Criteria computed here in
// float64 from the eval-mode scores of every row at once (Predict sums over chunks).
func TestPredictCriteria(t *testing.T) {
	src := digitsSource(t)
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	cfg.Epochs, cfg.EvalEvery = 1, 0
	r := newRun(t, cfg, src, "")
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	pred, err := PredictWithCriteria(r.Net, src, r.Dev, r.Prior(), r.Cfg.GammaVal)
	if err != nil {
		t.Fatal(err)
	}
	s := torch.NoGrad()
	defer s.Close()
	x, _ := src.Batch(s, s.Arange(src.Len(), torch.Int64, src.IndexDevice()), nil)
	a := s.Float32s(r.Net.Forward(s, x, false))
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	n, k, g := src.Len(), r.Cfg.K, r.Cfg.GammaVal
	var em, ll, maxP, ent float64
	sizes := make([]float64, k)
	for i := range n {
		row, p := a[i*k:(i+1)*k], pred.Posterior[i*k:(i+1)*k]
		var mix float64
		best := 0
		for j := range k {
			h := 1 / (1 + math.Exp(-float64(row[j])/g))
			em -= float64(p[j]) * math.Log(h)
			mix += h / float64(k)
			if p[j] > p[best] {
				best = j
			}
		}
		ll += math.Log(mix)
		maxP += float64(p[best])
		sizes[pred.Cluster[i]]++
	}
	for _, c := range sizes {
		if c > 0 {
			ent -= c / float64(n) * math.Log(c/float64(n))
		}
	}
	got := pred.Criteria
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"em_objective", got.EMObjective, em / float64(n)},
		{"log_likelihood", got.LogLikelihood, ll / float64(n)},
		{"max_posterior", got.MaxPosterior, maxP / float64(n)},
		{"size_entropy", got.SizeEntropy, ent / math.Log(float64(k))},
	} {
		if math.Abs(c.got-c.want) > 1e-4*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%s = %.6f, want %.6f", c.name, c.got, c.want)
		}
	}
	if got.SizeEntropy <= 0 || got.SizeEntropy > 1+1e-9 || got.MaxPosterior < 1/float64(k) || got.MaxPosterior > 1 {
		t.Errorf("criteria out of range: %+v", got)
	}
	if _, err := PredictWithCriteria(r.Net, src, r.Dev, r.Prior(), 0); err == nil {
		t.Error("γ = 0 was accepted")
	}

	// An evaluation during training finds the same clusters and criteria, and leaves
	// the posteriors, K floats a row, on the device.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	heads, err := r.predictClusters()
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if ev := heads[0]; ev.Posterior != nil || !slices.Equal(ev.Cluster, pred.Cluster) || *ev.Criteria != *pred.Criteria {
		t.Errorf("evaluation: %d posteriors, clusters equal %v, criteria %+v; want none, true, %+v", len(ev.Posterior), slices.Equal(ev.Cluster, pred.Cluster), *ev.Criteria, *pred.Criteria)
	}
	if got, posteriors := after.TotalAlloc-before.TotalAlloc, uint64(n*k*4); got >= posteriors {
		t.Errorf("evaluation allocated %d bytes on the host, the posteriors alone take %d", got, posteriors)
	}
}

func TestEpochsFor(t *testing.T) {
	for _, tc := range []struct{ rows, batch, epochs, minSteps, maxSteps, want int }{
		{1797, 128, 30, 1000, 0, 72},      // 14 steps an epoch: ⌈1000/14⌉
		{1797, 128, 30, 1000, 5000, 72},   // the maximum is far
		{150, 128, 30, 1000, 5000, 1000},  // the batch is clamped to the 150 rows: 1 step
		{1797, 128, 30, 0, 0, 30},         // neither
		{70000, 128, 30, 1000, 0, 30},     // 546 steps an epoch already
		{70000, 128, 30, 1000, 5000, 10},  // ⌈5000/546⌉
		{6435, 128, 30, 1000, 5000, 30},   // 50 steps an epoch: 1500 in all
		{22143, 128, 30, 1000, 5000, 30},  // 172 steps an epoch: ⌈5000/172⌉ = 30
		{22144, 128, 30, 1000, 5000, 29},  // 173: the first table lowered
		{500000, 128, 30, 1000, 5000, 2},  // 3906 steps an epoch
		{5000000, 128, 30, 1000, 5000, 1}, // more than the maximum in one epoch: one
		{70000, 128, 5, 1000, 5000, 5},    // below the maximum already
		{569, 128, 300, 1000, 0, 300},     // --epochs above the minimum stays
	} {
		cfg := Config{Epochs: tc.epochs, MinSteps: tc.minSteps, MaxSteps: tc.maxSteps, BatchSize: tc.batch}
		if got := cfg.EpochsFor(tc.rows); got != tc.want {
			t.Errorf("%d rows, batch %d, %d epochs, %d to %d steps: %d epochs, want %d", tc.rows, tc.batch, tc.epochs, tc.minSteps, tc.maxSteps, got, tc.want)
		}
		cfg.SetEpochs(tc.epochs)
		if got := cfg.EpochsFor(tc.rows); got != tc.epochs {
			t.Errorf("%d rows, %d epochs set: %d epochs", tc.rows, tc.epochs, got)
		}
	}
}

// New lowers the epochs of a large table to about MaxSteps steps, and the config it
// keeps (and saves) resolves to the same epochs again, as a resumed run's does.
func TestNewLowersEpochs(t *testing.T) {
	n, d := 4096, 3
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(i%7) - float32(i%5)
	}
	src, err := NewVectorSource(&data.Vectors{X: x, N: n, D: d, Source: "rows"}, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg := VectorDefaults()
	cfg.K, cfg.Restarts, cfg.HiddenAuto, cfg.MinSteps, cfg.MaxSteps = 3, 1, false, 10, 100 // 32 steps an epoch
	r := newRun(t, cfg, src, "")
	if got := r.Cfg.Epochs; got != 4 {
		t.Errorf("30 epochs of 32 steps, at most 100 steps: %d epochs, want 4", got)
	}
	if again := r.Cfg; again.EpochsFor(n) != again.Epochs {
		t.Errorf("the saved %d epochs resolve again to %d", again.Epochs, again.EpochsFor(n))
	}
}

// lossProgress counts the steps at which the loop read the loss for it.
type lossProgress struct {
	shows bool
	reads int
}

func (p *lossProgress) Start(epoch, epochs, steps int) {}
func (p *lossProgress) Step(done int, loss float64, read bool) {
	if read {
		p.reads++
	}
}
func (p *lossProgress) End(EpochMetrics) {}
func (p *lossProgress) ShowsLoss() bool  { return p.shows }

// The loop waits for the loss only for a progress that shows it: every LogEvery
// steps and at an epoch's last.
func TestLossReadOnlyWhenShown(t *testing.T) {
	src := digitsSource(t)
	for _, tc := range []struct {
		shows bool
		want  int
	}{{true, 2}, {false, 0}} {
		cfg := VectorDefaults()
		cfg.MinSteps, cfg.MaxSteps = 0, 0
		cfg.Epochs, cfg.LogEvery = 1, 10 // 14 steps: reads after steps 10 and 14
		r := newRun(t, cfg, src, "")
		p := &lossProgress{shows: tc.shows}
		r.Progress = p
		if err := r.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		if p.reads != tc.want {
			t.Errorf("ShowsLoss %v: the loss was read %d times, want %d", tc.shows, p.reads, tc.want)
		}
	}
}

// cancelAt cancels its context at a step of an epoch.
type cancelAt struct {
	epoch, step int
	cancel      context.CancelFunc
	current     int
}

func (c *cancelAt) Start(epoch, epochs, steps int) { c.current = epoch }
func (c *cancelAt) Step(done int, loss float64, read bool) {
	if c.current == c.epoch && done == c.step {
		c.cancel()
	}
}
func (c *cancelAt) End(EpochMetrics) {}

// An interrupt in the middle of a short epoch lets it finish and saves it, where
// the checkpoint would otherwise hold only the first epoch (one every 10 s); in the
// first epoch, whose length is not known yet, it stops at once as before.
func TestInterruptSavesShortEpochs(t *testing.T) {
	src := digitsSource(t) // 15 steps an epoch, on the device the run trains on
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps, cfg.Epochs, cfg.Restarts = 0, 0, 50, 1
	for _, tc := range []struct{ epoch, done, saved int }{{6, 6, 6}, {1, 0, 0}} {
		dir := t.TempDir()
		r := newRun(t, cfg, src, dir)
		ctx, cancel := context.WithCancel(context.Background())
		r.Progress = &cancelAt{epoch: tc.epoch, step: 3, cancel: cancel}
		err := r.Train(ctx)
		cancel()
		if !errors.Is(err, context.Canceled) || r.EpochsDone() != tc.done || r.EpochsSaved() != tc.saved {
			t.Errorf("cancelled in epoch %d: %v after %d epochs, %d saved; want the cancellation after %d, %d saved", tc.epoch, err, r.EpochsDone(), r.EpochsSaved(), tc.done, tc.saved)
		}
		r.Close()
		if tc.saved == 0 {
			continue
		}
		f, saved, _, err := ReadCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := LoadModel(dir, torch.CPU)
		if err != nil {
			t.Fatal(err)
		}
		if !m.Unfinished() || m.Epoch != tc.saved {
			t.Errorf("the stopped run's model: epoch %d, unfinished %v; want epoch %d, unfinished", m.Epoch, m.Unfinished(), tc.saved)
		}
		m.Close()
		resumed := newRun(t, *saved, src, dir)
		if err := resumed.Restore(f); err != nil || resumed.EpochsDone() != tc.saved || len(resumed.History) != tc.saved {
			t.Errorf("the checkpoint resumes at epoch %d with %d epochs of history (%v), want %d", resumed.EpochsDone(), len(resumed.History), err, tc.saved)
		}
		resumed.Close()
	}
}

// A save that fails as the run stops is reported with the stop, which stays what
// errors.Is finds; the checkpoint before it stays.
func TestInterruptSaveFails(t *testing.T) {
	src := digitsSource(t)
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps, cfg.Epochs, cfg.Restarts = 0, 0, 50, 1
	dir := t.TempDir()
	r := newRun(t, cfg, src, dir)
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Progress = &cancelAt{epoch: 6, step: 3, cancel: func() {
		// A folder where the checkpoint goes: its rename fails.
		ckpt := filepath.Join(dir, checkpointName)
		os.Remove(ckpt)
		os.MkdirAll(filepath.Join(ckpt, "x"), 0o755)
		cancel()
	}}
	err := r.Train(ctx)
	var se *StopSaveError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &se) || se.Epoch != 6 || r.EpochsSaved() != 1 {
		t.Errorf("got %v (%T), %d epochs saved; want the stop and the failed save of epoch 6, 1 epoch saved", err, err, r.EpochsSaved())
	}
}

// resolveEpochs clamps a batch above the rows to a multiple of the processes, and
// takes a config that leaves the processes unset as one (TrainRestarts' callers may).
func TestResolveEpochsBatch(t *testing.T) {
	for _, tc := range []struct{ rows, batch, world, want int }{
		{150, 128, 1, 128},
		{100, 128, 1, 100},
		{100, 128, 0, 100}, // was a division by zero
		{100, 128, 3, 99},
	} {
		cfg := Config{Epochs: 30, BatchSize: tc.batch, WorldSize: tc.world}
		resolveEpochs(&cfg, tc.rows)
		if cfg.BatchSize != tc.want {
			t.Errorf("%d rows, batch %d, %d processes: batch %d, want %d", tc.rows, tc.batch, tc.world, cfg.BatchSize, tc.want)
		}
	}
}

// A resumed run holds its checkpoint's tensors once, in libtorch: Restore lets go of
// the copy read from the file, which would otherwise stay for the whole run.
func TestRestoreReleasesCheckpoint(t *testing.T) {
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps, cfg.Epochs = 0, 0, 1
	cfg.K, cfg.Hidden, cfg.HiddenAuto = 10, []int{1500, 1500}, false // 2.37 M weights
	src := digitsSource(t)
	dir := t.TempDir()
	first := newRun(t, cfg, src, dir)
	if err := first.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	first.Close()
	f, saved, _, err := ReadCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, checkpointName))
	if err != nil {
		t.Fatal(err)
	}
	saved.Epochs = 2
	resumed := newRun(t, *saved, src, dir)
	if err := resumed.Restore(f); err != nil {
		t.Fatal(err)
	}
	var m runtime.MemStats
	runtime.GC() // what is live, not the garbage of training
	runtime.ReadMemStats(&m)
	if m.HeapInuse > uint64(st.Size())/2 || f.Held() != 0 {
		t.Errorf("after Restore the Go heap holds %d bytes in use and the file %d of its data, the checkpoint being %d", m.HeapInuse, f.Held(), st.Size())
	}
	s := torch.NoGrad()
	defer s.Close()
	if s.LoadTensor(f, "model.fc0.weight", torch.CPU); s.Err() == nil || !strings.Contains(s.Err().Error(), "released") {
		t.Errorf("a tensor loaded from the checkpoint after Restore: %v", s.Err())
	}
	if err := resumed.Train(context.Background()); err != nil || resumed.EpochsDone() != 2 {
		t.Fatalf("the resumed run trained to epoch %d: %v", resumed.EpochsDone(), err)
	}
}

// A saved prior is used only as a distribution over the run's K clusters, 1×K
// float32: libtorch would broadcast or cast any other, and cluster by it silently.
func TestCheckPrior(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	f32 := func(v ...float32) *torch.Tensor { return s.FromFloat32(v, []int{1, len(v)}, torch.CPU) }
	for _, tc := range []struct {
		name  string
		prior *torch.Tensor
		want  string // "" for accepted
	}{
		{"a distribution", f32(0.2, 0.3, 0.5), ""},
		{"an empty cluster's", f32(0, 0.5, 0.5), ""},
		{"of one dimension", s.FromFloat32([]float32{0.2, 0.3, 0.5}, []int{3}, torch.CPU), "shape [3]"},
		{"transposed", s.FromFloat32([]float32{0.2, 0.3, 0.5}, []int{3, 1}, torch.CPU), "shape [3 1]"},
		{"of other K", f32(0.5, 0.5), "shape [1 2]"},
		{"float64", s.FromFloat64([]float64{0.2, 0.3, 0.5}, []int{1, 3}, torch.CPU), "float64"},
		{"negative", f32(-0.5, 1, 0.5), "cluster 0 is -0.5"},
		{"NaN", f32(0.5, nan, 0.5), "cluster 1 is NaN"},
		{"infinite", f32(0.5, 0.5, inf), "cluster 2 is +Inf"},
		{"zero", f32(0, 0, 0), "sums to 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ck.safetensors")
			if err := torch.SaveSafetensors(path, []torch.Named{{Name: "prior", Tensor: tc.prior}}, nil); err != nil {
				t.Fatal(err)
			}
			f, err := torch.ReadSafetensors(path)
			if err != nil {
				t.Fatal(err)
			}
			err = checkPrior(f, "prior", 3)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path)) {
				t.Errorf("checkPrior: %v, want %q", err, tc.want)
			}
		})
	}
}

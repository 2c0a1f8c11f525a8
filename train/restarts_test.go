package train

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"emclust/data"
	"emclust/torch"
)

// The agreement of each clustering with the others, by hand: a relabelled partition
// agrees fully (ARI 1); {0,1,0,1} against {0,0,1,1} scores −1/2 (compare's
// TestSweepAgreement works it out), so the means are (1 − 1/2)/2, the same, and −1/2.
func TestMeanAgreement(t *testing.T) {
	got, err := meanAgreement([][]int{{0, 0, 1, 1}, {1, 1, 0, 0}, {0, 1, 0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{0.25, 0.25, -0.5} {
		if math.Abs(got[i]-want) > 1e-12 {
			t.Errorf("agreement %v, want [0.25 0.25 -0.5]", got)
			break
		}
	}
}

// With two restarts there is no agreement to go by: the max posterior decides, unless
// the silhouette keeps them.
func TestTrainTwoRestarts(t *testing.T) {
	src := digitsSource(t)
	for _, keepBy := range []string{KeepByAgreement, KeepBySilhouette} {
		t.Run(keepBy, func(t *testing.T) {
			cfg := VectorDefaults()
			cfg.MinSteps, cfg.MaxSteps, cfg.HiddenAuto = 0, 0, false
			cfg.Epochs, cfg.EvalEvery, cfg.Seed, cfg.Restarts, cfg.KeepBy = 2, 0, 3, 2, keepBy
			r, all, err := TrainRestarts(context.Background(), cfg, src, testDevice, RestartHooks{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			best := all[0]
			if keepBy == KeepBySilhouette {
				if all[0].Silhouette == nil || all[1].Silhouette == nil {
					t.Fatalf("silhouettes %v %v, want both", all[0].Silhouette, all[1].Silhouette)
				}
				if *all[1].Silhouette > *best.Silhouette {
					best = all[1]
				}
			} else if all[1].Criteria.Better(best.Criteria) {
				best = all[1]
			}
			if r.Cfg.Seed != best.Seed || all[0].Agreement != nil || all[1].Agreement != nil {
				t.Errorf("kept seed %d, want %d; agreements %v %v, want none", r.Cfg.Seed, best.Seed, all[0].Agreement, all[1].Agreement)
			}
		})
	}
}

// TrainRestarts trains one run per seed from cfg.Seed on and keeps the one that
// agrees best with the others, or has the highest silhouette; the kept run is whole
// (its criteria are those of its restart).
func TestTrainRestarts(t *testing.T) {
	for _, keepBy := range []string{KeepByAgreement, KeepBySilhouette} {
		t.Run(keepBy, func(t *testing.T) { testTrainRestarts(t, keepBy) })
	}
}

func testTrainRestarts(t *testing.T, keepBy string) {
	src := digitsSource(t)
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps, cfg.HiddenAuto = 0, 0, false // the epochs as set; the MLP alone
	// On an AMD EPYC the two rules keep different restarts of seeds 5–8.
	cfg.Epochs, cfg.EvalEvery, cfg.Seed, cfg.Restarts, cfg.KeepBy = 2, 1, 5, 4, keepBy
	heard := make([]uint64, 4) // by index: side by side, they end in any order
	reports := 0
	r, all, err := TrainRestarts(context.Background(), cfg, src, testDevice, RestartHooks{Done: func(i int, rs Restart) {
		if reports++; heard[i] != 0 {
			t.Errorf("restart %d reported twice", i)
		}
		heard[i] = rs.Seed
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(all) != 4 || reports != 4 {
		t.Fatalf("%d restarts, %d reported; want 4", len(all), reports)
	}
	score := func(rs Restart) float64 {
		if keepBy == KeepBySilhouette {
			return *rs.Silhouette
		}
		return *rs.Agreement
	}
	best := all[0]
	for i, rs := range all {
		if rs.Seed != cfg.Seed+uint64(i) || heard[i] != rs.Seed {
			t.Errorf("restart %d has seed %d (reported %d), want %d", i, rs.Seed, heard[i], cfg.Seed+uint64(i))
		}
		if rs.Agreement == nil || !(*rs.Agreement >= -1 && *rs.Agreement <= 1) {
			t.Fatalf("restart %d: agreement %v, want a mean ARI", i, rs.Agreement)
		}
		if (rs.Silhouette != nil) != (keepBy == KeepBySilhouette) || (rs.Silhouette != nil && !(*rs.Silhouette >= -1 && *rs.Silhouette <= 1)) {
			t.Fatalf("restart %d: silhouette %v, want one in [-1, 1] only when kept by it", i, rs.Silhouette)
		}
		// TrainRestarts' rule: ties (the same partition twice) go to the max posterior.
		if score(rs) > score(best) || (score(rs) == score(best) && rs.Criteria.Better(best.Criteria)) {
			best = rs
		}
	}
	if r.Cfg.Seed != best.Seed || r.EpochsDone() != 2 {
		t.Fatalf("kept seed %d after %d epochs, want seed %d (%s %.4f) after 2", r.Cfg.Seed, r.EpochsDone(), best.Seed, keepBy, score(best))
	}
	// Only the last epoch was scored; the kept run's config has the interval asked,
	// which a resume trains on with (was 0, the restarts').
	if h := r.History; len(h) != 2 || h[0].ACC != nil || h[1].ACC == nil || r.Cfg.EvalEvery != cfg.EvalEvery {
		t.Errorf("kept run: eval-every %d, %d epochs, scored %v; want %d, 2, the last only", r.Cfg.EvalEvery, len(h), []bool{len(h) > 0 && h[0].ACC != nil, len(h) > 1 && h[1].ACC != nil}, cfg.EvalEvery)
	}
	pred, err := PredictWithCriteria(r.Net, src, r.Dev, r.Prior(), r.Cfg.GammaVal)
	if err != nil {
		t.Fatal(err)
	}
	// Side by side, the restart was scored on one thread; here on the test's: the
	// sums may differ in their last bits.
	if !criteriaNear(*pred.Criteria, best.Criteria) {
		t.Errorf("kept run's criteria %+v, want its restart's %+v", *pred.Criteria, best.Criteria)
	}
	if err := r.Attach(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := r.Attach(t.TempDir()); err == nil {
		t.Error("a run was attached to a second folder")
	}
}

// An interrupt keeps the choice among the restarts that finished: none when the
// first is cut short, the better of two when the third is; and when the second
// network's first restart is, the first network's choice.
func TestTrainRestartsInterrupted(t *testing.T) {
	src := digitsSource(t)
	for _, tc := range []struct {
		name     string
		auto     bool
		cancelAt int // cancel when this many restarts have finished
		kept     int // restarts the kept run was chosen from; 0: none kept
	}{
		{"during the first", false, 0, 0},
		{"during the third", false, 2, 2},
		{"during the linear map's first", true, 2, 2},
	} {
		cfg := VectorDefaults()
		cfg.MinSteps, cfg.MaxSteps, cfg.HiddenAuto = 0, 0, tc.auto
		cfg.Epochs, cfg.Seed, cfg.Restarts = 2, 5, 4
		if tc.auto {
			cfg.Restarts = 2
		}
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancelAt == 0 {
				cancel()
			}
			// One after another, so that which restarts finish is known; side by side:
			// TestRestartsSideBySideInterrupted.
			r, all, err := trainRestarts(ctx, cfg, src, testDevice, RestartHooks{Done: func(i int, _ Restart) {
				if i+1 == tc.cancelAt {
					cancel()
				}
			}}, 0, cfg.Restarts, "") // each alone
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err %v, want the cancellation", err)
			}
			if tc.kept == 0 {
				if r != nil || all != nil {
					t.Fatalf("kept a run (%v, %d restarts) of none finished", r != nil, len(all))
				}
				return
			}
			if r == nil {
				t.Fatal("no run kept")
			}
			defer r.Close()
			best := all[0]
			if all[1].Criteria.Better(best.Criteria) {
				best = all[1]
			}
			if len(all) != tc.kept || r.Cfg.Restarts != tc.kept || r.Cfg.Seed != best.Seed || r.EpochsDone() != cfg.Epochs {
				t.Errorf("kept seed %d of %d restarts (config says %d) after %d epochs; want seed %d of %d after %d",
					r.Cfg.Seed, len(all), r.Cfg.Restarts, r.EpochsDone(), best.Seed, tc.kept, cfg.Epochs)
			}
			if tc.auto && (NetworkName(r.Cfg) != "mlp" || !slices.Equal(r.Cfg.Hidden, cfg.Hidden) || all[0].NetworkSilhouette != nil) {
				t.Errorf("kept the %q network (hidden %v, network silhouette %v); want the MLP, the only one trained, unscored",
					NetworkName(r.Cfg), r.Cfg.Hidden, all[0].NetworkSilhouette)
			}
		})
	}
}

// Restarts trained side by side, each on one thread, are the restarts trained one
// after another on one thread: every network's init draws from its own seed
// (torch.Seeded), and no epoch of vectors draws from libtorch's generator. Each
// restart's arithmetic is the same whatever runs beside it, so every figure matches;
// so it does for restarts in the same stacks. The thread count comes back, and no
// tensor is left behind.
func TestRestartsSideBySide(t *testing.T) {
	runtime.LockOSThread() // the thread count read is this OS thread's
	defer runtime.UnlockOSThread()
	src := digitsSourceOn(t, torch.CPU) // side by side is for the CPU
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0
	cfg.Epochs, cfg.Seed, cfg.Restarts = 1, 5, 8 // of each network: 16 restarts, many inits at once
	threads, live := torch.NumThreads(), torch.LiveTensors()
	runs := cfg.RestartRuns()
	stepsEach := src.Len() / cfg.BatchSize
	for _, stacks := range []int{cfg.Restarts, 3} { // each alone; in stacks of 3, 3 and 2
		var first []Restart
		var firstSeed uint64
		var firstNet string
		for _, workers := range []int{1, 2, 3} {
			var done, total, calls int
			r, all, err := trainRestarts(context.Background(), cfg, src, torch.CPU, RestartHooks{Progress: func(d, n int) {
				if calls++; d < done {
					t.Errorf("%d side by side: steps done fell from %d to %d", workers, done, d)
				}
				done, total = d, n
			}}, workers, stacks, "")
			if err != nil {
				t.Fatal(err)
			}
			seed, net := r.Cfg.Seed, NetworkName(r.Cfg)
			r.Close()
			// An epoch's start, every tenth step and its last: 14 steps make 3 calls.
			wantCalls := runs * (1 + stepsEach/stepsPerReport + 1)
			if done != runs*stepsEach || total != done || calls != wantCalls {
				t.Errorf("%d side by side, %d stacks: last progress %d of %d steps after %d calls; want %d of %d after %d",
					workers, stacks, done, total, calls, runs*stepsEach, runs*stepsEach, wantCalls)
			}
			if n := torch.NumThreads(); n != threads {
				t.Errorf("%d side by side: %d threads after, want %d as before", workers, n, threads)
			}
			if workers == 1 {
				first, firstSeed, firstNet = all, seed, net
				continue
			}
			if seed != firstSeed || net != firstNet || !reflect.DeepEqual(all, first) {
				t.Errorf("%d side by side in %d stacks kept the %s of seed %d, restarts\n%+v;\none at a time the %s of seed %d,\n%+v",
					workers, stacks, net, seed, all, firstNet, firstSeed, first)
			}
		}
	}
	if n := torch.LiveTensors(); n != live {
		t.Errorf("%d live tensors after, %d before", n, live)
	}
}

// An epoch of vectors neither seeds nor draws from libtorch's generator, which
// restarts beside it seed to build their networks.
func TestVectorEpochsLeaveGenerator(t *testing.T) {
	src := digitsSource(t)
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps, cfg.Epochs, cfg.Prior = 0, 0, 2, "learned"
	r := newRun(t, cfg, src, "")
	draw := func() float32 {
		s := torch.NoGrad()
		defer s.Close()
		v := s.Float32s(s.Rand([]int{1}, torch.Float32, torch.CPU))
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		return v[0]
	}
	if err := torch.ManualSeed(7); err != nil {
		t.Fatal(err)
	}
	want := draw()
	if err := torch.ManualSeed(7); err != nil {
		t.Fatal(err)
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := draw(); got != want {
		t.Errorf("after two epochs the generator drew %v, want %v as if they had not run", got, want)
	}
}

// Side by side, an interrupt stops the restarts in training and starts no more; the
// run kept is chosen among those that finished. A restart that fails stops the rest,
// and its error comes back. Neither leaves a tensor behind. Restarts trained stacked
// finish together.
func TestRestartsSideBySideInterrupted(t *testing.T) {
	src := digitsSourceOn(t, torch.CPU)
	live := torch.LiveTensors()
	// ±3e38 in every feature: every restart diverges.
	v := &data.Vectors{N: 40, D: 4, Source: "huge"}
	v.X = make([]float32, v.N*v.D)
	for i := range v.X {
		v.X[i] = float32(3e38 * float64(1-2*(i%2)))
	}
	huge, err := NewVectorSource(v, torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	const workers = 2
	for _, stack := range []int{1, 3} {
		cfg := VectorDefaults()
		cfg.MinSteps, cfg.MaxSteps, cfg.HiddenAuto = 0, 0, false
		cfg.Epochs, cfg.Seed, cfg.Restarts = 2, 5, 3*stack // in three stacks, more than the workers take at first
		ctx, cancel := context.WithCancel(context.Background())
		r, all, err := trainRestarts(ctx, cfg, src, torch.CPU, RestartHooks{Done: func(int, Restart) { cancel() }}, workers, 3, "")
		cancel()
		if !errors.Is(err, context.Canceled) || r == nil {
			t.Fatalf("%d stacked: err %v, kept a run: %v; want the cancellation and a run", stack, err, r != nil)
		}
		// The first to finish cancels; the other in training may finish before it sees it.
		if len(all) < stack || len(all) > workers*stack || len(all)%stack != 0 || r.Cfg.Restarts != len(all) || r.EpochsDone() != cfg.Epochs ||
			!slices.ContainsFunc(all, func(rs Restart) bool { return rs.Seed == r.Cfg.Seed }) {
			t.Errorf("%d stacked: kept seed %d of %d restarts (config says %d) after %d epochs; want one of %d or %d finished, after %d",
				stack, r.Cfg.Seed, len(all), r.Cfg.Restarts, r.EpochsDone(), stack, workers*stack, cfg.Epochs)
		}
		r.Close()

		cfg.K = 2
		r, all, err = trainRestarts(context.Background(), cfg, huge, torch.CPU, RestartHooks{}, workers, 3, "")
		if err == nil || !strings.Contains(err.Error(), "diverged") || !strings.Contains(err.Error(), "(seed ") || r != nil || all != nil {
			t.Fatalf("%d stacked: err %v, kept a run: %v, %d restarts; want divergence of a named restart and nothing", stack, err, r != nil, len(all))
		}
	}
	huge.Close()
	if n := torch.LiveTensors(); n != live {
		t.Errorf("%d live tensors after, %d before", n, live)
	}
}

// Vector restarts on the CPU train side by side, one per thread, unless the user
// set the threads, there is one restart, the steps are large, or the data are images;
// and those of the EM objective with one head in float32 train stacked, in as many
// stacks as give each thread one, of at most maxStack.
func TestRestartsSideBySideWhen(t *testing.T) {
	src := digitsSource(t)
	// The thread count is this OS thread's; the decision reads it, and nothing runs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const threads = 4
	defer torch.SetNumThreads(torch.NumThreads())
	if err := torch.SetNumThreads(threads); err != nil {
		t.Fatal(err)
	}
	cfg := VectorDefaults() // 10 restarts of each of two networks
	for _, tc := range []struct {
		name        string
		set         func(c *Config)
		src         Source
		dev         torch.Device
		want, stack int
	}{
		{"defaults", func(*Config) {}, src, torch.CPU, threads, 5},
		{"three restarts, one network", func(c *Config) { c.Restarts, c.HiddenAuto = 3, false }, src, torch.CPU, 3, 1},
		{"eight restarts, one network", func(c *Config) { c.Restarts, c.HiddenAuto = 8, false }, src, torch.CPU, threads, 2},
		{"one restart", func(c *Config) { c.Restarts = 1 }, src, torch.CPU, 0, 1},
		{"two restarts, one network", func(c *Config) { c.Restarts, c.HiddenAuto = 2, false }, src, torch.CPU, 2, 1},
		{"thirty restarts, one network", func(c *Config) { c.Restarts, c.HiddenAuto = 30, false }, src, torch.CPU, threads, 8},
		{"forty restarts of each network", func(c *Config) { c.Restarts = 40 }, src, torch.CPU, threads, maxStack},
		{"two heads", func(c *Config) { c.Heads = 2 }, src, torch.CPU, threads, 1},
		{"supervised", func(c *Config) { c.Objective = "supervised" }, src, torch.CPU, threads, 1},
		{"bf16", func(c *Config) { c.Precision = "bf16" }, src, torch.CPU, threads, 1},
		{"threads set", func(c *Config) { c.Threads = 1 }, src, torch.CPU, 0, 1},
		{"steps large enough to share", func(c *Config) { c.Hidden = []int{512, 512} }, src, torch.CPU, 0, 1},
		{"on a GPU", func(*Config) {}, src, torch.Device{CUDA: true}, 0, 1},
		{"several processes", func(c *Config) { c.WorldSize = 2 }, src, torch.CPU, 0, 1},
		{"images", func(*Config) {}, &ImageSource{}, torch.CPU, 0, 1},
	} {
		c := cfg
		tc.set(&c)
		if got, stack := RestartsSideBySide(c, tc.src, tc.dev), RestartsStacked(c, tc.src, tc.dev); got != tc.want || stack != tc.stack {
			t.Errorf("%s: %d side by side in stacks of %d, want %d in stacks of %d", tc.name, got, stack, tc.want, tc.stack)
		}
	}
	// One thread: one worker for restarts that stack, none for the others.
	if err := torch.SetNumThreads(1); err != nil {
		t.Fatal(err)
	}
	heads := cfg
	heads.Heads = 2
	if got, stack := RestartsSideBySide(cfg, src, torch.CPU), RestartsStacked(cfg, src, torch.CPU); got != 1 || stack != maxStack {
		t.Errorf("one thread: %d side by side in stacks of %d, want 1 in stacks of %d", got, stack, maxStack)
	}
	if got := RestartsSideBySide(heads, src, torch.CPU); got != 0 {
		t.Errorf("one thread, two heads: %d side by side, want 0", got)
	}
}

// criteriaNear reports whether a and b agree to float32's precision.
func criteriaNear(a, b Criteria) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) <= 1e-6*max(1, math.Abs(x), math.Abs(y)) }
	return near(a.EMObjective, b.EMObjective) && near(a.LogLikelihood, b.LogLikelihood) &&
		near(a.MaxPosterior, b.MaxPosterior) && near(a.SizeEntropy, b.SizeEntropy)
}

func TestNetworkCandidates(t *testing.T) {
	cfg := VectorDefaults()
	cfg.HiddenAuto = false
	if c := NetworkCandidates(cfg); len(c) != 1 || NetworkName(c[0]) != "" || !slices.Equal(c[0].Hidden, cfg.Hidden) || cfg.RestartRuns() != cfg.Restarts {
		t.Errorf("one network: %d candidates, %d runs; want cfg alone, %d runs", len(c), cfg.RestartRuns(), cfg.Restarts)
	}
	cfg.HiddenAuto, cfg.Prior = true, "uniform"
	for _, restarts := range []int{0, 1} {
		cfg.Restarts = restarts
		if c := NetworkCandidates(cfg); len(c) != 1 || !slices.Equal(c[0].Hidden, cfg.Hidden) || cfg.RestartRuns() != 1 {
			t.Errorf("auto, %d restarts: %d candidates, %d runs; want the MLP alone, once", restarts, len(c), cfg.RestartRuns())
		}
	}
	cfg.Restarts, cfg.Heads = 3, 2
	if c := NetworkCandidates(cfg); len(c) != 1 {
		t.Errorf("auto with two heads: %d candidates, want the MLP alone", len(c))
	}
	cfg.Heads = 1
	c := NetworkCandidates(cfg)
	if len(c) != 2 || cfg.RestartRuns() != 6 {
		t.Fatalf("auto: %d candidates, %d runs; want 2 and 6", len(c), cfg.RestartRuns())
	}
	for i, want := range []struct {
		name   string
		hidden []int
		prior  string
	}{{"mlp", cfg.Hidden, "uniform"}, {"linear", nil, "learned"}} {
		got := c[i]
		if NetworkName(got) != want.name || !slices.Equal(got.Hidden, want.hidden) || got.Prior != want.prior {
			t.Errorf("candidate %d: %q, hidden %v, prior %s; want %s, %v, %s",
				i, NetworkName(got), got.Hidden, got.Prior, want.name, want.hidden, want.prior)
		}
	}
}

// With HiddenAuto, TrainRestarts trains the restarts of the MLP and then of the
// linear map with a learned prior, keeps one of each by agreement, and returns the
// one whose clustering has the higher silhouette on the features as trained: raw
// digits here, whose z-scored silhouette would differ.
func TestTrainRestartsChoosesNetwork(t *testing.T) {
	v, err := data.Digits()
	if err != nil {
		t.Fatal(err)
	}
	src, err := NewVectorSource(v, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps, cfg.HiddenAuto = 0, 0, true
	cfg.Epochs, cfg.Seed, cfg.Restarts = 2, 5, 3
	heard := make([]string, 6) // by index
	r, all, err := TrainRestarts(context.Background(), cfg, src, testDevice, RestartHooks{Done: func(i int, rs Restart) {
		if heard[i] != "" {
			t.Errorf("restart %d reported twice", i)
		}
		heard[i] = rs.Network
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if want := []string{"mlp", "mlp", "mlp", "linear", "linear", "linear"}; !slices.Equal(heard, want) || len(all) != len(want) {
		t.Fatalf("restarts reported %v, %d returned; want %v", heard, len(all), want)
	}
	scored := map[string]Restart{}
	for i, rs := range all {
		if want := cfg.Seed + uint64(i%3); rs.Seed != want || rs.Network != heard[i] {
			t.Errorf("restart %d: %s seed %d, want %s seed %d", i, rs.Network, rs.Seed, heard[i], want)
		}
		if rs.NetworkSilhouette != nil {
			if _, twice := scored[rs.Network]; twice {
				t.Errorf("two %s restarts scored for the network choice", rs.Network)
			}
			scored[rs.Network] = rs
		}
	}
	kept := NetworkName(r.Cfg)
	other := map[string]string{"mlp": "linear", "linear": "mlp"}[kept]
	if len(scored) != 2 || scored[kept].Seed != r.Cfg.Seed ||
		betterNetwork([]int{scored[kept].NetworkClusters, scored[other].NetworkClusters}, []float64{*scored[kept].NetworkSilhouette, *scored[other].NetworkSilhouette}, r.Cfg.K) != 0 {
		t.Fatalf("kept the %s of seed %d; network scores %+v; want the better kept", kept, r.Cfg.Seed, scored)
	}
	if used := len(slices.Compact(slices.Sorted(slices.Values(r.recent[len(r.recent)-1])))); scored[kept].NetworkClusters != used {
		t.Errorf("kept run uses %d clusters, recorded %d", used, scored[kept].NetworkClusters)
	}
	if wantPrior := map[string]string{"mlp": "uniform", "linear": "learned"}[kept]; r.Cfg.Prior != wantPrior || (kept == "linear") != (len(r.Cfg.Hidden) == 0) {
		t.Errorf("kept %s with hidden %v and a %s prior", kept, r.Cfg.Hidden, r.Cfg.Prior)
	}
	// The kept run's score is the silhouette on the raw pixels.
	s := torch.NoGrad()
	defer s.Close()
	x32 := s.Float32s(src.Features(s))
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	x := make([]float64, len(x32))
	for i, f := range x32 {
		x[i] = float64(f)
	}
	want := silhouetteByDefinition(x, v.N, v.D, convertInts[int](r.recent[len(r.recent)-1]), false)
	if got := *scored[kept].NetworkSilhouette; math.Abs(got-want) > 1e-5 {
		t.Errorf("kept run's network silhouette %.7f, want %.7f on the features as trained", got, want)
	}
}

// The network kept has the highest silhouette of those using at least 70% of K
// clusters, or where none does, uses the most clusters and of those has the highest
// silhouette; a tie goes to the first, the MLP.
func TestBetterNetwork(t *testing.T) {
	for _, tc := range []struct {
		name string
		used []int
		sil  []float64
		k    int
		want int
	}{
		{"both whole, linear compacter", []int{10, 10}, []float64{0.2, 0.6}, 10, 1},
		{"both whole, MLP compacter", []int{10, 10}, []float64{0.6, 0.2}, 10, 0},
		{"the linear map's collapse on 2-d points", []int{10, 3}, []float64{0.2, 0.6}, 10, 0},
		{"rays: 6 of 10", []int{10, 6}, []float64{0.05, 0.1}, 10, 0},
		{"unequal blobs: 9 of 12", []int{12, 9}, []float64{0.23, 0.47}, 12, 1},
		{"Shuttle: 5 of 7", []int{7, 5}, []float64{0.26, 0.27}, 7, 1},
		{"glass: 4 of 6", []int{6, 4}, []float64{0.09, 0.31}, 6, 0},
		{"at 70%", []int{10, 7}, []float64{0.1, 0.9}, 10, 1},
		{"K=3: none may be empty", []int{3, 2}, []float64{0.1, 0.9}, 3, 0},
		{"the MLP below, the linear map whole", []int{4, 6}, []float64{0.9, 0.1}, 6, 1},
		{"neither: the most used", []int{5, 6}, []float64{0.9, 0.1}, 10, 1},
		{"neither, as many used: the silhouette", []int{4, 4}, []float64{0.1, 0.9}, 10, 1},
		{"a tie", []int{3, 3}, []float64{0.5, 0.5}, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := betterNetwork(tc.used, tc.sil, tc.k); got != tc.want {
				t.Errorf("betterNetwork(%v, %v, %d) = %d, want %d", tc.used, tc.sil, tc.k, got, tc.want)
			}
		})
	}
}

// Whole-run image restarts in a folder survive an interrupt: called again,
// TrainRestartsIn takes the restart that finished from its checkpoint, goes on with
// the one stopped, trains the last, and keeps what one uninterrupted call keeps, to
// the bit. An interrupt keeps no choice: the folders are what the resume goes on from.
func TestTrainRestartsResumed(t *testing.T) {
	im := mnistSet(t, 64)
	src := imageSource(t, im)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := torch.SetNumThreads(runtime.NumCPU()); err != nil {
		t.Fatal(err)
	}
	cfg := imageConfig("em", 3, 32) // 2 steps an epoch, 6 a restart
	cfg.Restarts = 3
	if !RestartsInFolders(cfg, src, testDevice) {
		t.Fatal("image restarts do not train in folders")
	}

	straight, want, err := TrainRestarts(context.Background(), cfg, src, testDevice, RestartHooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer straight.Close()

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := RestartHooks{Progress: func(done, _ int) {
		if done >= 10 { // the second restart's second epoch
			cancel()
		}
	}}
	first, recs, err := TrainRestartsIn(ctx, cfg, src, testDevice, dir, stop)
	if !errors.Is(err, context.Canceled) || first != nil || recs != nil {
		first.closeIfAny()
		t.Fatalf("interrupted: run %v, %d records, error %v; want none kept and the context's error", first != nil, len(recs), err)
	}
	for _, seed := range []int{1, 2} {
		if _, err := os.Stat(filepath.Join(dir, TrialsDir, fmt.Sprintf("seed-%d", seed), checkpointName)); err != nil {
			t.Fatalf("restart of seed %d left no checkpoint: %v", seed, err)
		}
	}
	if saved, err := ReadConfig(filepath.Join(dir, TrialsDir)); err != nil || saved.Restarts != 3 || saved.TrialEpochs != 0 {
		t.Fatalf("the plan: %+v, %v; want 3 whole restarts", saved, err)
	}

	// A damaged restart's checkpoint is named, with the way on.
	damagedSeed2(t, dir, "restart", func() (*Run, []Restart, error) {
		return TrainRestartsIn(context.Background(), cfg, src, testDevice, dir, RestartHooks{})
	})

	var firstCount, last [2]int // the resumed call's counts: the restored restarts' steps are not this call's
	resumed, got, err := TrainRestartsIn(context.Background(), cfg, src, testDevice, dir, RestartHooks{Progress: func(done, total int) {
		if firstCount == [2]int{} {
			firstCount = [2]int{done, total}
		}
		last = [2]int{done, total}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if firstCount[0] != 0 || last[0] != last[1] || last[1] < 2 || last[1] > 18-6 {
		t.Errorf("resumed restarts counted %v first and %v last; want 0 first, and at the end all of at most the 12 steps the first restart left", firstCount, last)
	}
	if len(got) != len(want) {
		t.Fatalf("%d restarts resumed, %d straight", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Seed != g.Seed || w.Criteria != g.Criteria || *w.Agreement != *g.Agreement {
			t.Errorf("restart %d: %+v resumed, %+v straight", i+1, g, w)
		}
	}
	if resumed.Cfg.Seed != straight.Cfg.Seed || resumed.Dir != "" || resumed.EpochsDone() != 3 || resumed.Cfg.Restarts != 3 {
		t.Fatalf("kept seed %d in %q after %d epochs of %d restarts; want seed %d without a folder, after 3, of 3",
			resumed.Cfg.Seed, resumed.Dir, resumed.EpochsDone(), resumed.Cfg.Restarts, straight.Cfg.Seed)
	}
	if resumed.chosenState != nil {
		t.Errorf("the kept restart holds a copy of its model (%d tensors) besides the network", len(resumed.chosenState))
	}
	s := torch.NoGrad()
	defer s.Close()
	sameBits(t, s, "parameter", "resumed", straight.Net.Params(), resumed.Net.Params())
	sameBits(t, s, "buffer", "resumed", straight.Net.Buffers(), resumed.Net.Buffers())

	// Kept in the run folder, the run is whole there and the restarts' folders go.
	if err := resumed.KeepTrial(dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, checkpointName)); err != nil {
		t.Errorf("the kept run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, TrialsDir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the restarts' folder after the keep: %v, want it gone", err)
	}
	if StoppedInTrials(dir) {
		t.Error("a kept run still reads as stopped among its restarts")
	}
}

// Vector restarts, which train stacked (and side by side where there are threads),
// take no folders.
func TestRestartsInFoldersRefused(t *testing.T) {
	src := digitsSource(t)
	cfg := VectorDefaults()
	cfg.Restarts = 4
	if RestartsInFolders(cfg, src, torch.CPU) {
		t.Fatal("stacked vector restarts would train in folders")
	}
	if r, _, err := TrainRestartsIn(context.Background(), cfg, src, torch.CPU, t.TempDir(), RestartHooks{}); err == nil {
		r.closeIfAny()
		t.Fatal("restarts side by side trained in folders")
	}
}

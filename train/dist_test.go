package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"emclust/torch"
)

// joinRanks makes a Gloo group of len(runs) ranks in this process and joins runs[r]
// as rank r, failing the test if any rank cannot.
func joinRanks(t *testing.T, runs []*Run) {
	t.Helper()
	for r, err := range tryJoin(t, runs) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// tryJoin is joinRanks returning each rank's error. The groups close with the test.
func tryJoin(t *testing.T, runs []*Run) []error {
	t.Helper()
	return inGroups(t, len(runs), func(r int, g *torch.Group) error { return runs[r].Join(context.Background(), g) })
}

// inGroups joins n ranks, one goroutine each, and calls rank r's function with its
// group; it returns each rank's error. The groups close with the test.
func inGroups(t *testing.T, n int, rank func(r int, g *torch.Group) error) []error {
	t.Helper()
	st, err := torch.ServeStore("127.0.0.1", 0, n, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := torch.NewGroup(torch.GroupConfig{Backend: torch.Gloo, Host: "127.0.0.1", Port: st.Port(),
				Prefix: t.Name(), Rank: r, World: n, Timeout: 20 * time.Second, Interface: "lo"})
			if err != nil {
				errs[r] = err
				return
			}
			t.Cleanup(g.Close)
			errs[r] = rank(r, g)
		}()
	}
	wg.Wait()
	return errs
}

// trainRanks trains every run concurrently, one goroutine a rank.
func trainRanks(t *testing.T, runs []*Run) {
	t.Helper()
	for r, err := range trainRanksIn(make([]context.Context, len(runs)), runs) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// trainRanksIn is trainRanks with rank r in ctxs[r] (nil: the background), returning
// each rank's error.
func trainRanksIn(ctxs []context.Context, runs []*Run) []error {
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for r, run := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := ctxs[r]
			if ctx == nil {
				ctx = context.Background()
			}
			errs[r] = run.Train(ctx)
		}()
	}
	wg.Wait()
	return errs
}

// cancelAfter cancels a rank's training when it has ended n epochs.
type cancelAfter struct {
	n, ended int
	cancel   func()
}

func (c *cancelAfter) Start(int, int, int)     {}
func (c *cancelAfter) Step(int, float64, bool) {}
func (c *cancelAfter) End(EpochMetrics) {
	if c.ended++; c.ended == c.n {
		c.cancel()
	}
}

// Ranks interrupted between epochs (always, where an epoch is under stopEvery steps)
// stop together there, and rank 0 saves that epoch, as one process does: its
// checkpoint held the first epoch only, the saves between being timed.
func TestRanksStoppedBetweenEpochsSave(t *testing.T) {
	src := digitsSourceOn(t, torch.CPU)
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	cfg.Epochs, cfg.KMeans, cfg.WorldSize = 50, false, 2
	if steps := (src.Len() + cfg.BatchSize - 1) / cfg.BatchSize; steps >= stopEvery {
		t.Fatalf("%d steps an epoch: the ranks could stop inside one", steps)
	}
	runs := []*Run{newRunOn(t, cfg, src, t.TempDir(), torch.CPU), newRunOn(t, cfg, src, "", torch.CPU)}
	joinRanks(t, runs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs[1].Progress = &cancelAfter{n: 3, cancel: cancel} // rank 1 alone is interrupted
	errs := trainRanksIn([]context.Context{nil, ctx}, runs)
	for r, run := range runs {
		if !errors.Is(errs[r], context.Canceled) || run.EpochsDone() != 3 {
			t.Errorf("rank %d: %v after %d epochs; want both stopped after 3", r, errs[r], run.EpochsDone())
		}
	}
	if got := runs[0].EpochsSaved(); got != 3 {
		t.Errorf("rank 0's checkpoint holds %d epochs, want the 3 done", got)
	}
}

// unidentified are the tensors training cannot pin down: the bias of the layer
// before the relevance normalisation, which the normalisation subtracts again, has a
// true gradient of zero, so Adam turns rounding noise into full-size steps; the
// normalisation's running mean follows it. In their place state compares the relevance
// of every row normalised over all rows, which neither changes.
var unidentified = map[string]bool{"out.bias": true, "relevance_norm.running_mean": true}

// state is a run's identified parameters and buffers, its prior, and the normalised
// relevance of every row, flattened.
func state(t *testing.T, r *Run) []float32 {
	s := torch.NoGrad()
	defer s.Close()
	var out []float32
	for _, nt := range append(r.Net.Params(), r.Net.Buffers()...) {
		if !unidentified[nt.Name] {
			out = append(out, s.Float32s(s.Cast(nt.Tensor, torch.Float32))...)
		}
	}
	if r.prior != nil {
		out = append(out, s.Float32s(r.prior)...)
	}
	x, _ := r.Src.Batch(s, s.Arange(r.Src.Len(), torch.Int64, r.Src.IndexDevice()), nil)
	a := r.Net.Relevance(s, x, false)
	a = s.Div(s.Sub(a, s.Mean(a, true, 0)), s.Sqrt(s.Var(a, true, 0)))
	out = append(out, s.Float32s(a)...)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// maxRelDiff is max |a−b| / (1e-3 + |b|) over the elements.
func maxRelDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i]))/(1e-3+math.Abs(float64(b[i]))))
	}
	return d
}

// TestDataParallelMatchesOneProcess: two ranks at global batch 128 are one process at
// batch 128 — same parameters, running statistics, prior and losses after 28 steps,
// up to summation order — and the ranks stay identical to each other. With local
// statistics they are not, which shows the comparison can fail.
func TestDataParallelMatchesOneProcess(t *testing.T) {
	const tol = 1e-2
	for _, c := range []struct {
		name  string
		edit  func(*Config)
		equal bool
	}{
		{"em", func(*Config) {}, true},
		{"em learned prior", func(c *Config) { c.Prior = "learned" }, true},
		{"em local stats", func(c *Config) { c.LocalStats = true }, false},
		{"em local stats learned prior", func(c *Config) { c.LocalStats, c.Prior = true, "learned" }, false},
		{"em heads", func(c *Config) { c.Heads = 3 }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			// On the CPU whatever the test device: ranks in one process on one CUDA
			// device deadlock, since autograd runs every backward pass on that device
			// on one worker thread, and rank 0's collective inside backward waits
			// for rank 1's, queued behind it. One process a rank on a GPU is
			// command's TestDataParallelEquivalence and gpu-acceptance.sh's dist step.
			src := digitsSourceOn(t, torch.CPU)
			cfg := VectorDefaults()
			cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
			cfg.Epochs, cfg.EvalEvery, cfg.KMeans = 2, 1, false
			c.edit(&cfg)
			one := newRunOn(t, cfg, src, "", torch.CPU)
			if err := one.Train(context.Background()); err != nil {
				t.Fatal(err)
			}

			cfg.WorldSize = 2
			// Different seeds for rank 1: Join must still start it from rank 0's model.
			other := cfg
			other.Seed++
			runs := []*Run{newRunOn(t, cfg, src, "", torch.CPU), newRunOn(t, other, src, "", torch.CPU)}
			runs[1].Cfg.Seed = cfg.Seed // its network stays that of seed+1
			joinRanks(t, runs)
			trainRanks(t, runs)

			s0, s1, ref := state(t, runs[0]), state(t, runs[1]), state(t, one)
			if d := maxRelDiff(s0, s1); c.equal && d != 0 {
				t.Errorf("ranks 0 and 1 differ by %g after training", d)
			}
			d := maxRelDiff(s0, ref)
			if testing.Verbose() {
				logTensorDiffs(t, runs[0], one)
			}
			t.Logf("2 ranks vs 1 process: max relative difference %.3g", d)
			if c.equal && d > tol {
				t.Errorf("2 ranks differ from 1 process by %g (tolerance %g)", d, tol)
			}
			if !c.equal && d < 10*tol {
				t.Errorf("local statistics differ from global ones by only %g: the global statistics look local", d)
			}
			// The evaluations are of the model rank 0 saves, whatever the other ranks'
			// own statistics (were a clustering stitched from each rank's).
			last := runs[0].History[len(runs[0].History)-1].Criteria
			saved, err := PredictWithCriteria(runs[0].Net, src, torch.CPU, runs[0].Prior(), runs[0].Cfg.GammaVal)
			if err != nil {
				t.Fatal(err)
			}
			rel := func(a, b float64) float64 { return math.Abs(a-b) / max(1e-9, math.Abs(b)) }
			if dm, de := rel(last.MaxPosterior, saved.Criteria.MaxPosterior), rel(last.EMObjective, saved.Criteria.EMObjective); dm > 1e-5 || de > 1e-5 {
				t.Errorf("last evaluation: max posterior %v, EM objective %v; rank 0's model on all rows: %v, %v", last.MaxPosterior, last.EMObjective, saved.Criteria.MaxPosterior, saved.Criteria.EMObjective)
			}
			for i, m := range runs[0].History {
				want := one.History[i]
				if m.Steps != want.Steps || (c.equal && math.Abs(m.Loss-want.Loss) > tol*math.Abs(want.Loss)) {
					t.Errorf("epoch %d: %d steps, loss %v; one process: %d steps, loss %v", i+1, m.Steps, m.Loss, want.Steps, want.Loss)
				}
				if c.equal && fmt.Sprint(m.Sizes) != fmt.Sprint(want.Sizes) {
					t.Logf("epoch %d: sizes %v, one process %v", i+1, m.Sizes, want.Sizes)
				}
				// Each rank scores its share of the rows; the criteria are of all of them.
				other := runs[1].History[i].Criteria
				if m.Criteria == nil || other == nil || *m.Criteria != *other {
					t.Fatalf("epoch %d: the ranks' criteria %+v and %+v, want the same", i+1, m.Criteria, other)
				}
				// and with heads, every head's, gathered in one collective.
				if o := runs[1].History[i]; !reflect.DeepEqual(m.Head, o.Head) || !reflect.DeepEqual(m.Heads, o.Heads) || len(m.Heads) != len(want.Heads) {
					t.Fatalf("epoch %d: the ranks chose different heads, or scored them differently; one process had %d heads", i+1, len(want.Heads))
				}
				for h := range m.Heads {
					if d := math.Abs(m.Heads[h].Criteria.MaxPosterior - want.Heads[h].Criteria.MaxPosterior); d > tol {
						t.Errorf("epoch %d head %d: max posterior %v, one process %v", i+1, h, m.Heads[h].Criteria.MaxPosterior, want.Heads[h].Criteria.MaxPosterior)
					}
				}
				if d := math.Abs(m.Criteria.MaxPosterior - want.Criteria.MaxPosterior); c.equal && d > tol {
					t.Errorf("epoch %d: max posterior %v, one process %v", i+1, m.Criteria.MaxPosterior, want.Criteria.MaxPosterior)
				}
			}
		})
	}
}

func TestJoinRefuses(t *testing.T) {
	src := digitsSource(t)
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	cfg.Epochs = 1
	same := func(int, *Config) {}
	for _, c := range []struct {
		name  string
		edit  func(r int, c *Config)
		after func(r int, run *Run)
		want  string
	}{
		{"batch that does not split", func(_ int, c *Config) { c.BatchSize = 127 }, nil, "does not split"},
		{"different configs", func(r int, c *Config) { c.LR *= float64(1 + r) }, nil, `'s config differs from rank`},
		{"what differs named", func(r int, c *Config) { c.Epochs += r }, nil, `'s in "epochs" (`},
		{"two differences", func(r int, c *Config) { c.Epochs, c.LR = c.Epochs+r, c.LR*float64(1+r) }, nil, `and 1 more: lr:`},
		// The same bytes under another mount point are the same data; other bytes are not.
		{"same data, other paths", func(r int, c *Config) { c.DataFile, c.DataDigest = fmt.Sprintf("/mnt/%d/d.csv", r), "d1" }, nil, ""},
		{"other data", func(r int, c *Config) { c.DataFile, c.DataDigest = "d.csv", fmt.Sprint("d", r) }, nil, `in the data it read (their SHA-256 differ`},
		{"a long value cut", func(r int, c *Config) { c.Features = []string{strings.Repeat("é", 50+r)} }, nil, `"features" (["ééééééééééééééééééééééééééééééééééé…`},
		{"world size other than the group's", func(_ int, c *Config) { c.WorldSize = 3 }, nil, "world size 3"},
		// A stale copy of the run folder on one machine: Adam's steps were not copied.
		{"checkpoints of different epochs", same, func(r int, run *Run) { run.epoch = 2 * r }, "resumes after epoch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs := make([]*Run, 2)
			for r := range runs {
				cc := cfg
				cc.WorldSize = 2
				c.edit(r, &cc)
				runs[r] = newRun(t, cc, src, "")
				if c.after != nil {
					c.after(r, runs[r])
				}
			}
			errs := tryJoin(t, runs)
			for r, err := range errs {
				switch {
				case c.want == "" && err != nil:
					t.Errorf("rank %d: %v, want none", r, err)
				case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
					t.Errorf("rank %d: %v, want an error with %q", r, err, c.want)
				}
			}
		})
	}
}

func logTensorDiffs(t *testing.T, a, b *Run) {
	s := torch.NoGrad()
	defer s.Close()
	bn := append(b.Net.Params(), b.Net.Buffers()...)
	for i, nt := range append(a.Net.Params(), a.Net.Buffers()...) {
		t.Logf("%s: %.3g", nt.Name, maxRelDiff(s.Float32s(nt.Tensor), s.Float32s(bn[i].Tensor)))
	}
}

// A rank waiting in Join for another hears at once why that one stopped, where it
// published its failure, and stops waiting on an interrupt: a blocking read waited out
// the whole --dist-timeout, and a signal started it again.
func TestJoinStopsWaiting(t *testing.T) {
	src := digitsSource(t)
	cfg := VectorDefaults()
	cfg.WorldSize = 2
	run := newRun(t, cfg, src, "")
	for _, interrupted := range []bool{false, true} {
		t.Run(fmt.Sprintf("a failed rank, interrupted %v", interrupted), func(t *testing.T) {
			errs := inGroups(t, 2, func(r int, g *torch.Group) error {
				if r == 1 {
					return PublishFailure(g, errors.New("open nope.csv: no such file or directory"), interrupted)
				}
				return run.Join(context.Background(), g)
			})
			var failed RankFailedError
			if !errors.As(errs[0], &failed) || failed.Rank != 1 || failed.Interrupted != interrupted || !strings.Contains(errs[0].Error(), "rank 1 stopped: open nope.csv") {
				t.Errorf("rank 0: %v (%+v), want rank 1's failure, interrupted %v", errs[0], failed, interrupted)
			}
			if errs[1] != nil {
				t.Errorf("rank 1 could not publish: %v", errs[1])
			}
		})
	}
	t.Run("an interrupt", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		errs := inGroups(t, 2, func(r int, g *torch.Group) error {
			if r == 1 {
				cancel() // rank 1 never publishes its config
				return nil
			}
			return run.Join(ctx, g)
		})
		if !errors.Is(errs[0], context.Canceled) {
			t.Errorf("rank 0: %v, want the interrupt", errs[0])
		}
	})
}

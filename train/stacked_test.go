package train

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"emclust/eval"
	"emclust/torch"
	"emclust/torch/torchtest"
)

// runState is what a trained run carries on: its parameters, running statistics,
// prior, optimiser moments and steps, by name, and each epoch's loss and h.
func runState(t *testing.T, r *Run) (tensors map[string][]float64, steps []int64, history [][]float64) {
	t.Helper()
	s := torch.NoGrad()
	defer s.Close()
	tensors = map[string][]float64{}
	add := func(name string, x *torch.Tensor) {
		var v []float64
		for _, f := range s.Float32s(x) {
			v = append(v, float64(f))
		}
		tensors[name] = v
	}
	params := r.Net.Params()
	for _, p := range params {
		add(p.Name, p.Tensor)
	}
	for _, b := range r.Net.Buffers() {
		add(b.Name, b.Tensor)
	}
	if r.prior != nil {
		add("prior", r.prior)
	}
	for j := range r.optA.Len() {
		m, v, step := r.optA.State(s, j)
		add(params[j].Name+" exp_avg", m)
		add(params[j].Name+" exp_avg_sq", v)
		steps = append(steps, step)
	}
	for _, m := range r.History {
		history = append(history, append([]float64{m.Loss}, m.HMean...))
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return tensors, steps, history
}

// Restarts trained stacked end as each would alone: the same parameters, running
// statistics, learned prior, optimiser state, epoch losses and criteria, up to the
// order of float sums in the batched products. For the MLP and for the linear map
// with a learned prior; and nothing is left behind. Each tensor is compared relative
// to its largest element, to 1e-2 (3e-2 on a GPU, whose batched and single matrix
// products are other kernels): Adam divides each gradient by its own running size, so
// a weight whose gradient is small carries its rounding at full scale (1e-4 of the
// linear map's weights after three epochs), and another restart's state is off by
// its whole size. Adam's first moments follow the last few gradients alone, which
// that rounding moves most: the third MLP restart's were 1.6e-2 apart on an H100 and
// 1.7e-2 to 4.9e-2 in one CPU run under libtorch 2.6 on a busy machine (below 1e-2
// in every other), so they are held to 0.25, which two restarts' moments exceed.
//
// But for one parameter: the relevance normalisation subtracts the batch mean, so
// the last layer's bias has a gradient of zero but for rounding, about 1e-8, which
// Adam (ε = 1e-8) turns into steps near the learning rate, another walk for another
// order of sums. The running mean follows the bias, and the criteria, scored with
// it, move in the fourth decimal; the clusterings by a few rows.
func TestStackedRestartsAreAlone(t *testing.T) {
	src := digitsSource(t) // the test device: a GPU run of the suite checks stacking there too
	live := torch.LiveTensors()
	mlp := VectorDefaults()
	mlp.MinSteps, mlp.MaxSteps, mlp.Epochs = 0, 0, 3
	cands := NetworkCandidates(mlp)
	if len(cands) != 2 {
		t.Fatalf("%d networks, want the MLP and the linear map", len(cands))
	}
	tol := 1e-2
	if testDevice.CUDA {
		tol = 3e-2
	}
	const momentTol = 0.25
	tolFor := func(name string) float64 {
		if strings.HasSuffix(name, " exp_avg") {
			return momentTol
		}
		return tol
	}
	for _, cfg := range cands {
		cfg.EvalEvery = 0
		t.Run(NetworkName(cfg), func(t *testing.T) {
			const restarts = 3
			var alone, stacked []*Run
			for i := range restarts {
				c := cfg
				c.Seed = 11 + uint64(i)
				alone = append(alone, newRun(t, c, src, ""))
				stacked = append(stacked, newRun(t, c, src, ""))
			}
			for _, r := range alone {
				if err := r.Train(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if err := trainStacked(context.Background(), stacked); err != nil {
				t.Fatal(err)
			}
			aloneStates := make([]map[string][]float64, restarts)
			for i := range restarts {
				a, b := alone[i], stacked[i]
				ta, sa, ha := runState(t, a)
				aloneStates[i] = ta
				tb, sb, hb := runState(t, b)
				for name := range ta {
					if strings.HasPrefix(name, "out.bias") || name == "relevance_norm.running_mean" {
						continue // and the bias's Adam moments
					}
					if !torchtest.Near(tb[name], ta[name], tolFor(name)) {
						t.Errorf("restart %d: %s stacked %v\nalone %v", i+1, name, tb[name], ta[name])
					}
				}
				if !reflect.DeepEqual(sa, sb) || len(ha) != cfg.Epochs || len(hb) != len(ha) {
					t.Errorf("restart %d: optimiser steps %v and %d epochs stacked, %v and %d alone", i+1, sb, len(hb), sa, len(ha))
				}
				for e := range min(len(ha), len(hb)) {
					if !torchtest.Near(hb[e], ha[e], 1e-4) {
						t.Errorf("restart %d epoch %d: loss and h stacked %v, alone %v", i+1, e+1, hb[e], ha[e])
					}
				}
				ca, cb := a.History[len(a.History)-1].Criteria, b.History[len(b.History)-1].Criteria
				if ca == nil || cb == nil || !torchtest.Near([]float64{cb.EMObjective, cb.LogLikelihood, cb.MaxPosterior, cb.SizeEntropy},
					[]float64{ca.EMObjective, ca.LogLikelihood, ca.MaxPosterior, ca.SizeEntropy}, 1e-2) {
					t.Errorf("restart %d: last criteria stacked %+v, alone %+v", i+1, cb, ca)
				}
				if ari, err := eval.ARI(a.recent[len(a.recent)-1], b.recent[len(b.recent)-1]); err != nil || ari < 0.95 {
					t.Errorf("restart %d: clusterings stacked and alone agree to ARI %.4f (%v), want at least 0.95", i+1, ari, err)
				}
				if a.EpochsDone() != b.EpochsDone() {
					t.Errorf("restart %d: %d epochs done stacked, %d alone", i+1, b.EpochsDone(), a.EpochsDone())
				}
			}
			// The moments' bound still tells restarts apart: two seeds' differ by more.
			t1, t2 := aloneStates[0], aloneStates[1]
			for name := range t1 {
				if strings.HasSuffix(name, " exp_avg") && !strings.HasPrefix(name, "out.bias") && torchtest.Near(t2[name], t1[name], momentTol) {
					t.Errorf("%s of seeds 11 and 12 within %g of each other: the bound would not catch one restart's state in another", name, momentTol)
				}
			}
			for i := range restarts {
				alone[i].Close()
				stacked[i].Close()
			}
		})
	}
	if n := torch.LiveTensors(); n != live {
		t.Errorf("%d live tensors after, %d before", n, live)
	}
}

// Each network's restarts go in as many stacks as asked, as even as they come.
func TestSplitStacks(t *testing.T) {
	jobs := func(networks ...int) []restartJob {
		var out []restartJob
		for n, count := range networks {
			for i := range count {
				out = append(out, restartJob{network: fmt.Sprint(n), index: i})
			}
		}
		return out
	}
	for _, tc := range []struct {
		jobs  []restartJob
		parts int
		want  [][]int
	}{
		{jobs(3), 3, [][]int{{0}, {1}, {2}}},
		{jobs(3), 5, [][]int{{0}, {1}, {2}}},
		{jobs(3), 1, [][]int{{0, 1, 2}}},
		{jobs(3), 0, [][]int{{0, 1, 2}}},
		{jobs(10, 10), 1, [][]int{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10, 11, 12, 13, 14, 15, 16, 17, 18, 19}}},
		{jobs(10), 4, [][]int{{0, 1}, {2, 3, 4}, {5, 6}, {7, 8, 9}}},
		{jobs(2, 3), 2, [][]int{{0}, {1}, {2}, {3, 4}}},
	} {
		if got := splitStacks(tc.jobs, tc.parts); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%d jobs in %d stacks a network: %v, want %v", len(tc.jobs), tc.parts, got, tc.want)
		}
	}
}

// TrainSeeds trains a run of each seed, in the seeds' order, each what it would be
// alone up to the order of sums (side by side and stacked on the CPU); cancelled, it
// returns the cancellation and no runs.
func TestTrainSeeds(t *testing.T) {
	src := digitsSourceOn(t, torch.CPU)
	live := torch.LiveTensors()
	cfg := VectorDefaults() // HiddenAuto: the sweep trains the MLP named
	cfg.MinSteps, cfg.MaxSteps, cfg.Epochs = 0, 0, 2
	seeds := []uint64{3, 9, 4, 7}
	runs, err := TrainSeeds(context.Background(), cfg, seeds, src, torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		alone := cfg
		alone.Seed, alone.EvalEvery, alone.Restarts = seeds[i], 0, 1
		a := newRunOn(t, alone, src, "", torch.CPU)
		if err := a.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		ca, cb := a.History[len(a.History)-1].Criteria, r.History[len(r.History)-1].Criteria
		ari, err := eval.ARI(a.recent[len(a.recent)-1], r.recent[len(r.recent)-1])
		if r.Cfg.Seed != seeds[i] || r.EpochsDone() != cfg.Epochs || !slices.Equal(r.Cfg.Hidden, cfg.Hidden) || err != nil || ari < 0.95 ||
			!torchtest.Near([]float64{cb.LogLikelihood, cb.MaxPosterior}, []float64{ca.LogLikelihood, ca.MaxPosterior}, 1e-2) {
			t.Errorf("run %d: seed %d after %d epochs, hidden %v, criteria %+v, ARI %.4f (%v) with seed %d alone, criteria %+v",
				i, r.Cfg.Seed, r.EpochsDone(), r.Cfg.Hidden, cb, ari, err, seeds[i], ca)
		}
		r.Close()
		a.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	runs, err = TrainSeeds(ctx, cfg, seeds, src, torch.CPU)
	if !errors.Is(err, context.Canceled) || slices.ContainsFunc(runs, func(r *Run) bool { return r != nil }) {
		t.Errorf("cancelled: err %v, runs %v; want the cancellation and none", err, runs)
	}
	if n := torch.LiveTensors(); n != live {
		t.Errorf("%d live tensors after, %d before", n, live)
	}
}

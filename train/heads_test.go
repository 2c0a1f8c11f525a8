package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"emclust/loss"
	"emclust/torch"
)

// Laid out a row per head, the heads' scores give each loss as the mean over heads of
// the loss of each head on its own columns.
func TestPerHeadLossIsMeanOverHeads(t *testing.T) {
	const n, k, heads, gamma = 16, 4, 3, 2.0
	s := torch.NoGrad()
	defer s.Close()
	a := s.Randn([]int{n, heads * k}, torch.Float32, testDevice)
	aTr := s.Randn([]int{n, heads * k}, torch.Float32, testDevice)
	for _, tc := range []struct {
		name string
		f    func(a, aTr *torch.Tensor) *torch.Tensor
	}{
		{"em", func(a, _ *torch.Tensor) *torch.Tensor { return loss.EM(s, a, loss.Posterior(s, a, nil), gamma) }},
		{"em-aug", func(a, aTr *torch.Tensor) *torch.Tensor {
			return loss.EMAug(s, a, aTr, loss.Posterior(s, a, nil), gamma)
		}},
		{"kl", func(a, aTr *torch.Tensor) *torch.Tensor { return loss.KL(s, loss.Posterior(s, a, nil), aTr, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := s.Float32s(tc.f(perHead(s, a, k), perHead(s, aTr, k)))
			var want float64
			for h := 0; h < heads; h++ {
				one := s.Float32s(tc.f(s.Narrow(a, 1, h*k, k), s.Narrow(aTr, 1, h*k, k)))
				want += float64(one[0]) / heads
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if math.Abs(float64(got[0])-want) > 1e-5*math.Max(1, math.Abs(want)) {
				t.Fatalf("loss over heads %v, mean of the heads' losses %v", got[0], want)
			}
		})
	}
	if one := perHead(s, s.Narrow(a, 1, 0, k), k); one.Dim(0) != n || one.Dim(1) != k {
		t.Fatalf("one head laid out as %v, want [%d %d]", one.Shape(), n, k)
	}
}

// A run with heads evaluates every head, predicts with the one that agrees most with
// the others, and saves that choice with the model.
func TestHeadsRun(t *testing.T) {
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0
	cfg.Epochs, cfg.EvalEvery, cfg.Heads = 3, 1, 3
	r := newRun(t, cfg, digitsSource(t), t.TempDir())
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, m := range r.History {
		if m.Head == nil || len(m.Heads) != cfg.Heads {
			t.Fatalf("epoch %d: head %v of %d heads, want one of %d", m.Epoch, m.Head, len(m.Heads), cfg.Heads)
		}
		best := 0
		for i, h := range m.Heads {
			if h.Head != i || h.Criteria == nil || h.ACC == nil || !(h.Agreement >= -1 && h.Agreement <= 1) {
				t.Fatalf("epoch %d head %d: %+v", m.Epoch, i, h)
			}
			if h.Agreement > m.Heads[best].Agreement {
				best = i
			}
		}
		sel := m.Heads[*m.Head]
		if *m.Head != best || *m.ACC != *sel.ACC || *m.Criteria != *sel.Criteria {
			t.Fatalf("epoch %d: selected head %d (ACC %v), want the most agreeing head %d with its scores %+v", m.Epoch, *m.Head, *m.ACC, best, sel)
		}
		if len(m.HMean) != cfg.K {
			t.Fatalf("epoch %d: h_mean of %d clusters, want %d", m.Epoch, len(m.HMean), cfg.K)
		}
	}
	last := r.History[len(r.History)-1]
	if r.Net.Head() != *last.Head {
		t.Fatalf("network predicts with head %d, the last evaluation chose %d", r.Net.Head(), *last.Head)
	}
	pred, err := PredictWithCriteria(r.Net, r.Src, testDevice, r.Prior(), r.Cfg.GammaVal)
	if err != nil {
		t.Fatal(err)
	}
	if len(pred.Posterior) != r.Src.Len()*cfg.K || *pred.Criteria != *last.Criteria {
		t.Fatalf("Predict: %d posteriors and criteria %+v, want %d and the evaluation's %+v", len(pred.Posterior), pred.Criteria, r.Src.Len()*cfg.K, last.Criteria)
	}
	// Every head's max posterior, summed on the device by head, is that of its
	// posteriors on the host.
	n := r.Src.Len()
	for h, hm := range last.Heads {
		if err := r.Net.SetHead(h); err != nil {
			t.Fatal(err)
		}
		ph, err := PredictWithCriteria(r.Net, r.Src, testDevice, r.Prior(), r.Cfg.GammaVal)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		for i := range n {
			sum += float64(slices.Max(ph.Posterior[i*cfg.K : (i+1)*cfg.K]))
		}
		if want := sum / float64(n); math.Abs(hm.Criteria.MaxPosterior-want) > 1e-5 {
			t.Errorf("head %d: max posterior %.7f in the evaluation, %.7f from its posteriors", h, hm.Criteria.MaxPosterior, want)
		}
	}
	if err := r.Net.SetHead(*last.Head); err != nil {
		t.Fatal(err)
	}
	if got := modelCriteria(t, filepath.Join(r.Dir, checkpointName), r); got != *last.Criteria {
		t.Fatalf("the checkpoint predicts with criteria %+v, the last evaluation had %+v", got, *last.Criteria)
	}
}

// Predict clusters with the selected head alone: another head's outputs that are not
// finite are no error (they failed predict), and the selected head's are.
func TestPredictIgnoresOtherHeads(t *testing.T) {
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0
	cfg.Epochs, cfg.Heads = 1, 2
	r := newRun(t, cfg, digitsSource(t), "")
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	before, err := PredictWithCriteria(r.Net, r.Src, testDevice, r.Prior(), r.Cfg.GammaVal)
	if err != nil {
		t.Fatal(err)
	}
	other := 1 - r.Net.Head()
	out := param(t, r.Net, "out.weight")
	s := torch.NoGrad()
	s.CopyInto(s.Narrow(out, 0, other*cfg.K, cfg.K), s.Full([]int{1}, math.NaN(), torch.Float32, testDevice))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	pred, err := Predict(r.Net, r.Src, testDevice, r.Prior())
	if err != nil {
		t.Fatalf("Predict with head %d, head %d not finite: %v", r.Net.Head(), other, err)
	}
	if !slices.Equal(pred.Cluster, before.Cluster) {
		t.Error("Predict's clusters changed with the other head's weights")
	}
	withCriteria, err := PredictWithCriteria(r.Net, r.Src, testDevice, r.Prior(), r.Cfg.GammaVal)
	if err != nil || *withCriteria.Criteria != *before.Criteria {
		t.Errorf("PredictWithCriteria: %v, criteria %+v, want %+v", err, withCriteria.Criteria, before.Criteria)
	}
	if err := r.Net.SetHead(other); err != nil {
		t.Fatal(err)
	}
	if _, err := Predict(r.Net, r.Src, testDevice, r.Prior()); !errors.Is(err, ErrNotFinite) {
		t.Errorf("Predict with the head not finite: %v, want %v", err, ErrNotFinite)
	}
	if _, err := PredictWithCriteria(r.Net, r.Src, testDevice, r.Prior(), r.Cfg.GammaVal); !errors.Is(err, ErrNotFinite) {
		t.Errorf("PredictWithCriteria with the head not finite: %v, want %v", err, ErrNotFinite)
	}
}

// Heads train on images with every augmenting objective, and resume exactly.
func TestHeadsImages(t *testing.T) {
	im := mnistSet(t, 128)
	for _, obj := range []string{"twofold", "iic"} {
		t.Run(obj, func(t *testing.T) {
			cfg := imageConfig(obj, 2, 32)
			cfg.Heads = 3
			r := trainImages(t, im, cfg)
			checkRun(t, r, im.N, false)
			if last := r.History[len(r.History)-1]; last.Head == nil || len(last.Heads) != 3 {
				t.Fatalf("last epoch: head %v of %d heads", last.Head, len(last.Heads))
			}
		})
	}
	src := imageSource(t, im)
	cfg := imageConfig("twofold", 2, 32)
	cfg.Heads, cfg.EvalEvery, cfg.Deterministic = 3, 1, true
	checkImageResume(t, im, cfg, src)
}

func TestHeadsConfigErrors(t *testing.T) {
	src := digitsSource(t)
	for _, tc := range []struct {
		heads            int
		prior, objective string
		want             string
	}{
		{-1, "uniform", "em", "heads -1"},
		{33, "uniform", "em", "heads 33"},
		{2, "learned", "em", "learned prior"},
		{2, "uniform", "supervised", "supervised objective"},
	} {
		t.Run(fmt.Sprint(tc.heads, tc.prior, tc.objective), func(t *testing.T) {
			cfg := VectorDefaults()
			cfg.Heads, cfg.Prior, cfg.Objective = tc.heads, tc.prior, tc.objective
			if _, err := New(cfg, src, testDevice, ""); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("heads %d, prior %s, %s: error %v, want one with %q", tc.heads, tc.prior, tc.objective, err, tc.want)
			}
		})
	}
}

// Of heads, one that uses every cluster is selected over constant heads, which agree
// perfectly with one another.
func TestCompareHeadsPrefersClustersUsed(t *testing.T) {
	constant := []int{1, 1, 1, 1, 1, 1}
	real := []int{0, 0, 1, 1, 2, 2}
	heads := []*Prediction{{Cluster: constant}, {Cluster: slices.Clone(constant)}, {Cluster: real}}
	out, best, err := compareHeads(heads)
	if err != nil {
		t.Fatal(err)
	}
	if best != 2 {
		t.Errorf("selected head %d (agreements %v), want the one using three clusters", best, out)
	}
	if out[0].Agreement <= out[2].Agreement {
		t.Errorf("the constant heads' agreement %v is not above the other's %v: the case tests nothing", out[0].Agreement, out[2].Agreement)
	}
}

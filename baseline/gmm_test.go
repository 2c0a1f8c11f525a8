package baseline

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"emclust/torch"
)

// parallelBars draws n points alternately from two Gaussians that are long (sd long)
// along one direction and thin (sd short) across it, side by side at distance gap,
// rotated by angle so that neither is aligned with the axes. k-means cuts such bars
// across their length, and a diagonal mixture cannot describe them.
func parallelBars(seed uint64, n int, long, short, gap, angle float64) ([]float32, []int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	c, sn := math.Cos(angle), math.Sin(angle)
	x := make([]float32, 0, 2*n)
	labels := make([]int, 0, n)
	for i := range n {
		k := i % 2
		u := rng.NormFloat64() * long
		v := rng.NormFloat64()*short + (float64(k)-0.5)*gap
		x = append(x, float32(c*u-sn*v), float32(sn*u+c*v))
		labels = append(labels, k)
	}
	return x, labels
}

// agreement is the fraction of points on which two 2-cluster labellings agree, under
// the better of the two ways to match their clusters.
func agreement(got, want []int) float64 {
	same := 0
	for i := range got {
		if got[i] == want[i] {
			same++
		}
	}
	f := float64(same) / float64(len(got))
	return max(f, 1-f)
}

// runGMM fits and records the log-likelihood trace of every restart.
func runGMM(t *testing.T, x *torch.Tensor, cfg GMMConfig) (*GMMResult, map[int][]float64) {
	t.Helper()
	traces := map[int][]float64{}
	res, err := gmm(context.Background(), x, cfg, func(r, it int, ll float64) {
		if it != len(traces[r])+1 {
			t.Errorf("restart %d: iteration %d after %d", r, it, len(traces[r]))
		}
		traces[r] = append(traces[r], ll)
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, traces
}

// checkEM checks what EM promises whatever the data: a finite likelihood that never
// falls (up to float32 rounding and the reg added after each M-step), weights that
// sum to 1, and a label for every row.
func checkEM(t *testing.T, res *GMMResult, traces map[int][]float64, n, k int) {
	t.Helper()
	if math.IsNaN(res.LogLikelihood) || math.IsInf(res.LogLikelihood, 0) {
		t.Fatalf("log-likelihood %g", res.LogLikelihood)
	}
	for r, tr := range traces {
		for i := 1; i < len(tr); i++ {
			if tr[i] < tr[i-1]-1e-5 {
				t.Errorf("restart %d: log-likelihood fell from %g to %g at iteration %d", r, tr[i-1], tr[i], i+1)
			}
		}
		if last := tr[len(tr)-1]; last < tr[0] {
			t.Errorf("restart %d: final log-likelihood %g below the first %g", r, last, tr[0])
		}
	}
	if len(res.Labels) != n || len(res.Weights) != k {
		t.Fatalf("%d labels, %d weights", len(res.Labels), len(res.Weights))
	}
	sum := 0.0
	for _, w := range res.Weights {
		sum += w
	}
	if math.Abs(sum-1) > 1e-5 {
		t.Fatalf("weights %v sum to %g", res.Weights, sum)
	}
}

func TestFullGMMSeparatesParallelBars(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	const n = 300
	xs, truth := parallelBars(1, n, 4, 0.4, 3, 0.7)
	x := tensor(t, s, xs, 2)

	km, err := KMeans(context.Background(), x, KMeansConfig{K: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The premise: k-means gets this wrong.
	if a := agreement(km.Labels, truth); a > 0.75 {
		t.Fatalf("k-means agrees %.3f with the bars; the test data is too easy", a)
	}

	// The default Tol (1e-3) stops EM on the plateau it crosses while the
	// components turn from k-means' halves to the bars, so ask for a tight one.
	full, ftr := runGMM(t, x, GMMConfig{K: 2, Seed: 1, Covariance: "full", Tol: 1e-6, MaxIter: 500, Restarts: 3})
	checkEM(t, full, ftr, n, 2)
	if a := agreement(full.Labels, truth); a < 0.95 {
		t.Fatalf("full GMM agrees %.3f with the bars, want ≥ 0.95 (k-means %.3f)", a, agreement(km.Labels, truth))
	}
	// EM climbed well above where the k-means initialisation put it.
	if tr := ftr[0]; tr[len(tr)-1] < tr[0]+0.3 {
		t.Errorf("full GMM log-likelihood went from %g to only %g", tr[0], tr[len(tr)-1])
	}
	for _, w := range full.Weights {
		if math.Abs(w-0.5) > 0.05 {
			t.Errorf("weights %v, want about ½ each", full.Weights)
		}
	}

	diag, dtr := runGMM(t, x, GMMConfig{K: 2, Seed: 1, Covariance: "diag", Tol: 1e-6, MaxIter: 500, Restarts: 3})
	checkEM(t, diag, dtr, n, 2)
	if diag.LogLikelihood >= full.LogLikelihood {
		t.Errorf("diag log-likelihood %g ≥ full %g on correlated data", diag.LogLikelihood, full.LogLikelihood)
	}
}

// On round, well-separated blobs every model finds the blobs, and the mean
// log-likelihood is close to that of the true mixture.
func TestGMMRecoversBlobs(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	const sd = 0.5
	xs, truth := blobs(4, 100, sd, [][]float64{{0, 0}, {10, 0}, {5, 8}})
	x := tensor(t, s, xs, 2)
	// Log-density of the true mixture (each blob separated enough that only its own
	// component counts): log(1/3) − log(2π sd²) − ||x−μ||²/(2 sd²), averaged.
	want := 0.0
	centres := [][]float64{{0, 0}, {10, 0}, {5, 8}}
	for i, l := range truth {
		dx, dy := float64(xs[2*i])-centres[l][0], float64(xs[2*i+1])-centres[l][1]
		want += math.Log(1.0/3) - math.Log(2*math.Pi*sd*sd) - (dx*dx+dy*dy)/(2*sd*sd)
	}
	want /= float64(len(truth))
	for _, cov := range []string{"diag", "full"} {
		res, tr := runGMM(t, x, GMMConfig{K: 3, Seed: 5, Covariance: cov, Restarts: 2})
		checkEM(t, res, tr, len(truth), 3)
		if !sameClustering(res.Labels, truth) {
			t.Errorf("%s: labels do not match the blobs", cov)
		}
		// The fitted mixture is the maximum-likelihood one, a little above the truth.
		if res.LogLikelihood < want || res.LogLikelihood > want+0.1 {
			t.Errorf("%s: mean log-likelihood %g, true mixture's %g", cov, res.LogLikelihood, want)
		}
	}
}

func TestGMMErrors(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	wide := s.Zeros([]int{300, MaxFullDim + 1}, torch.Float32, testDevice)
	if _, err := GMM(context.Background(), wide, GMMConfig{K: 2, Covariance: "full"}); err == nil || !strings.Contains(err.Error(), "D ≤ 256") {
		t.Errorf("full with D=257: err = %v", err)
	}
	x := tensor(t, s, make([]float32, 10*2), 2)
	for _, tc := range []struct {
		cfg  GMMConfig
		want string
	}{
		{GMMConfig{K: 20}, "gmm: K=20 is larger than the 10 rows of data"},
		{GMMConfig{K: 2, Covariance: "spherical"}, `Covariance="spherical"`},
		{GMMConfig{K: 2, Reg: -1}, "Reg=-1"},
	} {
		if _, err := GMM(context.Background(), x, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// precisionCholesky's factors must invert the covariance: PPᵀΣ = I.
func TestPrecisionCholesky(t *testing.T) {
	cov := []float32{4, 2, 0, 2, 3, 1, 0, 1, 2} // symmetric positive definite 3×3
	prec, logDet, err := precisionCholesky(cov, 1, 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		for j := range 3 {
			v := 0.0
			for a := range 3 {
				ppt := 0.0
				for b := range 3 {
					ppt += float64(prec[i*3+b]) * float64(prec[a*3+b])
				}
				v += ppt * float64(cov[a*3+j])
			}
			if want := map[bool]float64{true: 1, false: 0}[i == j]; math.Abs(v-want) > 1e-5 {
				t.Fatalf("(PPᵀΣ)[%d][%d] = %g", i, j, v)
			}
		}
	}
	// det Σ = 4(6−1) − 2(4−0) = 12.
	if want := -0.5 * math.Log(12); math.Abs(float64(logDet[0])-want) > 1e-6 {
		t.Fatalf("log det P = %g, want %g", logDet[0], want)
	}
	if _, _, err := precisionCholesky([]float32{1, 2, 2, 1}, 1, 2, 0); err == nil {
		t.Fatal("indefinite covariance accepted")
	}
}

// countdown is a context that is done from its n-th Err on: an interrupt at a known
// point of a loop, with no timer to race. Its Done never closes: the baselines poll
// Err between iterations, and a fit that waited on Done instead would run to its end
// and fail the test.
type countdown struct {
	context.Context
	n int
}

func (c *countdown) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// An interrupt stops k-means and GMM where it comes, between iterations: they return
// the context's error, wrapped, and leave no tensor behind. Ctrl-C in compare waited
// for a whole baseline before.
func TestBaselinesStopOnInterrupt(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	xs, _ := blobs(3, 200, 2.0, [][]float64{{0, 0}, {3, 0}, {1.5, 2.5}, {4, 3}})
	x := tensor(t, s, xs, 2)
	before := torch.LiveTensors()
	for _, tc := range []struct {
		name string
		fit  func(ctx context.Context) (iters int, err error)
		// least is the fewest checks a whole fit of iters iterations makes: one
		// before each restart and each iteration (for the GMM, its k-means's too),
		// besides one before each k-means++ centre after the first.
		least func(iters int) int
	}{
		{"k-means", func(ctx context.Context) (int, error) {
			res, err := KMeans(ctx, x, KMeansConfig{K: 8, Seed: 1, Restarts: 1})
			if err != nil {
				return 0, err
			}
			return res.Iters, nil
		}, func(iters int) int { return 1 + 7 + iters }},
		{"gmm-full", func(ctx context.Context) (int, error) {
			res, err := GMM(ctx, x, GMMConfig{K: 8, Seed: 1, Covariance: "full"})
			if err != nil {
				return 0, err
			}
			return res.Iters, nil
		}, func(iters int) int { return 2 + 7 + iters }},
	} {
		// Counted on a run to its end, then interrupted at the first check, the
		// second (in k-means++, at its second centre), halfway and at the last.
		all := &countdown{context.Background(), 1 << 30}
		iters, err := tc.fit(all)
		if err != nil {
			t.Fatalf("%s, not interrupted: %v", tc.name, err)
		}
		checks := 1<<30 - all.n
		if checks < tc.least(iters) || iters < 3 {
			t.Fatalf("%s: %d checks for the interrupt in a fit of %d iterations, want at least %d", tc.name, checks, iters, tc.least(iters))
		}
		for _, n := range []int{0, 1, checks / 2, checks - 1} {
			_, err := tc.fit(&countdown{context.Background(), n})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s, done at check %d of %d: %v, want the interrupt", tc.name, n+1, checks, err)
			}
			if n == 1 && tc.name == "k-means" && (err == nil || !strings.Contains(err.Error(), "k-means++")) {
				t.Errorf("k-means, done at check 2: %v, want the interrupt in k-means++", err)
			}
		}
	}
	// EM itself: an interrupt in iteration 3 ends it before iteration 4's E-step.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	last := 0
	_, err := gmm(ctx, x, GMMConfig{K: 8, Seed: 1, Tol: 1e-12, MaxIter: 50}, func(_, it int, _ float64) {
		last = it
		if it == 3 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || last != 3 {
		t.Errorf("EM interrupted in iteration 3: %v after iteration %d", err, last)
	}
	if n := torch.LiveTensors() - before; n != 0 {
		t.Errorf("%d tensors left by the interrupted fits", n)
	}
}

package baseline

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"emclust/torch"
)

// GMMConfig configures GMM. Zero fields take the defaults noted, which are
// scikit-learn's GaussianMixture defaults except for Covariance.
type GMMConfig struct {
	K        int     // number of components, 1 ≤ K ≤ N
	Restarts int     // EM runs from different k-means initialisations; default 1
	MaxIter  int     // EM iterations per restart; default 100
	Tol      float64 // stop when the mean log-likelihood changes by less; default 1e-3
	Seed     uint64  // restart r draws its k-means initialisation from PCG(Seed+r)

	// Covariance is "diag" (the default) or "full". scikit-learn defaults to full,
	// but full costs D×D per component and is limited to D ≤ MaxFullDim here, so
	// the default is the one that works for every feature width.
	Covariance string

	// Reg is added to the variances (diag) or the covariance diagonals (full) to
	// keep them positive definite, like scikit-learn's reg_covar; default 1e-6.
	Reg float64
}

// MaxFullDim is the widest data GMM fits with full covariances: their Cholesky
// factors are computed on the host, K of them per EM iteration.
const MaxFullDim = 256

func (c GMMConfig) withDefaults() (GMMConfig, error) {
	if c.Restarts == 0 {
		c.Restarts = 1
	}
	if c.MaxIter == 0 {
		c.MaxIter = 100
	}
	if c.Tol == 0 {
		c.Tol = 1e-3
	}
	if c.Reg == 0 {
		c.Reg = 1e-6
	}
	if c.Covariance == "" {
		c.Covariance = "diag"
	}
	switch {
	case c.Restarts < 0:
		return c, fmt.Errorf("gmm: Restarts=%d, want at least 1", c.Restarts)
	case c.MaxIter < 0:
		return c, fmt.Errorf("gmm: MaxIter=%d, want at least 1", c.MaxIter)
	case c.Tol < 0 || math.IsNaN(c.Tol):
		return c, fmt.Errorf("gmm: Tol=%g, want a non-negative tolerance", c.Tol)
	case c.Reg < 0 || math.IsNaN(c.Reg):
		return c, fmt.Errorf("gmm: Reg=%g, want a non-negative regulariser", c.Reg)
	case c.Covariance != "diag" && c.Covariance != "full":
		return c, fmt.Errorf("gmm: Covariance=%q, want \"diag\" or \"full\"", c.Covariance)
	}
	return c, nil
}

// GMMResult is the best EM restart.
type GMMResult struct {
	Labels        []int     // most responsible component of each row
	LogLikelihood float64   // mean log-likelihood per row under the final parameters
	Iters         int       // EM iterations of the best restart
	Weights       []float64 // mixture weights, summing to 1
}

// GMM fits a K-component Gaussian mixture to the rows of x, an N×D tensor on any
// device (other dtypes are cast to float32), by EM, keeping the restart of highest
// log-likelihood.
//
// As in scikit-learn, each restart starts from the hard responsibilities of one
// k-means run (k-means++ seeded from PCG(Seed+r)), alternates E- and M-steps until
// the mean log-likelihood changes by less than cfg.Tol, and ends with one more E-step
// so that labels and likelihood belong to the final parameters. The E-step works in
// log space (log-sum-exp over components).
//
// An interrupt (ctx done) is seen at each EM and k-means iteration and returned
// wrapped.
//
// Everything runs on x's device except, for full covariances, the Cholesky
// factorisation and triangular inverse of the K covariances, done on the host in
// float64 (gonum) and copied back as the factors P with PPᵀ = Σ⁻¹.
func GMM(ctx context.Context, x *torch.Tensor, cfg GMMConfig) (*GMMResult, error) {
	return gmm(ctx, x, cfg, nil)
}

// gmm is GMM with a hook that sees the mean log-likelihood of every E-step, the
// final one included, for tests of EM's monotonicity.
func gmm(ctx context.Context, x *torch.Tensor, cfg GMMConfig, trace func(restart, iter int, ll float64)) (*GMMResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if sh := x.Shape(); cfg.Covariance == "full" && len(sh) == 2 && sh[1] > MaxFullDim {
		return nil, fmt.Errorf("gmm: full covariances need D ≤ %d (their Cholesky factors are computed on the host), data has D=%d; use Covariance \"diag\" or reduce the dimension", MaxFullDim, sh[1])
	}
	s := torch.NoGrad()
	defer s.Close()
	p, err := preparePoints(s, x, cfg.K, "gmm", false)
	if err != nil {
		return nil, err
	}
	var best *GMMResult
	for r := range cfg.Restarts {
		var hook func(int, float64)
		if trace != nil {
			hook = func(it int, ll float64) { trace(r, it, ll) }
		}
		res, err := p.em(ctx, cfg, r, hook)
		if err != nil {
			return nil, fmt.Errorf("gmm: restart %d of %d: %w", r+1, cfg.Restarts, err)
		}
		if best == nil || res.LogLikelihood > best.LogLikelihood {
			best = res
		}
	}
	return best, nil
}

// mixture holds a mixture's parameters in the form the E-step uses.
type mixture struct {
	logWeights *torch.Tensor // 1×K
	means      *torch.Tensor // K×D
	prec       *torch.Tensor // diag: K×D inverse variances; full: K×D×D factors P, PPᵀ = Σ⁻¹
	logDet     *torch.Tensor // 1×K: log det of the precision's square root, −½ log det Σ
}

func (m *mixture) tensors() []*torch.Tensor {
	return []*torch.Tensor{m.logWeights, m.means, m.prec, m.logDet}
}

func (m *mixture) free() {
	for _, t := range m.tensors() {
		t.Free()
	}
}

// em runs restart r: the k-means initialisation, EM to convergence and a final E-step.
func (p *points) em(ctx context.Context, cfg GMMConfig, r int, hook func(iter int, ll float64)) (*GMMResult, error) {
	full := cfg.Covariance == "full"
	rng := rand.New(rand.NewPCG(cfg.Seed+uint64(r), pcgStream))
	km, err := p.kmeans(ctx, rng, 300, 1e-4)
	if err != nil {
		return nil, fmt.Errorf("k-means initialisation: %w", err)
	}

	rs := torch.NoGrad() // owns the current parameters
	defer rs.Close()
	resp := rs.Cast(rs.OneHot(rs.FromInt64(km.labels, []int{p.n}, p.dev), p.k), torch.Float32)
	m, err := p.mStep(rs, resp, full, cfg.Reg)
	if err != nil {
		return nil, fmt.Errorf("initial M-step: %w", err)
	}
	resp.Free()

	prev := math.Inf(-1)
	iters := 0
	for iters < cfg.MaxIter {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("EM iteration %d: %w", iters+1, err)
		}
		iters++
		s := torch.NoGrad()
		logResp, ll := p.eStep(s, m, full)
		if err := s.Err(); err != nil {
			s.Close()
			return nil, fmt.Errorf("E-step %d: %w", iters, err)
		}
		if hook != nil {
			hook(iters, ll)
		}
		next, err := p.mStep(s, s.Exp(logResp), full, cfg.Reg)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("M-step %d: %w", iters, err)
		}
		m.free()
		moveTo(rs, s, next.tensors()...)
		m = next
		s.Close()
		if math.Abs(ll-prev) < cfg.Tol {
			break
		}
		prev = ll
	}

	s := torch.NoGrad()
	defer s.Close()
	logResp, ll := p.eStep(s, m, full)
	best := s.Int64s(s.ArgMax(logResp, false, 1))
	logW := s.Float32s(m.logWeights)
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("final E-step: %w", err)
	}
	if hook != nil {
		hook(iters+1, ll)
	}
	if math.IsNaN(ll) || math.IsInf(ll, 0) {
		return nil, fmt.Errorf("log-likelihood is %g after %d iterations", ll, iters)
	}
	res := &GMMResult{Labels: make([]int, p.n), LogLikelihood: ll, Iters: iters, Weights: make([]float64, p.k)}
	for i, l := range best {
		res.Labels[i] = int(l)
	}
	for j, lw := range logW {
		res.Weights[j] = math.Exp(float64(lw))
	}
	return res, nil
}

// eStep returns the N×K log-responsibilities and the mean log-likelihood per row.
//
// The Mahalanobis terms are computed a component at a time from x − μ_k, which keeps
// float32 precise when a component is small and far from the origin, and each in its
// own scope, so the N×D temporaries of one component are gone before the next.
func (p *points) eStep(s *torch.Scope, m *mixture, full bool) (*torch.Tensor, float64) {
	cols := make([]*torch.Tensor, p.k)
	for j := range cols {
		c := torch.NoGrad()
		diff := c.Sub(p.x, c.Narrow(m.means, 0, j, 1))
		var maha *torch.Tensor
		if full {
			y := c.MatMul(diff, c.Reshape(c.Narrow(m.prec, 0, j, 1), p.d, p.d))
			maha = c.Sum(c.Square(y), true, 1)
		} else {
			maha = c.MatMul(c.Square(diff), c.Reshape(c.Narrow(m.prec, 0, j, 1), p.d, 1))
		}
		moveTo(s, c, maha)
		s.Fail(c.Close())
		cols[j] = maha
	}
	logProb := s.AddScalar(
		s.Add(s.MulScalar(s.Cat(1, cols...), -0.5), s.Add(m.logDet, m.logWeights)),
		-0.5*float64(p.d)*math.Log(2*math.Pi))
	logNorm := s.LogSumExp(logProb, true, 1)
	ll := s.Item(s.Mean(s.Cast(logNorm, torch.Float64), false))
	return s.Sub(logProb, logNorm), ll
}

// mStep estimates a mixture from N×K responsibilities. Following scikit-learn, the
// component masses get 10·eps (float32) so that an empty component divides by a tiny
// number instead of zero, and reg is added to every variance.
func (p *points) mStep(s *torch.Scope, resp *torch.Tensor, full bool, reg float64) (*mixture, error) {
	const eps32 = 1.1920929e-07
	k, d := p.k, p.d
	nk := s.AddScalar(s.Sum(resp, false, 0), 10*eps32) // K
	m := &mixture{
		logWeights: s.Reshape(s.Sub(s.Log(nk), s.Log(s.Sum(nk, false))), 1, k),
		means:      s.Div(s.MatMul(s.Transpose(resp, 0, 1), p.x), s.Unsqueeze(nk, 1)),
	}
	// Second moments about each component's own mean, a component at a time: the
	// expansion E[x²] − μ² would cancel catastrophically in float32.
	covs := make([]*torch.Tensor, k)
	for j := range covs {
		c := torch.NoGrad()
		diff := c.Sub(p.x, c.Narrow(m.means, 0, j, 1))
		r := c.Narrow(resp, 1, j, 1) // N×1
		var cov *torch.Tensor
		if full {
			cov = c.MatMul(c.Transpose(c.Mul(diff, r), 0, 1), diff) // D×D
		} else {
			cov = c.MatMul(c.Transpose(r, 0, 1), c.Square(diff)) // 1×D
		}
		cov = c.Div(cov, c.Narrow(nk, 0, j, 1))
		moveTo(s, c, cov)
		s.Fail(c.Close())
		covs[j] = cov
	}
	if !full {
		variance := s.AddScalar(s.Cat(0, covs...), reg) // K×D
		m.prec = s.Reciprocal(variance)
		m.logDet = s.Reshape(s.MulScalar(s.Sum(s.Log(m.prec), false, 1), 0.5), 1, k)
		return m, s.Err()
	}
	host := s.Float32s(s.Stack(0, covs...))
	if err := s.Err(); err != nil {
		return nil, err
	}
	prec, logDet, err := precisionCholesky(host, k, d, reg)
	if err != nil {
		return nil, err
	}
	m.prec = s.FromFloat32(prec, []int{k, d, d}, p.dev)
	m.logDet = s.FromFloat32(logDet, []int{1, k}, p.dev)
	return m, s.Err()
}

// precisionCholesky turns K row-major D×D covariances into the upper-triangular P = U⁻¹
// of each, where Σ + reg·I = UᵀU is gonum's Cholesky factorisation, so that
// PPᵀ = Σ⁻¹ and ||(x−μ)P||² is the squared Mahalanobis distance; logDet[k] is
// log det P = −½ log det Σ. The float32 covariances are symmetrised first, since a
// float32 matmul need not give an exactly symmetric product.
func precisionCholesky(cov []float32, k, d int, reg float64) (prec, logDet []float32, err error) {
	prec = make([]float32, k*d*d)
	logDet = make([]float32, k)
	sym := mat.NewSymDense(d, nil)
	var ch mat.Cholesky
	var u, inv mat.TriDense
	for j := range k {
		c := cov[j*d*d : (j+1)*d*d]
		for a := range d {
			for b := a; b < d; b++ {
				v := 0.5 * (float64(c[a*d+b]) + float64(c[b*d+a]))
				if a == b {
					v += reg
				}
				sym.SetSym(a, b, v)
			}
		}
		if !ch.Factorize(sym) {
			return nil, nil, fmt.Errorf("component %d: covariance is not positive definite; raise Reg (now %g)", j, reg)
		}
		ch.UTo(&u)
		if err := inv.InverseTri(&u); err != nil {
			return nil, nil, fmt.Errorf("component %d: inverting the Cholesky factor: %w", j, err)
		}
		pj := prec[j*d*d : (j+1)*d*d]
		for a := range d {
			for b := a; b < d; b++ {
				pj[a*d+b] = float32(inv.At(a, b))
			}
		}
		logDet[j] = float32(-0.5 * ch.LogDet())
	}
	return prec, logDet, nil
}

package report

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
)

// TSNEConfig holds the settings of exact t-SNE (van der Maaten and Hinton, 2008). The
// zero value of a field takes the default noted beside it, which are those of the
// paper's reference implementation as adopted by scikit-learn.
type TSNEConfig struct {
	Perplexity   float64 // effective number of neighbours; 30
	Iterations   int     // gradient steps; 1000
	Exaggeration float64 // early exaggeration of P; 12
	ExaggerIters int     // steps with exaggeration and momentum 0.5; 250
	LearningRate float64 // 200
	Seed         uint64  // the initial layout

	// Step, when set, is told after each gradient step how many are done.
	Step func(done int)
}

func (c *TSNEConfig) defaults() {
	if c.Perplexity == 0 {
		c.Perplexity = 30
	}
	if c.Iterations == 0 {
		c.Iterations = 1000
	}
	if c.Exaggeration == 0 {
		c.Exaggeration = 12
	}
	if c.ExaggerIters == 0 {
		c.ExaggerIters = 250
	}
	if c.LearningRate == 0 {
		c.LearningRate = 200
	}
}

// TSNE maps the n rows of x (n×d, row-major) to the plane and returns n×2
// coordinates. It is the exact O(n²) method: Gaussian affinities whose widths are
// found by binary search to give each point the configured perplexity, symmetrised;
// a Student-t kernel in the plane; and gradient descent with momentum (0.5 during
// early exaggeration, 0.8 after) and per-coordinate adaptive gains. Exact t-SNE is
// plenty for the few thousand points a report shows, and it has no approximation
// parameter to explain.
func TSNE(x []float64, n, d int, cfg TSNEConfig) ([]float64, error) {
	cfg.defaults()
	if n < 2 || len(x) != n*d {
		return nil, fmt.Errorf("tsne: %d values are not %d rows of %d", len(x), n, d)
	}
	// A perplexity of at least n−1 cannot be reached; shrink it for tiny inputs
	// the way scikit-learn asks users to.
	perp := min(cfg.Perplexity, float64(n-1)/3)
	if perp < 1 {
		perp = 1
	}
	p := affinities(x, n, d, perp)

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x75e))
	y := make([]float64, 2*n)
	for i := range y {
		y[i] = 1e-4 * rng.NormFloat64()
	}
	update := make([]float64, 2*n)
	gains := make([]float64, 2*n)
	for i := range gains {
		gains[i] = 1
	}
	grad := make([]float64, 2*n)
	num := make([]float64, n*n)

	exag := cfg.Exaggeration
	for i := range p {
		p[i] *= exag
	}
	for it := 0; it < cfg.Iterations; it++ {
		if it == cfg.ExaggerIters {
			for i := range p {
				p[i] /= exag
			}
		}
		momentum := 0.8
		if it < cfg.ExaggerIters {
			momentum = 0.5
		}
		gradient(p, y, num, grad, n)
		for i := range y {
			// Grow the gain of a coordinate whose gradient keeps pointing against
			// its last step, shrink it when the two agree (delta-bar-delta).
			if (grad[i] > 0) != (update[i] > 0) {
				gains[i] += 0.2
			} else {
				gains[i] *= 0.8
			}
			gains[i] = max(gains[i], 0.01)
			update[i] = momentum*update[i] - cfg.LearningRate*gains[i]*grad[i]
			y[i] += update[i]
		}
		var mx, my float64
		for i := 0; i < n; i++ {
			mx += y[2*i]
			my += y[2*i+1]
		}
		mx, my = mx/float64(n), my/float64(n)
		for i := 0; i < n; i++ {
			y[2*i] -= mx
			y[2*i+1] -= my
		}
		if cfg.Step != nil {
			cfg.Step(it + 1)
		}
	}
	for _, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("tsne: the layout diverged")
		}
	}
	return y, nil
}

// affinities returns the symmetric joint probabilities P (n×n) of the high-dimensional
// points: row i holds a Gaussian around x_i whose precision β_i is found by binary
// search so that the row's entropy is log(perplexity), and P = (P + Pᵀ)/2n.
func affinities(x []float64, n, d int, perplexity float64) []float64 {
	dist := make([]float64, n*n)
	parallel(n, func(i int) {
		xi := x[i*d : (i+1)*d]
		for j := 0; j < n; j++ {
			xj := x[j*d : (j+1)*d]
			var s float64
			for k := range xi {
				t := xi[k] - xj[k]
				s += t * t
			}
			dist[i*n+j] = s
		}
	})
	target := math.Log(perplexity)
	cond := make([]float64, n*n)
	parallel(n, func(i int) {
		row := cond[i*n : (i+1)*n]
		di := dist[i*n : (i+1)*n]
		// Distances are shifted by the row's smallest off-diagonal one, which leaves
		// the normalised row unchanged but keeps exp from underflowing to all zeros.
		dmin := math.Inf(1)
		for j, v := range di {
			if j != i {
				dmin = min(dmin, v)
			}
		}
		beta, lo, hi := 1.0, 0.0, math.Inf(1)
		for try := 0; try < 100; try++ {
			var sum, sumDP float64
			for j, v := range di {
				if j == i {
					row[j] = 0
					continue
				}
				e := math.Exp(-(v - dmin) * beta)
				row[j] = e
				sum += e
				sumDP += (v - dmin) * e
			}
			if sum == 0 {
				sum = 1e-300
			}
			h := math.Log(sum) + beta*sumDP/sum
			if math.Abs(h-target) < 1e-5 {
				break
			}
			if h > target {
				lo = beta
				if math.IsInf(hi, 1) {
					beta *= 2
				} else {
					beta = (beta + hi) / 2
				}
			} else {
				hi = beta
				beta = (beta + lo) / 2
			}
		}
		var sum float64
		for _, v := range row {
			sum += v
		}
		if sum > 0 {
			for j := range row {
				row[j] /= sum
			}
		}
	})
	p := dist // reuse: the distances are no longer needed
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			p[i*n+j] = max((cond[i*n+j]+cond[j*n+i])/(2*float64(n)), 1e-12)
		}
		p[i*n+i] = 0
	}
	return p
}

// gradient writes dC/dy for the current layout into grad, using num as scratch for
// the Student-t kernel 1/(1+‖y_i−y_j‖²).
func gradient(p, y, num, grad []float64, n int) {
	sums := make([]float64, n)
	parallel(n, func(i int) {
		var s float64
		yi0, yi1 := y[2*i], y[2*i+1]
		row := num[i*n : (i+1)*n]
		for j := 0; j < n; j++ {
			if j == i {
				row[j] = 0
				continue
			}
			a, b := yi0-y[2*j], yi1-y[2*j+1]
			v := 1 / (1 + a*a + b*b)
			row[j] = v
			s += v
		}
		sums[i] = s
	})
	var z float64
	for _, s := range sums {
		z += s
	}
	z = max(z, 1e-300)
	parallel(n, func(i int) {
		var g0, g1 float64
		yi0, yi1 := y[2*i], y[2*i+1]
		prow, nrow := p[i*n:(i+1)*n], num[i*n:(i+1)*n]
		for j := 0; j < n; j++ {
			q := max(nrow[j]/z, 1e-12)
			m := (prow[j] - q) * nrow[j]
			g0 += m * (yi0 - y[2*j])
			g1 += m * (yi1 - y[2*j+1])
		}
		grad[2*i], grad[2*i+1] = 4*g0, 4*g1
	})
}

// parallel calls f(i) for i in 0..n-1 on every CPU, in contiguous blocks.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				f(i)
			}
		})
	}
	wg.Wait()
}

// Package baseline holds the classical clustering baselines that every emclust run is
// compared with: k-means (k-means++ and Lloyd) and Gaussian mixtures fitted by EM.
//
// They run on the tensor's own device with the same libtorch binding as training, so a
// run on a GPU can print "emclust vs k-means" on the very features it clustered without
// copying them to the host. Only small things cross to the host: the N distances that
// k-means++ samples from, the distances Lloyd's iterations compute (N×K at most), the
// rows of the points that changed cluster, and for a full-covariance mixture the K D×D
// covariances, whose Cholesky factors are computed in Go with gonum.
//
// The algorithms follow scikit-learn's KMeans and GaussianMixture closely (greedy
// k-means++, the relative tolerance on the centre shift, reg_covar, k-means
// initialisation of the responsibilities) so that numbers can be read against published
// baselines; where they differ, the doc comments say so. Randomness comes from a Go PCG
// seeded by the caller, never from libtorch's generator, so a result depends only on the
// data and the seed, not on the device or on what else used libtorch's generator.
package baseline

import (
	"fmt"
	"math"

	"emclust/torch"
)

// pcgStream is the second PCG word. Restart r of a run with seed s draws from
// PCG(s+r, pcgStream), so neighbouring seeds give unrelated streams while a restart
// can still be replayed on its own.
const pcgStream = 0x9e3779b97f4a7c15

// points is the data as both algorithms see it: float32 on the caller's device, minus
// its column means. Centring is what scikit-learn does too: the distance expansion
// ||x||² − 2x·c + ||c||² loses the fewest digits near the origin, and neither inertia nor
// likelihood changes under a translation.
type points struct {
	x       *torch.Tensor // N×D, centred
	sq      *torch.Tensor // N×1 squared row norms of x
	mean    []float32     // D column means, added back to returned centres
	meanVar float64       // mean over columns of the (biased) column variance
	n, d    int
	dev     torch.Device
	k       int    // number of clusters
	who     string // "k-means" or "gmm", prefixed to errors
}

// preparePoints checks x and the cluster count k and builds the centred data in s,
// which owns it. who names the algorithm in error messages. With centred, x's columns
// are taken to have mean 0 already (standardized data) and are used as they are: the
// centred copy would be one more tensor as large as the data, for nothing.
func preparePoints(s *torch.Scope, x *torch.Tensor, k int, who string, centred bool) (*points, error) {
	if x == nil {
		return nil, fmt.Errorf("%s: nil data tensor", who)
	}
	shape := x.Shape()
	if shape == nil {
		return nil, fmt.Errorf("%s: data tensor is freed", who)
	}
	if len(shape) != 2 {
		return nil, fmt.Errorf("%s: data has shape %v, want N×D", who, shape)
	}
	n, d := shape[0], shape[1]
	if n == 0 || d == 0 {
		return nil, fmt.Errorf("%s: data has shape %v, want at least one row and one column", who, shape)
	}
	if k < 1 {
		return nil, fmt.Errorf("%s: K=%d, want at least 1", who, k)
	}
	if k > n {
		return nil, fmt.Errorf("%s: K=%d is larger than the %d rows of data", who, k, n)
	}
	xf := x
	if x.DType() != torch.Float32 {
		xf = s.Cast(x, torch.Float32)
	}
	// A NaN would otherwise surface as a meaningless clustering (argmin of NaN rows is
	// arbitrary) rather than an error. A finite column sum proves every value finite;
	// only when one is not are the bad values counted, a pass 50× slower.
	mean := s.Mean(xf, true, 0)
	meanHost := s.Float32s(mean)
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s: checking data: %w", who, err)
	}
	if !allFinite(meanHost) {
		bad := s.CountNotFinite(xf)
		if err := s.Err(); err != nil {
			return nil, fmt.Errorf("%s: checking data: %w", who, err)
		}
		if bad > 0 {
			return nil, fmt.Errorf("%s: data contains %d NaN or infinite values", who, bad)
		}
		return nil, fmt.Errorf("%s: data too large: a column's mean overflows float32", who)
	}
	xc := xf
	if centred {
		clear(meanHost) // nothing to add back to the centres
	} else {
		xc = s.Sub(xf, mean)
	}
	sq := rowSquares(s, xc)
	total := s.Item(s.Sum(sq, false))
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s: preparing data: %w", who, err)
	}
	if math.IsInf(total, 0) || math.IsNaN(total) {
		// Finite values whose squares overflow float32 would make every distance NaN.
		return nil, fmt.Errorf("%s: data too large: squared distances overflow float32 (standardise the features)", who)
	}
	p := &points{
		x:    xc,
		sq:   sq,
		mean: meanHost,
		// The mean column variance of centred data is Σ||x_i||² / (N·D).
		meanVar: total / float64(n) / float64(d),
		n:       n,
		d:       d,
		dev:     x.Device(),
		k:       k,
		who:     who,
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s: preparing data: %w", who, err)
	}
	return p, nil
}

// rowSquares is the N×1 squared row norms of x, made 8 192 rows at a time: the
// squares of all of x at once would be a temporary as large as the data.
func rowSquares(s *torch.Scope, x *torch.Tensor) *torch.Tensor {
	if s.Err() != nil {
		return nil // x may be nil: the centred copy did not fit
	}
	out, err := byRows(s, x.Shape()[0], 1, 8192, x.Device(), func(cs *torch.Scope, start, m int) *torch.Tensor {
		return cs.Sum(cs.Square(cs.Narrow(x, 0, start, m)), true, 1)
	})
	s.Fail(err)
	return out
}

// byRows is an n×cols float32 tensor in s whose rows are rows(cs, start, m), made chunk
// rows at a time in a scope cs of their own, so that no more than a chunk's
// temporaries exist at once.
func byRows(s *torch.Scope, n, cols, chunk int, dev torch.Device, rows func(cs *torch.Scope, start, m int) *torch.Tensor) (*torch.Tensor, error) {
	out := s.Empty([]int{n, cols}, torch.Float32, dev)
	if err := s.Err(); err != nil {
		return nil, err
	}
	for start := 0; start < n; start += chunk {
		m := min(chunk, n-start)
		cs := torch.NoGrad()
		cs.CopyInto(cs.Narrow(out, 0, start, m), rows(cs, start, m))
		if err := cs.Close(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func allFinite(v []float32) bool {
	for _, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return false
		}
	}
	return true
}

// sqDist is the N×K matrix of squared distances from every point to the rows of c,
// by the expansion ||x||² − 2x·cᵀ + ||c||² (one matmul instead of an N×K×D tensor),
// clamped at 0 where rounding made it negative.
func (p *points) sqDist(s *torch.Scope, c *torch.Tensor) *torch.Tensor {
	return s.SqDist(p.x, p.sq, c)
}

// moveTo hands tensors made in a short-lived scope to a longer-lived one, so that the
// scope of one iteration can close while its results live on.
func moveTo(dst, src *torch.Scope, ts ...*torch.Tensor) {
	for _, t := range ts {
		dst.Adopt(src.Keep(t))
	}
}

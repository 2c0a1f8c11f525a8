package train

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"emclust/eval"
	"emclust/torch"
)

// silhouetteRows caps the rows a silhouette is computed on, since its distances grow
// as the square of the rows: a larger set is scored on a seeded sample of this many
// (scikit-learn's silhouette_score offers the same sample_size).
const silhouetteRows = 4000

// silhouetteChunk is how many rows' distances are held at once (chunk × rows float64).
const silhouetteChunk = 512

// silhouettes returns the mean silhouette of each clustering (cluster ids in 0..k-1,
// one per row of features) on at most limit rows (sampleRows) of the features, or
// with zscore of their z-scored columns (each shifted and scaled to mean 0 and
// variance 1, so that the score weighs features alike whatever their units and
// whether or not the run standardised them). The Euclidean distances are computed
// on features' device in float64, one chunk of rows at a time, and summed per
// cluster of every clustering in the same pass.
func silhouettes[L eval.Label](features *torch.Tensor, clusterings [][]L, k, limit int, seed uint64, zscore bool) ([]float64, error) {
	s := torch.NoGrad()
	defer s.Close()
	shape := features.Shape()
	n := shape[0]
	for i, c := range clusterings {
		if len(c) != n {
			return nil, fmt.Errorf("silhouette: clustering %d has %d rows, the features %d", i+1, len(c), n)
		}
	}
	dev := features.Device()
	x := s.Reshape(features, n, -1)
	rows := sampleRows(n, limit, seed)
	if len(rows) < n {
		idx := make([]int64, len(rows))
		for i, r := range rows {
			idx[i] = int64(r)
		}
		x = s.IndexSelect(x, 0, s.FromInt64(idx, []int{len(idx)}, dev))
	}
	x = s.Cast(x, torch.Float64)
	m := len(rows)
	var err error
	if zscore {
		if x, err = zscoreColumns(s, x); err != nil {
			return nil, err
		}
	}

	// One-hot columns of every clustering side by side: m × (len(clusterings)·k).
	ids := make([]int64, 0, m*len(clusterings))
	for _, r := range rows {
		for _, c := range clusterings {
			if c[r] < 0 || int(c[r]) >= k {
				return nil, fmt.Errorf("silhouette: row %d has cluster %d, want 0..%d", r, c[r], k-1)
			}
			ids = append(ids, int64(c[r]))
		}
	}
	onehot := s.Reshape(s.Cast(s.OneHot(s.FromInt64(ids, []int{m, len(clusterings)}, dev), k), torch.Float64), m, len(clusterings)*k)
	sq := s.Sum(s.Square(x), false, 1) // |x_j|², m
	xt := s.Transpose(x, 0, 1)
	sums := make([]float32, 0, m*len(clusterings)*k)
	for lo := 0; lo < m; lo += silhouetteChunk {
		cs := torch.NoGrad()
		w := min(silhouetteChunk, m-lo)
		xc := cs.Narrow(x, 0, lo, w)
		// |a−b|² = |a|² + |b|² − 2a·b, clamped at 0 against rounding. Each chunk ×
		// rows temporary (16 MB at 512 × 4000) is freed once the next is made: at
		// most three are live, not six.
		norms := cs.Add(cs.Unsqueeze(cs.Narrow(sq, 0, lo, w), 1), cs.Unsqueeze(sq, 0))
		dot := cs.MatMul(xc, xt)
		dot2 := cs.MulScalar(dot, -2)
		dot.Free()
		d2 := cs.Add(norms, dot2)
		norms.Free()
		dot2.Free()
		pos := cs.ClampMin(d2, 0)
		d2.Free()
		d := cs.Sqrt(pos)
		pos.Free()
		sums = append(sums, cs.Float32s(cs.Cast(cs.MatMul(d, onehot), torch.Float32))...)
		err := cs.Close()
		if err != nil {
			return nil, fmt.Errorf("silhouette: %w", err)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("silhouette: %w", err)
	}
	out := make([]float64, len(clusterings))
	width := len(clusterings) * k
	per := make([][]float64, m)
	own := make([]int, m)
	for ci, c := range clusterings {
		for i, r := range rows {
			row := sums[i*width+ci*k : i*width+(ci+1)*k]
			per[i] = per[i][:0]
			for _, v := range row {
				per[i] = append(per[i], float64(v))
			}
			own[i] = int(c[r])
		}
		sil, err := eval.SilhouetteFromSums(own, per)
		if err != nil {
			return nil, err
		}
		out[ci] = sil
	}
	return out, nil
}

// Silhouettes are the mean silhouettes of clusterings of src's rows (ids in 0..k-1)
// on its features as trained, on a sample of silhouetteRows rows drawn by seed
// where it has more.
func Silhouettes(src Source, clusterings [][]int, k int, seed uint64) ([]float64, error) {
	s := torch.NoGrad()
	defer s.Close()
	return silhouettes(src.Features(s), clusterings, k, silhouetteRows, seed, false)
}

// sampleRows returns all n row indices if n ≤ limit, else limit of them drawn without
// replacement from a PCG seeded by seed, in increasing order.
func sampleRows(n, limit int, seed uint64) []int {
	if n <= limit {
		rows := make([]int, n)
		for i := range rows {
			rows[i] = i
		}
		return rows
	}
	rows := rand.New(rand.NewPCG(seed, 0x5111)).Perm(n)[:limit]
	slices.Sort(rows)
	return rows
}

// zscoreColumns shifts and scales each column of x (float64, rows × columns) to mean
// 0 and variance 1; a constant column stays 0 rather than dividing by its zero spread.
func zscoreColumns(s *torch.Scope, x *torch.Tensor) (*torch.Tensor, error) {
	x = s.Sub(x, s.Mean(x, true, 0))
	std := s.Float32s(s.Cast(s.Sqrt(s.Mean(s.Square(x), true, 0)), torch.Float32))
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("silhouette: %w", err)
	}
	for i, v := range std {
		if v < 1e-6 {
			std[i] = 1
		}
	}
	return s.Div(x, s.Cast(s.FromFloat32(std, []int{1, len(std)}, x.Device()), torch.Float64)), nil
}

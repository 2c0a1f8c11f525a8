package train

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"emclust/torch"
)

// silhouetteByDefinition is Rousseeuw's silhouette of ids on the rows of x (n×d,
// row-major), z-scored per column if zscore, straight from the definition in float64.
func silhouetteByDefinition(x []float64, n, d int, ids []int, zscore bool) float64 {
	z := slices.Clone(x)
	for c := range d {
		if !zscore {
			break
		}
		mean, sq := 0.0, 0.0
		for i := range n {
			mean += x[i*d+c]
		}
		mean /= float64(n)
		for i := range n {
			sq += (x[i*d+c] - mean) * (x[i*d+c] - mean)
		}
		std := math.Sqrt(sq / float64(n))
		for i := range n {
			z[i*d+c] = x[i*d+c] - mean
			if std > 1e-6 {
				z[i*d+c] /= std
			}
		}
	}
	dist := func(i, j int) float64 {
		s := 0.0
		for c := range d {
			s += (z[i*d+c] - z[j*d+c]) * (z[i*d+c] - z[j*d+c])
		}
		return math.Sqrt(s)
	}
	total := 0.0
	for i := range n {
		sum, count := map[int]float64{}, map[int]int{}
		for j := range n {
			if j != i {
				sum[ids[j]] += dist(i, j)
			}
			count[ids[j]]++
		}
		if count[ids[i]] == 1 {
			continue
		}
		a, b := sum[ids[i]]/float64(count[ids[i]]-1), math.Inf(1)
		for c, s := range sum {
			if c != ids[i] {
				b = min(b, s/float64(count[c]))
			}
		}
		total += (b - a) / max(a, b)
	}
	return total / float64(n)
}

// The device computation (several clusterings in one pass, chunked, sampled) gives
// the definition's silhouette, on the features as they are and z-scored: columns in
// wildly different units, a constant column, more rows than a chunk, and a sample
// smaller than the rows.
func TestSilhouettes(t *testing.T) {
	const n, d, k = 700, 4, 3
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float64, n*d)
	x32 := make([]float32, n*d)
	truth := make([]int, n)
	for i := range n {
		truth[i] = i % k
		x[i*d+0] = float64(truth[i])*3 + rng.NormFloat64()
		x[i*d+1] = 1000 * (float64(truth[i]%2) + rng.NormFloat64())
		x[i*d+2] = 7 // constant
		x[i*d+3] = rng.NormFloat64() / 1000
	}
	for i, v := range x {
		x32[i] = float32(v)
		x[i] = float64(x32[i]) // the tensor holds float32
	}
	random := make([]int, n)
	for i := range random {
		random[i] = rng.IntN(k)
	}
	clusterings := [][]int{truth, random, make([]int, n)} // the last: one cluster
	s := torch.NoGrad()
	defer s.Close()
	feat := s.FromFloat32(x32, []int{n, d}, testDevice)
	for _, tc := range []struct {
		limit  int
		zscore bool
	}{{n, true}, {300, true}, {n, false}, {300, false}} {
		limit := tc.limit
		got, err := silhouettes(feat, clusterings, k, limit, 9, tc.zscore)
		if err != nil {
			t.Fatal(err)
		}
		rows := sampleRows(n, limit, 9)
		sub := make([]float64, 0, len(rows)*d)
		for _, r := range rows {
			sub = append(sub, x[r*d:(r+1)*d]...)
		}
		for c, ids := range clusterings[:2] {
			sampled := make([]int, len(rows))
			for i, r := range rows {
				sampled[i] = ids[r]
			}
			want := silhouetteByDefinition(sub, len(rows), d, sampled, tc.zscore)
			if math.Abs(got[c]-want) > 1e-5 {
				t.Errorf("limit %d, z-score %v, clustering %d: silhouette %.7f, want %.7f", limit, tc.zscore, c, got[c], want)
			}
		}
		if got[2] != -1 {
			t.Errorf("limit %d, z-score %v: one cluster has silhouette %v, want -1", limit, tc.zscore, got[2])
		}
		if tc.zscore && (got[0] < 0.1 || math.Abs(got[1]) > 0.05) {
			t.Errorf("limit %d: silhouettes %v; want the true clusters well above a random split, and that near 0", limit, got)
		}
	}
	if _, err := silhouettes(feat, [][]int{truth[:n-1]}, k, n, 1, true); err == nil {
		t.Error("a clustering of the wrong length was scored")
	}
	bad := slices.Clone(truth)
	bad[5] = k
	if _, err := silhouettes(feat, [][]int{bad}, k, n, 1, true); err == nil {
		t.Error("a cluster id ≥ k was scored")
	}
}

func TestSampleRows(t *testing.T) {
	if got := sampleRows(5, 10, 1); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("sampleRows(5, 10) = %v, want every row", got)
	}
	got := sampleRows(1000, 100, 1)
	if len(got) != 100 || !slices.IsSorted(got) || got[0] < 0 || got[99] >= 1000 || len(slices.Compact(slices.Clone(got))) != 100 {
		t.Errorf("sampleRows(1000, 100) = %v, want 100 distinct rows in order", got)
	}
	if !slices.Equal(got, sampleRows(1000, 100, 1)) || slices.Equal(got, sampleRows(1000, 100, 2)) {
		t.Error("the sample is not a function of its seed")
	}
}

package eval

import (
	"math"
	"math/rand/v2"
	"testing"
)

// sumsOf is the per-cluster distance sums of points xs under ids, for k clusters.
func sumsOf(xs [][]float64, ids []int, k int) [][]float64 {
	out := make([][]float64, len(xs))
	for i, x := range xs {
		out[i] = make([]float64, k)
		for j, y := range xs {
			d := 0.0
			for c := range x {
				d += (x[c] - y[c]) * (x[c] - y[c])
			}
			out[i][ids[j]] += math.Sqrt(d)
		}
	}
	return out
}

func TestSilhouetteFromSums(t *testing.T) {
	tests := []struct {
		name string
		xs   [][]float64
		ids  []int
		k    int
		want float64
	}{
		// Points 0, 1 | 5, 6: a = 1 for all; b = 5.5, 4.5, 4.5, 5.5.
		{"two pairs", [][]float64{{0}, {1}, {5}, {6}}, []int{0, 0, 1, 1}, 2,
			((1 - 1/5.5) + (1 - 1/4.5) + (1 - 1/4.5) + (1 - 1/5.5)) / 4},
		// The same points split badly: 0, 5 | 1, 6. a = 5 for all; b = (1+6)/2, (4+1)/2, (1+4)/2, (6+1)/2.
		{"crossed pairs", [][]float64{{0}, {5}, {1}, {6}}, []int{0, 0, 1, 1}, 2,
			((3.5-5)/5 + (2.5-5)/5 + (2.5-5)/5 + (3.5-5)/5) / 4},
		// A singleton scores 0: 0 alone; 4, 6 together: a = 2, b = 4 and 6.
		{"singleton", [][]float64{{0}, {4}, {6}}, []int{0, 1, 1}, 2, (0 + (1 - 2.0/4) + (1 - 2.0/6)) / 3},
		// An empty third cluster changes nothing.
		{"empty cluster", [][]float64{{0}, {1}, {5}, {6}}, []int{0, 0, 2, 2}, 3,
			((1 - 1/5.5) + (1 - 1/4.5) + (1 - 1/4.5) + (1 - 1/5.5)) / 4},
		{"one cluster", [][]float64{{0}, {1}, {5}}, []int{1, 1, 1}, 2, -1},
		// 3-4-5 triangle in 2-d: (0,0), (3,0) | (3,4): a = 3, 3; b = 5, 4; the singleton 0.
		{"2-d", [][]float64{{0, 0}, {3, 0}, {3, 4}}, []int{0, 0, 1}, 2, ((1 - 3.0/5) + (1 - 3.0/4) + 0) / 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SilhouetteFromSums(tt.ids, sumsOf(tt.xs, tt.ids, tt.k))
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("silhouette %v, want %v", got, tt.want)
			}
		})
	}
}

// Better-separated clusters score higher, and a labelling that matches the clusters
// beats a random one: the property restarts are chosen by.
func TestSilhouetteRanksSeparation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	blobs := func(gap float64) ([][]float64, []int) {
		var xs [][]float64
		var ids []int
		for i := range 60 {
			c := i % 3
			xs = append(xs, []float64{gap*float64(c) + rng.NormFloat64(), rng.NormFloat64()})
			ids = append(ids, c)
		}
		return xs, ids
	}
	score := func(xs [][]float64, ids []int) float64 {
		s, err := SilhouetteFromSums(ids, sumsOf(xs, ids, 3))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	near, nearIDs := blobs(2)
	far, farIDs := blobs(10)
	if sn, sf := score(near, nearIDs), score(far, farIDs); !(sf > sn && sf > 0.7 && sf <= 1) {
		t.Errorf("silhouette of blobs 10 apart %v, 2 apart %v: want the far ones higher, above 0.7", sf, sn)
	}
	shuffled := append([]int(nil), farIDs...)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if s := score(far, shuffled); s >= 0.1 {
		t.Errorf("silhouette of a random labelling %v, want near 0 or below", s)
	}
}

func TestSilhouetteFromSumsErrors(t *testing.T) {
	tests := []struct {
		name string
		ids  []int
		sums [][]float64
	}{
		{"no points", nil, nil},
		{"length mismatch", []int{0, 1}, [][]float64{{0, 1}}},
		{"id out of range", []int{0, 2}, [][]float64{{0, 1}, {1, 0}}},
		{"negative id", []int{0, -1}, [][]float64{{0, 1}, {1, 0}}},
		{"ragged sums", []int{0, 1}, [][]float64{{0, 1}, {1}}},
	}
	for _, tt := range tests {
		if _, err := SilhouetteFromSums(tt.ids, tt.sums); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

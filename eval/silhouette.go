package eval

import (
	"fmt"
	"math"
)

// SilhouetteFromSums returns the mean silhouette of a clustering (Rousseeuw 1987) of
// n points, given for each point i and cluster j the sum of the distances from i to
// the points of cluster j (its own distance to itself, 0, included). Taking sums lets
// the caller compute the distances where it likes (train does so on the device) and
// score many clusterings of the same points in one pass.
//
// A point alone in its cluster scores 0, as in scikit-learn. A clustering with fewer
// than two non-empty clusters has no silhouette; it scores -1, the worst value, so
// that a collapsed restart never wins.
func SilhouetteFromSums(ids []int, sums [][]float64) (float64, error) {
	if len(ids) != len(sums) {
		return 0, fmt.Errorf("silhouette: %d cluster ids but %d rows of distance sums", len(ids), len(sums))
	}
	if len(ids) == 0 {
		return 0, fmt.Errorf("silhouette: no points")
	}
	k := len(sums[0])
	count := make([]int, k)
	for i, id := range ids {
		if id < 0 || id >= k {
			return 0, fmt.Errorf("silhouette: point %d has cluster %d, want 0..%d", i, id, k-1)
		}
		if len(sums[i]) != k {
			return 0, fmt.Errorf("silhouette: row %d has %d sums, want %d", i, len(sums[i]), k)
		}
		count[id]++
	}
	nonEmpty := 0
	for _, c := range count {
		if c > 0 {
			nonEmpty++
		}
	}
	if nonEmpty < 2 {
		return -1, nil
	}
	total := 0.0
	for i, own := range ids {
		if count[own] == 1 {
			continue
		}
		a := sums[i][own] / float64(count[own]-1)
		b := math.Inf(1)
		for j, c := range count {
			if j != own && c > 0 {
				b = min(b, sums[i][j]/float64(c))
			}
		}
		if m := max(a, b); m > 0 {
			total += (b - a) / m
		}
	}
	return total / float64(len(ids)), nil
}

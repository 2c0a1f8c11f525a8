// Package eval scores a clustering against ground-truth labels.
//
// It provides the three external metrics that deep-clustering papers
// report (clustering accuracy, normalized mutual information and the
// adjusted Rand index), the linear sum assignment that accuracy needs,
// and small helpers for summarising scores over several runs.
//
// NMI and ARI follow scikit-learn's normalized_mutual_info_score (with its
// default arithmetic normalisation) and adjusted_rand_score, edge cases
// included, so that numbers are comparable with the Python literature.
package eval

import (
	"errors"
	"fmt"
	"slices"
)

// Contingency cross-tabulates two labelings of the same points.
//
// table[i][j] counts the points whose true label is classes[i] and whose
// predicted cluster is clusters[j]. classes and clusters hold the distinct
// labels of truth and pred in increasing order, so label values need not be
// contiguous: a clustering that leaves some cluster ids empty yields no
// all-zero column for them.
//
// Labels must be non-negative; negative values usually mean "noise" or
// "unlabelled" in other tools, and silently scoring them as an ordinary
// class would distort every metric.
func Contingency[L Label](truth, pred []L) (table [][]int, classes, clusters []L, err error) {
	if err := checkLabelings(truth, pred); err != nil {
		return nil, nil, nil, err
	}
	classes, classOf := index(truth)
	clusters, clusterOf := index(pred)
	if len(classes)*len(clusters) > MaxTableCells {
		// The table, and accuracy's cost matrix beside it: 100 000 distinct ids
		// against themselves ran a machine out of memory.
		return nil, nil, nil, fmt.Errorf("eval: %d classes × %d clusters make a table of more than %d cells: is one labelling a column of ids or scores?", len(classes), len(clusters), MaxTableCells)
	}
	cells := make([]int, len(classes)*len(clusters))
	table = make([][]int, len(classes))
	for i := range table {
		table[i] = cells[i*len(clusters) : (i+1)*len(clusters) : (i+1)*len(clusters)]
	}
	for n := range truth {
		table[classOf[n]][clusterOf[n]]++
	}
	return table, classes, clusters, nil
}

// MaxTableCells bounds the contingency table: 256 MiB of counts, as much again
// for accuracy's costs.
const MaxTableCells = 1 << 25

// Label is the type of a labelling's entries: int, or int32 where millions of rows
// are kept at once (a run's restarts).
type Label interface{ ~int | ~int32 }

// checkLabelings reports why truth and pred cannot be compared, if they can't.
func checkLabelings[L Label](truth, pred []L) error {
	if len(truth) != len(pred) {
		return fmt.Errorf("eval: truth has %d labels but pred has %d", len(truth), len(pred))
	}
	if len(truth) == 0 {
		return errors.New("eval: no labels to compare")
	}
	for n, l := range truth {
		if l < 0 {
			return fmt.Errorf("eval: negative truth label %d at index %d", l, n)
		}
	}
	for n, l := range pred {
		if l < 0 {
			return fmt.Errorf("eval: negative predicted label %d at index %d", l, n)
		}
	}
	return nil
}

// index returns the sorted distinct values of labels and, for each entry, its
// value's position in that list. Clusters and classes are small ids, counted in a
// slice: a map lookup per entry made an epoch's agreement with the five before it a
// quarter of a small network's training time. Sparse ids (a column of ids, say) go
// through a map.
func index[L Label](labels []L) (values []L, code []int32) {
	code = make([]int32, len(labels))
	var hi L
	for _, l := range labels {
		hi = max(hi, l)
	}
	if int64(hi) < 2*int64(len(labels))+1024 {
		pos := make([]int32, int(hi)+1)
		for _, l := range labels {
			pos[l] = 1
		}
		for v, seen := range pos {
			if seen != 0 {
				pos[v] = int32(len(values))
				values = append(values, L(v))
			}
		}
		for n, l := range labels {
			code[n] = pos[l]
		}
		return values, code
	}
	pos := make(map[L]int32)
	for _, l := range labels {
		if _, ok := pos[l]; !ok {
			pos[l] = 0
			values = append(values, l)
		}
	}
	slices.Sort(values)
	for i, v := range values {
		pos[v] = int32(i)
	}
	for n, l := range labels {
		code[n] = pos[l]
	}
	return values, code
}

// ClusterSizes counts the points in each cluster 0..k-1.
//
// Empty clusters appear as zeros, which is the point: a collapsed
// clustering is easy to spot from its sizes. If pred holds an id >= k the
// result grows to include it rather than dropping points; negative ids have
// no slot and are not counted.
func ClusterSizes[L Label](pred []L, k int) []int {
	n := max(k, 0)
	for _, c := range pred {
		n = max(n, int(c)+1)
	}
	sizes := make([]int, n)
	for _, c := range pred {
		if c >= 0 {
			sizes[c]++
		}
	}
	return sizes
}

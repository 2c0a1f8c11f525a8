package eval

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
)

// ACC returns the clustering accuracy of pred against truth: the fraction
// of points that are correct under the best one-to-one mapping of clusters
// to classes.
//
// Cluster ids are arbitrary, so plain accuracy is meaningless; the best
// mapping is found exactly with Hungarian on the contingency table. The
// numbers of clusters and classes may differ: clusters left without a
// class (or classes without a cluster) contribute no correct points, which
// is what makes over- or under-clustering cost accuracy.
func ACC(truth, pred []int) (float64, error) {
	table, _, _, err := Contingency(truth, pred)
	if err != nil {
		return 0, fmt.Errorf("ACC: %w", err)
	}
	acc, err := accuracy(table, len(truth))
	if err != nil {
		return 0, fmt.Errorf("ACC: %w", err)
	}
	return acc, nil
}

// accuracy computes ACC from a contingency table over n points.
func accuracy(table [][]int, n int) (float64, error) {
	cost := make([][]float64, len(table))
	for i, row := range table {
		cost[i] = make([]float64, len(row))
		for j, x := range row {
			cost[i][j] = -float64(x)
		}
	}
	_, total, err := Hungarian(cost)
	if err != nil {
		return 0, err
	}
	// total is a sum of integers well below 2^53, hence exact.
	return -total / float64(n), nil
}

// NMI returns the normalized mutual information between truth and pred,
// using the natural logarithm and the arithmetic mean of the two entropies
// as normaliser: MI / ((H(truth)+H(pred))/2).
//
// It matches scikit-learn's normalized_mutual_info_score with its default
// average_method="arithmetic", edge cases included: 1 when both labelings
// put every point in one cluster (they agree perfectly), and 0 whenever the
// mutual information is zero, in particular when only one side is a single
// cluster.
func NMI(truth, pred []int) (float64, error) {
	table, _, _, err := Contingency(truth, pred)
	if err != nil {
		return 0, fmt.Errorf("NMI: %w", err)
	}
	return nmi(table), nil
}

// nmi computes NMI from a contingency table, mirroring scikit-learn's
// arithmetic so that results agree to the last few bits.
func nmi(table [][]int) float64 {
	rows, cols := marginals(table)
	if len(rows) == 1 && len(cols) == 1 {
		return 1
	}
	mi := mutualInfo(table, rows, cols)
	if mi == 0 {
		return 0
	}
	// At most 1: a clustering equal to the truth came out as 1.0000000000000002 in
	// --json, its MI and entropies rounded apart.
	return min(1, mi/((entropy(rows)+entropy(cols))/2))
}

// marginals returns the row and column sums of table.
func marginals(table [][]int) (rows, cols []int) {
	rows = make([]int, len(table))
	cols = make([]int, len(table[0]))
	for i, row := range table {
		for j, x := range row {
			rows[i] += x
			cols[j] += x
		}
	}
	return rows, cols
}

// mutualInfo returns the mutual information, in nats, of the joint
// distribution given by table with marginal counts rows and cols.
func mutualInfo(table [][]int, rows, cols []int) float64 {
	// A labeling with a single cluster has zero entropy, and MI <= H.
	if len(rows) == 1 || len(cols) == 1 {
		return 0
	}
	var n int
	for _, x := range rows {
		n += x
	}
	logN := math.Log(float64(n))
	var mi float64
	for i, row := range table {
		for j, nij := range row {
			if nij == 0 {
				continue
			}
			p := float64(nij) / float64(n)
			// log(nij·n / (ai·bj)) split into sums of logs, as scikit-learn
			// does, to avoid overflow and loss of precision in the ratio.
			logOuter := -math.Log(float64(rows[i]*cols[j])) + logN + logN
			term := p*(math.Log(float64(nij))-logN) + p*logOuter
			// Terms that are zero in exact arithmetic come out as rounding
			// noise; scikit-learn drops anything below machine epsilon.
			if math.Abs(term) < epsilon {
				term = 0
			}
			mi += term
		}
	}
	return max(mi, 0)
}

// epsilon is the float64 machine epsilon, numpy's finfo(float64).eps.
const epsilon = 0x1p-52

// entropy returns the entropy, in nats, of the distribution with the given
// non-zero counts.
func entropy(counts []int) float64 {
	if len(counts) == 1 {
		return 0
	}
	var n int
	for _, x := range counts {
		n += x
	}
	logN := math.Log(float64(n))
	var h float64
	for _, x := range counts {
		h -= float64(x) / float64(n) * (math.Log(float64(x)) - logN)
	}
	return h
}

// ARI returns the adjusted Rand index of pred against truth (Hubert and
// Arabie, 1985): the Rand index corrected for chance, so that random
// labelings score about 0 and identical partitions score 1. It can be
// negative for labelings that agree less than chance.
//
// It matches scikit-learn's adjusted_rand_score, which computes it from the
// pair confusion matrix and defines it as 1 whenever the two partitions
// agree on every pair, which covers both labelings being a single cluster
// or both being all singletons, where the usual formula is 0/0.
func ARI[L Label](truth, pred []L) (float64, error) {
	table, _, _, err := Contingency(truth, pred)
	if err != nil {
		return 0, fmt.Errorf("ARI: %w", err)
	}
	return ari(table), nil
}

// ari computes ARI from a contingency table.
func ari(table [][]int) float64 {
	rows, cols := marginals(table)
	// Counts of ordered pairs of distinct points: together in both
	// partitions (tp), only in truth (fn), only in pred (fp), in neither (tn).
	var n, sumSquares, rowDot, colDot int64
	for i, row := range table {
		for j, x := range row {
			nij := int64(x)
			n += nij
			sumSquares += nij * nij
			rowDot += nij * int64(rows[i])
			colDot += nij * int64(cols[j])
		}
	}
	tp := sumSquares - n
	fp := colDot - sumSquares
	fn := rowDot - sumSquares
	tn := n*n - fp - fn - sumSquares
	if fn == 0 && fp == 0 {
		return 1
	}
	// The products below are O(n^4) and overflow int64 once n passes a few
	// tens of thousands, which is the size of MNIST; compute them exactly.
	b := func(x int64) *big.Int { return big.NewInt(x) }
	mul := func(x, y int64) *big.Int { return new(big.Int).Mul(b(x), b(y)) }
	num := new(big.Int).Sub(mul(tp, tn), mul(fn, fp))
	den := new(big.Int).Add(mul(tp+fn, fn+tn), mul(tp+fp, fp+tn))
	numF, _ := new(big.Float).SetInt(num).Float64()
	denF, _ := new(big.Float).SetInt(den).Float64()
	return 2 * numF / denF
}

// Scores holds the three metrics usually reported for a clustering.
type Scores struct {
	ACC float64 `json:"acc"`
	NMI float64 `json:"nmi"`
	ARI float64 `json:"ari"`
	// Scored is how many points were scored where ScoreLabelled left some out (0:
	// all were), so that a score of a few labelled rows is not read as one of all.
	Scored int `json:"scored_rows,omitempty"`
}

// Score computes ACC, NMI and ARI of pred against truth, building the
// contingency table only once.
func Score(truth, pred []int) (Scores, error) {
	table, _, _, err := Contingency(truth, pred)
	if err != nil {
		return Scores{}, fmt.Errorf("score: %w", err)
	}
	acc, err := accuracy(table, len(truth))
	if err != nil {
		return Scores{}, fmt.Errorf("score: ACC: %w", err)
	}
	return Scores{ACC: acc, NMI: nmi(table), ARI: ari(table)}, nil
}

// ScoreLabelled is Score over the points whose truth is not negative: a negative
// truth marks a point without a class (data.Unlabelled, an empty label cell), which
// is clustered but cannot be scored. Where it leaves points out, the result's Scored
// says how many it scored.
func ScoreLabelled(truth, pred []int) (Scores, error) {
	if len(truth) != len(pred) {
		return Scores{}, fmt.Errorf("score: truth has %d labels but pred has %d", len(truth), len(pred))
	}
	n := ScoredRows(truth)
	if n == 0 {
		if slices.ContainsFunc(truth, func(t int) bool { return t < 0 }) {
			return Scores{}, errors.New("score: no point has a class to score against")
		}
		return Score(truth, pred)
	}
	t, p := make([]int, 0, n), make([]int, 0, n)
	for i, l := range truth {
		if l >= 0 {
			t, p = append(t, l), append(p, pred[i])
		}
	}
	s, err := Score(t, p)
	s.Scored = n
	return s, err
}

// ScoredRows is how many points of truth ScoreLabelled scores where it leaves some
// out (a negative truth), and 0 where it scores them all: Scores.Scored.
func ScoredRows(truth []int) int {
	n := 0
	for _, t := range truth {
		if t >= 0 {
			n++
		}
	}
	if n == len(truth) {
		return 0
	}
	return n
}

// String formats s as "ACC 0.8123 NMI 0.7710 ARI 0.6934", the form used in
// logs and result tables, followed by " on 120 labelled rows" where Scored is set.
func (s Scores) String() string {
	str := fmt.Sprintf("ACC %.4f NMI %.4f ARI %.4f", s.ACC, s.NMI, s.ARI)
	if s.Scored > 0 {
		str += fmt.Sprintf(" on %d labelled rows", s.Scored)
	}
	return str
}

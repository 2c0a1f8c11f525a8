package eval

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// MeanStd returns the mean and the sample standard deviation (divisor n-1)
// of xs, the usual "mean ± std over seeds" summary.
//
// The mean of no values is NaN. The standard deviation is 0 for fewer than
// two values, so that a single run still prints as a plain number.
func MeanStd(xs []float64) (mean, std float64) {
	n := len(xs)
	if n == 0 {
		return math.NaN(), 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(n)
	if n < 2 {
		return mean, 0
	}
	// Two-pass with compensation: exact for constant inputs and accurate
	// when the spread is small compared to the mean, as with scores.
	var ss, comp float64
	for _, x := range xs {
		d := x - mean
		ss += d * d
		comp += d
	}
	ss -= comp * comp / float64(n)
	return mean, math.Sqrt(ss / float64(n-1))
}

// MeanCI95 returns the mean of xs and the half-width of its two-sided 95%
// confidence interval, t(0.975, n-1) · s / √n.
//
// Student's t rather than the normal 1.96 is used because results are
// typically averaged over a handful of seeds, where the normal
// approximation is far too optimistic. The margin is 0 for fewer than two
// values, where no interval can be estimated.
func MeanCI95(xs []float64) (mean, margin float64) {
	mean, std := MeanStd(xs)
	n := len(xs)
	if n < 2 {
		return mean, 0
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(0.975)
	return mean, t * std / math.Sqrt(float64(n))
}

package data

import (
	"fmt"
	"math"
	"slices"
)

// Standardize z-scores every column in place, subtracting its mean and
// dividing by its population standard deviation, so that features measured
// in different units weigh alike in distances. A constant column would
// divide by zero; it becomes all zeros instead, and its std is returned as 0.
// The returned mean and std undo the transform (x·std + mean) or, through
// ApplyStandardize, repeat it to the bit.
func (v *Vectors) Standardize() (mean, std []float64) {
	z := v.ZScore()
	z.Apply(v.X)
	std = make([]float64, v.D)
	for j := range std {
		if !z.constant[j] {
			std[j] = z.std[j]
		}
	}
	return slices.Clone(z.mean), std
}

// ZScore is the map Standardize applies to a table's columns, kept apart from the
// rows so that a copy of them elsewhere (on a device) can be z-scored in the same
// float64 arithmetic after the host's rows are gone.
type ZScore struct {
	mean, std, inv []float64
	constant       []bool
}

// ZScore is the map that Standardize would apply to v.
func (v *Vectors) ZScore() ZScore {
	mu, sd, constant := v.columnMoments()
	inv := make([]float64, len(sd))
	for j, s := range sd {
		if !constant[j] {
			inv[j] = 1 / s
		}
	}
	return ZScore{mean: mu, std: sd, inv: inv, constant: constant}
}

// Apply z-scores rows in place: whole rows of the map's columns, one after another.
func (z ZScore) Apply(rows []float32) {
	d := len(z.mean)
	if d == 0 {
		return
	}
	for i := 0; i+d <= len(rows); i += d {
		row := rows[i : i+d]
		for j, x := range row {
			if z.constant[j] {
				row[j] = 0
				continue
			}
			row[j] = float32((float64(x) - z.mean[j]) * z.inv[j])
		}
	}
}

// SpreadToStandardize is the FeatureSpread above which features are taken to be in
// different units and standardized by default. On the four tables of docs/RESULTS.md
// section 17 the spreads are 1.5 (digits), 2.3 (iris), 388 (wine) and 8662 (breast
// cancer; 2.2 and 7829 there, by the mean of the middle two), and both emclust and k-means score higher on the raw features of the
// first two and the standardized ones of the last two.
const SpreadToStandardize = 10

// OffsetToStandardize is the FeatureOffset above which features are standardized
// whatever their spread: values that vary in their fourth digit and later
// (coordinates in metres, timestamps) trained raw to one cluster (two columns near
// 1e7 of unit spread; a review's, docs/RESULTS.md section 64). The shipped tables'
// offsets are at most 501 (glass's refractive index), so none changes its choice.
const OffsetToStandardize = 1000

// FeatureOffset is the largest of the non-constant columns' |mean| over standard
// deviation: how far their values lie from 0 against how much they vary.
func (v *Vectors) FeatureOffset() float64 {
	mean, sd, constant := v.columnMoments()
	offset := 0.0
	for j, s := range sd {
		if !constant[j] && s > 0 {
			offset = max(offset, math.Abs(mean[j])/s)
		}
	}
	return offset
}

// FeatureSpread is the largest column standard deviation over the (lower) median
// of the non-zero ones: near 1 when the features share a unit (pixels, lengths), hundreds
// when they do not (an area beside a ratio). 0 when every column is constant.
func (v *Vectors) FeatureSpread() float64 {
	_, sd, constant := v.columnMoments()
	var nonzero []float64
	for j, s := range sd {
		if !constant[j] {
			nonzero = append(nonzero, s)
		}
	}
	if len(nonzero) == 0 {
		return 0
	}
	slices.Sort(nonzero)
	// The lower median: the mean of the middle two let the largest decide an even
	// count's, so an income beside a 0/1 column (or two of each) scored at most 2.
	return nonzero[len(nonzero)-1] / nonzero[(len(nonzero)-1)/2]
}

// columnMoments is each column's mean and population standard deviation, and whether
// it is constant. Sums are taken in float64 so that large N does not lose precision.
func (v *Vectors) columnMoments() (mean, std []float64, constant []bool) {
	n, d := v.N, v.D
	sum := make([]float64, d)
	lo := make([]float32, d)
	hi := make([]float32, d)
	if n > 0 {
		copy(lo, v.X[:d])
		copy(hi, v.X[:d])
	}
	for i := 0; i < n; i++ {
		row := v.X[i*d : (i+1)*d]
		for j, x := range row {
			sum[j] += float64(x)
			lo[j] = min(lo[j], x)
			hi[j] = max(hi[j], x)
		}
	}
	mean = make([]float64, d)
	for j := range mean {
		if n > 0 {
			mean[j] = sum[j] / float64(n)
		}
	}
	// Second pass over deviations: steadier than E[x²]-E[x]² when the mean
	// is large compared with the spread.
	ss := make([]float64, d)
	for i := 0; i < n; i++ {
		row := v.X[i*d : (i+1)*d]
		for j, x := range row {
			dx := float64(x) - mean[j]
			ss[j] += dx * dx
		}
	}
	std = make([]float64, d)
	constant = make([]bool, d)
	for j := range std {
		if n > 0 {
			std[j] = math.Sqrt(ss[j] / float64(n))
		}
		// Test constancy exactly: a constant column's float64 mean can be an
		// ulp off its value, leaving a tiny spurious std that would blow
		// rounding noise up to order one.
		constant[j] = n == 0 || lo[j] == hi[j] || std[j] == 0
	}
	return mean, std, constant
}

// Validate reports whether v is well formed: a non-empty N×D table of finite
// values, with one label in range per row when it has labels. Loaders
// guarantee this; Validate guards data built or changed by other code before
// it reaches training, where a bad value would surface far from its cause.
func (v *Vectors) Validate() error {
	name := v.Source
	if name == "" {
		name = "vectors"
	}
	switch {
	case v.N <= 0:
		return fmt.Errorf("%s: no rows (N = %d)", name, v.N)
	case v.D <= 0:
		return fmt.Errorf("%s: no features (D = %d)", name, v.D)
	case v.N > math.MaxInt/v.D || len(v.X) != v.N*v.D:
		return fmt.Errorf("%s: %d values, want N×D = %d×%d", name, len(v.X), v.N, v.D)
	case v.Features != nil && len(v.Features) != v.D:
		return fmt.Errorf("%s: %d feature names, want D = %d", name, len(v.Features), v.D)
	}
	for i, x := range v.X {
		// All exponent bits set: NaN or ±Inf. One test a value, where IsNaN and IsInf
		// of a conversion to float64 took 0.4 s on a table of 64 million values.
		if math.Float32bits(x)&0x7f800000 == 0x7f800000 {
			return fmt.Errorf("%s: %v at row %d, column %d (0-based)", name, x, i/v.D, i%v.D)
		}
	}
	if v.Labels == nil {
		if v.Classes != nil {
			return fmt.Errorf("%s: %d class names but no labels", name, len(v.Classes))
		}
		return nil
	}
	if len(v.Labels) != v.N {
		return fmt.Errorf("%s: %d labels, want N = %d", name, len(v.Labels), v.N)
	}
	if v.Classes == nil {
		// Labels without names are allowed; ids need only be non-negative.
		for i, l := range v.Labels {
			if l < 0 && l != Unlabelled {
				return fmt.Errorf("%s: row %d: negative label %d", name, i, l)
			}
		}
		return nil
	}
	for i, l := range v.Labels {
		if l != Unlabelled && (l < 0 || l >= len(v.Classes)) {
			return fmt.Errorf("%s: row %d: label %d out of range [0, %d)", name, i, l, len(v.Classes))
		}
	}
	return nil
}

// ApplyStandardize scales v with the column means and standard deviations of another
// set, as Standardize returned them: new data must be seen the way the model was
// trained, not through its own statistics. A column of std 0 was constant there and
// is all zeros here, whatever its values; the arithmetic is Standardize's, so the
// training rows come out as they went in. (Runs saved before std 0 marked a constant
// column saved 1 there, and get x − mean, as they did.)
func (v *Vectors) ApplyStandardize(mean, std []float64) error {
	if len(mean) != v.D || len(std) != v.D {
		return fmt.Errorf("%s: the standardisation has %d means and %d deviations, the data %d columns", v.Source, len(mean), len(std), v.D)
	}
	z := ZScore{mean: mean, std: std, inv: make([]float64, v.D), constant: make([]bool, v.D)}
	for j, s := range std {
		if !(s >= 0) || math.IsInf(s, 0) || math.IsNaN(mean[j]) || math.IsInf(mean[j], 0) {
			return fmt.Errorf("%s: standardisation of column %d: mean %v, std %v", v.Source, j, mean[j], s)
		}
		if z.constant[j] = s == 0; !z.constant[j] {
			z.inv[j] = 1 / s
		}
	}
	z.Apply(v.X[:v.N*v.D])
	for i, x := range v.X[:v.N*v.D] {
		if math.IsInf(float64(x), 0) || math.IsNaN(float64(x)) {
			return fmt.Errorf("%s: row %d, column %d (0-based): standardized by the training data's mean and deviation, the value passes float32's range; it lies far outside the spread the model was trained on", v.Source, i/v.D, i%v.D)
		}
	}
	return nil
}

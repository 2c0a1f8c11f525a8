package data

import (
	"fmt"
	"math"
)

// Standardize z-scores every column in place, subtracting its mean and
// dividing by its population standard deviation, so that features measured
// in different units weigh alike in distances. A constant column would
// divide by zero; it gets std 1 instead and so becomes all zeros. The
// returned mean and std (with those 1s) undo or repeat the transform.
//
// Sums are taken in float64 so that large N does not lose precision.
func (v *Vectors) Standardize() (mean, std []float32) {
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
	mu := make([]float64, d)
	for j := range mu {
		if n > 0 {
			mu[j] = sum[j] / float64(n)
		}
	}
	// Second pass over deviations: steadier than E[x²]-E[x]² when the mean
	// is large compared with the spread.
	ss := make([]float64, d)
	for i := 0; i < n; i++ {
		row := v.X[i*d : (i+1)*d]
		for j, x := range row {
			dx := float64(x) - mu[j]
			ss[j] += dx * dx
		}
	}
	mean = make([]float32, d)
	std = make([]float32, d)
	inv := make([]float64, d)
	for j := range std {
		mean[j] = float32(mu[j])
		s := 0.0
		if n > 0 {
			s = math.Sqrt(ss[j] / float64(n))
		}
		// Test constancy exactly: a constant column's float64 mean can be an
		// ulp off its value, leaving a tiny spurious std that would blow
		// rounding noise up to order one.
		if n == 0 || lo[j] == hi[j] || s == 0 {
			s = 1
		}
		std[j] = float32(s)
		inv[j] = 1 / s
	}
	for i := 0; i < n; i++ {
		row := v.X[i*d : (i+1)*d]
		for j, x := range row {
			if lo[j] == hi[j] {
				row[j] = 0
				continue
			}
			row[j] = float32((float64(x) - mu[j]) * inv[j])
		}
	}
	return mean, std
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
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
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
			if l < 0 {
				return fmt.Errorf("%s: row %d: negative label %d", name, i, l)
			}
		}
		return nil
	}
	for i, l := range v.Labels {
		if l < 0 || l >= len(v.Classes) {
			return fmt.Errorf("%s: row %d: label %d out of range [0, %d)", name, i, l, len(v.Classes))
		}
	}
	return nil
}

// ApplyStandardize scales v with the column means and standard deviations of another
// set, as Standardize returned them: new data must be seen the way the model was
// trained, not through its own statistics.
func (v *Vectors) ApplyStandardize(mean, std []float32) error {
	if len(mean) != v.D || len(std) != v.D {
		return fmt.Errorf("%s: standardisation has %d columns, the data %d", v.Source, len(mean), v.D)
	}
	for i := 0; i < v.N; i++ {
		row := v.X[i*v.D : (i+1)*v.D]
		for j := range row {
			row[j] = (row[j] - mean[j]) / std[j]
		}
	}
	return nil
}

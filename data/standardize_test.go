package data

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func TestStandardize(t *testing.T) {
	// Column 0 varies, column 1 is constant, column 2 has a large offset.
	v := &Vectors{N: 4, D: 3, X: []float32{
		1, 7, 1e6 + 1,
		2, 7, 1e6 + 2,
		3, 7, 1e6 + 3,
		6, 7, 1e6 + 6,
	}}
	mean, std := v.Standardize()
	wantMean := []float64{3, 7, 1e6 + 3}
	wantStd := []float64{math.Sqrt(3.5), 0, math.Sqrt(3.5)} // 0: constant
	for j := range 3 {
		if math.Abs(float64(mean[j])-wantMean[j]) > 1e-6*math.Max(1, wantMean[j]) {
			t.Errorf("mean[%d] = %v, want %v", j, mean[j], wantMean[j])
		}
		if math.Abs(float64(std[j])-wantStd[j]) > 1e-6 {
			t.Errorf("std[%d] = %v, want %v", j, std[j], wantStd[j])
		}
		var s, ss float64
		for i := range v.N {
			x := float64(v.X[i*v.D+j])
			s += x
			ss += x * x
		}
		m := s / float64(v.N)
		sd := math.Sqrt(ss/float64(v.N) - m*m)
		if math.Abs(m) > 1e-6 {
			t.Errorf("column %d: mean after = %v, want 0", j, m)
		}
		want := 1.0
		if j == 1 {
			want = 0 // constant: all zeros
		}
		if math.Abs(sd-want) > 1e-5 {
			t.Errorf("column %d: std after = %v, want %v", j, sd, want)
		}
	}
	for i := range v.N {
		if v.X[i*v.D+1] != 0 {
			t.Errorf("constant column row %d = %v, want 0", i, v.X[i*v.D+1])
		}
	}
}

func TestStandardizeConstantRounding(t *testing.T) {
	// 0.1 is not exact in binary; a float64 mean of many copies can be an
	// ulp off. The column must still become exactly zero, not noise.
	n := 1001
	v := &Vectors{N: n, D: 1, X: make([]float32, n)}
	for i := range v.X {
		v.X[i] = 0.1
	}
	_, std := v.Standardize()
	if std[0] != 0 {
		t.Errorf("std = %v, want 0 (constant)", std[0])
	}
	for i, x := range v.X {
		if x != 0 {
			t.Fatalf("row %d = %v, want 0", i, x)
		}
	}
}

// ApplyStandardize with the statistics Standardize returned, through config.json's
// JSON, repeats the training rows to the bit, and maps a constant column of new
// data to zeros as training did.
func TestApplyStandardizeRepeatsStandardize(t *testing.T) {
	v, err := Table("wine")
	if err != nil {
		t.Fatal(err)
	}
	v.X = append([]float32(nil), v.X...)
	for i := range v.N {
		v.X[i*v.D+4] = 2.5 // a constant column
	}
	raw := append([]float32(nil), v.X...)
	mean, std := v.Standardize()
	b, err := json.Marshal([2][]float64{mean, std})
	if err != nil {
		t.Fatal(err)
	}
	var saved [2][]float64
	if err := json.Unmarshal(b, &saved); err != nil {
		t.Fatal(err)
	}
	again := &Vectors{N: v.N, D: v.D, X: raw, Source: "again"}
	if err := again.ApplyStandardize(saved[0], saved[1]); err != nil {
		t.Fatal(err)
	}
	for i := range v.X {
		if math.Float32bits(again.X[i]) != math.Float32bits(v.X[i]) {
			t.Fatalf("row %d, column %d: %v applied, %v standardized", i/v.D, i%v.D, again.X[i], v.X[i])
		}
	}
	other := &Vectors{N: 1, D: v.D, X: append([]float32(nil), raw[:v.D]...), Source: "new"}
	other.X[4] = 9
	if err := other.ApplyStandardize(saved[0], saved[1]); err != nil {
		t.Fatal(err)
	}
	if other.X[4] != 0 {
		t.Errorf("a column constant in training: %v, want 0", other.X[4])
	}
	bad := []float64{math.NaN()}
	one := &Vectors{N: 1, D: 1, X: []float32{1}, Source: "one"}
	if err := one.ApplyStandardize([]float64{0}, bad); err == nil || !strings.Contains(err.Error(), "column 0") {
		t.Errorf("std NaN: error %v, want one naming column 0", err)
	}
}

func TestStandardizeDigits(t *testing.T) {
	v, err := Digits()
	if err != nil {
		t.Fatal(err)
	}
	v.Standardize()
	if err := v.Validate(); err != nil {
		t.Fatal(err)
	}
	for j := range v.D {
		var s, ss float64
		for i := range v.N {
			x := float64(v.X[i*v.D+j])
			s += x
			ss += x * x
		}
		m := s / float64(v.N)
		sd := math.Sqrt(ss/float64(v.N) - m*m)
		// Digits has constant (all-zero) border pixels.
		if math.Abs(m) > 1e-5 || !(math.Abs(sd-1) < 1e-4 || sd == 0) {
			t.Errorf("column %d: mean %v std %v after standardising", j, m, sd)
		}
	}
}

func TestValidateStandard(t *testing.T) {
	ok := func() *Vectors {
		return &Vectors{X: []float32{1, 2, 3, 4}, N: 2, D: 2, Labels: []int{0, 1}, Classes: []string{"a", "b"}, Source: "v.csv"}
	}
	if err := ok().Validate(); err != nil {
		t.Fatalf("valid vectors: %v", err)
	}
	unlabelled := ok()
	unlabelled.Labels[0] = Unlabelled
	if err := unlabelled.Validate(); err != nil {
		t.Fatalf("a row without a class: %v", err)
	}
	extreme := ok()
	extreme.X = []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1))}
	if err := extreme.Validate(); err != nil {
		t.Fatalf("the largest, smallest and negative-zero float32: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(v *Vectors)
		want   string
	}{
		{"no rows", func(v *Vectors) { v.N, v.X, v.Labels = 0, nil, nil }, "v.csv: no rows"},
		{"no features", func(v *Vectors) { v.D = 0 }, "v.csv: no features"},
		{"length", func(v *Vectors) { v.X = v.X[:3] }, "v.csv: 3 values, want N×D = 2×2"},
		{"NaN", func(v *Vectors) { v.X[3] = float32(math.NaN()) }, "v.csv: NaN at row 1, column 1"},
		{"Inf", func(v *Vectors) { v.X[0] = float32(math.Inf(1)) }, "v.csv: +Inf at row 0, column 0"},
		{"-Inf", func(v *Vectors) { v.X[2] = float32(math.Inf(-1)) }, "v.csv: -Inf at row 1, column 0"},
		{"signalling NaN", func(v *Vectors) { v.X[1] = math.Float32frombits(0x7f800001) }, "v.csv: NaN at row 0, column 1"},
		{"negative NaN", func(v *Vectors) { v.X[1] = math.Float32frombits(0xffc00000) }, "v.csv: NaN at row 0, column 1"},
		{"labels length", func(v *Vectors) { v.Labels = []int{0} }, "v.csv: 1 labels, want N = 2"},
		{"label range", func(v *Vectors) { v.Labels[1] = 2 }, "v.csv: row 1: label 2 out of range [0, 2)"},
		{"negative label", func(v *Vectors) { v.Classes = nil; v.Labels[0] = -2 }, "v.csv: row 0: negative label -2"},
		{"negative label, named classes", func(v *Vectors) { v.Labels[1] = -3 }, "v.csv: row 1: label -3 out of range [0, 2)"},
		{"features", func(v *Vectors) { v.Features = []string{"x"} }, "v.csv: 1 feature names, want D = 2"},
		{"classes without labels", func(v *Vectors) { v.Labels = nil }, "v.csv: 2 class names but no labels"},
		{"unnamed source", func(v *Vectors) { v.Source = ""; v.D = 0 }, "vectors: no features"},
	}
	for _, tt := range tests {
		v := ok()
		tt.mutate(v)
		err := v.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestFeatureSpread(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    *Vectors
		want float64
	}{
		// Columns of population std 1, 2 and 3 (values ±s): max 3 over median 2.
		{"one unit", &Vectors{N: 2, D: 3, X: []float32{1, 2, 3, -1, -2, -3}}, 1.5},
		// Std 1, 1000, 0.5, 1: max 1000 over the lower median of four, 1.
		{"two units", &Vectors{N: 2, D: 4, X: []float32{1, 1000, 0.5, 1, -1, -1000, -0.5, -1}}, 1000},
		// A constant column does not count towards the median; of two, the smaller is it.
		{"constant column", &Vectors{N: 2, D: 3, X: []float32{5, 2, 4, 5, -2, -4}}, 2},
		// Were 2 and 2.67 (over the mean of the middle two): never standardized.
		{"two columns of two units", &Vectors{N: 2, D: 2, X: []float32{50000, 1, -50000, -1}}, 50000},
		{"two and two", &Vectors{N: 2, D: 4, X: []float32{50000, 40000, 1, 0.5, -50000, -40000, -1, -0.5}}, 50000},
		{"all constant", &Vectors{N: 2, D: 2, X: []float32{5, 6, 5, 6}}, 0},
	} {
		if got := tc.v.FeatureSpread(); math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("%s: FeatureSpread = %v, want %v", tc.name, got, tc.want)
		}
	}
	d, err := Digits()
	if err != nil {
		t.Fatal(err)
	}
	if s := d.FeatureSpread(); !(s > 1 && s < SpreadToStandardize) {
		t.Errorf("digits: FeatureSpread %v, want in (1, %d): 64 pixels of one unit", s, SpreadToStandardize)
	}
}

func TestFeatureOffset(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    *Vectors
		want float64
	}{
		// Means 1e7 and 0.5, stds 1 and 0.5: the first column's 1e7 standard deviations.
		{"coordinates", &Vectors{N: 2, D: 2, X: []float32{1e7 - 1, 0, 1e7 + 1, 1}}, 1e7},
		{"centred", &Vectors{N: 2, D: 2, X: []float32{-1, 3, 1, -3}}, 0},
		// A constant column, whatever its value, does not count.
		{"constant column", &Vectors{N: 2, D: 2, X: []float32{1e9, 4, 1e9, 6}}, 5},
		{"all constant", &Vectors{N: 2, D: 1, X: []float32{7, 7}}, 0},
	} {
		if got := tc.v.FeatureOffset(); got != tc.want {
			t.Errorf("%s: FeatureOffset = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The offset rule changes no shipped table's choice: every offset is under the
// threshold, so each is standardized by its spread alone, as the suite measured.
func TestShippedTablesOffsets(t *testing.T) {
	tables := TableNames()
	held, err := filepath.Glob(filepath.Join("heldout", "*.csv.gz"))
	if err != nil || len(held) == 0 {
		t.Fatalf("data/heldout: %v, %d tables", err, len(held))
	}
	for _, name := range append(tables, held...) {
		var v *Vectors
		if strings.HasSuffix(name, ".csv.gz") {
			v, err = ReadCSV(name, CSVOptions{LabelCol: "label"})
		} else {
			v, err = Table(name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if o := v.FeatureOffset(); o > OffsetToStandardize {
			t.Errorf("%s: FeatureOffset %.1f, past %d: the rule would standardize it", name, o, OffsetToStandardize)
		}
	}
}

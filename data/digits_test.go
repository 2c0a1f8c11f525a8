package data

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

func TestDigits(t *testing.T) {
	v, err := Digits()
	if err != nil {
		t.Fatal(err)
	}
	if v.N != 1797 || v.D != 64 || len(v.X) != 1797*64 || len(v.Labels) != 1797 {
		t.Fatalf("shape %d×%d, len(X) %d, len(Labels) %d; want 1797×64", v.N, v.D, len(v.X), len(v.Labels))
	}
	if err := v.Validate(); err != nil {
		t.Fatal(err)
	}
	wantClasses := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
	if !reflect.DeepEqual(v.Classes, wantClasses) {
		t.Errorf("Classes = %q, want %q", v.Classes, wantClasses)
	}
	if len(v.Features) != 64 || v.Features[0] != "pixel_0_0" || v.Features[9] != "pixel_1_1" || v.Features[63] != "pixel_7_7" {
		t.Errorf("Features = %q", v.Features)
	}
	if v.Source != "embedded:digits (UCI ML hand-written digits, CC BY 4.0)" {
		t.Errorf("Source = %q", v.Source)
	}
	counts := make([]int, 10)
	for _, l := range v.Labels {
		counts[l]++
	}
	// Class sizes of scikit-learn's load_digits().
	if want := []int{178, 182, 177, 183, 181, 182, 181, 179, 174, 180}; !reflect.DeepEqual(counts, want) {
		t.Errorf("class counts %v, want %v", counts, want)
	}
	sum := 0
	for c, n := range counts {
		if n < 174 || n > 183 {
			t.Errorf("class %d has %d rows, want 174..183", c, n)
		}
		sum += n
	}
	if sum != 1797 {
		t.Errorf("class counts sum to %d", sum)
	}
	if got, want := fmt.Sprint(v.X[:8]), "[0 0 5 13 9 1 0 0]"; got != want {
		t.Errorf("first row starts %s, want %s", got, want)
	}
	if v.Labels[0] != 0 || v.Labels[1] != 1 || v.Labels[2] != 2 {
		t.Errorf("first labels %v, want 0 1 2", v.Labels[:3])
	}
	for i, x := range v.X {
		if x < 0 || x > 16 || x != float32(int(x)) {
			t.Fatalf("X[%d] = %v, want an integer in 0..16", i, x)
		}
	}

	// Each call returns an independent copy.
	v.X[0] = 99
	w, err := Digits()
	if err != nil {
		t.Fatal(err)
	}
	if w.X[0] != 0 {
		t.Error("Digits shares its result between calls")
	}
}

func TestTables(t *testing.T) {
	for _, name := range TableNames() {
		v, err := Table(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := v.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if v.Labels == nil || len(v.Features) != v.D {
			t.Errorf("%s: labels %v, %d feature names for %d features", name, v.Labels != nil, len(v.Features), v.D)
		}
	}
	if _, err := Table("nope"); err == nil {
		t.Error("an unknown table loaded")
	}
}

// The held-out tables of data/heldout load as their README describes them.
func TestHeldoutTables(t *testing.T) {
	for _, tc := range []struct {
		name       string
		n, d       int
		classSizes []int // sorted
	}{
		{"glass", 214, 9, []int{9, 13, 17, 29, 70, 76}},
		{"ionosphere", 351, 33, []int{126, 225}},
		{"sonar", 208, 60, []int{97, 111}},
		{"vehicle", 846, 18, []int{199, 212, 217, 218}},
		{"satellite", 6435, 36, []int{626, 703, 707, 1358, 1508, 1533}},
	} {
		v, err := LoadVectors(filepath.Join("heldout", tc.name+".csv.gz"), CSVOptions{LabelCol: "label"})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := v.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		sizes := make([]int, len(v.Classes))
		for _, l := range v.Labels {
			sizes[l]++
		}
		slices.Sort(sizes)
		if v.N != tc.n || v.D != tc.d || len(v.Features) != tc.d || !slices.Equal(sizes, tc.classSizes) {
			t.Errorf("%s: %d rows × %d features (%d named), class sizes %v; want %d × %d, %v",
				tc.name, v.N, v.D, len(v.Features), sizes, tc.n, tc.d, tc.classSizes)
		}
	}
}

package eval

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// sklearnCases were scored with scikit-learn 1.2.1
// (normalized_mutual_info_score with the default arithmetic averaging,
// adjusted_rand_score) and, for ACC, scipy 1.10.1's linear_sum_assignment
// on the negated contingency table.
var sklearnCases = []struct {
	name          string
	truth, pred   []int
	acc, nmi, ari float64
}{
	// By hand: table [[2 0 0] [0 1 1]], H(truth) = ln 2, H(pred) = 1.5 ln 2,
	// MI = ln 2, so NMI = ln 2 / (1.25 ln 2) = 0.8. Pair counts: sum
	// C(nij,2) = 1, rows 2, cols 1, C(4,2) = 6, expected 1/3, max 3/2, so
	// ARI = (1 - 1/3) / (3/2 - 1/3) = 4/7. ACC: clusters 0→0 and 1→1, 3/4.
	{"split class", []int{0, 0, 1, 1}, []int{0, 0, 1, 2}, 0.75, 0.7999999999999999, 0.5714285714285714},
	// The same table transposed; NMI and ARI are symmetric.
	{"merged classes", []int{0, 0, 1, 2}, []int{0, 0, 1, 1}, 0.75, 0.7999999999999999, 0.5714285714285714},
	{"permuted", []int{0, 0, 1, 1, 2, 2}, []int{2, 2, 0, 0, 1, 1}, 1, 1, 1},
	// Independent labelings: MI = 0, and fewer pairs agree than by chance.
	{"independent", []int{0, 0, 1, 1}, []int{0, 1, 0, 1}, 0.5, 0, -0.5},
	// Edge cases: both single cluster is a perfect match, one single
	// cluster against anything else carries no information.
	{"both single", []int{0, 0, 0}, []int{5, 5, 5}, 1, 1, 1},
	{"truth single, pred singletons", []int{0, 0, 0, 0}, []int{0, 1, 2, 3}, 0.25, 0, 0},
	{"pred single", []int{0, 0, 1, 1}, []int{0, 0, 0, 0}, 0.5, 0, 0},
	{"truth single, two clusters", []int{0, 0, 0, 0}, []int{0, 0, 1, 1}, 0.5, 0, 0},
	{"all singletons", []int{0, 1, 2, 3}, []int{3, 2, 1, 0}, 1, 1, 1},
	{"one point", []int{0}, []int{0}, 1, 1, 1},
	{"sparse ids", []int{1, 1, 7, 7, 9}, []int{4, 4, 4, 0, 0}, 0.6, 0.45806528564401566, 0.09090909090909091},
	{
		"random 30",
		[]int{0, 1, 2, 0, 1, 2, 0, 1, 2, 2, 2, 0, 2, 0, 0, 0, 0, 2, 2, 0, 0, 1, 0, 0, 1, 0, 1, 0, 2, 0},
		[]int{3, 1, 2, 0, 1, 2, 0, 2, 2, 2, 2, 0, 1, 0, 0, 0, 0, 3, 2, 0, 3, 1, 0, 0, 1, 0, 1, 0, 2, 0},
		0.8333333333333334, 0.67526196086866, 0.685965925498123,
	},
}

// near reports whether a and b agree to 1e-12, far tighter than any
// metric is reported but loose enough for summation order.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12 }

func TestMetricsAgainstSklearn(t *testing.T) {
	for _, tt := range sklearnCases {
		t.Run(tt.name, func(t *testing.T) {
			acc, err := ACC(tt.truth, tt.pred)
			if err != nil {
				t.Fatal(err)
			}
			nmi, err := NMI(tt.truth, tt.pred)
			if err != nil {
				t.Fatal(err)
			}
			ari, err := ARI(tt.truth, tt.pred)
			if err != nil {
				t.Fatal(err)
			}
			if !near(acc, tt.acc) {
				t.Errorf("ACC = %v, want %v", acc, tt.acc)
			}
			if !near(nmi, tt.nmi) {
				t.Errorf("NMI = %v, want %v", nmi, tt.nmi)
			}
			if !near(ari, tt.ari) {
				t.Errorf("ARI = %v, want %v", ari, tt.ari)
			}
			s, err := Score(tt.truth, tt.pred)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Scores{ACC: acc, NMI: nmi, ARI: ari}); s != want {
				t.Errorf("Score = %+v, want %+v", s, want)
			}
		})
	}
}

// ScoredRows counts the points ScoreLabelled scores, and is 0 where it scores all.
func TestScoredRows(t *testing.T) {
	for _, tc := range []struct {
		truth []int
		want  int
	}{
		{nil, 0},
		{[]int{0, 1, 1}, 0},
		{[]int{0, -1, 1}, 2},
		{[]int{-1, -1}, 0},
	} {
		if got := ScoredRows(tc.truth); got != tc.want {
			t.Errorf("ScoredRows(%v) = %d, want %d", tc.truth, got, tc.want)
		}
	}
}

// TestScoreLabelled checks that points of a negative truth are left out, and counted
// out, and that a fully labelled truth scores as Score does.
func TestScoreLabelled(t *testing.T) {
	tests := []struct {
		name        string
		truth, pred []int
		want        Scores // by hand
		err         string
	}{
		{name: "all labelled", truth: []int{0, 0, 1, 1}, pred: []int{1, 1, 0, 0}, want: Scores{ACC: 1, NMI: 1, ARI: 1}},
		// Unscored, the two -1 points would break the perfect match.
		{name: "two unlabelled", truth: []int{0, -1, 0, 1, -1, 1}, pred: []int{1, 0, 1, 0, 1, 0}, want: Scores{ACC: 1, NMI: 1, ARI: 1, Scored: 4}},
		// Left: truth 0,0,1,1 against 0,1,1,1: ACC 3/4; ARI of that table by hand:
		// sum C(n_ij,2) = 1, a = C(2,2)+C(2,2) = 2, b = C(1,2)+C(3,2) = 3, C(4,2) = 6,
		// expected 2·3/6 = 1, max (2+3)/2 = 2.5: ARI = (1-1)/(2.5-1) = 0.
		{name: "one unlabelled", truth: []int{0, 0, -1, 1, 1}, pred: []int{0, 1, 0, 1, 1}, want: Scores{ACC: 0.75, ARI: 0, Scored: 4}},
		{name: "none labelled", truth: []int{-1, -1}, pred: []int{0, 1}, err: "no point has a class"},
		{name: "lengths", truth: []int{0, -1}, pred: []int{0}, err: "2 labels but pred has 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ScoreLabelled(tt.truth, tt.pred)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !near(s.ACC, tt.want.ACC) || !near(s.ARI, tt.want.ARI) || s.Scored != tt.want.Scored {
				t.Errorf("ScoreLabelled = %+v, want %+v", s, tt.want)
			}
			if tt.want.NMI != 0 && !near(s.NMI, tt.want.NMI) {
				t.Errorf("NMI = %v, want %v", s.NMI, tt.want.NMI)
			}
			if tt.want.Scored > 0 && !strings.HasSuffix(s.String(), fmt.Sprintf(" on %d labelled rows", tt.want.Scored)) {
				t.Errorf("String() = %q, want it to say how many rows were scored", s.String())
			}
		})
	}
}

// TestMetricsLarge uses 100000 points, enough for the pair counts behind
// ARI to overflow int64 if multiplied naively. Reference values from
// scikit-learn 1.2.1 and scipy 1.10.1 on the same formulas:
//
//	truth[i] = i % 10
//	pred[i]  = (i*7 + i//1000) % 13                  (case "near random")
//	pred[i]  = i % 10 if i % 3 else (i//7) % 12      (case "two thirds right")
func TestMetricsLarge(t *testing.T) {
	const n = 100000
	tests := []struct {
		name          string
		pred          func(i int) int
		acc, nmi, ari float64
	}{
		{"near random", func(i int) int { return (i*7 + i/1000) % 13 }, 0.077, 6.08788914649065e-08, -0.00010284052068343694},
		{"two thirds right", func(i int) int {
			if i%3 != 0 {
				return i % 10
			}
			return (i / 7) % 12
		}, 0.69999, 0.4652196189523492, 0.46834233133356373},
	}
	truth := make([]int, n)
	for i := range truth {
		truth[i] = i % 10
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pred := make([]int, n)
			for i := range pred {
				pred[i] = tt.pred(i)
			}
			s, err := Score(truth, pred)
			if err != nil {
				t.Fatal(err)
			}
			if !near(s.ACC, tt.acc) || !near(s.NMI, tt.nmi) || !near(s.ARI, tt.ari) {
				t.Errorf("Score = %+v, want {ACC:%v NMI:%v ARI:%v}", s, tt.acc, tt.nmi, tt.ari)
			}
		})
	}
}

func TestACCHand(t *testing.T) {
	tests := []struct {
		name        string
		truth, pred []int
		want        float64
	}{
		{"identical", []int{0, 1, 2, 0}, []int{0, 1, 2, 0}, 1},
		{"permuted", []int{0, 0, 1, 1, 2, 2}, []int{1, 1, 2, 2, 0, 0}, 1},
		// Majority voting would map both clusters to class 0 (3/4); the
		// one-to-one map gives cluster 1 to class 1 and scores 2/4 + 1/4.
		{"one-to-one, not majority", []int{0, 0, 0, 1}, []int{0, 0, 1, 1}, 0.75},
		// More clusters than classes: 0→0 and 2→1 match 2+2; clusters 1
		// and 3 get no class and their points count as wrong.
		{"more clusters", []int{0, 0, 0, 1, 1, 1}, []int{0, 0, 1, 2, 2, 3}, 4.0 / 6},
		// Fewer clusters than classes: one of classes 0 and 1 must go
		// unmatched, so at most 2 + 2 of 6.
		{"fewer clusters", []int{0, 0, 1, 1, 2, 2}, []int{0, 0, 0, 0, 1, 1}, 4.0 / 6},
		// The best map is the anti-diagonal 0→2, 1→1, 2→0: 3+2+3 = 8 of 10.
		{"anti-diagonal", []int{0, 0, 0, 1, 1, 1, 2, 2, 2, 2}, []int{2, 2, 2, 1, 1, 0, 0, 0, 0, 1}, 0.8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ACC(tt.truth, tt.pred)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got, tt.want) {
				t.Errorf("ACC = %v, want %v", got, tt.want)
			}
		})
	}
}

// bruteACC tries every injective map from clusters to classes (or back).
func bruteACC(truth, pred []int) float64 {
	table, _, _, err := Contingency(truth, pred)
	if err != nil {
		panic(err)
	}
	cost := make([][]float64, len(table))
	for i, row := range table {
		for _, x := range row {
			cost[i] = append(cost[i], -float64(x))
		}
	}
	return -bruteForce(cost) / float64(len(truth))
}

func randomLabels(rng *rand.Rand, n, k int) []int {
	l := make([]int, n)
	for i := range l {
		l[i] = rng.IntN(k)
	}
	return l
}

// relabel applies a random injective renaming to the cluster ids, which no
// metric may notice.
func relabel(rng *rand.Rand, pred []int) []int {
	ids := rng.Perm(100)
	out := make([]int, len(pred))
	for i, p := range pred {
		out[i] = ids[p] * 3
	}
	return out
}

func TestMetricsProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for it := range 300 {
		n := 1 + rng.IntN(60)
		truth := randomLabels(rng, n, 1+rng.IntN(6))
		pred := randomLabels(rng, n, 1+rng.IntN(6))
		if it%3 == 0 { // correlated labelings, so scores are not all near 0
			for i := range pred {
				if rng.IntN(3) != 0 {
					pred[i] = (truth[i] + 1) % 6
				}
			}
		}
		s, err := Score(truth, pred)
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteACC(truth, pred); !near(s.ACC, want) {
			t.Fatalf("ACC(%v, %v) = %v, brute force %v", truth, pred, s.ACC, want)
		}
		r, err := Score(truth, relabel(rng, pred))
		if err != nil {
			t.Fatal(err)
		}
		if !near(r.ACC, s.ACC) || !near(r.NMI, s.NMI) || !near(r.ARI, s.ARI) {
			t.Fatalf("relabelling pred changed %v to %v", s, r)
		}
		nmi, _ := NMI(pred, truth)
		ari, _ := ARI(pred, truth)
		if !near(nmi, s.NMI) || !near(ari, s.ARI) {
			t.Fatalf("NMI/ARI not symmetric: %v %v vs %v %v", s.NMI, s.ARI, nmi, ari)
		}
		if s.NMI < 0 || s.NMI > 1+1e-12 || s.ARI > 1+1e-12 || s.ACC <= 0 || s.ACC > 1 {
			t.Fatalf("scores out of range: %v", s)
		}
		self, _ := Score(truth, relabel(rng, truth))
		if !near(self.ACC, 1) || !near(self.NMI, 1) || !near(self.ARI, 1) {
			t.Fatalf("truth against a relabelling of itself scored %v", self)
		}
	}
}

func TestMetricErrors(t *testing.T) {
	tests := []struct {
		name        string
		truth, pred []int
		want        string
	}{
		{"length", []int{0, 1}, []int{0}, "truth has 2 labels but pred has 1"},
		{"empty", nil, nil, "no labels"},
		{"negative truth", []int{0, -1}, []int{0, 0}, "negative truth label -1 at index 1"},
		{"negative pred", []int{0, 1}, []int{-1, 0}, "negative predicted label -1 at index 0"},
	}
	funcs := []struct {
		name string
		f    func(a, b []int) error
	}{
		{"ACC", func(a, b []int) error { _, err := ACC(a, b); return err }},
		{"NMI", func(a, b []int) error { _, err := NMI(a, b); return err }},
		{"ARI", func(a, b []int) error { _, err := ARI(a, b); return err }},
		{"score", func(a, b []int) error { _, err := Score(a, b); return err }},
		{"Contingency", func(a, b []int) error { _, _, _, err := Contingency(a, b); return err }},
	}
	for _, tt := range tests {
		for _, f := range funcs {
			err := f.f(tt.truth, tt.pred)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), f.name) && f.name != "Contingency" {
				t.Errorf("%s %s: err = %v, want %q", f.name, tt.name, err, tt.want)
			}
		}
	}
}

// The same labellings as small ids (counted in a slice) and as sparse ones (in a map).
func TestContingency(t *testing.T) {
	for _, offset := range []int{0, 1 << 30} {
		add := func(xs ...int) []int {
			for i := range xs {
				xs[i] += offset
			}
			return xs
		}
		table, classes, clusters, err := Contingency(add(5, 5, 2, 2, 2, 9), add(3, 0, 3, 3, 7, 7))
		if err != nil {
			t.Fatal(err)
		}
		wantTable := [][]int{
			{0, 2, 1}, // class 2
			{1, 1, 0}, // class 5
			{0, 0, 1}, // class 9
		}
		if !slices.Equal(classes, add(2, 5, 9)) || !slices.Equal(clusters, add(0, 3, 7)) {
			t.Fatalf("offset %d: classes %v clusters %v, want [2 5 9] [0 3 7] plus the offset", offset, classes, clusters)
		}
		if !slices.EqualFunc(table, wantTable, slices.Equal) {
			t.Fatalf("offset %d: table %v, want %v", offset, table, wantTable)
		}
		// Rows must not share capacity: appending to one must not overwrite
		// the next.
		_ = append(table[0], 99)
		if table[1][0] != 1 {
			t.Fatalf("rows alias each other: %v", table)
		}
	}
}

// A labelling of ids against itself was a table of n² counts: at 100 000 rows, out
// of memory.
func TestContingencyTooLarge(t *testing.T) {
	n := 6000 // 36 million cells, above MaxTableCells
	ids := make([]int, n)
	for i := range ids {
		ids[i] = i
	}
	_, _, _, err := Contingency(ids, ids)
	if err == nil || !strings.Contains(err.Error(), "6000 classes × 6000 clusters") {
		t.Errorf("err = %v, want the table refused", err)
	}
	if _, err := Score(ids[:2000], ids[:2000]); err != nil {
		t.Errorf("2000 × 2000, under the bound: %v", err)
	}
}

func TestClusterSizes(t *testing.T) {
	tests := []struct {
		pred []int
		k    int
		want []int
	}{
		{[]int{0, 2, 2, 0, 2}, 4, []int{2, 0, 3, 0}},
		{nil, 3, []int{0, 0, 0}},
		{[]int{1, 4}, 2, []int{0, 1, 0, 0, 1}}, // ids beyond k still counted
		{[]int{-1, 0}, 1, []int{1}},            // negative ids have no slot
		{nil, 0, []int{}},
	}
	for _, tt := range tests {
		if got := ClusterSizes(tt.pred, tt.k); !slices.Equal(got, tt.want) {
			t.Errorf("ClusterSizes(%v, %d) = %v, want %v", tt.pred, tt.k, got, tt.want)
		}
	}
}

func TestScoresString(t *testing.T) {
	tests := []struct {
		s    Scores
		want string
	}{
		{Scores{ACC: 0.8123, NMI: 0.771, ARI: 0.69344}, "ACC 0.8123 NMI 0.7710 ARI 0.6934"},
		{Scores{ACC: 1, ARI: -0.5}, "ACC 1.0000 NMI 0.0000 ARI -0.5000"},
		{Scores{ACC: 1, NMI: 1, ARI: 1, Scored: 120}, "ACC 1.0000 NMI 1.0000 ARI 1.0000 on 120 labelled rows"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.s, got, tt.want)
		}
	}
}

// An epoch's agreement: a clustering of the digits' size against another.
func BenchmarkARI1797(b *testing.B) {
	x, y := make([]int32, 1797), make([]int32, 1797)
	for i := range x {
		x[i], y[i] = int32(i*7%10), int32(i*3%10)
	}
	for b.Loop() {
		if _, err := ARI(x, y); err != nil {
			b.Fatal(err)
		}
	}
}

// NMI is at most 1: a labelling scored against itself gave 1.0000000000000002 (in
// train --json), its mutual information and entropies rounded apart.
func TestNMIAtMostOne(t *testing.T) {
	x := []int{1, 0, 5, 9, 10, 7, 0, 1, 11, 7, 10, 8, 0, 10, 11, 1, 8, 0, 5, 4, 6, 7, 5, 6, 4, 4, 7, 9, 5, 7, 1, 3, 2, 2, 3, 7, 2, 2, 1, 2, 8, 4, 8}
	y := make([]int, len(x))
	for i, c := range x {
		y[i] = 11 - c // the same partition, named otherwise
	}
	for _, pred := range [][]int{x, y} {
		if v, err := NMI(x, pred); err != nil || v > 1 || v < 1-1e-12 {
			t.Errorf("NMI of a partition with itself: %v (%v), want 1 at most and within 1e-12 of it", v, err)
		}
	}
}

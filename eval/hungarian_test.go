package eval

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// bruteForce returns the minimum total cost over all ways of giving each
// row of the smaller side a distinct column (or each column a distinct row
// when there are more rows than columns).
func bruteForce(cost [][]float64) float64 {
	r, c := len(cost), len(cost[0])
	best := math.Inf(1)
	used := make([]bool, max(r, c))
	var rec func(k int, sum float64)
	if r <= c {
		rec = func(i int, sum float64) {
			if i == r {
				best = min(best, sum)
				return
			}
			for j := range c {
				if !used[j] {
					used[j] = true
					rec(i+1, sum+cost[i][j])
					used[j] = false
				}
			}
		}
	} else {
		rec = func(j int, sum float64) {
			if j == c {
				best = min(best, sum)
				return
			}
			for i := range r {
				if !used[i] {
					used[i] = true
					rec(j+1, sum+cost[i][j])
					used[i] = false
				}
			}
		}
	}
	rec(0, 0)
	return best
}

// subsetDP solves the assignment problem exactly by dynamic programming over
// subsets of columns, for r <= c <= about 16. It is independent of both the
// Hungarian code and bruteForce, and reaches sizes brute force cannot.
func subsetDP(cost [][]float64) float64 {
	r, c := len(cost), len(cost[0])
	dp := make([]float64, 1<<c)
	for m := range dp {
		dp[m] = math.Inf(1)
	}
	dp[0] = 0
	best := math.Inf(1)
	for m := range dp {
		if math.IsInf(dp[m], 1) {
			continue
		}
		i := popcount(m)
		if i == r {
			best = min(best, dp[m])
			continue
		}
		for j := range c {
			if m&(1<<j) == 0 {
				n := m | 1<<j
				dp[n] = min(dp[n], dp[m]+cost[i][j])
			}
		}
	}
	return best
}

func popcount(m int) int {
	n := 0
	for ; m != 0; m &= m - 1 {
		n++
	}
	return n
}

func transpose(a [][]float64) [][]float64 {
	t := make([][]float64, len(a[0]))
	for j := range t {
		t[j] = make([]float64, len(a))
		for i := range a {
			t[j][i] = a[i][j]
		}
	}
	return t
}

// randomCost fills an r×c matrix. Small integer costs make ties common,
// which exercises the tie-breaking paths; continuous costs do not.
func randomCost(rng *rand.Rand, r, c int, ints bool) [][]float64 {
	m := make([][]float64, r)
	for i := range m {
		m[i] = make([]float64, c)
		for j := range m[i] {
			if ints {
				m[i][j] = float64(rng.IntN(5) - 1)
			} else {
				m[i][j] = rng.NormFloat64() * 100
			}
		}
	}
	return m
}

// checkAssignment verifies that assign is a valid matching of the right
// size whose cost is total, and returns nothing; the optimum is checked by
// the caller.
func checkAssignment(t *testing.T, cost [][]float64, assign []int, total float64) {
	t.Helper()
	r, c := len(cost), len(cost[0])
	if len(assign) != r {
		t.Fatalf("len(assign) = %d, want %d", len(assign), r)
	}
	seen := make(map[int]bool)
	sum := 0.0
	for i, j := range assign {
		if j == -1 {
			continue
		}
		if j < 0 || j >= c {
			t.Fatalf("assign[%d] = %d out of range [0,%d)", i, j, c)
		}
		if seen[j] {
			t.Fatalf("column %d assigned twice in %v", j, assign)
		}
		seen[j] = true
		sum += cost[i][j]
	}
	if len(seen) != min(r, c) {
		t.Fatalf("%d rows assigned, want %d: %v", len(seen), min(r, c), assign)
	}
	if sum != total {
		t.Fatalf("total = %v but assigned costs sum to %v", total, sum)
	}
}

func TestHungarianKnown(t *testing.T) {
	tests := []struct {
		name   string
		cost   [][]float64
		assign []int
		total  float64
	}{
		// The example from scipy.optimize.linear_sum_assignment's docs.
		{"scipy doc", [][]float64{{4, 1, 3}, {2, 0, 5}, {3, 2, 2}}, []int{1, 0, 2}, 5},
		{"1x1", [][]float64{{-3.5}}, []int{0}, -3.5},
		{"row", [][]float64{{3, 1, 2}}, []int{1}, 1},
		{"column", [][]float64{{3}, {1}, {2}}, []int{-1, 0, -1}, 1},
		// Greedy row by row would take 1 then 100; the optimum is 2+2.
		{"greedy trap", [][]float64{{1, 2}, {2, 100}}, []int{1, 0}, 4},
		// Rows 0 and 2 compete for column 0; row 1 is cheapest left out.
		{"3x2", [][]float64{{1, 9}, {5, 5}, {2, 3}}, []int{0, -1, 1}, 4},
		// Maximising matches: the identity is worth 9+8+7.
		{"negated counts", [][]float64{{-9, -1, 0}, {-2, -8, -3}, {0, -1, -7}}, []int{0, 1, 2}, -24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assign, total, err := Hungarian(tt.cost)
			if err != nil {
				t.Fatal(err)
			}
			checkAssignment(t, tt.cost, assign, total)
			if total != tt.total {
				t.Errorf("total = %v, want %v", total, tt.total)
			}
			for i := range assign {
				if assign[i] != tt.assign[i] {
					t.Errorf("assign = %v, want %v", assign, tt.assign)
					break
				}
			}
		})
	}
}

func TestHungarianBruteForce(t *testing.T) {
	shapes := [][2]int{
		{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}, {7, 7},
		{1, 4}, {4, 1}, {2, 3}, {3, 2}, {3, 5}, {5, 3}, {2, 6}, {6, 2}, {4, 7}, {7, 4},
	}
	for _, sh := range shapes {
		r, c := sh[0], sh[1]
		seeds := 40
		if r*c >= 36 {
			seeds = 8 // 7! leaves per matrix
		}
		for seed := range seeds {
			for _, ints := range []bool{false, true} {
				rng := rand.New(rand.NewPCG(uint64(seed), uint64(r*100+c)))
				cost := randomCost(rng, r, c, ints)
				assign, total, err := Hungarian(cost)
				if err != nil {
					t.Fatalf("%dx%d seed %d: %v", r, c, seed, err)
				}
				checkAssignment(t, cost, assign, total)
				if want := bruteForce(cost); math.Abs(total-want) > 1e-9*max(1, math.Abs(want)) {
					t.Fatalf("%dx%d seed %d ints=%v: total %v, brute force %v\ncost %v\nassign %v",
						r, c, seed, ints, total, want, cost, assign)
				}
			}
		}
	}
}

func TestHungarianSubsetDP(t *testing.T) {
	shapes := [][2]int{{8, 8}, {10, 10}, {12, 12}, {9, 14}, {14, 9}, {3, 16}, {16, 5}}
	for _, sh := range shapes {
		r, c := sh[0], sh[1]
		for seed := range 5 {
			for _, ints := range []bool{false, true} {
				rng := rand.New(rand.NewPCG(uint64(seed), uint64(r*100+c)))
				cost := randomCost(rng, r, c, ints)
				assign, total, err := Hungarian(cost)
				if err != nil {
					t.Fatal(err)
				}
				checkAssignment(t, cost, assign, total)
				ref := cost
				if r > c {
					ref = transpose(cost)
				}
				if want := subsetDP(ref); math.Abs(total-want) > 1e-9*max(1, math.Abs(want)) {
					t.Fatalf("%dx%d seed %d ints=%v: total %v, want %v", r, c, seed, ints, total, want)
				}
			}
		}
	}
}

// The problem is symmetric under transposition, and the rectangular code
// takes different paths for the two orientations, so they must agree.
func TestHungarianTransposeAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		r, c := 1+rng.IntN(30), 1+rng.IntN(30)
		cost := randomCost(rng, r, c, rng.IntN(2) == 0)
		_, a, err := Hungarian(cost)
		if err != nil {
			t.Fatal(err)
		}
		_, b, err := Hungarian(transpose(cost))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(a-b) > 1e-9*max(1, math.Abs(a)) {
			t.Fatalf("%dx%d: total %v, transposed %v", r, c, a, b)
		}
	}
}

func TestHungarianErrors(t *testing.T) {
	tests := []struct {
		name string
		cost [][]float64
		want string
	}{
		{"nil", nil, "no rows"},
		{"empty row", [][]float64{{}}, "no columns"},
		{"ragged", [][]float64{{1, 2}, {3}}, "row 1 has 1 columns, want 2"},
		{"NaN", [][]float64{{1, 2}, {3, math.NaN()}}, "cost[1][1] is NaN"},
		{"+Inf", [][]float64{{math.Inf(1), 2}}, "cost[0][0] is +Inf"},
		{"-Inf", [][]float64{{1}, {math.Inf(-1)}}, "cost[1][0] is -Inf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Hungarian(tt.cost)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestHungarianDoesNotModifyInput(t *testing.T) {
	cost := [][]float64{{4, 1, 3}, {2, 0, 5}}
	if _, _, err := Hungarian(cost); err != nil {
		t.Fatal(err)
	}
	if cost[0][0] != 4 || cost[0][1] != 1 || cost[0][2] != 3 || cost[1][0] != 2 || cost[1][1] != 0 || cost[1][2] != 5 {
		t.Fatalf("input modified: %v", cost)
	}
}

func BenchmarkHungarian100(b *testing.B) {
	cost := randomCost(rand.New(rand.NewPCG(1, 1)), 100, 100, false)
	for b.Loop() {
		if _, _, err := Hungarian(cost); err != nil {
			b.Fatal(err)
		}
	}
}

package eval

import (
	"errors"
	"fmt"
	"math"
)

// Hungarian solves the rectangular linear sum assignment problem: it picks
// min(r, c) cells of the r×c cost matrix, no two in the same row or column,
// with the smallest possible sum.
//
// assign[i] is the column given to row i, or -1 when there are more rows
// than columns and row i is left out. total is the sum of the chosen costs.
//
// The method is the shortest augmenting path algorithm of Jonker and
// Volgenant as adapted to rectangular matrices by Crouse (2016), the same
// one behind scipy.optimize.linear_sum_assignment. It runs in O(r·c·min(r,c))
// time; unlike a search over permutations it stays fast for the hundreds of
// clusters some experiments use.
//
// NaN and infinite costs are rejected: they make the optimum undefined, and
// in this package they can only come from a bug upstream.
func Hungarian(cost [][]float64) (assign []int, total float64, err error) {
	r := len(cost)
	if r == 0 {
		return nil, 0, errors.New("eval: hungarian: cost matrix has no rows")
	}
	c := len(cost[0])
	if c == 0 {
		return nil, 0, errors.New("eval: hungarian: cost matrix has no columns")
	}
	for i, row := range cost {
		if len(row) != c {
			return nil, 0, fmt.Errorf("eval: hungarian: row %d has %d columns, want %d", i, len(row), c)
		}
		for j, x := range row {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, 0, fmt.Errorf("eval: hungarian: cost[%d][%d] is %v", i, j, x)
			}
		}
	}

	// The algorithm augments one row at a time and needs every row to find
	// a free column, so it works on the orientation with rows <= columns.
	transpose := r > c
	nr, nc := r, c
	if transpose {
		nr, nc = c, r
	}
	flat := make([]float64, nr*nc)
	for i, row := range cost {
		for j, x := range row {
			if transpose {
				flat[j*nc+i] = x
			} else {
				flat[i*nc+j] = x
			}
		}
	}

	col4row := solveLSAP(nr, nc, flat)

	assign = make([]int, r)
	if transpose {
		for i := range assign {
			assign[i] = -1
		}
		for j, i := range col4row {
			assign[i] = j
		}
	} else {
		copy(assign, col4row)
	}
	for i, j := range assign {
		if j >= 0 {
			total += cost[i][j]
		}
	}
	return assign, total, nil
}

// solveLSAP assigns every row of the nr×nc row-major matrix cost (nr <= nc,
// all entries finite) to a distinct column at minimum total cost and returns
// the column of each row.
func solveLSAP(nr, nc int, cost []float64) []int {
	u := make([]float64, nr) // row duals
	v := make([]float64, nc) // column duals
	shortest := make([]float64, nc)
	path := make([]int, nc)
	col4row := make([]int, nr)
	row4col := make([]int, nc)
	for i := range col4row {
		col4row[i] = -1
	}
	for j := range row4col {
		row4col[j] = -1
	}
	sr := make([]bool, nr) // rows scanned in the current search
	sc := make([]bool, nc) // columns reached in the current search
	remaining := make([]int, nc)

	for cur := 0; cur < nr; cur++ {
		// Dijkstra-like search for the cheapest alternating path, in reduced
		// costs, from row cur to an unassigned column.
		for k := range remaining {
			remaining[k] = nc - k - 1
		}
		numRemaining := nc
		for i := range sr {
			sr[i] = false
		}
		for j := range sc {
			sc[j] = false
			shortest[j] = math.Inf(1)
		}
		minVal := 0.0
		sink := -1
		for i := cur; sink == -1; {
			sr[i] = true
			index := -1
			lowest := math.Inf(1)
			for k := 0; k < numRemaining; k++ {
				j := remaining[k]
				red := minVal + cost[i*nc+j] - u[i] - v[j]
				if red < shortest[j] {
					path[j] = i
					shortest[j] = red
				}
				// Prefer a free column on ties: it ends the search sooner.
				if shortest[j] < lowest || (shortest[j] == lowest && row4col[j] == -1) {
					lowest = shortest[j]
					index = k
				}
			}
			// With finite costs and nr <= nc a free column is always
			// reachable, so index is never -1 here.
			minVal = lowest
			j := remaining[index]
			if row4col[j] == -1 {
				sink = j
			} else {
				i = row4col[j]
			}
			sc[j] = true
			numRemaining--
			remaining[index] = remaining[numRemaining]
		}

		// Update the duals so that reduced costs stay non-negative and are
		// zero along the new matching.
		u[cur] += minVal
		for i := range sr {
			if sr[i] && i != cur {
				u[i] += minVal - shortest[col4row[i]]
			}
		}
		for j := range sc {
			if sc[j] {
				v[j] -= minVal - shortest[j]
			}
		}

		// Flip the matching along the path back from the sink to row cur.
		for j := sink; ; {
			i := path[j]
			row4col[j] = i
			col4row[i], j = j, col4row[i]
			if i == cur {
				break
			}
		}
	}
	return col4row
}

package report

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Three well-separated Gaussian blobs in 10-d stay three separate groups in the
// plane: every point's nearest neighbours in the map come from its own blob, and the
// blobs' centres lie far apart compared with their spread.
func TestTSNESeparatesBlobs(t *testing.T) {
	const per, d, k = 80, 10, 3
	n := per * k
	rng := rand.New(rand.NewPCG(7, 7))
	x := make([]float64, n*d)
	label := make([]int, n)
	for i := 0; i < n; i++ {
		label[i] = i % k
		for j := 0; j < d; j++ {
			centre := 0.0
			if j == label[i] {
				centre = 20
			}
			x[i*d+j] = centre + rng.NormFloat64()
		}
	}
	y, err := TSNE(x, n, d, TSNEConfig{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	dist := func(a, b int) float64 { return math.Hypot(y[2*a]-y[2*b], y[2*a+1]-y[2*b+1]) }

	// 5-nearest-neighbour agreement.
	agree := 0
	for i := 0; i < n; i++ {
		best := make([]int, 0, 5)
		for j := 0; j < n; j++ {
			if j == i {
				continue
			}
			best = append(best, j)
			for m := len(best) - 1; m > 0 && dist(i, best[m]) < dist(i, best[m-1]); m-- {
				best[m], best[m-1] = best[m-1], best[m]
			}
			if len(best) > 5 {
				best = best[:5]
			}
		}
		for _, j := range best {
			if label[j] == label[i] {
				agree++
			}
		}
	}
	if frac := float64(agree) / float64(5*n); frac < 0.99 {
		t.Errorf("only %.3f of 5-NN in the map share the blob", frac)
	}

	var cx, cy [k]float64
	for i := 0; i < n; i++ {
		cx[label[i]] += y[2*i] / per
		cy[label[i]] += y[2*i+1] / per
	}
	var spread [k]float64
	for i := 0; i < n; i++ {
		spread[label[i]] = max(spread[label[i]], math.Hypot(y[2*i]-cx[label[i]], y[2*i+1]-cy[label[i]]))
	}
	for a := 0; a < k; a++ {
		for b := a + 1; b < k; b++ {
			gap := math.Hypot(cx[a]-cx[b], cy[a]-cy[b])
			if gap < spread[a]+spread[b] {
				t.Errorf("blobs %d and %d overlap: centres %.2f apart, radii %.2f and %.2f", a, b, gap, spread[a], spread[b])
			}
		}
	}
}

func TestTSNEErrors(t *testing.T) {
	if _, err := TSNE([]float64{1, 2, 3}, 2, 2, TSNEConfig{}); err == nil {
		t.Error("3 values accepted as 2×2")
	}
	if _, err := TSNE([]float64{1}, 1, 1, TSNEConfig{}); err == nil {
		t.Error("one point accepted")
	}
}

// Step hears of every gradient step, in order, the last at Iterations.
func TestTSNESteps(t *testing.T) {
	x := make([]float64, 20*3)
	for i := range x {
		x[i] = float64(i % 7)
	}
	var seen []int
	if _, err := TSNE(x, 20, 3, TSNEConfig{Iterations: 60, ExaggerIters: 20, Seed: 1, Step: func(done int) { seen = append(seen, done) }}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 60 {
		t.Fatalf("%d steps reported, want 60", len(seen))
	}
	for i, d := range seen {
		if d != i+1 {
			t.Fatalf("step %d reported as %d", i+1, d)
		}
	}
}

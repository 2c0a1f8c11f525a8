package compare

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"emclust/data"
	"emclust/train"
)

func TestCheckKs(t *testing.T) {
	for _, tc := range []struct {
		ks   []int
		rows int
		want string // "" for no error
	}{
		{[]int{2, 3}, 10, ""},
		{[]int{6, 8, 10, 12}, 0, ""}, // rows unknown yet
		{[]int{3}, 10, "at least two"},
		{[]int{2, 3, 2}, 10, "given twice"},
		{[]int{1, 3}, 10, "K = 1"},
		{[]int{2, 11}, 10, "K = 11"},
	} {
		err := CheckKs(tc.ks, tc.rows)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckKs(%v, %d) = %v, want %q", tc.ks, tc.rows, err, tc.want)
		}
	}
}

// The agreement column is the ARI between every two seeds' clusterings, by hand:
// a relabelled partition agrees fully (1); {0,1,0,1} against {0,0,1,1} has a
// contingency of four ones, so Σ C(n_ij,2) = 0, the expected index 2·2/C(4,2) = 2/3,
// the maximum 2, and ARI = (0 − 2/3)/(2 − 2/3) = −1/2.
func TestSweepAgreement(t *testing.T) {
	opt := SweepOptions{Method: "em", Ks: []int{2, 3}, Seeds: []uint64{1, 2}, Train: train.VectorDefaults()}
	runs := []KRun{
		{K: 2, Seed: 1, clusters: []int{0, 0, 1, 1}},
		{K: 2, Seed: 2, clusters: []int{1, 1, 0, 0}},
		{K: 3, Seed: 1, clusters: []int{0, 1, 0, 1}},
		{K: 3, Seed: 2, clusters: []int{0, 0, 1, 1}},
	}
	rep, err := NewSweepReport("four rows", 4, opt, "cpu", runs, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Ks) != 2 {
		t.Fatalf("%d rows, want one per K", len(rep.Ks))
	}
	for i, want := range []float64{1, -0.5} {
		a := rep.Ks[i].Agreement
		if a == nil || a.N != 1 || math.Abs(a.Mean-want) > 1e-12 {
			t.Errorf("K = %d: agreement %+v, want %v over one pair", rep.Ks[i].K, a, want)
		}
	}
	if strings.Contains(rep.Markdown(), "NMI") {
		t.Error("a sweep without labels shows an NMI column")
	}
}

// With three seeds or more, each seed contributes one value, its mean index with the
// others, so the interval has S−1 degrees of freedom. Three seeds where two agree
// fully and the third agrees with neither (ARI −1/2 with both, as above): the seeds'
// means are (1 − 1/2)/2, the same, and −1/2.
func TestSeedAgreement(t *testing.T) {
	a, b := []int{0, 0, 1, 1}, []int{0, 1, 0, 1}
	got, err := seedAgreement([][]int{a, a, b})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.25, 0.25, -0.5}
	if len(got) != len(want) {
		t.Fatalf("%v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("seed %d: %v, want %v", i, got[i], want[i])
		}
	}
	if st := NewStat(got); st.N != 3 {
		t.Errorf("agreement over %d values, want one per seed", st.N)
	}
	if got, _ := seedAgreement([][]int{a}); got != nil {
		t.Errorf("one seed: %v, want none", got)
	}
}

// A sweep on three separated blobs: a run per K and seed in K-major order, criteria
// in their ranges, NMI from the labels, and a report that marshals to JSON with one
// seed too (where no agreement can be computed).
func TestSweepK(t *testing.T) {
	const perBlob, d = 60, 4
	v := &data.Vectors{N: 3 * perBlob, D: d, Source: "blobs"}
	for i := range v.N {
		c := i / perBlob
		for j := range d {
			// Deterministic spread inside each blob, centres 10 apart.
			v.X = append(v.X, float32(10*c)+float32((i*7+j*3)%11)/10)
		}
		v.Labels = append(v.Labels, c)
	}
	src, err := train.NewVectorSource(v, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg := train.VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps, cfg.Epochs, cfg.EvalEvery, cfg.KMeans = 0, 0, 5, 0, false
	for _, seeds := range [][]uint64{{1, 2}, {3}} {
		opt := SweepOptions{Method: "em", Ks: []int{2, 3}, Seeds: seeds, Train: cfg, Device: testDevice}
		var done int
		opt.Done = func(r KRun, n, total int) { done = n }
		runs, err := SweepK(context.Background(), src, opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2*len(seeds) || done != len(runs) {
			t.Fatalf("%d runs, %d reported done; want %d", len(runs), done, 2*len(seeds))
		}
		for i, r := range runs {
			if wantK := opt.Ks[i/len(seeds)]; r.K != wantK || r.Seed != seeds[i%len(seeds)] {
				t.Errorf("run %d: K %d seed %d, want K %d seed %d", i, r.K, r.Seed, wantK, seeds[i%len(seeds)])
			}
			c := r.Criteria
			if !(c.MaxPosterior >= 1/float64(r.K)-1e-6 && c.MaxPosterior <= 1+1e-6) || !(c.SizeEntropy >= 0 && c.SizeEntropy <= 1+1e-9) ||
				!(c.LogLikelihood < 0) || r.NMI == nil || !(*r.NMI >= 0 && *r.NMI <= 1+1e-9) {
				t.Errorf("run %d: criteria %+v, NMI %v out of range", i, c, r.NMI)
			}
		}
		rep, err := NewSweepReport("blobs", v.N, opt, "cpu", runs, 3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(rep); err != nil {
			t.Errorf("%d seeds: %v", len(seeds), err)
		}
		if got := rep.Ks[0].Agreement != nil; got != (len(seeds) > 1) {
			t.Errorf("%d seeds: agreement present %v", len(seeds), got)
		}
		if md := rep.Markdown(); !strings.Contains(md, "NMI vs labels") || !strings.Contains(md, "3 classes") {
			t.Errorf("markdown lacks the labels' reference:\n%s", md)
		}
	}
	if _, err := SweepK(context.Background(), src, SweepOptions{Method: "kmeans", Ks: []int{2, 3}, Seeds: []uint64{1}, Train: cfg}); err == nil {
		t.Error("a sweep of a baseline was accepted")
	}
}

package baseline

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"emclust/torch"
)

// blobs draws n points round each centre with standard deviation sd, in order of
// centre, and returns them row-major with their true labels.
func blobs(seed uint64, n int, sd float64, centres [][]float64) ([]float32, []int) {
	rng := rand.New(rand.NewPCG(seed, 1))
	d := len(centres[0])
	x := make([]float32, 0, n*len(centres)*d)
	var labels []int
	for k, c := range centres {
		for range n {
			for _, m := range c {
				x = append(x, float32(m+sd*rng.NormFloat64()))
			}
			labels = append(labels, k)
		}
	}
	return x, labels
}

// tensor puts row-major host data in a scope on the CPU.
func tensor(t *testing.T, s *torch.Scope, x []float32, d int) *torch.Tensor {
	t.Helper()
	xt := s.FromFloat32(x, []int{len(x) / d, d}, testDevice)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return xt
}

// sameClustering reports whether got is want up to a renaming of the clusters: each
// true cluster maps to exactly one found cluster and no two true clusters to the same.
func sameClustering(got, want []int) bool {
	if len(got) != len(want) {
		return false
	}
	fwd := map[int]int{}
	back := map[int]int{}
	for i := range want {
		if g, ok := fwd[want[i]]; ok && g != got[i] {
			return false
		}
		if w, ok := back[got[i]]; ok && w != want[i] {
			return false
		}
		fwd[want[i]], back[got[i]] = got[i], want[i]
	}
	return true
}

// hostInertia recomputes the inertia in float64 from the returned centres and labels.
func hostInertia(x []float32, d int, centres []float32, labels []int) float64 {
	sum := 0.0
	for i, l := range labels {
		for j := range d {
			v := float64(x[i*d+j]) - float64(centres[l*d+j])
			sum += v * v
		}
	}
	return sum
}

func TestKMeansRecoversBlobs(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	xs, truth := blobs(1, 100, 0.5, [][]float64{{0, 0}, {10, 0}, {5, 8}})
	res, err := KMeans(context.Background(), tensor(t, s, xs, 2), KMeansConfig{K: 3, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if !sameClustering(res.Labels, truth) {
		t.Fatalf("labels do not match the blobs: %v", res.Labels)
	}
	if len(res.Centers) != 3*2 || res.Iters < 1 {
		t.Fatalf("centres %v, iters %d", res.Centers, res.Iters)
	}
	want := hostInertia(xs, 2, res.Centers, res.Labels)
	if rel := math.Abs(res.Inertia-want) / want; rel > 1e-3 {
		t.Fatalf("inertia %g, host recomputation %g (relative error %g)", res.Inertia, want, rel)
	}
	// At convergence each centre is the mean of its points and each point's label
	// names its nearest centre.
	for k := range 3 {
		var sum [2]float64
		n := 0
		for i, l := range res.Labels {
			if l == k {
				sum[0] += float64(xs[2*i])
				sum[1] += float64(xs[2*i+1])
				n++
			}
		}
		for j := range 2 {
			if m := sum[j] / float64(n); math.Abs(m-float64(res.Centers[2*k+j])) > 1e-4 {
				t.Errorf("centre %d = %v, mean of its points %v", k, res.Centers[2*k:2*k+2], m)
			}
		}
	}
	for i, l := range res.Labels {
		p := []float32{xs[2*i], xs[2*i+1]}
		for k := range 3 {
			if hostInertia(p, 2, res.Centers, []int{k}) < hostInertia(p, 2, res.Centers, []int{l}) {
				t.Fatalf("point %d labelled %d but nearer centre %d", i, l, k)
			}
		}
	}
}

func TestKMeansHandExample(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	res, err := KMeans(context.Background(), tensor(t, s, []float32{0, 1, 10, 11}, 1), KMeansConfig{K: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	c := slices.Clone(res.Centers)
	slices.Sort(c)
	if c[0] != 0.5 || c[1] != 10.5 {
		t.Fatalf("centres %v, want 0.5 and 10.5", res.Centers)
	}
	if res.Inertia != 1 {
		t.Fatalf("inertia %g, want 4 × 0.25 = 1", res.Inertia)
	}
	if !sameClustering(res.Labels, []int{0, 0, 1, 1}) {
		t.Fatalf("labels %v", res.Labels)
	}
}

func TestKMeansDeterministic(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	rng := rand.New(rand.NewPCG(5, 5))
	xs := make([]float32, 500*4)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	x := tensor(t, s, xs, 4)
	cfg := KMeansConfig{K: 6, Restarts: 3, Seed: 42}
	a, err := KMeans(context.Background(), x, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := KMeans(context.Background(), x, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Labels, b.Labels) || a.Inertia != b.Inertia || !slices.Equal(a.Centers, b.Centers) {
		t.Fatalf("same seed, different results: inertia %g vs %g", a.Inertia, b.Inertia)
	}
	// More restarts can only find an equal or lower inertia: restarts 0..2 are shared.
	c, err := KMeans(context.Background(), x, KMeansConfig{K: 6, Restarts: 6, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	if c.Inertia > a.Inertia {
		t.Fatalf("6 restarts gave inertia %g, 3 restarts %g", c.Inertia, a.Inertia)
	}
	// Other dtypes are cast: float64 input gives the same clustering.
	d, err := KMeans(context.Background(), s.Cast(x, torch.Float64), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a.Labels, d.Labels) {
		t.Fatal("float64 input clustered differently from float32")
	}
}

// Restarts share one host state (lloyd): each must still be what it is alone, the
// best of them kept whichever came first. Restart r of seed S is restart 0 of seed
// S+r; rows of three spreads make the restarts differ, and the best must not be the
// last, whose labels the shared state still holds.
func TestKMeansRestartsIndependent(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	rng := rand.New(rand.NewPCG(8, 8))
	const n, d = 600, 3
	xs := make([]float32, n*d)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64() * float64(1+i/d%3))
	}
	x := tensor(t, s, xs, d)
	const restarts = 5
	all, err := KMeans(context.Background(), x, KMeansConfig{K: 7, Restarts: restarts, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var best *Result
	bestAt := 0
	inertias := map[float64]bool{}
	for r := range restarts {
		one, err := KMeans(context.Background(), x, KMeansConfig{K: 7, Restarts: 1, Seed: 3 + uint64(r)})
		if err != nil {
			t.Fatal(err)
		}
		inertias[one.Inertia] = true
		if best == nil || one.Inertia < best.Inertia {
			best, bestAt = one, r
		}
	}
	if len(inertias) < 2 || bestAt == restarts-1 {
		t.Fatalf("inertias %v, the best at restart %d of %d: the test needs them to differ and the best before the last", inertias, bestAt+1, restarts)
	}
	if all.Inertia != best.Inertia || !slices.Equal(all.Labels, best.Labels) || !slices.Equal(all.Centers, best.Centers) {
		t.Errorf("%d restarts: inertia %v, the best of them run alone %v (labels equal: %v)", restarts, all.Inertia, best.Inertia, slices.Equal(all.Labels, best.Labels))
	}
}

func TestKMeansKEqualsN(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	rng := rand.New(rand.NewPCG(9, 9))
	xs := make([]float32, 10*3)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64() * 100)
	}
	res, err := KMeans(context.Background(), tensor(t, s, xs, 3), KMeansConfig{K: 10, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Inertia != 0 {
		t.Fatalf("inertia %g, want 0 with one point per cluster", res.Inertia)
	}
	seen := slices.Clone(res.Labels)
	slices.Sort(seen)
	if !slices.Equal(seen, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("labels %v are not a permutation", res.Labels)
	}
}

func TestKMeansErrors(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	x := tensor(t, s, make([]float32, 10*2), 2)
	for _, tc := range []struct {
		cfg  KMeansConfig
		want string
	}{
		{KMeansConfig{K: 20}, "k-means: K=20 is larger than the 10 rows of data"},
		{KMeansConfig{K: 0}, "k-means: K=0, want at least 1"},
		{KMeansConfig{K: 2, Tol: -1}, "Tol=-1"},
		{KMeansConfig{K: 2, Restarts: -1}, "Restarts=-1"},
	} {
		if _, err := KMeans(context.Background(), x, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := KMeans(context.Background(), x, KMeansConfig{K: 20}); err == nil || err.Error() != "k-means: K=20 is larger than the 10 rows of data" {
		t.Errorf("K > N: err = %v", err)
	}
	bad := tensor(t, s, []float32{0, 1, float32(math.NaN()), 3, 4, 5}, 2)
	if _, err := KMeans(context.Background(), bad, KMeansConfig{K: 2}); err == nil || !strings.Contains(err.Error(), "1 NaN") {
		t.Errorf("NaN data: err = %v", err)
	}
	// Finite, but the squares overflow float32: every distance would be NaN and all
	// points would land in cluster 0 without an error.
	huge := tensor(t, s, []float32{1e20, -1e20, -1e20, 1e20, 1e20, 1e20, -1e20, -1e20}, 2)
	if _, err := KMeans(context.Background(), huge, KMeansConfig{K: 2}); err == nil || !strings.Contains(err.Error(), "overflow") {
		t.Errorf("±1e20 data: err = %v", err)
	}
	if _, err := KMeans(context.Background(), s.Reshape(x, 20), KMeansConfig{K: 2}); err == nil || !strings.Contains(err.Error(), "want N×D") {
		t.Errorf("1-D data: err = %v", err)
	}
	if _, err := KMeans(context.Background(), nil, KMeansConfig{K: 2}); err == nil {
		t.Error("nil data accepted")
	}
}

// All data equal: k-means++ finds no point with positive distance and falls back to
// uniform draws, and Lloyd stops at once.
func TestKMeansIdenticalPoints(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	xs := make([]float32, 8*2)
	for i := range xs {
		xs[i] = 3
	}
	res, err := KMeans(context.Background(), tensor(t, s, xs, 2), KMeansConfig{K: 4, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Inertia != 0 {
		t.Fatalf("inertia %g", res.Inertia)
	}
	for _, c := range res.Centers {
		if c != 3 {
			t.Fatalf("centres %v, want all 3", res.Centers)
		}
	}
}

// A centre that wins no point is moved to the point farthest from its own centre.
func TestLloydReseedsEmptyCluster(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	p, err := preparePoints(s, tensor(t, s, []float32{0, 1, 10, 11}, 1), 2, "k-means", false)
	if err != nil {
		t.Fatal(err)
	}
	// Centred data is -5.5 -4.5 4.5 5.5; centre 1 is far from everything.
	st := &lloyd{}
	if err := p.resetLloyd(st, s.FromFloat32([]float32{-5, 100}, []int{2, 1}, testDevice)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.assign(st); err != nil {
		t.Fatal(err)
	}
	if err := p.update(s, st); err != nil {
		t.Fatal(err)
	}
	got := s.Float32s(st.centers)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	// Centre 0 took every point (mean 0); centre 1 moves to 5.5, 10.5 from centre 0.
	if got[0] != 0 || got[1] != 5.5 || st.host[0] != 0 || st.host[1] != 5.5 {
		t.Fatalf("centres after the step %v (host %v), want [0 5.5]", got, st.host)
	}
	if want := 5.0*5.0 + 94.5*94.5; math.Abs(st.shift-want) > 1e-2 {
		t.Fatalf("shift %g, want %g", st.shift, want)
	}
}

// The bounds may skip a point only when a full pass would leave it where it is: after
// every iteration each point's centre is its nearest one, computed on the host in
// float64 from the centres the device holds, up to the rounding slack. And they must
// skip: late iterations compute few rows.
func TestLloydBoundsKeepNearestCentre(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	const n, d, k = 3000, 8, 12
	rng := rand.New(rand.NewPCG(7, 8))
	xs := make([]float32, n*d)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64()) + float32(4*((i/d)%5)) // five overlapping groups
	}
	p, err := preparePoints(s, tensor(t, s, xs, d), k, "k-means", false)
	if err != nil {
		t.Fatal(err)
	}
	host := s.Float32s(p.x)
	centres, err := p.plusPlus(context.Background(), s, []*rand.Rand{rand.New(rand.NewPCG(1, pcgStream))})
	if err != nil {
		t.Fatal(err)
	}
	st := &lloyd{}
	if err := p.resetLloyd(st, centres[0]); err != nil {
		t.Fatal(err)
	}
	minComputed := n
	for iter := 1; iter <= 40; iter++ {
		changed, err := p.assign(st)
		if err != nil {
			t.Fatal(err)
		}
		if iter > 1 {
			minComputed = min(minComputed, st.computed)
		}
		for i := range n {
			dist := func(j int) float64 {
				t := 0.0
				for c := range d {
					e := float64(host[i*d+c]) - float64(st.host[j*d+c])
					t += e * e
				}
				return t
			}
			own, best := dist(int(st.labels[i])), math.Inf(1)
			for j := range k {
				best = min(best, dist(j))
			}
			if own > best+2*st.slack[i] {
				t.Fatalf("iteration %d: point %d is at %g from its centre %d, but %g from the nearest",
					iter, i, own, st.labels[i], best)
			}
		}
		if changed == 0 {
			break
		}
		if err := p.update(s, st); err != nil {
			t.Fatal(err)
		}
	}
	if minComputed > n/2 {
		t.Fatalf("the bounds never skipped half of the points (least computed: %d of %d)", minComputed, n)
	}
}

func TestNoTensorsLeak(t *testing.T) {
	s := torch.NoGrad()
	xs, _ := blobs(2, 50, 1, [][]float64{{0, 0, 0}, {5, 5, 5}})
	x := tensor(t, s, xs, 3)
	before := torch.LiveTensors()
	if _, err := KMeans(context.Background(), x, KMeansConfig{K: 2, Restarts: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := GMM(context.Background(), x, GMMConfig{K: 2, Covariance: "full"}); err != nil {
		t.Fatal(err)
	}
	if _, err := GMM(context.Background(), x, GMMConfig{K: 2, Covariance: "diag"}); err != nil {
		t.Fatal(err)
	}
	if _, err := KMeans(context.Background(), x, KMeansConfig{K: 200}); err == nil {
		t.Fatal("K > N accepted")
	}
	if n := torch.LiveTensors() - before; n != 0 {
		t.Fatalf("%d tensors leaked", n)
	}
	s.Close()
}

// BenchmarkKMeansDigitsSize times K=10 with 10 restarts on random data the size of the
// embedded digits set (1797×64) on the CPU.
func BenchmarkKMeansDigitsSize(b *testing.B) {
	s := torch.NoGrad()
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	xs := make([]float32, 1797*64)
	for i := range xs {
		xs[i] = float32(rng.IntN(17))
	}
	x := s.FromFloat32(xs, []int{1797, 64}, testDevice)
	iters := 0
	b.ResetTimer()
	for i := range b.N {
		res, err := KMeans(context.Background(), x, KMeansConfig{K: 10, Seed: uint64(i)})
		if err != nil {
			b.Fatal(err)
		}
		iters += res.Iters
	}
	b.ReportMetric(float64(iters)/float64(b.N), "iters/op")
}

// BenchmarkKMeansBlobs times K=10 with 10 restarts on 200 000 rows of 20 features in
// ten Gaussian blobs, a table where the bounds decide most of the time.
func BenchmarkKMeansBlobs(b *testing.B) {
	s := torch.NoGrad()
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const n, d, k = 200000, 20, 10
	centres := make([]float64, k*d)
	for i := range centres {
		centres[i] = rng.NormFloat64() * 4
	}
	xs := make([]float32, n*d)
	for i := range n {
		c := rng.IntN(k)
		for j := range d {
			xs[i*d+j] = float32(centres[c*d+j] + rng.NormFloat64())
		}
	}
	x := s.FromFloat32(xs, []int{n, d}, testDevice)
	iters := 0
	b.ResetTimer()
	for i := range b.N {
		res, err := KMeans(context.Background(), x, KMeansConfig{K: k, Seed: uint64(i)})
		if err != nil {
			b.Fatal(err)
		}
		iters += res.Iters
	}
	b.ReportMetric(float64(iters)/float64(b.N), "iters/op")
}

// Centred data is clustered as it is, not through a copy, and as a copy would be: the
// same clusters, and centres in the data's own coordinates.
func TestKMeansCentred(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	xs, truth := blobs(6, 80, 1, [][]float64{{-4, 0, 2}, {4, 1, -2}, {0, -5, 0}})
	const d = 3
	mean := make([]float64, d)
	for i, v := range xs {
		mean[i%d] += float64(v) / float64(len(xs)/d)
	}
	for i := range xs {
		xs[i] -= float32(mean[i%d])
	}
	x := tensor(t, s, xs, d)
	p, err := preparePoints(s, x, 3, "k-means", true)
	if err != nil {
		t.Fatal(err)
	}
	if p.x != x {
		t.Fatal("centred data was copied")
	}
	for _, centred := range []bool{false, true} {
		res, err := KMeans(context.Background(), x, KMeansConfig{K: 3, Seed: 2, Centred: centred})
		if err != nil {
			t.Fatal(err)
		}
		if !sameClustering(res.Labels, truth) {
			t.Errorf("Centred %v: the blobs were not recovered", centred)
		}
		if got, want := res.Inertia, hostInertia(xs, d, res.Centers, res.Labels); math.Abs(got-want) > 1e-4*want {
			t.Errorf("Centred %v: inertia %g, but the centres returned give %g", centred, got, want)
		}
	}
}

// A centred copy that failed (out of memory) leaves x nil and the scope's error set:
// the row norms are nil too, and preparePoints returns that error, not a panic.
func TestRowSquaresAfterAFailure(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	s.Fail(errors.New("sub: can't allocate memory"))
	if sq := rowSquares(s, nil); sq != nil {
		t.Fatalf("row norms %v of a failed copy", sq)
	}
}

// Restarts seeded side by side hold N×R distances: never more than 64 MiB or a
// quarter of the data, yet at least one restart and at most all.
func TestSeedGroup(t *testing.T) {
	for _, tc := range []struct{ n, d, r int }{
		{500000, 128, 10}, {4000000, 2, 10}, {1797, 64, 10}, {60000, 784, 10}, {100000000, 1, 10}, {10, 3, 1}, {5, 1, 50},
	} {
		g := seedGroup(tc.n, tc.d, tc.r)
		if g < 1 || g > tc.r {
			t.Errorf("%+v: group %d, want 1 to %d", tc, g, tc.r)
		}
		if bytes := tc.n * g * 4; g > 1 && bytes > max(64<<20, tc.n*tc.d) {
			t.Errorf("%+v: group %d holds %d MiB of distances", tc, g, bytes>>20)
		}
	}
	if g := seedGroup(500000, 128, 10); g != 10 {
		t.Errorf("500 000 × 128: group %d, want all 10 restarts", g)
	}
}

// Step hears of each restart, in order.
func TestKMeansSteps(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	xs, _ := blobs(3, 40, 1, [][]float64{{0, 0}, {6, 6}, {0, 6}})
	var seen []int
	if _, err := KMeans(context.Background(), tensor(t, s, xs, 2), KMeansConfig{K: 3, Restarts: 4, Seed: 5, Step: func(done int) { seen = append(seen, done) }}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []int{1, 2, 3, 4}) {
		t.Errorf("steps %v, want 1 to 4", seen)
	}
}

package baseline

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"emclust/torch"
)

// KMeansConfig configures KMeans. Zero fields take scikit-learn's defaults.
type KMeansConfig struct {
	K        int     // number of clusters, 1 ≤ K ≤ N
	Restarts int     // k-means++ initialisations, best kept by inertia; default 10
	MaxIter  int     // Lloyd iterations per restart; default 300
	Tol      float64 // stop when the summed squared centre shift ≤ Tol × mean column variance; default 1e-4
	Seed     uint64  // restart r draws from PCG(Seed+r)
}

func (c KMeansConfig) withDefaults() (KMeansConfig, error) {
	if c.Restarts == 0 {
		c.Restarts = 10
	}
	if c.MaxIter == 0 {
		c.MaxIter = 300
	}
	if c.Tol == 0 {
		c.Tol = 1e-4
	}
	switch {
	case c.Restarts < 0:
		return c, fmt.Errorf("k-means: Restarts=%d, want at least 1", c.Restarts)
	case c.MaxIter < 0:
		return c, fmt.Errorf("k-means: MaxIter=%d, want at least 1", c.MaxIter)
	case c.Tol < 0 || math.IsNaN(c.Tol):
		return c, fmt.Errorf("k-means: Tol=%g, want a non-negative tolerance", c.Tol)
	}
	return c, nil
}

// Result is the best k-means restart.
type Result struct {
	Labels  []int     // cluster of each row, in 0..K-1
	Centers []float32 // K×D row-major, in the data's own coordinates
	Inertia float64   // sum of squared distances of the rows to their centres
	Iters   int       // Lloyd iterations of the best restart
}

// KMeans clusters the rows of x, an N×D tensor on any device (other dtypes are cast to
// float32), into cfg.K clusters: cfg.Restarts runs of greedy k-means++ seeding and
// Lloyd iterations, all on x's device, keeping the run of least inertia.
//
// A run stops, as in scikit-learn, when an assignment leaves every label unchanged or
// when the centres moved by at most cfg.Tol times the mean column variance of x (summed
// squared moves), or after cfg.MaxIter iterations. The labels returned are always the
// nearest-centre assignment of the returned centres, and the inertia is computed from
// them by direct differences in float64, not from the distance expansion.
//
// Each iteration holds an N×K distance matrix on the device besides x and a centred
// copy of it; nothing of size N×D crosses to the host.
func KMeans(x *torch.Tensor, cfg KMeansConfig) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := torch.NoGrad()
	defer s.Close()
	p, err := preparePoints(s, x, cfg.K, "k-means")
	if err != nil {
		return nil, err
	}
	var best *kmeansRun
	for r := range cfg.Restarts {
		rng := rand.New(rand.NewPCG(cfg.Seed+uint64(r), pcgStream))
		run, err := p.kmeans(rng, cfg.MaxIter, cfg.Tol)
		if err != nil {
			return nil, fmt.Errorf("k-means: restart %d of %d: %w", r+1, cfg.Restarts, err)
		}
		if best == nil || run.inertia < best.inertia {
			best = run
		}
	}
	centers := best.centers
	for i := range centers {
		centers[i] += p.mean[i%p.d]
	}
	return &Result{Labels: best.labels, Centers: centers, Inertia: best.inertia, Iters: best.iters}, nil
}

// kmeansRun is one restart's outcome, with centres in the centred coordinates of points.
type kmeansRun struct {
	labels  []int
	centers []float32
	inertia float64
	iters   int
}

// kmeans runs one k-means++ seeding and Lloyd's algorithm. Its tensors live in a scope
// of the restart, and each iteration's N×K temporaries in a scope of the iteration, so
// memory stays flat however many iterations run.
func (p *points) kmeans(rng *rand.Rand, maxIter int, tol float64) (*kmeansRun, error) {
	rs := torch.NoGrad()
	defer rs.Close()
	centers, err := p.plusPlus(rs, rng)
	if err != nil {
		return nil, fmt.Errorf("k-means++: %w", err)
	}
	tolAbs := tol * p.meanVar
	var labels *torch.Tensor
	strict := false
	iters := 0
	for iters < maxIter {
		iters++
		st, err := p.lloydStep(rs, centers, labels)
		if err != nil {
			return nil, fmt.Errorf("Lloyd iteration %d: %w", iters, err)
		}
		centers.Free()
		labels.Free()
		centers, labels = st.centers, st.labels
		if st.changed == 0 {
			// The assignment reproduced the previous one, so the new centres are the
			// old ones and another iteration would change nothing.
			strict = true
			break
		}
		if st.shift <= tolAbs {
			break
		}
	}

	s := torch.NoGrad()
	defer s.Close()
	if !strict {
		// The last centres moved after the last assignment: reassign, so that the
		// labels returned are the nearest centres of the centres returned.
		labels = s.ArgMin(p.sqDist(s, centers), 1, false)
	}
	diff := s.Sub(p.x, s.IndexSelect(centers, 0, labels))
	inertia := s.Item(s.Sum(s.Cast(s.Square(diff), torch.Float64), false))
	labels64 := s.Int64s(labels)
	hostCenters := s.Float32s(centers)
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("inertia: %w", err)
	}
	out := &kmeansRun{labels: make([]int, len(labels64)), centers: hostCenters, inertia: inertia, iters: iters}
	for i, l := range labels64 {
		out.labels[i] = int(l)
	}
	return out, nil
}

// plusPlus picks K initial centres by greedy k-means++ (scikit-learn's
// _kmeans_plusplus): the first uniformly, each next one as the best of 2+⌊ln K⌋
// candidates drawn with probability proportional to the squared distance to the
// nearest centre so far, best meaning least total squared distance afterwards.
//
// The distances stay on the device; each step copies the N current minimum distances
// to the host, where the PCG samples the candidates, and gets back one potential per
// candidate. The centres returned belong to rs.
func (p *points) plusPlus(rs *torch.Scope, rng *rand.Rand) (*torch.Tensor, error) {
	k, n := p.k, p.n
	trials := 2 + int(math.Log(float64(k)))
	chosen := make([]int64, 0, k)
	taken := make([]bool, n)
	first := rng.IntN(n)
	chosen = append(chosen, int64(first))
	taken[first] = true

	is := torch.NoGrad() // owns closest, the distance of each point to its nearest centre
	defer is.Close()
	closest := p.sqDist(is, is.IndexSelect(p.x, 0, is.FromInt64(chosen, []int{1}, p.dev)))
	if err := is.Err(); err != nil {
		return nil, err
	}
	cum := make([]float64, n)
	cand := make([]int64, trials)
	for len(chosen) < k {
		s := torch.NoGrad()
		w := s.Float32s(closest)
		if err := s.Err(); err != nil {
			s.Close()
			return nil, err
		}
		sampleCandidates(rng, w, taken, cum, cand)
		ct := s.IndexSelect(p.x, 0, s.FromInt64(cand, []int{trials}, p.dev))
		// Nearest-centre distance of every point if each candidate were added: N×trials.
		next := s.Minimum(closest, p.sqDist(s, ct))
		pots := s.Float32s(s.Sum(next, false, 0))
		if err := s.Err(); err != nil {
			s.Close()
			return nil, err
		}
		best := 0
		for t := range pots {
			if pots[t] < pots[best] {
				best = t
			}
		}
		chosen = append(chosen, cand[best])
		taken[cand[best]] = true
		nc := s.Contiguous(s.Narrow(next, 1, best, 1))
		closest.Free()
		closest = nc
		moveTo(is, s, nc)
		if err := s.Close(); err != nil {
			return nil, err
		}
	}
	centers := rs.IndexSelect(p.x, 0, rs.FromInt64(chosen, []int{k}, p.dev))
	return centers, rs.Err()
}

// sampleCandidates fills cand with indices drawn with probability proportional to w,
// ignoring points already taken as centres: their distance is zero in exact
// arithmetic, but the distance expansion can leave a rounding residue that would
// otherwise let a centre be chosen twice (fatal when K = N). cum is scratch of len(w).
//
// When every remaining weight is zero (fewer distinct points than K), candidates are
// drawn uniformly from the points not yet taken.
func sampleCandidates(rng *rand.Rand, w []float32, taken []bool, cum []float64, cand []int64) {
	total := 0.0
	last := -1 // last index of positive weight
	for i, v := range w {
		if !taken[i] && v > 0 {
			total += float64(v)
			last = i
		}
		cum[i] = total
	}
	if last < 0 {
		free := make([]int64, 0, len(w))
		for i := range w {
			if !taken[i] {
				free = append(free, int64(i))
			}
		}
		for t := range cand {
			cand[t] = free[rng.IntN(len(free))]
		}
		return
	}
	for t := range cand {
		r := rng.Float64() * total
		// The first index whose cumulative weight exceeds r has positive weight.
		i := sort.Search(len(cum), func(i int) bool { return cum[i] > r })
		if i > last {
			i = last // r rounded up to total
		}
		cand[t] = int64(i)
	}
}

// lloydState is what one Lloyd iteration hands to the next.
type lloydState struct {
	labels, centers *torch.Tensor // owned by the restart's scope
	shift           float64       // summed squared move of the centres
	changed         int           // labels that differ from the previous assignment
}

// lloydStep assigns every point to its nearest centre and moves each centre to the
// mean of its points (one-hotᵀ·x / counts). prev, the previous labels, may be nil.
//
// An empty cluster is re-seeded with the point farthest from its own centre, the
// next-farthest for a second empty cluster and so on, as scikit-learn does; unlike
// scikit-learn the donor cluster's mean is not corrected for the point it lost,
// which the next assignment does anyway. The new labels and centres move to rs.
func (p *points) lloydStep(rs *torch.Scope, centers, prev *torch.Tensor) (*lloydState, error) {
	s := torch.NoGrad()
	defer s.Close()
	k := p.k
	dist := p.sqDist(s, centers)
	labels := s.ArgMin(dist, 1, false)
	onehot := s.Cast(s.OneHot(labels, k), torch.Float32)
	counts := s.Sum(onehot, false, 0)
	sums := s.MatMul(s.Transpose(onehot, 0, 1), p.x)
	next := s.Div(sums, s.Unsqueeze(s.ClampMin(counts, 1), 1))
	shift := s.Sum(s.Square(s.Sub(next, centers)), false)
	var changed *torch.Tensor
	if prev == nil {
		changed = s.Full(nil, float64(p.n), torch.Float32, p.dev)
	} else {
		changed = s.Cast(s.Sum(s.Not(s.Eq(labels, prev)), false), torch.Float32)
	}
	// One copy to the host per iteration: K counts, the shift and the changed count.
	stats := s.Float32s(s.Cat(0, counts, s.Reshape(shift, 1), s.Reshape(changed, 1)))
	if err := s.Err(); err != nil {
		return nil, err
	}
	st := &lloydState{shift: float64(stats[k]), changed: int(stats[k+1])}

	var empty []int
	for j, c := range stats[:k] {
		if c == 0 {
			empty = append(empty, j)
		}
	}
	if len(empty) > 0 {
		far := s.Float32s(s.Min(dist, false, 1)) // distance of each point to its own centre
		if err := s.Err(); err != nil {
			return nil, err
		}
		order := make([]int, p.n)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(far[b], far[a]) })
		idx := make([]int64, len(empty))
		for i := range idx {
			idx[i] = int64(order[i])
		}
		rows := s.Float32s(s.IndexSelect(p.x, 0, s.FromInt64(idx, []int{len(idx)}, p.dev)))
		host := s.Float32s(next)
		if err := s.Err(); err != nil {
			return nil, err
		}
		for i, j := range empty {
			copy(host[j*p.d:(j+1)*p.d], rows[i*p.d:(i+1)*p.d])
		}
		next = s.FromFloat32(host, []int{k, p.d}, p.dev)
		st.shift = s.Item(s.Sum(s.Square(s.Sub(next, centers)), false))
		// Moving a centre changes the problem even if no label changed.
		st.changed = max(st.changed, 1)
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if math.IsNaN(st.shift) {
		return nil, errors.New("centres became NaN")
	}
	st.labels, st.centers = labels, next
	moveTo(rs, s, labels, next)
	return st, nil
}

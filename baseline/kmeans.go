package baseline

import (
	"cmp"
	"context"
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

	// Centred says that x's columns have mean 0 already, as standardized data's do:
	// x is then used as it is rather than through a centred copy, one tensor as large
	// as the data fewer. The result is the same either way, up to rounding.
	Centred bool

	// Step, when set, is told after each restart how many are done.
	Step func(done int)
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
// An interrupt (ctx done) is seen at each Lloyd iteration and returned wrapped.
//
// Besides x and a centred copy of it (none with Centred), seeding holds two N×R
// distance matrices for R restarts on the device and two on the host, and Lloyd's
// iterations at most two N×K distance matrices and the rows whose distances an
// iteration computes (see lloyd); the host holds the assignment, N×K distance bounds
// and the last N×K distances, one set of them for all the restarts. Nothing of size
// N×D crosses to the host.
func KMeans(ctx context.Context, x *torch.Tensor, cfg KMeansConfig) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := torch.NoGrad()
	defer s.Close()
	p, err := preparePoints(s, x, cfg.K, "k-means", cfg.Centred)
	if err != nil {
		return nil, err
	}
	rngs := make([]*rand.Rand, cfg.Restarts)
	for r := range rngs {
		rngs[r] = rand.New(rand.NewPCG(cfg.Seed+uint64(r), pcgStream))
	}
	var seeds []*torch.Tensor
	for g, size := 0, seedGroup(p.n, p.d, cfg.Restarts); g < cfg.Restarts; g += size {
		group, err := p.plusPlus(ctx, s, rngs[g:min(g+size, cfg.Restarts)])
		if err != nil {
			return nil, fmt.Errorf("k-means: k-means++ seeding of %d restarts: %w", cfg.Restarts, err)
		}
		seeds = append(seeds, group...)
	}
	var best *kmeansRun
	var st lloyd // one restart's host state, reused by the next: N×K bounds on large N
	for r := range cfg.Restarts {
		run, err := p.kmeansWith(ctx, &st, seeds[r], cfg.MaxIter, cfg.Tol)
		if err != nil {
			return nil, fmt.Errorf("k-means: restart %d of %d: %w", r+1, cfg.Restarts, err)
		}
		if best == nil || run.inertia < best.inertia {
			if best != nil {
				run.labels = best.labels[:0] // the old best's room
			}
			run.labels = append(run.labels, st.labels...)
			best = run
		}
		if cfg.Step != nil {
			cfg.Step(r + 1)
		}
	}
	labels := make([]int, len(best.labels))
	for i, l := range best.labels {
		labels[i] = int(l)
	}
	centers := best.centers
	for i := range centers {
		centers[i] += p.mean[i%p.d]
	}
	return &Result{Labels: labels, Centers: centers, Inertia: best.inertia, Iters: best.iters}, nil
}

// kmeansRun is one restart's outcome, with centres in the centred coordinates of
// points. kmeansWith leaves labels nil: they are st's, until the next restart.
type kmeansRun struct {
	labels  []int64
	centers []float32
	inertia float64
	iters   int
}

// kmeans runs one k-means++ seeding and Lloyd's algorithm.
func (p *points) kmeans(ctx context.Context, rng *rand.Rand, maxIter int, tol float64) (*kmeansRun, error) {
	s := torch.NoGrad()
	defer s.Close()
	seeds, err := p.plusPlus(ctx, s, []*rand.Rand{rng})
	if err != nil {
		return nil, fmt.Errorf("k-means++: %w", err)
	}
	var st lloyd
	run, err := p.kmeansWith(ctx, &st, seeds[0], maxIter, tol)
	if err == nil {
		run.labels = st.labels
	}
	return run, err
}

// kmeansWith runs Lloyd's algorithm from the given centres, which it takes over, in
// st, whose host buffers it reuses; the labels stay in st. Its tensors live in a scope
// of the restart, and each iteration's temporaries in a scope of the iteration, so
// memory stays flat however many iterations run.
func (p *points) kmeansWith(ctx context.Context, st *lloyd, centers *torch.Tensor, maxIter int, tol float64) (*kmeansRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rs := torch.NoGrad()
	defer rs.Close()
	if err := p.resetLloyd(st, centers); err != nil {
		return nil, err
	}
	tolAbs := tol * p.meanVar
	strict := false
	iters := 0
	for iters < maxIter {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("Lloyd iteration %d: %w", iters+1, err)
		}
		iters++
		changed, err := p.assign(st)
		if err == nil {
			err = p.update(rs, st)
		}
		if err != nil {
			return nil, fmt.Errorf("Lloyd iteration %d: %w", iters, err)
		}
		if changed == 0 {
			// The assignment reproduced the previous one, so the new centres are the
			// old ones and another iteration would change nothing.
			strict = true
			break
		}
		if st.shift <= tolAbs {
			break
		}
	}
	if !strict {
		// The last centres moved after the last assignment: reassign, so that the
		// labels returned are the nearest centres of the centres returned.
		if _, err := p.assign(st); err != nil {
			return nil, fmt.Errorf("final assignment: %w", err)
		}
	}

	inertia, err := p.inertia(st.centers, st.labels)
	if err != nil {
		return nil, fmt.Errorf("inertia: %w", err)
	}
	return &kmeansRun{centers: st.host, inertia: inertia, iters: iters}, nil
}

// inertia sums the squared distances of the points to their centres from direct
// differences, each row's sum in float32 and the total in float64. It goes 8 192 rows
// at a time, so that it needs no N×D temporaries.
func (p *points) inertia(centers *torch.Tensor, labels []int64) (float64, error) {
	const chunk = 8192
	total := 0.0
	for start := 0; start < p.n; start += chunk {
		m := min(chunk, p.n-start)
		s := torch.NoGrad()
		own := s.IndexSelect(centers, 0, s.FromInt64(labels[start:start+m], []int{m}, p.dev))
		rows := s.Float32s(s.Sum(s.Square(s.Sub(s.Narrow(p.x, 0, start, m), own)), false, 1))
		if err := s.Close(); err != nil {
			return 0, err
		}
		for _, v := range rows {
			total += float64(v)
		}
	}
	return total, nil
}

// plusPlus picks K initial centres for each of len(rngs) restarts by greedy k-means++
// (scikit-learn's _kmeans_plusplus): the first uniformly, each next one as the best of
// 2+⌊ln K⌋ candidates drawn with probability proportional to the squared distance to
// the nearest centre so far, best meaning least total squared distance afterwards.
//
// The restarts are seeded side by side. At each step every restart draws its candidates
// from its own distances, with its own generator, in the order a lone seeding draws
// them; then one pass over the data gives the distances to all the restarts'
// candidates, and a second to the ones chosen. A restart at a time would read the data
// once per restart and step, and on the CPU a pass over a large table is bound by
// memory: on 500 000 rows of 128 features ten restarts took 7.8 s that way.
//
// The distances stay on the device, N×R; each step copies them to the host, where the
// PCGs sample the candidates, and gets back one potential per candidate. The centres
// returned (K×D each) belong to rs. An interrupt (ctx done) is seen at each step: K
// passes over the data take a while on images at a large K.
func (p *points) plusPlus(ctx context.Context, rs *torch.Scope, rngs []*rand.Rand) ([]*torch.Tensor, error) {
	k, n, restarts := p.k, p.n, len(rngs)
	trials := 2 + int(math.Log(float64(k)))
	chosen := make([]int64, 0, k*restarts) // step-major: step t of restart r at t*restarts+r
	taken := make([]bool, n*restarts)      // restart r's at r*n
	for r, rng := range rngs {
		first := rng.IntN(n)
		chosen = append(chosen, int64(first))
		taken[r*n+first] = true
	}

	is := torch.NoGrad() // owns closest
	defer is.Close()
	// closest: N×R, the squared distance of each point to restart r's nearest centre.
	closest, err := p.nearer(is, nil, chosen)
	if err != nil {
		return nil, err
	}
	cum := make([]float64, n)
	cand := make([]int64, restarts*trials) // restart r's at r*trials
	var host, w []float32
	if restarts > 1 {
		w = make([]float32, n*restarts)
	}
	for len(chosen) < k*restarts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s := torch.NoGrad()
		host = s.Float32sInto(host, closest) // N×R
		if err := s.Err(); err != nil {
			s.Close()
			return nil, err
		}
		if restarts == 1 {
			w = host
		} else {
			for i := range n { // to R×N: each restart's weights in a row
				for r, v := range host[i*restarts : (i+1)*restarts] {
					w[r*n+i] = v
				}
			}
		}
		for r, rng := range rngs {
			sampleCandidates(rng, w[r*n:(r+1)*n], taken[r*n:(r+1)*n], cum, cand[r*trials:(r+1)*trials])
		}
		pots, err := p.potentials(closest, cand, trials)
		if err != nil {
			s.Close()
			return nil, err
		}
		picks := make([]int64, restarts)
		for r := range restarts {
			best := 0
			for t := range trials {
				if pots[r*trials+t] < pots[r*trials+best] {
					best = t
				}
			}
			picks[r] = cand[r*trials+best]
			taken[r*n+int(picks[r])] = true
		}
		chosen = append(chosen, picks...)
		nc, err := p.nearer(s, closest, picks)
		if err != nil {
			s.Close()
			return nil, err
		}
		closest.Free()
		closest = nc
		moveTo(is, s, nc)
		if err := s.Close(); err != nil {
			return nil, err
		}
	}
	centers := make([]*torch.Tensor, restarts)
	own := make([]int64, k)
	for r := range restarts {
		for t := range own {
			own[t] = chosen[t*restarts+r]
		}
		centers[r] = rs.IndexSelect(p.x, 0, rs.FromInt64(own, []int{k}, p.dev))
	}
	return centers, rs.Err()
}

// seedGroup is how many of r restarts plusPlus seeds side by side on n points of d
// features: all of them while their N×R distances take at most 64 MiB or a quarter of
// the data's size. A few features and many rows (4 million points of 2, ten restarts)
// would otherwise hold several times the data in distances.
func seedGroup(n, d, r int) int {
	return max(1, min(r, max((16<<20)/n, d/4)))
}

// seedChunk is how many points plusPlus takes at a time: enough that a product with
// the candidates is efficient, few enough that the temporaries of R×trials distances
// per point stay small (a few MB) on tables of millions of rows.
func seedChunk(cols int) int { return max(4096, (4<<20)/4/max(cols, 1)) }

// nearer is min(closest, d) in s, N×R, where column r of d is the squared distance of
// each point to point picks[r]; with closest nil, d itself.
func (p *points) nearer(s *torch.Scope, closest *torch.Tensor, picks []int64) (*torch.Tensor, error) {
	c := s.IndexSelect(p.x, 0, s.FromInt64(picks, []int{len(picks)}, p.dev))
	return byRows(s, p.n, len(picks), seedChunk(len(picks)), p.dev, func(cs *torch.Scope, start, m int) *torch.Tensor {
		d := cs.SqDist(cs.Narrow(p.x, 0, start, m), cs.Narrow(p.sq, 0, start, m), c)
		if closest != nil {
			d = cs.Minimum(cs.Narrow(closest, 0, start, m), d)
		}
		return d
	})
}

// potentials is, for each candidate cand[r*trials+t] of restart r, the sum over the
// points of their squared distance to restart r's nearest centre were it added. The
// chunks' sums add up on the device, so that one copy to the host (one sync on a GPU)
// serves the whole pass.
func (p *points) potentials(closest *torch.Tensor, cand []int64, trials int) ([]float64, error) {
	restarts := len(cand) / trials
	s := torch.NoGrad()
	defer s.Close()
	c := s.IndexSelect(p.x, 0, s.FromInt64(cand, []int{len(cand)}, p.dev))
	var total *torch.Tensor
	chunk := seedChunk(len(cand))
	for start := 0; start < p.n; start += chunk {
		m := min(chunk, p.n-start)
		cs := torch.NoGrad()
		d := cs.Reshape(cs.SqDist(cs.Narrow(p.x, 0, start, m), cs.Narrow(p.sq, 0, start, m), c), m, restarts, trials)
		near := cs.Reshape(cs.Narrow(closest, 0, start, m), m, restarts, 1)
		part := cs.Sum(cs.Minimum(d, near), false, 0)
		if total != nil {
			part = cs.Add(total, part)
			total.Free()
		}
		moveTo(s, cs, part)
		if err := cs.Close(); err != nil {
			return nil, err
		}
		total = part
	}
	host := s.Float32s(total)
	if err := s.Err(); err != nil {
		return nil, err
	}
	pots := make([]float64, len(host))
	for i, v := range host {
		pots[i] = float64(v)
	}
	return pots, nil
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

// lloyd is one restart's state between Lloyd iterations: the centres, the assignment,
// the per-cluster sums it implies, and per point Elkan's bounds (Elkan 2003, "Using the
// triangle inequality to accelerate k-means"): an upper bound on the distance to its
// own centre and a lower bound on the distance to each centre. A point whose upper
// bound is below every other centre's lower bound, or below half the gap between its
// centre and that one, keeps its cluster without any distance being computed. The
// assignment is the one a full pass would make, up to the rounding of the distance
// expansion, which the bounds allow for. Late in a run almost every point is skipped,
// and the sums are updated by the few points that moved, so an iteration costs a small
// fraction of a pass over the data.
type lloyd struct {
	centers  *torch.Tensor // K×D, owned by the restart's scope
	host     []float32     // the same centres on the host
	labels   []int64       // assignment of each point; -1 before the first
	upper    []float64     // per point, ≥ the distance to its own centre (not squared)
	lower    []float64     // N×K, ≤ the distance of point i to centre j
	slack    []float64     // rounding allowance of each point's squared distances
	sums     []float64     // K×D sums of the points of each cluster
	counts   []int         // points per cluster
	rows     []int64       // the points the last assignment had to check: room reused
	dist     []float32     // the distances it computed, M×K: room reused
	moved    []int64       // points whose cluster the last assignment changed
	from     []int64       // their previous clusters
	shift    float64       // summed squared move of the centres in the last update
	computed int           // rows whose distances the last assignment computed
}

// resetLloyd starts a restart in st at the given centres, which it takes over; st's
// host buffers are reused where they have the room.
func (p *points) resetLloyd(st *lloyd, centers *torch.Tensor) error {
	s := torch.NoGrad()
	defer s.Close()
	host := s.Float32s(centers)
	sq := s.Float32s(p.sq)
	if err := s.Err(); err != nil {
		return err
	}
	*st = lloyd{
		centers: centers,
		host:    host,
		labels:  resize(st.labels, p.n),
		upper:   resize(st.upper, p.n),
		lower:   resize(st.lower, p.n*p.k),
		slack:   resize(st.slack, p.n),
		sums:    make([]float64, p.k*p.d),
		counts:  make([]int, p.k),
		rows:    st.rows[:0],
		dist:    st.dist,
		moved:   st.moved[:0],
		from:    st.from[:0],
	}
	// upper and lower keep the last restart's values: the first assignment computes
	// every distance and writes every bound.
	maxSq := float64(slices.Max(sq))
	for i := range st.labels {
		st.labels[i] = -1
		// ||x||² − 2x·c + ||c||² in float32 is off by a few ulps of ||x||² + ||c||²;
		// allow a hundred. A centre is a mean of points or a point, so ||c||² ≤ maxSq.
		st.slack[i] = 1e-5 * (float64(sq[i]) + maxSq)
	}
	return nil
}

// assign gives every point its nearest centre and returns how many points changed
// cluster (all of them the first time). Only points whose bounds do not settle it
// have their distances computed, on the device, and only those cross to the host.
func (p *points) assign(st *lloyd) (changed int, err error) {
	k, n := p.k, p.n
	var rows []int64 // points to compute; nil means all
	if st.labels[0] >= 0 {
		gap := halfGaps(st.host, k, p.d)
		st.rows = st.rows[:0]
		for i := range n {
			a, u := int(st.labels[i]), st.upper[i]
			lo := st.lower[i*k : (i+1)*k]
			for j := range k {
				if j != a && u > lo[j] && u > gap[a*k+j] {
					st.rows = append(st.rows, int64(i))
					break
				}
			}
		}
		// Gathering most rows costs more than computing all; when none is left to
		// check, a full pass confirms the assignment.
		if len(st.rows) > 0 && len(st.rows) <= n/2 {
			rows = st.rows
		}
	}
	st.moved, st.from = st.moved[:0], st.from[:0]
	m := n
	if rows != nil {
		m = len(rows)
	}
	st.computed = m
	if m == 0 {
		return 0, nil
	}
	s := torch.NoGrad()
	defer s.Close()
	var dt *torch.Tensor
	if rows == nil {
		dt = p.sqDist(s, st.centers)
	} else {
		idx := s.FromInt64(rows, []int{m}, p.dev)
		dt = s.SqDist(s.IndexSelect(p.x, 0, idx), s.IndexSelect(p.sq, 0, idx), st.centers)
	}
	st.dist = s.Float32sInto(st.dist, dt)
	dist := st.dist
	if err := s.Err(); err != nil {
		return 0, err
	}
	for r := range m {
		i := r
		if rows != nil {
			i = int(rows[r])
		}
		best, bestD := 0, math.Inf(1)
		lo := st.lower[i*k : (i+1)*k]
		for j, v := range dist[r*k : (r+1)*k] {
			d := max(float64(v), 0)
			if d < bestD {
				best, bestD = j, d
			}
			lo[j] = math.Sqrt(max(d-st.slack[i], 0))
		}
		st.upper[i] = math.Sqrt(bestD + st.slack[i])
		if old := st.labels[i]; int64(best) != old {
			st.moved = append(st.moved, int64(i))
			st.from = append(st.from, old)
			st.labels[i] = int64(best)
		}
	}
	return len(st.moved), nil
}

// halfGaps is the K×K matrix of half the distances between centres: a point closer
// than gap[a,j] to its own centre a is closer to a than to j.
func halfGaps(c []float32, k, d int) []float64 {
	gap := make([]float64, k*k)
	for a := range k {
		for b := range a {
			t := 0.0
			for i := range d {
				e := float64(c[a*d+i]) - float64(c[b*d+i])
				t += e * e
			}
			gap[a*k+b] = math.Sqrt(t) / 2
			gap[b*k+a] = gap[a*k+b]
		}
	}
	return gap
}

// update moves each centre to the mean of its points and loosens the bounds by how far
// the centres moved. The cluster sums are kept in float64 on the host: the first
// update takes them from one pass over x (index_add on the CPU; a one-hot product on a
// GPU, where index_add's atomics would make runs irreproducible), and later updates
// move only the rows of the points that changed cluster.
//
// An empty cluster is re-seeded with the point farthest from its own centre, the
// next-farthest for a second empty cluster and so on, as scikit-learn does; unlike
// scikit-learn the donor cluster's mean is not corrected for the point it lost,
// which the next assignment does anyway. The new centres move to rs.
func (p *points) update(rs *torch.Scope, st *lloyd) error {
	s := torch.NoGrad()
	defer s.Close()
	k, d := p.k, p.d
	if len(st.moved) > 0 && st.from[0] < 0 { // the first assignment: every point came from nowhere
		labels := s.FromInt64(st.labels, []int{p.n}, p.dev)
		var sums *torch.Tensor
		if p.dev.CUDA {
			sums = s.MatMul(s.Transpose(s.Cast(s.OneHot(labels, k), torch.Float32), 0, 1), p.x)
		} else {
			sums = s.IndexAdd(s.Zeros([]int{k, d}, torch.Float32, p.dev), 0, labels, p.x)
		}
		host := s.Float32s(sums)
		if err := s.Err(); err != nil {
			return err
		}
		for i, v := range host {
			st.sums[i] = float64(v)
		}
		for _, l := range st.labels {
			st.counts[l]++
		}
	} else if len(st.moved) > 0 {
		rows := s.Float32s(s.IndexSelect(p.x, 0, s.FromInt64(st.moved, []int{len(st.moved)}, p.dev)))
		if err := s.Err(); err != nil {
			return err
		}
		for r, i := range st.moved {
			x := rows[r*d : (r+1)*d]
			from, to := st.sums[st.from[r]*int64(d):], st.sums[st.labels[i]*int64(d):]
			for c, v := range x {
				from[c] -= float64(v)
				to[c] += float64(v)
			}
			st.counts[st.from[r]]--
			st.counts[st.labels[i]]++
		}
	}

	host := make([]float32, k*d)
	var empty []int
	for j, c := range st.counts {
		if c == 0 {
			empty = append(empty, j)
			continue
		}
		for i := range d {
			host[j*d+i] = float32(st.sums[j*d+i] / float64(c))
		}
	}
	if len(empty) > 0 {
		far := s.Float32s(s.Min(p.sqDist(s, st.centers), false, 1)) // distance of each point to its own centre
		if err := s.Err(); err != nil {
			return err
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
		if err := s.Err(); err != nil {
			return err
		}
		for i, j := range empty {
			copy(host[j*d:(j+1)*d], rows[i*d:(i+1)*d])
		}
	}

	moved := make([]float64, k)
	st.shift = 0
	for j := range k {
		t := 0.0
		for i := range d {
			e := float64(host[j*d+i]) - float64(st.host[j*d+i])
			t += e * e
		}
		if math.IsNaN(t) {
			return errors.New("centres became NaN")
		}
		st.shift += t
		moved[j] = math.Sqrt(t)
	}
	for i, l := range st.labels {
		st.upper[i] += moved[l]
		lo := st.lower[i*k : (i+1)*k]
		for j := range lo {
			lo[j] -= moved[j]
		}
	}
	next := s.FromFloat32(host, []int{k, d}, p.dev)
	if err := s.Err(); err != nil {
		return err
	}
	st.centers.Free()
	st.centers, st.host = next, host
	moveTo(rs, s, next)
	return s.Err()
}

// resize is buf with n elements, reusing its room when it has enough.
func resize[T any](buf []T, n int) []T {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]T, n)
}

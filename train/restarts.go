package train

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"emclust/eval"
	"emclust/torch"
)

// Restart is one of the runs TrainRestarts or TrainTrials trained: its seed,
// criteria, and what kept or dropped it: how well its clustering agrees with the other
// restarts', its silhouette, or a trial's agreement with itself.
type Restart struct {
	Seed     uint64   `json:"seed"`
	Criteria Criteria `json:"criteria"`
	// Agreement is the mean adjusted Rand index between this restart's clustering and
	// each other restart's; set once all have trained, and only with three or more.
	Agreement *float64 `json:"agreement,omitempty"`
	// Silhouette is the mean silhouette of the clustering on the z-scored features;
	// set once all have trained, when they are kept by it.
	Silhouette *float64 `json:"silhouette,omitempty"`
	// ChosenEpoch, EmptyClusters, SelfAgreement and ACC describe a trial
	// (TrainTrials): the epoch it chose, the clusters that epoch left empty and its
	// mean adjusted Rand index with its AgreementWindow earlier evaluations, which
	// kept the trial (Chosen.AgreesMore), and that epoch's ACC where the data have
	// labels, for the record only.
	ChosenEpoch   int      `json:"chosen_epoch,omitempty"`
	EmptyClusters int      `json:"empty_clusters,omitempty"`
	SelfAgreement *float64 `json:"self_agreement,omitempty"`
	ACC           *float64 `json:"acc,omitempty"`
	// Network names the restart's network when Config.HiddenAuto trained two:
	// "mlp" or "linear".
	Network string `json:"network,omitempty"`
	// NetworkSilhouette and NetworkClusters are, of each network's kept restart, the
	// mean silhouette on the features trained on and the clusters its clustering
	// uses (of K), which chose between the networks (chooseNetwork).
	NetworkSilhouette *float64 `json:"network_silhouette,omitempty"`
	NetworkClusters   int      `json:"network_clusters,omitempty"`
}

// NetworkCandidates are the networks TrainRestarts trains for cfg: cfg itself, or
// with HiddenAuto and several restarts the MLP of cfg.Hidden with cfg.Prior and then
// a linear map with a learned prior. The MLP makes clusters of about equal size,
// which the linear map does not, and each won on about half of ten tables; the
// silhouette on the features trained on picked the better on eight of them
// (docs/RESULTS.md section 29). One restart is one run of the MLP (a single run
// checkpoints and evaluates as it goes, which a choice made at the end cannot), and
// so are several heads (a learned prior is one head's).
func NetworkCandidates(cfg Config) []Config {
	if !cfg.HiddenAuto || cfg.Restarts <= 1 || cfg.Heads > 1 {
		return []Config{cfg}
	}
	linear := cfg
	linear.Hidden, linear.Prior = nil, "learned"
	return []Config{cfg, linear}
}

// NetworkName names the network of cfg, a run whose network was left to HiddenAuto:
// "mlp" or "linear", as Restart.Network records it; "" for one whose network was
// named.
func NetworkName(cfg Config) string {
	switch {
	case !cfg.HiddenAuto || cfg.Heads > 1:
		return ""
	case len(cfg.Hidden) == 0:
		return "linear"
	}
	return "mlp"
}

// RestartRuns is how many runs TrainRestarts trains for cfg: its restarts for each
// candidate network.
func (c *Config) RestartRuns() int { return max(c.Restarts, 1) * len(NetworkCandidates(*c)) }

// What keeps one of several restarts (Config.KeepBy).
const (
	// KeepByAgreement keeps the medoid: the clustering of the highest mean adjusted
	// Rand index with the others (docs/RESULTS.md §20). The default.
	KeepByAgreement = "agreement"
	// KeepBySilhouette keeps the clustering of the highest mean silhouette on the
	// z-scored features: compact clusters far from each other. Replayed on earlier
	// runs it kept better restarts than the agreement (0.010 ACC more on average over
	// 20 table and preprocessing pairs), but trained afresh it lost 0.032 on the
	// digits and moved the other nine tables by less than their margins
	// (docs/RESULTS.md §26), so it is an option, not the default.
	KeepBySilhouette = "silhouette"
)

// MinAgreementRestarts is the fewest restarts among which the agreement chooses:
// with two, each agrees with the other alike, and the max posterior decides.
const MinAgreementRestarts = 3

// keptByMaxPosterior is KeptBy's answer when no other rule can choose.
const keptByMaxPosterior = "max posterior"

// KeptBy is the rule that chooses among n restarts under keepBy (Config.KeepBy):
// KeepBySilhouette, KeepByAgreement, or "max posterior" where the agreement has
// fewer than MinAgreementRestarts to go by. Logs and reports name it from here.
func KeptBy(keepBy string, n int) string {
	switch {
	case keepBy == KeepBySilhouette && n >= 2:
		return KeepBySilhouette
	case keepBy != KeepBySilhouette && n >= MinAgreementRestarts:
		return KeepByAgreement
	}
	return keptByMaxPosterior
}

// RestartHooks let a caller follow TrainRestarts; either may be nil. Restarts may
// train side by side, so the hooks are called from several goroutines, but never
// two at once.
type RestartHooks struct {
	// Progress hears, as any restart starts an epoch and every few of its steps, how
	// many steps all restarts have done of how many they will do. The total counts
	// the restarts not yet started as long as one that has.
	Progress func(done, total int)
	// Done hears of each restart that finishes, in the order they finish: its index
	// among all restarts (NetworkCandidates' order, then the seeds') and its record.
	Done func(i int, r Restart)
}

// TrainRestarts trains max(cfg.Restarts, 1) runs, of seeds cfg.Seed, cfg.Seed+1, ...,
// without a run folder and scoring only their last epoch, and returns the run that
// cfg.KeepBy keeps, with every restart's seed, criteria, agreement and silhouette.
// By agreement, it keeps the medoid under the adjusted Rand index: a structure the
// data have comes back from seed to seed, so the restart closest to all others is the
// one least driven by its seed; on the embedded tables it beat the highest mean max
// posterior, which chose badly on wine (docs/RESULTS.md section 20). By silhouette, it
// keeps the restart whose clusters are most compact and apart in the feature space.
// By agreement, fewer than MinAgreementRestarts fall back to the max posterior
// (Criteria.Better).
//
// With several NetworkCandidates it does so for each (the same seeds), and of the two
// runs kept returns the one whose clustering has the higher silhouette on the
// features as trained, raw or standardised as the run chose, of those that use at
// least MinClustersUsed percent of the clusters (chooseNetwork). (On z-scored features the
// digits' near-constant pixels weigh like the others, and the silhouette there picked
// the network that lost 0.13 ACC; section 29.)
//
// Vector restarts on the CPU train side by side, one per libtorch thread
// (RestartsSideBySide), and each worker trains several of a network at once as one
// network of stacked weights (RestartsStacked); the others one after another.
//
// The caller owns the returned run (Attach gives it a folder); the others are closed.
// All restarts stay open until all have trained, so as many networks are held at once.
//
// Cancelling ctx stops the restarts in training and starts no more. If some had
// finished, the run chosen among them comes back with the error (ctx's, unless a
// restart failed first), so that an interrupted run keeps what it finished; its
// Cfg.Restarts counts those restarts of its network. Restarts stacked finish
// together.
//
// It sets process-wide state while restarts train side by side (GOMAXPROCS, the
// BLAS's thread count) and restores it: calls must not overlap.
func TrainRestarts(ctx context.Context, cfg Config, src Source, dev torch.Device, hooks RestartHooks) (*Run, []Restart, error) {
	return TrainRestartsIn(ctx, cfg, src, dev, "", hooks)
}

// TrainRestartsIn is TrainRestarts with each restart trained as a run of its own in
// dir/trials/seed-S (TrialsDir, as trials are), saved as it trains, where dir is not
// "": whole runs of a CNN take hours each, and a job killed among them would lose
// them all. Called again on the same dir, it takes the restarts that finished from
// their checkpoints, goes on with the one that was stopped and trains the rest: the
// run it keeps is the one an uninterrupted call keeps. The plan, cfg, is
// dir/trials/config.json, for the resume to read.
//
// Only restarts that train one after another, unstacked, as images' do, train in
// folders (RestartsInFolders); vector restarts take seconds. With a dir, an interrupt
// keeps no choice (the folders are what a resume goes on from), and the run kept comes
// back without a folder: KeepTrial saves it in dir.
func TrainRestartsIn(ctx context.Context, cfg Config, src Source, dev torch.Device, dir string, hooks RestartHooks) (*Run, []Restart, error) {
	workers, stacks := restartPlan(cfg, src, dev)
	if dir != "" {
		if workers > 0 || stacks < cfg.RestartRuns() {
			return nil, nil, errors.New("restarts trained side by side or stacked train without folders")
		}
		if err := cfg.Validate(); err != nil {
			return nil, nil, err // before config.json, which a resume must be able to read
		}
		trials := filepath.Join(dir, TrialsDir)
		if err := os.MkdirAll(trials, 0o755); err != nil {
			return nil, nil, fmt.Errorf("run folder: %w", err)
		}
		if err := WriteConfig(trials, cfg); err != nil {
			return nil, nil, err
		}
	}
	run, all, err := trainRestarts(ctx, cfg, src, dev, hooks, workers, stacks, dir)
	if err != nil && ctx.Err() == nil {
		dropUnsavedTrials(dir)
	}
	if run != nil {
		run.Restarts = all
		// The restarts scored only their last epoch; a resume trains on as asked.
		asked := cfg
		resolveEpochs(&asked, src.Len())
		run.Cfg.EvalEvery = asked.EvalEvery
	}
	return run, all, err
}

// TrainSeeds trains one run of cfg's network for each of seeds, without a run folder
// and scoring only the last epoch, as TrainRestarts trains its restarts: side by side
// and stacked where those would be. It returns the runs in the order of seeds, nil
// where a run did not finish, with the first error (ctx's when it stopped them). The
// caller closes the runs.
func TrainSeeds(ctx context.Context, cfg Config, seeds []uint64, src Source, dev torch.Device) ([]*Run, error) {
	plan := cfg
	plan.HiddenAuto, plan.Restarts = false, len(seeds) // the network as named, once a seed
	jobs := make([]restartJob, len(seeds))
	for i, seed := range seeds {
		c := plan
		c.Seed, c.EvalEvery, c.Restarts = seed, 0, 1
		jobs[i] = restartJob{cfg: c, index: i}
	}
	workers, stacks := restartPlan(plan, src, dev)
	runs, _, err := trainJobs(ctx, jobs, src, dev, RestartHooks{}, workers, stacks)
	return runs, err
}

// RestartsStacked is how many restarts of a network TrainRestarts trains at once, at
// most, as one network of stacked weights (trainStacked): where they train side by
// side (RestartsSideBySide) with the EM objective and one head in float32, each
// network's restarts go in as many stacks as give every worker one, of at most
// maxStack (restartPlan). 1 where they train one by one.
func RestartsStacked(cfg Config, src Source, dev torch.Device) int {
	_, stacks := restartPlan(cfg, src, dev)
	return (max(cfg.Restarts, 1) + stacks - 1) / stacks
}

// maxStack is the most restarts trained stacked (trainStacked). On two cores,
// make run's twenty digits restarts trained in 1.6–1.9 s in stacks of ten, 2.0–2.2 s
// of five, 2.6–2.8 s of three, and 3.5–3.8 s one at a time (docs/RESULTS.md section
// 33). More were not measured.
const maxStack = 10

// restartPlan is how TrainRestarts trains cfg's restarts: workers side by side
// (RestartsSideBySide), and into how many stacks it splits each network's restarts:
// its restarts (each alone) where they do not stack; otherwise enough for the
// workers to have one each, and for none to hold more than maxStack.
func restartPlan(cfg Config, src Source, dev torch.Device) (workers, stacks int) {
	restarts := max(cfg.Restarts, 1)
	workers = RestartsSideBySide(cfg, src, dev)
	if workers == 0 || !stackable(cfg, src) {
		return workers, restarts
	}
	networks := len(NetworkCandidates(cfg))
	return workers, min(restarts, max((workers+networks-1)/networks, (restarts+maxStack-1)/maxStack))
}

// RestartsSideBySide is how many of cfg's restarts TrainRestarts trains at once, each
// on one thread: one per libtorch thread for vectors on the CPU whose steps are too
// small to share among threads (oneThreadForSmallSteps), when cfg leaves the thread
// count to emclust (Config.Threads 0); 0, one after another, otherwise. Such a run
// trains and evaluates on one thread anyway, so the restarts share the threads
// instead, to the same results (docs/RESULTS.md section 32). On one thread, one
// worker, for restarts that stack (RestartsStacked).
func RestartsSideBySide(cfg Config, src Source, dev torch.Device) int {
	vectors, ok := src.(*VectorSource)
	threads := torch.NumThreads()
	if !ok || dev.CUDA || cfg.Threads != 0 || cfg.WorldSize > 1 || cfg.RestartRuns() < 2 || (threads < 2 && !stackable(cfg, src)) {
		return 0
	}
	for _, c := range NetworkCandidates(cfg) {
		spec, err := vectors.Spec(&c)
		if err != nil || !smallStep(spec.MLPForwardFLOPs(), min(c.BatchSize, src.Len()), c.Objective) {
			return 0 // New reports a bad spec; a large step shares the threads
		}
	}
	return min(threads, cfg.RestartRuns())
}

// restartJob is one restart to train: its config, the name of its network in its
// record, its index among its network's restarts, and the folder it trains in ("":
// none).
type restartJob struct {
	cfg     Config
	network string
	index   int
	dir     string
}

// RestartsInFolders says whether TrainRestartsIn trains cfg's restarts in folders of
// their own: where they train one after another, unstacked.
func RestartsInFolders(cfg Config, src Source, dev torch.Device) bool {
	workers, stacks := restartPlan(cfg, src, dev)
	return workers == 0 && stacks >= cfg.RestartRuns()
}

// trainRestarts is TrainRestartsIn with workers side by side (0: one after another on
// the caller's threads), and each network's restarts in that many stacks (trainJobs).
func trainRestarts(ctx context.Context, cfg Config, src Source, dev torch.Device, hooks RestartHooks, workers, stacks int, dir string) (*Run, []Restart, error) {
	if err := checkRestartsFit(cfg, src, memoryToCheck(&cfg, dev)); err != nil {
		return nil, nil, err
	}
	cands := NetworkCandidates(cfg)
	n := max(cfg.Restarts, 1)
	var jobs []restartJob
	for _, cand := range cands {
		name := "" // restarts name their network when there is a choice
		if len(cands) > 1 {
			name = NetworkName(cand)
		}
		for i := range n {
			c := cand
			c.Seed = cand.Seed + uint64(i)
			// Only the last epoch is scored: the criteria choose, and scoring every
			// epoch of runs that are mostly dropped took 3/4 of the time (10 restarts
			// of the digits: 12.8 s against 3.2 s).
			c.EvalEvery = 0
			job := restartJob{cfg: c, network: name, index: i}
			if dir != "" {
				job.dir = filepath.Join(dir, TrialsDir, strings.TrimSuffix(fmt.Sprintf("seed-%d-%s", c.Seed, name), "-"))
			}
			jobs = append(jobs, job)
		}
	}
	runs, records, err := trainJobs(ctx, jobs, src, dev, hooks, workers, stacks)
	closeFrom := func(first int, kept []*Run) {
		for _, r := range kept {
			r.Close()
		}
		for _, r := range runs[first:] {
			if r != nil {
				r.Close()
			}
		}
	}
	if err != nil && (ctx.Err() == nil || dir != "") {
		closeFrom(0, nil)
		return nil, nil, err
	}
	// Each network keeps one of its restarts that finished.
	var kept []*Run
	var all []Restart
	for c := range cands {
		var finished []*Run
		var clusterings [][]int32
		var restarts []Restart
		for j := c * n; j < (c+1)*n; j++ {
			if r := runs[j]; r != nil {
				finished = append(finished, r)
				clusterings = append(clusterings, r.recent[len(r.recent)-1])
				restarts = append(restarts, records[j])
			}
		}
		if len(finished) == 0 {
			continue
		}
		run, cerr := choose(finished, clusterings, restarts, src) // closes the others
		if cerr != nil {
			closeFrom((c+1)*n, kept)
			return nil, nil, cerr
		}
		kept = append(kept, run)
		all = append(all, restarts...)
	}
	switch len(kept) {
	case 0:
		return nil, nil, err
	case 1:
		kept[0].detach() // from its folder, if it has one: the caller attaches it to dir
		return kept[0], all, err
	}
	best, cerr := chooseNetwork(kept, src)
	if cerr != nil {
		closeFrom(len(runs), kept)
		return nil, nil, cerr
	}
	for i, r := range kept {
		for j := range all {
			if all[j].Network == NetworkName(r.Cfg) && all[j].Seed == r.Cfg.Seed {
				all[j].NetworkSilhouette, all[j].NetworkClusters = &best.silhouettes[i], best.clusters[i]
			}
		}
		if i != best.index {
			r.Close()
		}
	}
	kept[best.index].detach()
	return kept[best.index], all, err
}

// trainJobs trains jobs and returns, for each, its run and record, or nil and a
// zero record where it did not finish. Each network's jobs (consecutive) train in
// that many stacks (splitStacks, trainStacked). With workers > 0 that many train side by
// side, each on an OS thread of its own with one libtorch thread; with 0 they train
// one after another on the caller's threads. The first error stops every job in
// training and comes back; so does ctx's when it stopped a job or kept one from
// starting.
func trainJobs(ctx context.Context, jobs []restartJob, src Source, dev torch.Device, hooks RestartHooks, workers, stacks int) ([]*Run, []Restart, error) {
	runs := make([]*Run, len(jobs))
	records := make([]Restart, len(jobs))
	var mu sync.Mutex // the hooks, runs, records and firstErr
	var firstErr error
	var steps *stepCounter
	if hooks.Progress != nil {
		steps = newStepCounter(&mu, hooks.Progress, len(jobs))
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		stop()
	}
	name := func(j int) string {
		job := jobs[j]
		if job.network != "" {
			return fmt.Sprintf("%s restart %d (seed %d)", job.network, job.index+1, job.cfg.Seed)
		}
		return fmt.Sprintf("restart %d (seed %d)", job.index+1, job.cfg.Seed)
	}
	// train trains the jobs of group g, stacked when there are several.
	train := func(g []int) {
		rs := make([]*Run, 0, len(g))
		defer func() {
			for _, r := range rs {
				r.Close()
			}
		}()
		for _, j := range g {
			if err := ctx.Err(); err != nil {
				fail(fmt.Errorf("%s: %w", name(j), err))
				return
			}
			r, err := openRestart(jobs[j], src, dev)
			if err != nil {
				fail(fmt.Errorf("%s: %w", name(j), err))
				return
			}
			rs = append(rs, r)
			if steps != nil {
				r.Progress = &restartSteps{c: steps, j: j}
				if done := r.EpochsDone(); done > 0 {
					per := r.stepsPerEpoch()
					steps.restore(j, done*per, r.Cfg.Epochs*per)
				}
			}
		}
		if len(rs) == 1 {
			if err := rs[0].Train(ctx); err != nil {
				fail(fmt.Errorf("%s: %w", name(g[0]), err))
				return
			}
			// A restart in a folder kept its last epoch, its only one evaluated and
			// so its chosen, as the network has it: no copy while the others train.
			rs[0].dropChosenState()
		} else if err := trainStacked(ctx, rs); err != nil {
			var one *restartError
			if errors.As(err, &one) {
				fail(fmt.Errorf("%s: %w", name(g[one.i]), one.err))
			} else {
				first, last := jobs[g[0]], jobs[g[len(g)-1]]
				fail(fmt.Errorf("%srestarts %d–%d (seeds %d–%d): %w", strings.TrimSpace(first.network+" "), first.index+1, last.index+1,
					first.cfg.Seed, last.cfg.Seed, err))
			}
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for i, j := range g {
			// Train evaluated the last epoch: its criteria.
			r := rs[i]
			runs[j], records[j] = r, Restart{Seed: jobs[j].cfg.Seed, Criteria: *r.History[len(r.History)-1].Criteria, Network: jobs[j].network}
			if hooks.Done != nil {
				hooks.Done(j, records[j])
			}
		}
		rs = nil // kept
	}
	groups := splitStacks(jobs, stacks)
	if workers == 0 {
		for _, g := range groups {
			if train(g); firstErr != nil {
				break
			}
		}
		return runs, records, firstErr
	}
	workers = min(workers, len(groups))
	prev := torch.NumThreads()
	// A worker holds its P through each libtorch call. With no P to spare, the runtime
	// takes it from a call that outlasts a sysmon tick and wakes a thread to hold it:
	// 13% of the digits restarts' time on two cores (docs/RESULTS.md section 32).
	procs := runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + workers)
	defer runtime.GOMAXPROCS(procs)
	// The BLAS's count is the process's: one before any worker starts, so that no
	// restart's products run on more (whose sums come out in another order).
	// OpenMP's is this OS thread's: keep the thread until the count is restored on it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := torch.SetNumThreads(1); err != nil {
		return runs, records, err
	}
	next := make(chan []int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The OS thread keeps its one libtorch thread (OpenMP's setting is the
			// calling thread's) and ends with this goroutine, which never unlocks it.
			runtime.LockOSThread()
			// Reading the count first settles libtorch's lazy set-up of a new thread,
			// which would later apply the process-wide count instead.
			torch.NumThreads()
			if err := torch.SetNumThreads(1); err != nil {
				fail(err)
			}
			for g := range next {
				train(g)
			}
		}()
	}
	for _, g := range groups {
		next <- g
	}
	close(next)
	wg.Wait()
	// The caller's count again: for its thread, the BLAS, and threads started later.
	if err := torch.SetNumThreads(prev); err != nil && firstErr == nil {
		firstErr = err
	}
	return runs, records, firstErr
}

// openRestart makes the run of job, in its folder where it has one: from its
// checkpoint there, if it has one.
func openRestart(job restartJob, src Source, dev torch.Device) (*Run, error) {
	if job.dir == "" {
		return New(job.cfg, src, dev, "")
	}
	var ckpt *torch.SafeFile
	// Lstat: a link to nothing is read, and its error named, not trained over.
	if _, err := os.Lstat(filepath.Join(job.dir, checkpointName)); err == nil {
		if ckpt, _, _, err = ReadCheckpoint(job.dir); err != nil {
			return nil, fmt.Errorf("%w (remove %s to train that restart again)", err, job.dir)
		}
		defer ckpt.Release() // where New fails before Restore
	}
	r, err := New(job.cfg, src, dev, job.dir)
	if err != nil {
		return nil, err
	}
	if ckpt != nil {
		if err := r.Restore(ckpt); err != nil {
			r.Close()
			return nil, fmt.Errorf("%w (remove %s to train that restart again)", err, job.dir)
		}
		if r.EpochsDone() > r.Cfg.Epochs {
			r.Close()
			return nil, fmt.Errorf("%s trained %d epochs, more than the run's %d", job.dir, r.EpochsDone(), r.Cfg.Epochs)
		}
	}
	return r, nil
}

// splitStacks splits jobs into what a worker trains at once: each network's
// restarts (consecutive jobs) into parts stacks as even as they come, or each alone
// with fewer restarts.
func splitStacks(jobs []restartJob, parts int) [][]int {
	var out [][]int
	for first := 0; first < len(jobs); {
		end := first + 1
		for end < len(jobs) && jobs[end].network == jobs[first].network {
			end++
		}
		n := end - first
		p := min(max(parts, 1), n)
		for part := range p {
			var g []int
			for j := first + n*part/p; j < first+n*(part+1)/p; j++ {
				g = append(g, j)
			}
			out = append(out, g)
		}
		first = end
	}
	return out
}

// stepCounter sums the steps of restarts for RestartHooks.Progress: those this call
// trains, without the ones a restart restored from its folder had done, which took
// no time here and would make a rate of them.
type stepCounter struct {
	mu          *sync.Mutex
	hook        func(done, total int)
	done, total []int // per restart; total is 0 until its first epoch starts
	restored    []int // per restart, of done and total; nil: none
}

func newStepCounter(mu *sync.Mutex, hook func(done, total int), restarts int) *stepCounter {
	return &stepCounter{mu: mu, hook: hook, done: make([]int, restarts), total: make([]int, restarts)}
}

// restore records that restart j came back from its folder with done of its total
// steps done, and tells the hook the sums.
func (c *stepCounter) restore(j, done, total int) {
	c.mu.Lock()
	if c.restored == nil {
		c.restored = make([]int, len(c.done))
	}
	c.restored[j] = done
	c.mu.Unlock()
	c.set(j, done, total)
}

// set records restart j's steps done and, when total > 0, its steps in all, and
// tells the hook the sums. A restart not yet started counts as many steps as the
// longest known.
func (c *stepCounter) set(j, done, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done[j] = done
	if total > 0 {
		c.total[j] = total
	}
	var sumDone, sumTotal, known int
	for i := range c.done {
		sumDone += c.done[i]
		sumTotal += c.total[i]
		known = max(known, c.total[i])
		if c.restored != nil {
			sumDone -= c.restored[i]
			sumTotal -= c.restored[i]
		}
	}
	for _, t := range c.total {
		if t == 0 {
			sumTotal += known
		}
	}
	c.hook(sumDone, sumTotal)
}

// restartSteps is the Progress of restart j: its epochs' steps, counted in c every
// stepsPerReport steps and at the end of each epoch, since the workers share c's lock.
type restartSteps struct {
	c     *stepCounter
	j     int
	base  int // steps of the epochs before this one
	steps int // in this epoch
}

const stepsPerReport = 10

func (p *restartSteps) Start(epoch, epochs, steps int) {
	p.base, p.steps = (epoch-1)*steps, steps
	p.c.set(p.j, p.base, epochs*steps)
}

func (p *restartSteps) Step(done int, _ float64, _ bool) {
	if done%stepsPerReport == 0 || done == p.steps {
		p.c.set(p.j, p.base+done, 0)
	}
}

func (p *restartSteps) End(EpochMetrics) {}

// ShowsLoss: the steps are counted, the loss is not shown.
func (p *restartSteps) ShowsLoss() bool { return false }

// networkChoice is what chooseNetwork found: the index of the run kept, and every
// run's silhouette on the features trained on and clusters in use.
type networkChoice struct {
	index       int
	silhouettes []float64
	clusters    []int
}

// chooseNetwork picks, of runs of different networks on src, the one whose last
// clustering has the highest mean silhouette on src's features as trained among those
// that use at least MinClustersUsed percent of the K clusters (betterNetwork).
func chooseNetwork(runs []*Run, src Source) (networkChoice, error) {
	k := runs[0].Cfg.K
	clusterings := make([][]int32, len(runs))
	for i, r := range runs {
		clusterings[i] = r.recent[len(r.recent)-1]
	}
	s := torch.NoGrad()
	sil, err := silhouettes(src.Features(s), clusterings, k, silhouetteRows, runs[0].Cfg.Seed, false)
	if cerr := s.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return networkChoice{}, fmt.Errorf("choosing the network: %w", err)
	}
	used := make([]int, len(runs))
	for i, c := range clusterings {
		used[i] = clustersUsed(c)
	}
	return networkChoice{index: betterNetwork(used, sil, k), silhouettes: sil, clusters: used}, nil
}

// clustersUsed is how many clusters hold a row of the clustering.
func clustersUsed[L int | int32](cluster []L) int {
	used := 0
	for _, n := range eval.ClusterSizes(cluster, 0) {
		if n > 0 {
			used++
		}
	}
	return used
}

// MinClustersUsed is the least share of the K clusters, in percent, that a network's
// clustering must use for its silhouette to choose it. A clustering that leaves
// clusters empty is not what was asked for (K is the user's), and scores a higher
// silhouette for being coarser: on 2-d Fashion-MNIST points the linear map's learned
// prior used 3 of 10 clusters, ACC 0.29 against the MLP's 0.87, and on rays like
// them 3 to 6 of 10 (docs/RESULTS.md sections 29 and 73). But where groups differ
// much in size the linear map fits them and leaves a few clusters empty: on twelve
// blobs of 334 to 4950 rows it used 9 to 11 of 12, ACC 0.95–0.97 against the MLP's
// 0.71, and on Shuttle 5 or 6 of 7. With K = 3 every cluster must be used.
const MinClustersUsed = 70

// betterNetwork is the index of the highest silhouette among the clusterings that use
// at least MinClustersUsed percent of k clusters, or where none does, of the most
// clusters used and among those the highest silhouette; ties go to the first (the
// MLP).
func betterNetwork(used []int, sil []float64, k int) int {
	best := -1
	for i := range sil {
		if 100*used[i] >= MinClustersUsed*k && (best < 0 || sil[i] > sil[best]) {
			best = i
		}
	}
	if best >= 0 {
		return best
	}
	best = 0
	for i := range sil {
		if used[i] > used[best] || (used[i] == used[best] && sil[i] > sil[best]) {
			best = i
		}
	}
	return best
}

// choose keeps the run that the first run's KeepBy prefers (of runs trained, with
// their clusterings and criteria; src gives the features a silhouette is measured
// on), fills in each restart's agreement and silhouette, and closes the rest. The
// kept run's config counts the restarts it was chosen from; its seed is its own,
// which a resume's later epochs draw from.
func choose(runs []*Run, clusterings [][]int32, all []Restart, src Source) (*Run, error) {
	rule := KeptBy(runs[0].Cfg.KeepBy, len(runs))
	var score []float64 // higher is kept; nil: the max posterior decides
	err := func() error {
		// The agreement is recorded whichever rule keeps.
		if len(runs) >= MinAgreementRestarts {
			agree, err := meanAgreement(clusterings)
			if err != nil {
				return err
			}
			for i := range all {
				all[i].Agreement = &agree[i]
			}
			if rule == KeepByAgreement {
				score = agree
			}
		}
		if rule == KeepBySilhouette {
			s := torch.NoGrad()
			sil, err := silhouettes(src.Features(s), clusterings, runs[0].Cfg.K, silhouetteRows, runs[0].Cfg.Seed, true)
			if cerr := s.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("silhouette: %w", cerr)
			}
			if err != nil {
				return err
			}
			for i := range all {
				all[i].Silhouette = &sil[i]
			}
			score = sil
		}
		return nil
	}()
	if err != nil {
		for _, r := range runs {
			r.Close()
		}
		return nil, err
	}
	best := 0
	for i := range all {
		// Ties, and no score, go to the higher max posterior.
		if score != nil && score[i] != score[best] {
			if score[i] > score[best] {
				best = i
			}
		} else if all[i].Criteria.Better(all[best].Criteria) {
			best = i
		}
	}
	for i, r := range runs {
		if i != best {
			r.Close()
		}
	}
	runs[best].Cfg.Restarts = len(runs)
	return runs[best], nil
}

// meanAgreement is, for each clustering, its mean adjusted Rand index with the others.
func meanAgreement[L eval.Label](clusterings [][]L) ([]float64, error) {
	n := len(clusterings)
	out := make([]float64, n)
	for i := range n {
		for j := i + 1; j < n; j++ {
			ari, err := eval.ARI(clusterings[i], clusterings[j])
			if err != nil {
				return nil, fmt.Errorf("agreement of restarts %d and %d: %w", i+1, j+1, err)
			}
			out[i] += ari
			out[j] += ari
		}
	}
	for i := range out {
		out[i] /= float64(n - 1)
	}
	return out, nil
}

// Better reports whether a clustering with criteria c is to be kept over one with o:
// the higher mean max posterior. Of the criteria of one run alone, it ranked 20 seeds
// closest to their ACC on digits, iris, wine and breast cancer
// (scripts/study/restart_criteria.py, docs/RESULTS.md section 14); the EM objective
// and the log-likelihood did worse.
func (c Criteria) Better(o Criteria) bool { return c.MaxPosterior > o.MaxPosterior }

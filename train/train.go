package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"emclust/data"
	"emclust/eval"
	"emclust/loss"
	"emclust/model"
	"emclust/torch"
	"emclust/transform"
)

// EpochMetrics is one line of RUN/metrics.jsonl.
type EpochMetrics struct {
	Epoch   int       `json:"epoch"`
	Steps   int       `json:"steps"`
	Loss    float64   `json:"loss"`              // mean EM (or IIC) loss of the epoch's steps
	LossKL  float64   `json:"loss_kl,omitempty"` // mean KL loss (twofold)
	Seconds float64   `json:"seconds"`           // training time of the epoch (its stack's, trained stacked)
	HMean   []float64 `json:"h_mean"`            // batch mean of sigmoid(a*/γ) per cluster
	Sizes   []int     `json:"sizes,omitempty"`   // cluster sizes at evaluation
	Empty   int       `json:"empty_clusters"`
	ACC     *float64  `json:"acc,omitempty"`
	NMI     *float64  `json:"nmi,omitempty"`
	ARI     *float64  `json:"ari,omitempty"`
	// Criteria judge the epoch's clustering without labels, at evaluations.
	Criteria *Criteria `json:"criteria,omitempty"`
	// Agreement is the mean adjusted Rand index between this evaluation's clustering
	// and those of the AgreementWindow evaluations before it (fewer at the start).
	Agreement *float64 `json:"agreement,omitempty"`
	// Head is the head a run with several selected at this evaluation; the clustering,
	// criteria and scores above are its. Heads has every head's.
	Head  *int          `json:"head,omitempty"`
	Heads []HeadMetrics `json:"heads,omitempty"`
}

// HeadMetrics is one head's clustering at an evaluation of a run with several heads.
type HeadMetrics struct {
	Head int `json:"head"`
	// Agreement is the mean adjusted Rand index with the other heads' clusterings.
	Agreement float64   `json:"agreement"`
	Criteria  *Criteria `json:"criteria"`
	ACC       *float64  `json:"acc,omitempty"`
}

// AgreementWindow is how many earlier evaluations an epoch's agreement spans. Of 1, 3
// and 5, five kept the best epoch of three digits runs and beat the last epoch on
// three Fashion-MNIST runs (docs/RESULTS.md section 21).
const AgreementWindow = 5

// Progress receives training progress; the CLI draws a bar from it. A Progress with a
// method ShowsLoss() bool that returns false is never given the loss, which spares
// the training loop a wait for the device every LogEvery steps.
type Progress interface {
	Start(epoch, epochs, steps int)
	Step(done int, loss float64, read bool) // loss is the epoch's running mean when read
	End(m EpochMetrics)
}

// Run is a training run: config, data, network, optimisers and history.
type Run struct {
	Cfg      Config
	Dir      string
	Spec     model.Spec
	Net      *model.Net
	Dev      torch.Device
	Src      Source
	History  []EpochMetrics
	Progress Progress
	// Restarts are the restarts or trials this run was kept from (TrainRestarts,
	// TrainTrials); the checkpoint carries them, so that a resumed run's summary
	// still lists them.
	Restarts []Restart

	optA, optB *torch.Adam // EM (or IIC) step; KL step of twofold
	params     []*torch.Tensor
	group      *torch.Group // data-parallel ranks (see Join); nil alone
	prior      *torch.Tensor
	labels     *torch.Tensor // int64 labels on the index device (supervised)
	epoch      int           // epochs completed
	savedEpoch int           // epochs the checkpoint in Dir holds
	// resumedAfter is the epochs Restore found: an earlier sitting's.
	resumedAfter int
	lastSave     time.Time
	lock         *os.File // held on Dir/.lock while the run may write there

	// recent are the clusterings of the last AgreementWindow evaluations, oldest
	// first; the checkpoint carries them, so that a resumed run agrees alike. They
	// are int32: a choice among twenty restarts holds all of theirs at once.
	recent [][]int32
	// chosen is the evaluated epoch ranked first (better); chosenState holds its
	// tensors (with a folder), which each checkpoint carries while a later epoch is
	// the last; chosenFile is the epoch ChosenName holds.
	chosen      *Chosen
	chosenState []torch.Named
	chosenFile  int
	better      func(a, b Chosen) bool // the ranking: Chosen.AgreesMore
	// keepChosen snapshots the chosen epoch without a folder: a trial
	// (TrainTrials) may go on in one, and its chosen epoch with it.
	keepChosen bool
}

// Chosen is the epoch a run keeps beside its last: of the evaluated epochs, the one
// whose clustering agrees best with those of the evaluations before it. Image runs
// swing by several points of ACC from epoch to epoch (docs/RESULTS.md section 8),
// and the last is just the last; an epoch that agrees with its predecessors sits
// where training has settled, as the restart that agrees with the others does
// (section 20). Section 21 compares this with the max posterior.
type Chosen struct {
	Epoch     int      `json:"epoch"`
	Criteria  Criteria `json:"criteria"`
	Agreement *float64 `json:"agreement,omitempty"`
	// Empty is the clusters the epoch left empty (its EpochMetrics.Empty).
	Empty int `json:"-"`
}

// AgreesMore reports whether c ranks above o: fewer clusters left empty, then a
// higher agreement. Two clusterings that put every row in one cluster agree
// perfectly (adjusted Rand index 1), and a run stuck there would choose it over
// every epoch that uses its K clusters. The first evaluation, which has nothing to
// agree with, ranks below every later one.
func (c Chosen) AgreesMore(o Chosen) bool {
	switch {
	case c.Agreement == nil:
		return false
	case o.Agreement == nil:
		return true
	case c.Empty != o.Empty:
		return c.Empty < o.Empty
	}
	return *c.Agreement > *o.Agreement
}

// ChosenName is the file in a run folder that holds the chosen epoch's model when it
// is not the last: a checkpoint without optimiser states, which predict and eval
// read as --model RUN/chosen.safetensors. The checkpoint carries the same tensors
// (under "chosen."), so a resume rewrites the file should a kill have cut it short.
const ChosenName = "chosen.safetensors"

// New builds the network and optimisers for cfg on src's device and writes
// RUN/config.json. The network's init is drawn from cfg.Seed.
func New(cfg Config, src Source, dev torch.Device, dir string) (*Run, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.K > src.Len() {
		return nil, fmt.Errorf("k = %d is larger than the %d rows of data", cfg.K, src.Len())
	}
	if src.Len() < 2 {
		// The relevance normalisation is a batch statistic: one row gives a zero
		// variance and NaN posteriors.
		return nil, fmt.Errorf("%d row of data: the relevance normalisation needs batches of at least 2 rows", src.Len())
	}
	if cfg.WorldSize == 0 {
		cfg.WorldSize = 1
	}
	resolveEpochs(&cfg, src.Len())
	if cfg.BatchSize < max(2, cfg.WorldSize) {
		// Fewer rows than processes: the batch, cut to a multiple of them, is empty.
		return nil, fmt.Errorf("%d rows of data make no batch for %d processes; train them in fewer", src.Len(), cfg.WorldSize)
	}
	if cfg.needsAugment() {
		if _, vectors := src.(*VectorSource); vectors {
			return nil, fmt.Errorf("objective %s trains on transformed images and needs images; use --objective em for vectors", cfg.Objective)
		}
		if cfg.Augment == nil {
			aug := transform.DefaultAugment()
			cfg.Augment = &aug
		}
		if err := cfg.Augment.Validate(); err != nil {
			return nil, err
		}
	}
	g, err := loss.ParseGamma(cfg.Gamma, cfg.BatchSize)
	if err != nil {
		return nil, err
	}
	cfg.GammaVal = g
	if cfg.objective().Supervised {
		if src.Labels() == nil {
			return nil, fmt.Errorf("objective supervised needs labels; %s has none", src.Describe())
		}
		// Each label is a score's index: one past K fails inside the loss, and on a GPU
		// as a device-side assert that spoils every later CUDA call.
		if labels := src.Labels(); len(labels) > 0 {
			if top := slices.Max(labels); top >= cfg.K {
				return nil, fmt.Errorf("objective supervised: %s has %d classes but --k is %d: give --k %d", src.Describe(), top+1, cfg.K, top+1)
			}
			if n := len(labels) - data.CountLabelled(labels); n > 0 {
				return nil, fmt.Errorf("objective supervised needs a class for every row, and %d of the %d rows have an empty or NA label", n, len(labels))
			}
		}
		cfg.Norm = false // cross-entropy on the raw scores
	}
	spec, err := src.Spec(&cfg)
	if err != nil {
		return nil, err
	}
	cfg.Arch = spec.Arch
	if err := checkNetworkFits(spec, &cfg, src.Len(), memoryToCheck(&cfg, dev)); err != nil {
		return nil, err
	}
	if cfg.Threads > 0 {
		if err := torch.SetNumThreads(cfg.Threads); err != nil {
			return nil, err
		}
	}
	if dev.CUDA {
		torch.SetCuDNNDeterministic(cfg.Deterministic)
		if cfg.Deterministic {
			torch.SetCuDNNBenchmark(false) // the autotuner's choice varies between runs
		}
	}
	var net *model.Net
	err = torch.Seeded(cfg.Seed, func() (err error) {
		net, err = model.New(spec, dev)
		return err
	})
	if te := (*torch.Error)(nil); errors.As(err, &te) && te.OutOfMemory() {
		return nil, buildOOM(spec, &cfg, dev, err)
	}
	if err != nil {
		return nil, err
	}
	if err := net.SetCompute(cfg.Compute()); err != nil {
		net.Close()
		return nil, err
	}
	r := &Run{Cfg: cfg, Dir: dir, Spec: net.Spec, Net: net, Dev: dev, Src: src, better: Chosen.AgreesMore}
	params := net.Params()
	ts := make([]*torch.Tensor, len(params))
	r.params = ts
	lrA := make([]float64, len(params))
	lrB := make([]float64, len(params))
	for i, p := range params {
		ts[i] = p.Tensor
		lrA[i] = cfg.LR
		lrB[i] = cfg.LRKL
	}
	if r.optA, err = torch.NewAdam(ts, lrA, torch.AdamConfig{}); err != nil {
		r.Close()
		return nil, err
	}
	if cfg.objective().KLStep {
		if r.optB, err = torch.NewAdam(ts, lrB, torch.AdamConfig{}); err != nil {
			r.Close()
			return nil, err
		}
	}
	if cfg.objective().Supervised {
		s := torch.NoGrad()
		lab := make([]int64, src.Len())
		for i, l := range src.Labels() {
			lab[i] = int64(l)
		}
		r.labels = s.Keep(s.FromInt64(lab, []int{len(lab)}, src.IndexDevice()))
		if err := s.Close(); err != nil {
			r.Close()
			return nil, err
		}
	}
	if cfg.Prior == "learned" {
		s := torch.NoGrad()
		r.prior = s.Keep(s.Full([]int{1, cfg.K}, 1/float64(cfg.K), torch.Float32, dev))
		if err := s.Close(); err != nil {
			r.Close()
			return nil, err
		}
	}
	if dir != "" {
		if err := r.Attach(dir); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// resolveEpochs sets cfg's batch size, epochs and evaluation interval for n rows, as
// New trains them.
func resolveEpochs(cfg *Config, n int) {
	if cfg.BatchSize > n {
		cfg.BatchSize = n - n%max(cfg.WorldSize, 1)
	}
	switch epochs := cfg.EpochsFor(n); {
	case epochs > cfg.Epochs:
		// Raised to make MinSteps steps: evaluate about as often as the epochs asked
		// for would have, not after every one of many one-step epochs.
		if cfg.EvalEvery > 0 {
			cfg.EvalEvery = max(cfg.EvalEvery, epochs/cfg.Epochs)
		}
		cfg.Epochs = epochs
	case epochs < cfg.Epochs:
		cfg.Epochs = epochs // lowered to about MaxSteps steps
	}
}

// Attach makes dir the run's folder: it locks it, removes the partial files a run
// killed while writing left there, and writes config.json. New attaches its dir; a run trained without one (a
// restart not yet chosen) is attached when it is kept.
func (r *Run) Attach(dir string) error { return r.AttachLocked(dir, nil) }

// LockDir makes dir and takes its lock for a run that attaches to it later, as the
// kept restart does: no other run can take the folder while the restarts train.
func LockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("folder: %w", err)
	}
	return lockRunDir(dir)
}

// AttachLocked is Attach with dir's lock from LockDir (nil: take it now), which the
// run then owns, even when attaching fails, and releases at Close.
func (r *Run) AttachLocked(dir string, lock *os.File) error {
	if r.lock != nil {
		if lock != nil {
			lock.Close()
		}
		return fmt.Errorf("run already attached to %s", r.Dir)
	}
	if lock == nil {
		var err error
		if lock, err = LockDir(dir); err != nil {
			return err
		}
	}
	r.lock, r.Dir = lock, dir
	removeStale(dir)
	return writeJSON(filepath.Join(dir, "config.json"), r.Cfg)
}

// Close frees the network, optimisers and prior (not the source), and releases the
// run folder.
func (r *Run) Close() {
	if r.lock != nil {
		r.lock.Close()
		r.lock = nil
	}
	if r.optA != nil {
		r.optA.Close()
	}
	if r.optB != nil {
		r.optB.Close()
	}
	r.prior.Free()
	r.labels.Free()
	r.dropChosenState()
	if r.Net != nil {
		r.Net.Close()
	}
}

// EpochsDone is the number of completed epochs.
func (r *Run) EpochsDone() int { return r.epoch }

// ResumedAfter is the number of epochs an earlier sitting trained, which Restore
// found; 0 for a run trained in one sitting.
func (r *Run) ResumedAfter() int { return r.resumedAfter }

// EpochsSaved is the number of epochs the run folder's checkpoint holds: what a
// resume starts from.
func (r *Run) EpochsSaved() int { return r.savedEpoch }

// checkpointInterval spaces the checkpoints of epochs shorter than it: a checkpoint
// is two or three fsynced files, and a table of a few hundred rows runs a thousand one-step
// epochs in under a second (docs/RESULTS.md section 17). The first and the last
// epoch are always saved.
const checkpointInterval = 10 * time.Second

// epochSeed derives the generator seed of an epoch, so that a run resumed at an epoch
// boundary draws the same shuffles and augmentations as one that never stopped.
func epochSeed(seed uint64, epoch int) uint64 {
	z := seed + 0x9e3779b97f4a7c15*uint64(epoch+1)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Train runs the remaining epochs, evaluating and checkpointing as configured.
// Cancelling ctx stops after the current step; or, in a run of one process whose
// previous epoch took under shortEpoch, at the end of the current one, which is then
// saved: a run of short epochs checkpoints only every checkpointInterval, and an
// interrupt would otherwise lose up to that much. Ranks stop together every
// stopEvery steps, and save where that falls between epochs (always, for epochs of
// fewer steps). The last checkpoint stays valid either way.
func (r *Run) Train(ctx context.Context) error {
	defer r.oneThreadForSmallSteps()()
	defer oneBLASThreadForConvolutions(r.Net, r.Dev)()
	var last time.Duration // the last epoch's time; 0: none trained yet
	for r.epoch < r.Cfg.Epochs {
		// Ranks agree on it (stopRequested): one leaving alone would leave the others
		// waiting in a collective. Between epochs all hold the same state, which rank
		// 0 saves as one process does.
		stop := ctx.Err()
		if r.group != nil {
			stop = r.stopRequested(ctx, 0)
		}
		if err := stop; err != nil {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("epoch %d: %w", r.epoch+1, err) // the agreement's collective failed
			}
			if r.Dir != "" && r.epoch > r.savedEpoch {
				if serr := r.Save(); serr != nil {
					return &StopSaveError{Epoch: r.epoch, Stop: err, Err: serr}
				}
			}
			return err
		}
		epochCtx := ctx
		if last > 0 && last < shortEpoch && r.group == nil {
			epochCtx = context.WithoutCancel(ctx)
		}
		start := time.Now()
		m, err := r.trainEpoch(epochCtx)
		if err != nil {
			return fmt.Errorf("epoch %d: %w", r.epoch+1, err)
		}
		last = time.Since(start)
		if err := r.endEpoch(m); err != nil {
			return err
		}
	}
	return nil
}

// StopSaveError is a run stopped (Stop: ctx's error) whose save of the epochs done
// since its last checkpoint failed (Err); that checkpoint stays valid.
type StopSaveError struct {
	Epoch     int
	Stop, Err error
}

func (e *StopSaveError) Error() string {
	return fmt.Sprintf("%v; saving epoch %d failed: %v", e.Stop, e.Epoch, e.Err)
}
func (e *StopSaveError) Unwrap() []error { return []error{e.Stop, e.Err} }

// shortEpoch is the longest epoch an interrupt lets finish, so that the run can be
// saved at its end (Train).
const shortEpoch = time.Second

// endEpoch takes the metrics of the epoch just trained: it evaluates when due,
// records the epoch, and saves when due.
func (r *Run) endEpoch(m EpochMetrics) error {
	last := r.epoch+1 == r.Cfg.Epochs
	if last || (r.Cfg.EvalEvery > 0 && (r.epoch+1)%r.Cfg.EvalEvery == 0) {
		if err := r.evaluate(&m); err != nil {
			return fmt.Errorf("epoch %d: evaluate: %w", r.epoch+1, err)
		}
		if err := r.consider(m); err != nil {
			return fmt.Errorf("epoch %d: %w", r.epoch+1, err)
		}
	}
	r.epoch++
	r.History = append(r.History, m)
	if r.Progress != nil {
		r.Progress.End(m)
	}
	if r.Dir != "" && (last || r.savedEpoch == 0 || time.Since(r.lastSave) >= checkpointInterval) {
		return r.Save()
	}
	return nil
}

// smallStepFLOPs is the step size below which a CPU step runs on one thread.
const smallStepFLOPs = 10e6

// smallStep reports whether a training step of a network of forwardFLOPs per input,
// on batches of batch rows under objective, is below smallStepFLOPs.
func smallStep(forwardFLOPs int64, batch int, objective string) bool {
	return float64(StepFLOPs(forwardFLOPs, batch, objective)) < smallStepFLOPs
}

// oneThreadForSmallSteps runs CPU steps too small to share on one OpenMP thread and
// returns the function that restores the thread count. Below smallStepFLOPs the
// hand-offs between threads cost more than they save: the digits MLP step (2.6 MFLOP)
// takes 0.28–0.33 ms on one thread and 0.40–0.53 ms on two, half of it in libgomp
// waiting (docs/RESULTS.md section 10). Only when Cfg.Threads leaves the count to
// emclust. Train's evaluations run on that one thread too: setting the count anew
// around each made a digits run of 72 epochs four times slower (1.5–1.9 s against
// 0.4 s; docs/RESULTS.md section 32). The baselines keep every thread.
func (r *Run) oneThreadForSmallSteps() (restore func()) {
	prev := torch.NumThreads()
	if r.Cfg.Threads != 0 || r.Dev.CUDA || prev <= 1 || !smallStep(r.Net.ForwardFLOPs(), r.Cfg.BatchSize, r.Cfg.Objective) {
		return func() {}
	}
	// OpenMP's count is the calling OS thread's: the run keeps its thread until the
	// restore, so that every step sees the one thread and the restore undoes it on
	// the thread that has it. A thread left at one took it into later runs that
	// landed there (a resumed run then summed its gradients in another order than
	// the run it should equal, under libtorch 2.6).
	runtime.LockOSThread()
	torch.SetNumThreads(1)
	return func() {
		torch.SetNumThreads(prev)
		runtime.UnlockOSThread()
	}
}

// oneBLASThreadForConvolutions keeps OpenBLAS on the calling thread while a
// convolutional network computes on the CPU, and returns the function that restores
// its count. libtorch's OpenMP threads run the convolutions; OpenBLAS keeps a pool of
// its own for the fully connected layers (a small share of a CNN's FLOPs), whose
// idle threads spin in sched_yield after each product, on the cores OpenMP's threads
// need for the next layer: the mnist twofold step took 333 ms with OpenBLAS on two
// threads and 276 ms on one (2 cores; docs/RESULTS.md section 34). Nothing changes
// where libtorch uses MKL or OpenBLAS's OpenMP build, which run on OpenMP's threads.
func oneBLASThreadForConvolutions(net *model.Net, dev torch.Device) (restore func()) {
	return oneBLASThreadIf(len(net.ConvLayers()) > 0, dev)
}

// oneBLASThreadIf keeps OpenBLAS on the calling thread while on is true and dev is
// the CPU, and returns the function that restores its count.
func oneBLASThreadIf(on bool, dev torch.Device) (restore func()) {
	prev := torch.BLASThreads()
	if dev.CUDA || prev <= 1 || !on {
		return func() {}
	}
	torch.SetBLASThreads(1)
	return func() { torch.SetBLASThreads(prev) }
}

// bigChunkFLOPs is the forward work of an evaluation chunk from which OpenBLAS
// keeps its threads: between 512- and 1024-wide MLP layers on 1024 rows.
const bigChunkFLOPs = 1e9

// stepsPerEpoch is how many steps an epoch trains: full batches only.
func (r *Run) stepsPerEpoch() int { return r.Src.Len() / r.Cfg.BatchSize }

// trainEpoch is one pass over a fresh shuffle, dropping the last partial batch (a
// normalisation over a handful of rows would be noise).
func (r *Run) trainEpoch(ctx context.Context) (EpochMetrics, error) {
	cfg := &r.Cfg
	m := EpochMetrics{Epoch: r.epoch + 1}
	seed := epochSeed(cfg.Seed, r.epoch)
	if cfg.needsAugment() {
		// The augmentations draw from libtorch's generator; nothing else in an epoch
		// does, so other epochs leave it to the restarts that build their networks
		// beside this one (TrainRestarts).
		if err := torch.ManualSeed(seed); err != nil {
			return m, err
		}
	}
	n, steps := r.Src.Len(), r.stepsPerEpoch()
	perm := make([]int64, n)
	r.epochOrder(perm, seed)

	// Per-epoch tensors: the permutation and the on-device accumulators, read once at
	// the end (and every LogEvery steps for the progress bar) so steps never wait.
	ep := torch.NoGrad()
	defer ep.Close()
	permT := ep.FromInt64(perm, []int{n}, r.Src.IndexDevice())
	lossSum := ep.Zeros(nil, torch.Float32, r.Dev)
	klSum := ep.Zeros(nil, torch.Float32, r.Dev)
	hSum := ep.Zeros([]int{cfg.K}, torch.Float32, r.Dev)
	if err := ep.Err(); err != nil {
		return m, err
	}
	offset, rows := r.rankRows()
	// Reading the loss waits for the device: only for a progress that shows it.
	showsLoss := r.Progress != nil
	if r.Progress != nil {
		r.Progress.Start(r.epoch+1, cfg.Epochs, steps)
		if q, ok := r.Progress.(interface{ ShowsLoss() bool }); ok {
			showsLoss = q.ShowsLoss()
		}
	}
	start := time.Now()
	for step := 0; step < steps; step++ {
		if step > 0 { // Train asked before the first
			if err := r.stopRequested(ctx, step); err != nil {
				return m, err
			}
		}
		s := torch.NewScope()
		idx := s.Narrow(permT, 0, step*cfg.BatchSize+offset, rows)
		l, kl, h := r.step(s, idx)
		// Accumulate in place of the old sums, outside the step's scope.
		lossSum = swap(ep, lossSum, s.Add(lossSum, s.Detach(l)))
		hSum = swap(ep, hSum, s.Add(hSum, h))
		if kl != nil {
			klSum = swap(ep, klSum, s.Add(klSum, s.Detach(kl)))
		}
		if err := s.Close(); err != nil {
			return m, err
		}
		if r.Progress != nil {
			// Reading the loss waits for the device, so only every LogEvery steps.
			read := showsLoss && cfg.LogEvery > 0 && ((step+1)%cfg.LogEvery == 0 || step+1 == steps)
			var l float64
			if read {
				l = ep.Item(lossSum) / float64(step+1)
			}
			r.Progress.Step(step+1, l, read)
		}
	}
	if r.group != nil {
		// The epoch's figures are the means over all ranks' batches.
		if err := r.group.AllReduce(lossSum, klSum, hSum); err != nil {
			return m, err
		}
	}
	m.Steps = steps
	batches := float64(steps * r.worldSize())
	m.Loss = ep.Item(lossSum) / batches
	if cfg.objective().KLStep {
		m.LossKL = ep.Item(klSum) / batches
	}
	hs := ep.Float32s(ep.DivScalar(hSum, batches))
	if err := ep.Err(); err != nil {
		return m, err
	}
	m.Seconds = time.Since(start).Seconds()
	m.HMean = make([]float64, len(hs))
	for j, v := range hs {
		m.HMean[j] = round6(float64(v))
	}
	return m, r.diverged(m.Loss)
}

// epochOrder fills perm, of one entry per row, with the order in which an epoch of
// seed (epochSeed) visits the rows. It is rand.Perm's permutation, drawn in place:
// runs saved before keep their batches, and no second slice of the rows' size is made.
func (r *Run) epochOrder(perm []int64, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, r.Cfg.Seed))
	for i := range perm {
		perm[i] = int64(i)
	}
	rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
}

// diverged is the error for an epoch's mean loss that is not finite.
func (r *Run) diverged(loss float64) error {
	if !math.IsNaN(loss) && !math.IsInf(loss, 0) {
		return nil
	}
	return r.divergedBecause(fmt.Sprintf("loss is %v", loss))
}

// divergedBecause is the error for a run whose training diverged, as what shows.
func (r *Run) divergedBecause(what string) error {
	advice := "try a lower --lr or a larger --gamma"
	if _, vectors := r.Src.(*VectorSource); vectors && !r.Cfg.Standardize {
		// Raw features of ±1e38 overflow the first layer; z-scores do not.
		advice = "try --standardize, a lower --lr or a larger --gamma"
	}
	return fmt.Errorf("%s: training diverged (%s)", what, advice)
}

// swap moves next into the epoch scope in place of old.
func swap(ep *torch.Scope, old, next *torch.Tensor) *torch.Tensor {
	if next == nil {
		return old
	}
	ep.Adopt(next)
	old.Free()
	return next
}

// step is one batch of Algorithm 1 (or its single-objective variants). It returns the
// main loss, the KL loss (twofold), and the batch mean of h per cluster.
func (r *Run) step(s *torch.Scope, idx *torch.Tensor) (l, kl, hMean *torch.Tensor) {
	cfg := &r.Cfg
	var aug = cfg.Augment
	if !cfg.needsAugment() {
		aug = nil
	}
	x, xt := r.Src.Batch(s, idx, aug)
	if s.Err() != nil {
		return nil, nil, nil
	}

	obj := cfg.objective()
	if obj.Supervised {
		y := s.IndexSelect(r.labels, 0, idx)
		if y != nil && y.Device() != r.Dev {
			y = s.ToDevice(y, r.Dev, true)
		}
		l = loss.CrossEntropy(s, r.Net.Relevance(s, x, true), y)
		r.update(s, r.optA, l)
		return l, nil, s.Zeros([]int{cfg.K}, torch.Float32, r.Dev)
	}

	// EM (or IIC) step with optimiser A, in a scope of its own: its activations are
	// freed before the KL step builds the next graph. Every forward here is in
	// training mode, the transformed batches' too, so the running statistics that
	// evaluation uses are as much T(x)'s as x's, as they are for the same step
	// written with PyTorch modules (scripts/bench's peer).
	var logPrior *torch.Tensor
	if r.prior != nil {
		logPrior = s.Log(r.prior)
	}
	em := torch.NewScope()
	aHeads := r.Net.ForwardHeads(em, x, true)
	aStar := perHead(em, aHeads, cfg.K)
	p := loss.Posterior(em, aStar, logPrior)
	switch cfg.Objective {
	case "em":
		l = loss.EM(em, aStar, p, cfg.GammaVal)
	case "em-aug", "twofold":
		l = loss.EMAug(em, aStar, perHead(em, r.Net.ForwardHeads(em, xt, true), cfg.K), p, cfg.GammaVal)
	case "iic":
		l = r.iic(em, aHeads, r.Net.ForwardHeads(em, xt, true))
	}
	hMean = s.Adopt(batchMeanH(em, r.Net.SelectHead(em, aHeads), cfg.GammaVal, 0))
	r.update(em, r.optA, l)
	if r.prior != nil {
		mean := em.Mean(p, true, 0)
		if r.syncGroup() != nil {
			mean = r.globalMean(em, mean)
		}
		updatePrior(em, r.prior, mean)
	}
	l = s.Adopt(em.Detach(l))
	s.Fail(em.Close())
	if !obj.KLStep {
		return l, nil, hMean
	}

	// KL step with optimiser B: fresh posteriors of the originals under the updated θ
	// (constants, so computed without a graph), and q of the transformed batch.
	ng := torch.NoGrad()
	pNew := loss.Posterior(ng, perHead(ng, r.Net.ForwardHeads(ng, x, true), cfg.K), logPrior)
	if err := ng.Err(); err != nil {
		s.Fail(err)
	}
	kl = loss.KL(s, pNew, perHead(s, r.Net.ForwardHeads(s, xt, true), cfg.K), logPrior)
	r.update(s, r.optB, kl)
	ng.Close()
	return l, kl, hMean
}

// batchMeanH is the mean of h = sigmoid(a*/γ) over the batch, dimension dim of a*,
// without a graph: what an epoch reports per cluster.
func batchMeanH(s *torch.Scope, aStar *torch.Tensor, gamma float64, dim int) *torch.Tensor {
	return s.Mean(s.Sigmoid(s.DivScalar(s.Detach(aStar), gamma)), false, dim)
}

// updatePrior moves a learned prior in place toward meanP, the batch's mean
// posterior: π ← 0.99 π + 0.01 mean_i p_i, so that the priors come from the
// previous posteriors.
func updatePrior(s *torch.Scope, prior, meanP *torch.Tensor) {
	s.CopyInto(prior, s.Add(s.MulScalar(prior, 0.99), s.MulScalar(meanP, 0.01)))
}

// perHead lays the n×(H·K) scores of H heads out as (n·H)×K, a row per row and head,
// so that the per-row losses, which divide by their row count, are the mean over
// heads of each head's loss. One head's scores are returned as they are.
func perHead(s *torch.Scope, a *torch.Tensor, k int) *torch.Tensor {
	if a == nil || a.Dim(1) == k {
		return a
	}
	return s.Reshape(a, a.Dim(0)*a.Dim(1)/k, k)
}

// iic is the IIC loss averaged over the heads: mutual information is a property of a
// head's joint distribution over the whole batch, so each head gets its own.
func (r *Run) iic(s *torch.Scope, a, aTr *torch.Tensor) *torch.Tensor {
	k, heads := r.Cfg.K, r.Spec.NumHeads()
	if heads == 1 {
		return loss.IIC(s, a, aTr, r.syncGroup())
	}
	var sum *torch.Tensor
	for h := 0; h < heads; h++ {
		l := loss.IIC(s, s.Narrow(a, 1, h*k, k), s.Narrow(aTr, 1, h*k, k), r.syncGroup())
		if sum == nil {
			sum = l
		} else {
			sum = s.Add(sum, l)
		}
	}
	return s.DivScalar(sum, float64(heads))
}

func (r *Run) update(s *torch.Scope, opt *torch.Adam, l *torch.Tensor) {
	if s.Err() != nil {
		return
	}
	s.Fail(opt.ZeroGrad())
	s.Backward(l)
	if r.group != nil && s.Err() == nil {
		// Each rank's loss is the mean over its rows: their mean is the global
		// batch's, and so is the mean of their gradients.
		s.Fail(r.group.ReduceGrads(r.params, 1/float64(r.group.Size())))
	}
	if s.Err() == nil {
		s.Fail(opt.Step())
	}
}

func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

func (r *Run) evaluate(m *EpochMetrics) error {
	heads, err := r.predictClusters()
	if errors.Is(err, ErrNotFinite) {
		// The epoch's loss, taken before each step, was finite; its last step was not.
		return r.divergedBecause(err.Error())
	}
	if err != nil {
		return err
	}
	best := 0
	if len(heads) > 1 {
		if m.Heads, best, err = compareHeads(heads); err != nil {
			return err
		}
		if err := r.Net.SetHead(best); err != nil {
			return err
		}
		m.Head = &best
	}
	cluster := heads[best].Cluster
	compact := convertInts[int32](cluster)
	m.Criteria = heads[best].Criteria
	if len(r.recent) > 0 {
		var sum float64
		for _, c := range r.recent {
			ari, err := eval.ARI(compact, c)
			if err != nil {
				return fmt.Errorf("agreement with earlier evaluations: %w", err)
			}
			sum += ari
		}
		agree := round6(sum / float64(len(r.recent)))
		m.Agreement = &agree
	}
	r.recent = append(r.recent, compact)
	if len(r.recent) > AgreementWindow {
		r.recent = r.recent[1:]
	}
	m.Sizes = eval.ClusterSizes(cluster, r.Cfg.K)
	for _, c := range m.Sizes {
		if c == 0 {
			m.Empty++
		}
	}
	labels := r.Src.Labels()
	if labels == nil {
		return nil
	}
	for h, pred := range heads {
		sc, err := eval.ScoreLabelled(labels, pred.Cluster)
		if err != nil {
			return err
		}
		acc, nmi, ari := round6(sc.ACC), round6(sc.NMI), round6(sc.ARI)
		if m.Heads != nil {
			m.Heads[h].ACC = &acc
		}
		if h == best {
			m.ACC, m.NMI, m.ARI = &acc, &nmi, &ari
		}
	}
	return nil
}

// compareHeads scores each head's clustering by its mean adjusted Rand index with the
// other heads' and returns the scores and the head that agrees most: as with
// restarts (docs/RESULTS.md section 20), the clustering the others agree with is the
// settled one, and no label is needed to find it.
func compareHeads(heads []*Prediction) ([]HeadMetrics, int, error) {
	out := make([]HeadMetrics, len(heads))
	sum := make([]float64, len(heads))
	for i := range heads {
		for j := i + 1; j < len(heads); j++ {
			ari, err := eval.ARI(heads[i].Cluster, heads[j].Cluster)
			if err != nil {
				return nil, 0, fmt.Errorf("agreement between heads: %w", err)
			}
			sum[i] += ari
			sum[j] += ari
		}
	}
	// As Chosen.AgreesMore: heads that put every row in one cluster agree
	// perfectly with one another, so the clusters a head uses come first.
	used := make([]int, len(heads))
	best := 0
	for i, h := range heads {
		out[i] = HeadMetrics{Head: i, Agreement: round6(sum[i] / float64(len(heads)-1)), Criteria: h.Criteria}
		used[i] = clustersUsed(h.Cluster)
		if used[i] > used[best] || (used[i] == used[best] && out[i].Agreement > out[best].Agreement) {
			best = i
		}
	}
	return out, best, nil
}

// predictClusters is, for each head, every row's cluster and the clustering's
// criteria (Posterior left out). Ranks each predict an equal share of the rows and
// gather the rest.
func (r *Run) predictClusters() ([]*Prediction, error) {
	n, k, heads := r.Src.Len(), r.Cfg.K, r.Net.Spec.NumHeads()
	lo, hi := 0, n
	prior := r.prior
	if r.group != nil {
		w, rank := r.group.Size(), r.group.Rank()
		lo, hi = rank*n/w, (rank+1)*n/w
		if r.Cfg.LocalStats && w > 1 {
			// Each rank's running statistics and prior are its own rows'; the
			// evaluation is of rank 0's, the model the run saves. Running statistics
			// are not read in training, the prior is: each rank keeps its own.
			s := torch.NoGrad()
			defer s.Close()
			var bufs []*torch.Tensor
			for _, nt := range r.Net.Buffers() {
				bufs = append(bufs, nt.Tensor)
			}
			if prior != nil {
				prior = s.Clone(r.prior)
				bufs = append(bufs, prior)
			}
			if err := s.Err(); err != nil {
				return nil, err
			}
			if err := r.group.Broadcast(0, bufs...); err != nil {
				return nil, fmt.Errorf("copy rank 0's statistics: %w", err)
			}
		}
	}
	preds, err := predict(r.Net, r.Src, r.Dev, prior, r.Cfg.GammaVal, false, lo, hi, nil)
	if err != nil {
		return nil, err
	}
	if r.group == nil {
		if err := checkFinite(preds); err != nil {
			return nil, err
		}
		return preds, nil
	}
	// Each rank fills its rows of a zero matrix (a row per head); the sum over ranks
	// is all of them. The criteria are means: each rank gives its rows' sums.
	all := make([]int64, heads*n)
	sums := make([]float32, 0, 3*heads)
	m := float64(hi - lo)
	for h, p := range preds {
		for i, c := range p.Cluster {
			all[h*n+lo+i] = int64(c)
		}
		c := p.Criteria
		sums = append(sums, float32(c.EMObjective*m), float32(c.LogLikelihood*m), float32(c.MaxPosterior*m))
	}
	s := torch.NoGrad()
	defer s.Close()
	t := s.FromInt64(all, []int{heads, n}, r.Dev) // NCCL moves only CUDA tensors
	st := s.FromFloat32(sums, []int{heads, 3}, r.Dev)
	if err := s.Err(); err != nil {
		return nil, err
	}
	for _, x := range []*torch.Tensor{t, st} { // one dtype per collective
		if err := r.group.AllReduce(x); err != nil {
			return nil, fmt.Errorf("gather predictions: %w", err)
		}
	}
	clusters := convertInts[int](s.Int64s(t))
	sum := s.Float32s(st)
	if err := s.Err(); err != nil {
		return nil, err
	}
	for h, p := range preds {
		p.Cluster = clusters[h*n : (h+1)*n]
		p.Criteria = newCriteria(float64(sum[3*h]), float64(sum[3*h+1]), float64(sum[3*h+2]), p.Cluster, k)
	}
	if err := checkFinite(preds); err != nil {
		return nil, err
	}
	return preds, nil
}

// convertInts is c with each value converted to To: cluster ids between Go's ints,
// the int32 a run keeps and the int64 tensors hold.
func convertInts[To, From ~int | ~int32 | ~int64](c []From) []To {
	out := make([]To, len(c))
	for i, v := range c {
		out[i] = To(v)
	}
	return out
}

// Prior is the learned prior π (1×K), nil for uniform.
func (r *Run) Prior() *torch.Tensor { return r.prior }

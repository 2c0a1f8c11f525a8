// Package compare runs several clustering methods over several seeds on one labelled
// data set and summarises each method as mean ± 95% confidence half-width, the form of
// the paper's Table sota. One run per seed says little: the spread between seeds is
// often as large as the gap between methods, and the margin makes that visible.
//
// Every run is reproducible: a neural run draws its initialisation, shuffles and
// augmentations from its seed (see train.New), a baseline its initialisations, so on
// the CPU the same seeds give the same numbers.
package compare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"emclust/atomicfile"
	"emclust/baseline"
	"emclust/eval"
	"emclust/torch"
	"emclust/train"
)

// Baselines are the classical methods compared with the network's objectives.
var Baselines = []string{"kmeans", "gmm-diag", "gmm-full"}

// Methods lists every method: the unsupervised training objectives, then the
// baselines.
func Methods() []string {
	var m []string
	for _, o := range train.Objectives {
		if !o.Supervised {
			m = append(m, o.Name)
		}
	}
	return append(m, Baselines...)
}

// DefaultMethods are the methods compared when none are named: for vectors the
// paper's EM against the classical mixtures it generalises; for images its
// augmented objectives against IIC and k-means on raw pixels (a GMM on thousands of
// pixels says little and full covariances do not fit).
func DefaultMethods(images bool) []string {
	if images {
		return []string{"twofold", "em-aug", "iic", "kmeans"}
	}
	return []string{"em", "kmeans", "gmm-diag", "gmm-full"}
}

// Neural reports whether method trains a network (rather than being a baseline).
func Neural(method string) bool {
	o, err := train.LookupObjective(method)
	return err == nil && !o.Supervised
}

// NeedsImages reports whether method trains on augmented copies of images, which
// vectors have no equivalent of.
func NeedsImages(method string) bool {
	o, err := train.LookupObjective(method)
	return err == nil && o.Augmented
}

// Baseline settings. k-means keeps the best of 10 k-means++ restarts, as the train
// command's baseline does; the GMMs take scikit-learn's single restart and start from
// its covariance regulariser.
//
// baseline.KMeans draws restart r from seed+r, so seeds 1 and 2 would share nine of
// their ten restarts and often return the very same clustering, which narrows the
// margin without any evidence. Seed s therefore runs k-means with seed s·KMeansRestarts:
// restarts s·10 … s·10+9, disjoint from every other seed's. (The train command's
// baseline, one run, uses its seed as it is.)
//
// Full covariances are estimated in float32, whose rounding on a small component (as
// on the standardised digits, with near-constant pixels) can exceed 1e-6 and leave a
// covariance not positive definite. Such a run is repeated with the regulariser ten
// times larger, through GMMRegs, as one would raise scikit-learn's reg_covar; the
// value that worked is recorded in Result.Reg and noted under the table.
const (
	KMeansRestarts = 10
	GMMRestarts    = 1
)

// GMMRegs are the covariance regularisers a GMM run tries in turn.
var GMMRegs = []float64{1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1}

// CheckMethods checks a method list before anything is loaded or trained: every name
// known, none twice, and none that needs images when images is false.
func CheckMethods(methods []string, images bool) error {
	if len(methods) == 0 {
		return errors.New("no methods to compare")
	}
	for i, m := range methods {
		if !slices.Contains(Methods(), m) {
			return fmt.Errorf("unknown method %q: want some of %s", m, strings.Join(Methods(), ", "))
		}
		if slices.Contains(methods[:i], m) {
			return fmt.Errorf("method %s named twice", m)
		}
		if NeedsImages(m) && !images {
			var ok []string
			for _, m := range Methods() {
				if !NeedsImages(m) {
					ok = append(ok, m)
				}
			}
			return fmt.Errorf("method %s trains on augmented copies of images, and these data are vectors; vectors take %s", m, strings.Join(ok, ", "))
		}
	}
	return nil
}

// CheckSeeds rejects an empty or repeated seed list: a repeated seed repeats a run
// exactly and would shrink the margin without adding evidence.
func CheckSeeds(seeds []uint64) error {
	if len(seeds) == 0 {
		return errors.New("no seeds")
	}
	for i, s := range seeds {
		if slices.Contains(seeds[:i], s) {
			return fmt.Errorf("seed %d given twice: a repeated seed repeats its runs exactly and would narrow the margins falsely", s)
		}
	}
	return nil
}

// Options configure Run.
type Options struct {
	Methods []string // in the order runs are made and the table lists them
	Seeds   []uint64

	// Train configures the neural methods (K also the baselines); each run sets
	// Objective to its method and Seed to its seed. Zero EvalEvery, which the
	// comparison needs, skips the per-epoch evaluations.
	Train  train.Config
	Device torch.Device

	// Dir, when set, keeps each neural run's folder as Dir/<method>-s<seed>
	// (config, metrics, checkpoint); otherwise neural runs write nothing.
	Dir string
	// Replace lets a neural run start over in a folder under Dir that an earlier
	// comparison left; without it such a folder is an error.
	Replace bool
	// Resume goes on with a comparison stopped part-way in Dir: a run whose
	// ResultName its folder holds is not trained again, one stopped in training goes
	// on from its checkpoint or its trials, and the rest train anew. The caller
	// checks that Dir was begun with these options; a run whose checkpoint was
	// trained with others since (train --resume --epochs N) is refused.
	Resume bool
	// Plan names the comparison (a digest of what it runs): each run's ResultName
	// carries it, and a resumed comparison takes only results of its own plan.
	Plan string

	// Done, when set, is called after each run with its result and how many runs
	// are done of how many.
	Done func(r Result, done, total int)
	// Progress, when set, gives each neural run what to report its training to: its
	// epochs, and its restarts' or trials' steps.
	Progress func(method string, seed uint64) (train.Progress, train.RestartHooks)
}

// Result is one run: a method with a seed, scored against the labels.
type Result struct {
	Method string  `json:"method"`
	Seed   uint64  `json:"seed"`
	ACC    float64 `json:"acc"`
	NMI    float64 `json:"nmi"`
	ARI    float64 `json:"ari"`
	Empty  int     `json:"empty_clusters"`
	Reg    float64 `json:"reg,omitempty"` // the GMMs' covariance regulariser
	// Network is the network a neural run kept when it chose one (train.NetworkName).
	Network string  `json:"network,omitempty"`
	Seconds float64 `json:"seconds"` // wall time of fitting and predicting, not scoring
	// Resumed marks a neural run trained over more than one sitting (Options.Resume):
	// Seconds counts the last.
	Resumed bool `json:"resumed,omitempty"`
	// Earlier marks a result read from the run's folder, made by an earlier sitting.
	Earlier bool `json:"-"`
}

// ResultName is the file in which a neural run's folder keeps its Result once it is
// scored, for a resumed comparison (Options.Resume).
const ResultName = "result.json"

// ReportDir is where emclust report writes a run's report by default: in a run
// folder retrained, it would describe a model no longer there.
const ReportDir = "report"

// Run makes every (method, seed) run on src, methods in order and each over all
// seeds, and returns their results. Everything that can be checked without training
// is checked before the first run. When ctx is cancelled, Run returns the runs
// finished so far with an error wrapping ctx's.
func Run(ctx context.Context, src train.Source, opt Options) ([]Result, error) {
	if err := opt.check(src); err != nil {
		return nil, err
	}
	if opt.Dir != "" && !opt.Resume {
		// All at once: a comparison begun again and stopped before it reached a run
		// must leave none of that run's earlier results to a resume.
		for _, m := range opt.Methods {
			for _, seed := range opt.Seeds {
				if Neural(m) {
					if err := ClearRun(RunDir(opt.Dir, m, seed)); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	total := len(opt.Methods) * len(opt.Seeds)
	results := make([]Result, 0, total)
	for _, m := range opt.Methods {
		for _, seed := range opt.Seeds {
			if err := ctx.Err(); err != nil {
				return results, fmt.Errorf("compare: stopped after %d of %d runs: %w", len(results), total, err)
			}
			var r Result
			var err error
			if Neural(m) {
				r, err = opt.neural(ctx, src, m, seed)
			} else {
				r, err = opt.baseline(ctx, src, m, seed)
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return results, fmt.Errorf("compare: stopped during %s seed %d, after %d of %d runs: %w", m, seed, len(results), total, err)
			}
			if err != nil {
				return results, fmt.Errorf("compare: %s seed %d: %w", m, seed, err)
			}
			results = append(results, r)
			if opt.Done != nil {
				opt.Done(r, len(results), total)
			}
		}
	}
	return results, nil
}

// check validates the options against src, so that a mistake fails at once rather
// than after hours of other runs.
func (opt *Options) check(src train.Source) error {
	_, vectors := src.(*train.VectorSource)
	if err := CheckMethods(opt.Methods, !vectors); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	if err := CheckSeeds(opt.Seeds); err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	labels := src.Labels()
	if labels == nil {
		return fmt.Errorf("compare: %s has no labels to score against", src.Describe())
	}
	if len(labels) != src.Len() {
		return fmt.Errorf("compare: %d labels for %d rows", len(labels), src.Len())
	}
	if k := opt.Train.K; k < 2 || k > src.Len() {
		return fmt.Errorf("compare: k = %d: want 2 to %d (the rows of data)", k, src.Len())
	}
	for _, m := range opt.Methods {
		if !Neural(m) {
			continue
		}
		cfg := opt.Train
		cfg.Objective = m
		if err := cfg.Validate(); err != nil {
			return fmt.Errorf("compare: %s: %w", m, err)
		}
		// Validate checked the base seed's restarts; each seed's take seed+i.
		for _, seed := range opt.Seeds {
			if !train.SeedTakesRestarts(seed, cfg.Restarts) {
				return fmt.Errorf("compare: seed %d: its %d restarts would take seeds past 2⁶⁴−1; give smaller seeds", seed, cfg.Restarts)
			}
		}
		if opt.Dir == "" || opt.Replace || opt.Resume {
			continue
		}
		for _, seed := range opt.Seeds {
			dir := RunDir(opt.Dir, m, seed)
			if _, err := os.Stat(filepath.Join(dir, "checkpoint.safetensors")); err == nil {
				return fmt.Errorf("compare: %s already holds a run; pick another output folder, or replace it with --force", dir)
			}
		}
	}
	if slices.Contains(opt.Methods, "gmm-full") {
		s := torch.NoGrad()
		defer s.Close()
		x := src.Features(s)
		if err := s.Err(); err != nil {
			return fmt.Errorf("compare: features: %w", err)
		}
		if d := x.Shape()[1]; d > baseline.MaxFullDim {
			return fmt.Errorf("compare: gmm-full fits full covariances only up to %d features, and these data have %d; use gmm-diag", baseline.MaxFullDim, d)
		}
	}
	return nil
}

// RunDir is the folder of one neural run kept under dir.
func RunDir(dir, method string, seed uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s-s%d", method, seed))
}

// neural trains one network and scores its final eval-mode prediction; resuming,
// it takes the result its folder keeps, or goes on with the run stopped there.
func (opt *Options) neural(ctx context.Context, src train.Source, method string, seed uint64) (Result, error) {
	cfg := opt.Train
	cfg.Objective = method
	cfg.Seed = seed
	dir := ""
	if opt.Dir != "" {
		dir = RunDir(opt.Dir, method, seed)
		if opt.Resume {
			r, ok, err := readResult(filepath.Join(dir, ResultName), opt.Plan, method, seed)
			if err != nil {
				return r, fmt.Errorf("%w; remove %s to train that run again, or start over with --force", err, dir)
			}
			if ok {
				return r, nil
			}
		}
	}
	var prog progress
	if opt.Progress != nil {
		prog.epochs, prog.restarts = opt.Progress(method, seed)
	}
	start := time.Now()
	run, resumed, err := trainRun(ctx, cfg, src, opt.Device, dir, opt.Resume, prog)
	if err != nil {
		return Result{}, err
	}
	defer run.Close()
	pred, err := train.Predict(run.Net, src, opt.Device, run.Prior())
	if err != nil {
		return Result{}, fmt.Errorf("predict: %w", err)
	}
	res, err := score(method, seed, src.Labels(), pred.Cluster, cfg.K, time.Since(start))
	if err != nil {
		return Result{}, err
	}
	res.Network = train.NetworkName(run.Cfg)
	res.Resumed = resumed
	if dir != "" {
		if err := writeResult(filepath.Join(dir, ResultName), opt.Plan, res); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// ClearRun removes what an earlier comparison's run left in dir (its result,
// checkpoint, trials and the other files of a run), so that a comparison started
// over takes none of it for its own, even when it is stopped before the run's first
// save.
func ClearRun(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// Not under a run that trains there now (another comparison's).
	lock, err := train.LockDir(dir)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	defer lock.Close()
	for _, name := range append([]string{ResultName, train.TrialsDir, ReportDir}, train.RunFiles...) {
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
	}
	return nil
}

// keptResult is a run's ResultName: its result, and the plan it was made under.
type keptResult struct {
	Plan   string `json:"plan"`
	Result Result `json:"result"`
}

// readResult reads a run's kept result; ok is false where there is none.
func readResult(path, plan, method string, seed uint64) (r Result, ok bool, err error) {
	b, err := atomicfile.ReadFile(path, train.MaxJSONBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Result{}, false, nil
	}
	if err != nil {
		return Result{}, false, err
	}
	var kept keptResult
	if err := json.Unmarshal(b, &kept); err != nil {
		return Result{}, false, fmt.Errorf("%s: %w", path, err)
	}
	r = kept.Result
	switch in := func(v, lo, hi float64) bool { return v >= lo && v <= hi }; { // false for NaN
	case kept.Plan != plan:
		return Result{}, false, fmt.Errorf("%s: the result of another comparison than the one in %s", path, filepath.Dir(filepath.Dir(path)))
	case r.Method != method || r.Seed != seed:
		return Result{}, false, fmt.Errorf("%s: the result of %q seed %d, where this folder is %s seed %d's", path, r.Method, r.Seed, method, seed)
	case !in(r.ACC, 0, 1) || !in(r.NMI, 0, 1) || !in(r.ARI, -1, 1) || !in(r.Seconds, 0, math.MaxFloat64) || r.Empty < 0:
		return Result{}, false, fmt.Errorf("%s: a score, time or count out of range", path)
	case !slices.Contains([]string{"", "mlp", "linear"}, r.Network): // train.NetworkName's
		return Result{}, false, fmt.Errorf("%s: network %q: want mlp or linear", path, r.Network)
	}
	r.Earlier = true
	return r, true, nil
}

func writeResult(path, plan string, r Result) error {
	b, err := json.Marshal(keptResult{Plan: plan, Result: r})
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, append(b, '\n'))
}

// trainRun trains the run cfg describes, in dir when dir is set: one seed, or
// cfg.Restarts of them from cfg.Seed·cfg.Restarts (disjoint for each seed, as
// k-means' are; see KMeansRestarts) of which train.TrainRestarts keeps one (for
// each network, with HiddenAuto, and then one of the networks), or, with
// cfg.TrialEpochs, train.TrainTrials keeps one to train on. Trials, and whole-run
// image restarts, train in dir's trials folder, where a resume goes on with them.
// With resume, a run whose checkpoint dir holds goes on from there; resumed says
// whether the run began in an earlier sitting. The caller closes the run.
func trainRun(ctx context.Context, cfg train.Config, src train.Source, dev torch.Device, dir string, resume bool, prog progress) (run *train.Run, resumed bool, err error) {
	if dir != "" && resume {
		if _, err := os.Stat(filepath.Join(dir, "checkpoint.safetensors")); err == nil {
			run, err := resumeRun(ctx, cfg, src, dev, dir, prog)
			return run, true, err
		}
	}
	if cfg.Restarts <= 1 {
		run, err := train.New(cfg, src, dev, dir)
		if err != nil {
			return nil, false, err
		}
		run.Progress = prog.epochs
		if err := run.Train(ctx); err != nil {
			run.Close()
			return nil, false, err
		}
		return run, false, nil
	}
	cfg.Seed *= uint64(cfg.Restarts)
	_, vectors := src.(*train.VectorSource)
	if dir != "" && (cfg.TrialEpochs > 0 || !vectors && train.RestartsInFolders(cfg, src, dev)) {
		return trainTrials(ctx, cfg, src, dev, dir, resume, prog)
	}
	choose := train.TrainRestarts
	if cfg.TrialEpochs > 0 {
		choose = train.TrainTrials
	}
	run, _, err = choose(ctx, cfg, src, dev, prog.restarts)
	if err != nil {
		if run != nil {
			run.Close() // the choice among the restarts an interrupt left
		}
		return nil, false, err
	}
	if dir != "" {
		if err := run.Attach(dir); err == nil {
			err = run.Save()
		}
		if err != nil {
			run.Close()
			return nil, false, err
		}
	}
	// A kept trial trains on to cfg's epochs; restarts have trained theirs.
	run.Progress = prog.epochs
	if err := run.Train(ctx); err != nil {
		run.Close()
		return nil, false, err
	}
	return run, false, nil
}

// progress is what a neural run reports its training to (Options.Progress).
type progress struct {
	epochs   train.Progress
	restarts train.RestartHooks
}

// trainTrials trains cfg's trials, or its whole-run image restarts, in dir/trials, as
// train does, so that a stopped comparison goes on with them, keeps one in dir, and
// trains it on (a trial; a restart is trained).
func trainTrials(ctx context.Context, cfg train.Config, src train.Source, dev torch.Device, dir string, resume bool, prog progress) (*train.Run, bool, error) {
	resumed := resume && train.StoppedInTrials(dir)
	in := train.TrainTrialsIn
	if cfg.TrialEpochs == 0 {
		in = train.TrainRestartsIn
	}
	run, _, err := in(ctx, cfg, src, dev, dir, prog.restarts)
	if err == nil {
		if err = run.KeepTrial(dir, nil); err == nil {
			run.Progress = prog.epochs
			err = run.Train(ctx)
		}
	}
	if err != nil {
		if run != nil {
			run.Close()
		}
		return nil, false, err
	}
	return run, resumed, nil
}

// resumeRun goes on with the run saved in dir to its epochs.
func resumeRun(ctx context.Context, planned train.Config, src train.Source, dev torch.Device, dir string, prog progress) (*train.Run, error) {
	f, cfg, _, err := train.ReadCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	defer f.Release() // where the run refuses it before Restore
	if field := otherRun(planned, src.Len(), *cfg); field != "" {
		return nil, fmt.Errorf("%s: its checkpoint was trained with another %s than this comparison's (by train --resume since?); remove the folder, or start over with --force", dir, field)
	}
	// As train --resume: the standardisation comes from the data, read again; the
	// threads, device and memory check are this comparison's.
	cfg.InputMean, cfg.InputStd = nil, nil
	cfg.Threads, cfg.Device, cfg.NoMemoryCheck = planned.Threads, planned.Device, planned.NoMemoryCheck
	run, err := train.New(*cfg, src, dev, dir)
	if err != nil {
		return nil, err
	}
	run.Progress = prog.epochs
	if err = run.Restore(f); err != nil {
		err = fmt.Errorf("resume %s: %w", dir, err)
	} else if run.EpochsDone() < run.Cfg.Epochs {
		err = run.Train(ctx)
	}
	if err == nil {
		// A run kept from trials and killed before their folder went.
		err = train.RemoveTrials(dir)
	}
	if err != nil {
		run.Close()
		return nil, err
	}
	return run, nil
}

// otherRun names what in a run's saved config differs from the comparison's plan
// for it, "" when nothing does: what train --resume may change and a result depends
// on (the epochs, the precision and layout), and the method, K and data. The rest is
// the plan's, which the comparison checked when it resumed.
func otherRun(planned train.Config, rows int, saved train.Config) string {
	switch {
	case saved.EpochsFor(rows) != planned.EpochsFor(rows):
		return fmt.Sprintf("number of epochs (%d, where the comparison trains %d)", saved.EpochsFor(rows), planned.EpochsFor(rows))
	case saved.Objective != planned.Objective:
		return "objective"
	case saved.K != planned.K:
		return "K"
	case saved.DataDigest != planned.DataDigest || saved.LabelsDigest != planned.LabelsDigest:
		return "data"
	case saved.Precision != planned.Precision || saved.ChannelsLast != planned.ChannelsLast:
		return "precision or layout"
	case saved.WorldSize > 1:
		return fmt.Sprintf("number of processes (%d)", saved.WorldSize)
	}
	return ""
}

// baseline clusters the features the train command's k-means baseline uses: the
// vectors as given (standardised if asked), or raw pixels scaled to [0, 1].
func (opt *Options) baseline(ctx context.Context, src train.Source, method string, seed uint64) (Result, error) {
	k := opt.Train.K
	start := time.Now()
	s := torch.NoGrad()
	defer s.Close()
	x := src.Features(s)
	if err := s.Err(); err != nil {
		return Result{}, fmt.Errorf("features: %w", err)
	}
	var labels []int
	var reg float64
	switch method {
	case "kmeans":
		// Standardized features are centred already: no copy of them is made.
		res, err := baseline.KMeans(ctx, x, baseline.KMeansConfig{K: k, Restarts: KMeansRestarts, Seed: seed * KMeansRestarts, Centred: opt.Train.Standardize})
		if err != nil {
			return Result{}, err
		}
		labels = res.Labels
	case "gmm-diag", "gmm-full":
		cov := strings.TrimPrefix(method, "gmm-")
		for i, r := range GMMRegs {
			res, err := baseline.GMM(ctx, x, baseline.GMMConfig{K: k, Restarts: GMMRestarts, Seed: seed, Covariance: cov, Reg: r})
			if err == nil {
				labels, reg = res.Labels, r
				break
			}
			// baseline has no sentinel for this failure; its message is tested below
			// (TestRunGMM) so that a rewording cannot silently stop the retries.
			if !strings.Contains(err.Error(), "not positive definite") || i == len(GMMRegs)-1 {
				return Result{}, err
			}
		}
	default:
		return Result{}, fmt.Errorf("no baseline %q", method)
	}
	r, err := score(method, seed, src.Labels(), labels, k, time.Since(start))
	r.Reg = reg
	return r, err
}

func score(method string, seed uint64, truth, pred []int, k int, elapsed time.Duration) (Result, error) {
	sc, err := eval.ScoreLabelled(truth, pred)
	if err != nil {
		return Result{}, err
	}
	return Result{Method: method, Seed: seed, ACC: sc.ACC, NMI: sc.NMI, ARI: sc.ARI, Empty: emptyClusters(pred, k),
		Seconds: elapsed.Seconds()}, nil
}

// emptyClusters counts the clusters of 0..k-1 that no row fell in.
func emptyClusters(pred []int, k int) int {
	empty := 0
	for _, n := range eval.ClusterSizes(pred, k) {
		if n == 0 {
			empty++
		}
	}
	return empty
}

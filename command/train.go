package command

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/cpu"

	"emclust/atomicfile"
	"emclust/baseline"
	"emclust/compare"
	"emclust/data"
	"emclust/eval"
	"emclust/launch"
	"emclust/torch"
	"emclust/train"
)

func trainCommand() *cli.Command {
	flags := append(dataFlags("the embedded digits", autoStandardizeHelp), modelFlags()...)
	flags = append(flags,
		&cli.StringFlag{Name: "objective", Usage: objectiveHelp(), DefaultText: "em for vectors, twofold for images"},
		&cli.Uint64Flag{Name: "seed", Usage: "seed for init, shuffling and augmentation", DefaultText: fmt.Sprint(train.VectorDefaults().Seed)},
		&cli.IntFlag{Name: "restarts", Usage: "train seeds --seed, --seed+1, ... and keep the one --keep-by chooses, or on images the trial --trial-epochs chooses (on the CPU, those of steps too small to share train side by side, one per thread, and several at once as one network; Ctrl-C keeps those finished)",
			DefaultText: fmt.Sprintf("%d for vectors; %d trials for images, 1 where --epochs is at most %d; on images with --keep-by, give it", train.DefaultVectorRestarts, train.DefaultImageTrials, train.DefaultImageTrials*train.DefaultTrialEpochs)},
		&cli.IntFlag{Name: "trial-epochs", Usage: "with --restarts R on images: train each restart this many epochs, then go on with the one whose clustering agreed most with its own earlier evaluations (docs/RESULTS.md sections 44 and 51; labels are never used); 0: restarts train whole runs, kept by --keep-by",
			DefaultText: fmt.Sprintf("%d on images with several restarts and more epochs than that; 0 with --keep-by, or where one seed trains", train.DefaultTrialEpochs)},
		&cli.IntFlag{Name: "eval-every", Usage: "epochs between full evaluations; the one that agrees best with those before it, of those leaving the fewest clusters empty, is kept as chosen.safetensors (0: only at the end; restarts evaluate only their last epoch, trials every epoch)", DefaultText: fmt.Sprint(train.VectorDefaults().EvalEvery)},
		&cli.BoolFlag{Name: "kmeans", Usage: "also cluster the same features with k-means and print both (--kmeans=false: off)", DefaultText: "true for vectors, false for images"},
		&cli.StringFlag{Name: "out", Usage: "run folder for config, metrics, checkpoint and assignments", DefaultText: "runs/<data>-<time>"},
		&cli.StringFlag{Name: "resume", Usage: "continue the run in this folder from its last checkpoint (--epochs may extend it, --data or --data-dir name where its data lies now, and --device, --threads, --precision, --channels-last, --deterministic, --no-memory-check, --nproc and the --dist-* flags may change how it computes; the run's other settings are kept)", DefaultText: "off"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress or log lines: the summary line, warnings and errors remain"},
		&cli.BoolFlag{Name: "json", Usage: "print the summary as JSON"},
	)
	flags = append(flags, distFlags()...)
	return &cli.Command{
		Name:      "train",
		Usage:     "cluster a data set and save the run",
		UsageText: "emclust train [--dataset NAME --data-dir D | --data FILE.csv --label-col C] --k K --epochs N --out RUN",
		Flags:     flags,
		Action:    action(trainOptionsFrom, runTrain),
	}
}

// trainOptions are train's flags: a new run's config, or the run to resume and the
// settings a resumed run may change.
type trainOptions struct {
	New         newRun
	Out         string // a new run's folder; empty: runs/<data>-<time>
	Resume      string
	Resumed     resumeOverrides
	Quiet, JSON bool
	Dist        distOptions
}

func trainOptionsFrom(c *cli.Context) (trainOptions, error) {
	opts := trainOptions{Out: c.String("out"), Resume: c.String("resume"), Quiet: c.Bool("quiet"), JSON: c.Bool("json")}
	var err error
	if opts.Dist, err = distOptionsFrom(c); err != nil {
		return opts, err
	}
	if opts.Resume == "" {
		opts.New, err = newRunFrom(c)
		opts.New.Config.LocalStats = !c.Bool("sync-stats")
		return opts, err
	}
	if err := checkResumeFlags(c); err != nil {
		return opts, err
	}
	if err := checkDataDir(c); err != nil {
		return opts, err
	}
	o := &opts.Resumed
	if c.IsSet("epochs") {
		o.Epochs = ptr(c.Int("epochs"))
	}
	if c.IsSet("threads") {
		o.Threads = ptr(c.Int("threads"))
	}
	if c.IsSet("device") {
		o.Device = ptr(c.String("device"))
	}
	if c.IsSet("precision") {
		o.Precision = ptr(c.String("precision"))
	}
	if c.IsSet("channels-last") {
		o.ChannelsLast = ptr(c.Bool("channels-last"))
	}
	if c.IsSet("deterministic") {
		o.Deterministic = ptr(c.Bool("deterministic"))
	}
	if c.IsSet("no-memory-check") {
		o.NoMemoryCheck = ptr(c.Bool("no-memory-check"))
	}
	if c.IsSet("data") {
		o.DataFile = ptr(c.String("data"))
	}
	if c.IsSet("data-dir") {
		o.DataDir = ptr(c.String("data-dir"))
	}
	return opts, nil
}

func ptr[T any](v T) *T { return &v }

func runTrain(ctx context.Context, opts trainOptions, stdout, stderr io.Writer) error {
	// Catch Ctrl-C (and SIGTERM) from the start, so that one arriving while the data
	// load still ends in the one-line message below; a second one kills at once.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	role, err := launch.FromEnv(os.Getenv)
	if err != nil {
		return usageError{err} // the launch variables, set as a command line is
	}
	if role == nil && opts.Dist.NProc > 1 {
		// Said once, before any rank starts, as each rank would say it (runRank).
		if opts.Resume == "" && opts.New.Config.Restarts > 1 && (opts.New.RestartsSet || opts.New.TrialEpochsSet || opts.New.KeepBySet) {
			return usageError{fmt.Errorf("--restarts, --trial-epochs or --keep-by with %d processes: train restarts in one process, or one restart at a time", opts.Dist.NProc)}
		}
		if opts.Resume != "" && train.StoppedInTrials(opts.Resume) {
			return trialsInRanks(opts.Resume, opts.Dist.NProc)
		}
		file := opts.New.Config.DataFile
		if opts.Resumed.DataFile != nil {
			file = *opts.Resumed.DataFile
		}
		if err := streamInRanks(file, opts.Dist.NProc); err != nil {
			return err
		}
		if w := oversubscribed(opts.Dist.NProc, runtime.NumCPU(), opts.New.Config.Device, torch.CUDAAvailable()); w != "" {
			fmt.Fprintln(stderr, w) // on --quiet too
		}
		err := spawnRanks(ctx, opts.Dist, stdout, stderr)
		dir := cmp.Or(opts.Resume, opts.Out)
		if killed := (*launch.KilledError)(nil); errors.As(err, &killed) && dir != "" && exists(filepath.Join(dir, "checkpoint.safetensors")) {
			err = fmt.Errorf("%w: continue from %s's last checkpoint with emclust train --resume %s --nproc %d", err, dir, data.ShellQuote(dir), opts.Dist.NProc)
		}
		return err
	}
	if role != nil {
		// Rank 0 speaks for the run; the others report only their errors, and that
		// they are still waiting to join.
		if !opts.Quiet {
			opts.Dist.Log = stderr
		}
		if role.Rank != 0 {
			stdout, stderr = io.Discard, io.Discard
			opts.Quiet = true
		}
		err := runRank(ctx, opts, role, stdout, stderr)
		var ie interruptedError
		if role.Rank != 0 && errors.As(err, &ie) {
			return silentError{err} // rank 0 says where the checkpoint is
		}
		if err != nil {
			return fmt.Errorf("rank %d: %w", role.Rank, err)
		}
		return nil
	}
	return runRank(ctx, opts, nil, stdout, stderr)
}

// runRank trains the run alone (role nil) or as one rank of several.
func runRank(ctx context.Context, opts trainOptions, role *launch.Role, stdout, stderr io.Writer) (err error) {
	cfg, runDir := opts.New.Config, opts.Out
	speaks := role == nil || role.Rank == 0 // writes the run folder and the summary
	var ckpt *torch.SafeFile
	var newFolder *runFolder // a new run's, locked until the run takes it
	resumeTrials := opts.Resume != "" && train.StoppedInTrials(opts.Resume)
	if resumeTrials && role != nil {
		return trialsInRanks(opts.Resume, role.World)
	}
	if resumeTrials {
		var err error
		if cfg, newFolder, err = openResumedTrials(opts.Resume, opts.Resumed); err != nil {
			return err
		}
		defer newFolder.release()
		runDir = opts.Resume
	} else if opts.Resume != "" {
		var err error
		if ckpt, cfg, err = openResumed(opts.Resume, opts.Resumed); err != nil {
			return err
		}
		defer ckpt.Release() // where the run refuses it before Restore
		runDir = opts.Resume
	} else if speaks {
		// A run folder among the images would be read as a class of them next time.
		what := "--out " + opts.Out
		if opts.Out == "" {
			what = "the run's folder, under runs/ here,"
		}
		if err := outsideImageFolder(what, cmp.Or(opts.Out, "runs"), cfg); err != nil {
			return err
		}
		folder, err := takeNewRunFolder(opts.Out, train.DataName(cfg))
		if err != nil {
			return err
		}
		defer folder.release() // unless handed to the run
		runDir, newFolder = folder.dir, folder
	}
	dev, err := rankDevice(cfg.Device, role)
	if err != nil {
		return err
	}
	if cfg.Threads > 0 {
		torch.SetNumThreads(cfg.Threads)
	}
	var group *torch.Group
	oneRestart := false // the default restarts dropped for ranks: said with the ranks
	if role != nil {
		if err := streamInRanks(cfg.DataFile, role.World); err != nil {
			return err
		}
		if ckpt == nil && !opts.New.RestartsSet && !opts.New.TrialEpochsSet && !opts.New.KeepBySet && (cfg.Restarts > 1 || cfg.TrialEpochs > 0) {
			cfg.Restarts, cfg.TrialEpochs = 1, 0 // data-parallel runs are for data too large to train ten times
			oneRestart = true
		}
		if cfg.Restarts > 1 && ckpt == nil {
			return usageError{fmt.Errorf("--restarts, --trial-epochs or --keep-by with %d processes: train restarts in one process, or one restart at a time", role.World)}
		}
		if group, err = joinGroup(ctx, role, dev, cfg.Threads, opts.Dist); err != nil {
			if interruptedIn(ctx, err) {
				return interruptedJoining(opts.Resume, -1)
			}
			return err
		}
		defer group.Close()
		// A rank that stops says why to the others, which may be waiting for it: a
		// machine without the data would otherwise keep them for --dist-timeout.
		defer func() {
			if err != nil {
				// No store: rank 0 is gone, and the others hear that.
				train.PublishFailure(group, err, errors.As(err, new(interruptedError)))
			}
		}()
		cfg.WorldSize, cfg.LocalRanks = role.World, role.LocalWorld
	} else {
		cfg.WorldSize = 1
	}
	began, beganLabels := cfg.DataDigest, cfg.LabelsDigest // a resumed run's; OpenSource records what it reads now
	src, err := train.OpenSource(&cfg, dev)
	if err != nil {
		return err
	}
	defer src.Close()
	if ckpt == nil && !resumeTrials {
		if err := opts.New.resolve(&cfg, dev, src); err != nil {
			return err
		}
		if w := opts.New.partialKWarning(&cfg, src); w != "" {
			fmt.Fprintln(stderr, w) // on --quiet too
		}
	} else if err := checkResumedData(ckpt, began, beganLabels, cfg, src, runDir); err != nil {
		return err
	}
	if err := checkK(&cfg, src, opts.New.KSet || ckpt != nil || resumeTrials); err != nil {
		return err
	}
	log := stderr
	if opts.Quiet {
		log = io.Discard
	}
	// A new run's only: a resumed one does not record whether --precision was given,
	// and its precision was chosen, and heard of, when it started.
	if hint := precisionHint(cfg, dev, opts.New.PrecisionSet, cpu.X86.HasAMXBF16); hint != "" && speaks && ckpt == nil && !resumeTrials {
		fmt.Fprintln(log, hint)
	}
	if ckpt == nil && cfg.Restarts > 1 && cfg.TrialEpochs > 0 {
		return trainTrials(ctx, cfg, src, dev, newFolder, resumeTrials, opts.Quiet, opts.JSON, stdout, log, stderr)
	}
	if ckpt == nil && cfg.Restarts > 1 {
		return trainRestarts(ctx, cfg, src, dev, newFolder, resumeTrials, opts.JSON, stdout, log, stderr)
	}
	writeDir := runDir
	if !speaks || newFolder != nil {
		writeDir = "" // a new run attaches the folder it holds locked below
	}
	// New writes the resumed config.json before Restore has accepted the
	// checkpoint; a refused resume puts the old one back, or removes it where the
	// folder had none (the checkpoint holds the config too).
	restoreConfig := func() error { return nil }
	if ckpt != nil && writeDir != "" {
		path := filepath.Join(writeDir, "config.json")
		switch saved, err := atomicfile.ReadFile(path, train.MaxJSONBytes); {
		case err == nil:
			restoreConfig = func() error { return atomicfile.WriteBytes(path, saved) }
		case errors.Is(err, fs.ErrNotExist):
			restoreConfig = func() error { return os.Remove(path) }
		default:
			return fmt.Errorf("resume: %w", err)
		}
	}
	run, err := train.New(cfg, src, dev, writeDir)
	if err != nil {
		return err
	}
	defer run.Close()
	if ckpt != nil {
		if err := run.Restore(ckpt); err != nil {
			if werr := restoreConfig(); werr != nil {
				err = errors.Join(err, werr)
			}
			return fmt.Errorf("resume: %w", err)
		}
		// A run killed after its kept trial's first save, before the trials' folder
		// went, left it: the run holds what it needs of them.
		if speaks {
			if err := train.RemoveTrials(runDir); err != nil {
				return err
			}
		}
	}
	if group != nil {
		if err := run.Join(ctx, group); err != nil {
			var failed train.RankFailedError
			switch {
			case errors.As(err, new(train.SettingsError)):
				return usageError{err}
			case ctx.Err() != nil:
				return interruptedJoining(opts.Resume, -1)
			case errors.As(err, &failed) && failed.Interrupted:
				return interruptedJoining(opts.Resume, failed.Rank)
			case storeLost(err) && !role.ServeStore() && !role.AgentStore:
				return fmt.Errorf("lost rank 0, which served the store at %s:%d: %w", role.MasterAddr, role.MasterPort, err)
			}
			return err
		}
		stats := "global batch statistics"
		if cfg.LocalStats {
			stats = "each process's own batch statistics"
		}
		if oneRestart {
			stats += "; one seed of one network, without the restarts one process trains (on a table that fits one process, that is faster and scores better)"
		}
		fmt.Fprintf(log, "emclust: %s (%s, %s), %d rows each per batch, %s\n",
			plural(role.World, "rank"), role.Launcher, group.Backend(), run.Cfg.BatchSize/role.World, stats)
	}
	// After Join: ranks that refuse each other's settings leave no folder behind.
	if newFolder != nil {
		if err := run.AttachLocked(runDir, newFolder.take()); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "emclust: %s on %v (libtorch %s, %s, %v)\n", describeData(src, run.Cfg), dev, torch.Version(), plural(torch.NumThreads(), "thread"), run.Net.Compute())
	if speaks {
		warnData(stderr, src) // with --quiet too, as every warning
	}
	fmt.Fprintf(log, "emclust: %s net, %d params, K=%d, objective %s, γ=%.4g, batch %d, %s → %s\n",
		run.Spec.Layers(), run.Net.NumParams(), run.Cfg.K, run.Cfg.Objective, run.Cfg.GammaVal, run.Cfg.BatchSize, plural(run.Cfg.Epochs, "epoch"), runDir)
	if ckpt != nil {
		fmt.Fprintf(log, "emclust: resuming after epoch %d\n", run.EpochsDone())
	}
	run.Progress = newProgress(log, opts.Quiet)

	start := time.Now()
	if run.EpochsDone() >= run.Cfg.Epochs {
		// Resumed only to write what the first sitting could not (see above).
		fmt.Fprintf(log, "emclust: all %d epochs were done; writing the assignments\n", run.EpochsDone())
		if !speaks {
			return nil
		}
		return finishRun(ctx, run, src, dev, 0, opts.JSON, stdout, log, stderr)
	}
	if err := trainRun(ctx, run, runDir, group, role); err != nil {
		return err
	}
	if !speaks {
		return nil
	}
	return finishRun(ctx, run, src, dev, time.Since(start), opts.JSON, stdout, log, stderr)
}

// oversubscribed warns of more CPU ranks than cores: each rank loads libtorch, the
// network and the data (about 200 MB for a table) and trains on one thread, so they
// train no faster and may run out of memory, which the memory check, counting one
// rank, does not foresee. "" where the ranks train on GPUs or fit.
func oversubscribed(nproc, cores int, device string, cuda bool) string {
	if nproc <= cores || strings.HasPrefix(device, "cuda") || (device == "auto" && cuda) {
		return ""
	}
	return fmt.Sprintf("emclust: warning: --nproc %d on %d cores: more ranks than cores train no faster, and each holds its own libtorch, network and data", nproc, cores)
}

// interruptedJoining is the error of an interrupt before the ranks trained, of this
// rank's (by -1) or of rank by's: the run to resume, if any, is as it was.
func interruptedJoining(resume string, by int) error {
	what := "interrupted"
	if by >= 0 {
		what = fmt.Sprintf("rank %d was interrupted", by)
	}
	if resume != "" {
		return interruptedError{fmt.Errorf("%s while the ranks joined; %s is as it was: continue with emclust train --resume %s", what, resume, data.ShellQuote(resume))}
	}
	return interruptedError{fmt.Errorf("%s while the ranks joined, before any training: start the run again", what)}
}

// storeLost reports whether err is of a store whose server (rank 0) has gone.
func storeLost(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Broken pipe") || strings.Contains(msg, "Connection reset") || strings.Contains(msg, "Connection refused")
}

// precisionHint says, once, what the precision will cost a CNN on this CPU. Where it
// has AMX, bf16 took the Fashion-MNIST step from 698 to 336 ms and kept the accuracy
// (docs/RESULTS.md section 48), so a run left in fp32 hears of it; where it has not,
// bf16 was no faster (AVX-512 BF16) or 2.3–2.6 times slower (section 49), so a run
// asking for it hears that. A hint, not a default: measured on one CPU, over short
// runs. hasAMX comes from CPUID, which does not say whether the kernel lets a process
// use AMX; hence "may".
func precisionHint(cfg train.Config, dev torch.Device, precisionSet, hasAMX bool) string {
	if dev.CUDA || !trainsCNN(&cfg) {
		return ""
	}
	switch {
	case hasAMX && cfg.Precision == "fp32" && !precisionSet:
		return "emclust: this CPU has AMX: --precision bf16 may train the CNN about twice as fast (docs/RESULTS.md section 48)"
	case !hasAMX && cfg.Precision == "bf16":
		return "emclust: this CPU has no AMX: bf16 may train the CNN no faster than fp32, or slower (docs/RESULTS.md section 49)"
	}
	return ""
}

// trainRun trains run to its epochs, saving in runDir, and says what an interrupt
// left there to resume.
func trainRun(ctx context.Context, run *train.Run, runDir string, group *torch.Group, role *launch.Role) error {
	err := run.Train(ctx)
	if err == nil {
		return nil
	}
	if se := (*train.StopSaveError)(nil); errors.As(err, &se) {
		return interruptedError{fmt.Errorf("interrupted after %s, and saving them failed (%v): continue with emclust train --resume %s from what its checkpoint holds",
			plural(run.EpochsDone(), "epoch"), se.Err, data.ShellQuote(runDir))}
	}
	if errors.Is(err, context.Canceled) {
		if run.EpochsSaved() == 0 {
			return interruptedError{fmt.Errorf("interrupted before the first epoch ended, so %s holds no checkpoint to resume: start the run again", runDir)}
		}
		return interruptedError{fmt.Errorf("interrupted after %s; the checkpoint in %s holds %s: continue with emclust train --resume %s",
			plural(run.EpochsDone(), "epoch"), runDir, plural(run.EpochsSaved(), "epoch"), data.ShellQuote(runDir))}
	}
	if group != nil {
		err = explainLost(group, role, err)
	}
	return train.ExplainOOM(err, oomAdvice(run.Cfg))
}

// oomAdvice is what train suggests when the device runs out of memory: the settings
// that size cfg's network and its batches.
func oomAdvice(cfg train.Config) string {
	switch {
	case cfg.Dataset == "folder":
		return "lower --batch-size, try --precision bf16, or a smaller --image-size"
	case train.IsImageSet(cfg.Dataset): // images of the paper's sizes, which stay
		return "lower --batch-size, or try --precision bf16"
	}
	return "lower --batch-size, or narrow --hidden"
}

// keepChoice saves run, the choice among restarts that came back with err, in folder,
// which it then owns, even on error. interrupted reports that ctx stopped the choice
// before all were done: run is then the choice among those that finished, whole, for
// --resume. cfg, the restarts', names the settings an out-of-memory error points to.
func keepChoice(run *train.Run, cfg train.Config, err error, folder *runFolder) (interrupted bool, _ error) {
	interrupted = errors.Is(err, context.Canceled)
	if err != nil && !interrupted {
		return false, train.ExplainOOM(err, oomAdvice(cfg))
	}
	if run == nil {
		return false, interruptedError{errors.New("interrupted before any restart finished; no run was kept: start the run again")}
	}
	if err := run.AttachLocked(folder.dir, folder.take()); err != nil {
		return false, err
	}
	return interrupted, run.Save()
}

// savedTrials adds to err, which stopped a run among its trials or restarts (what),
// the ways on where some saved: the folder is the stopped run's (train.TrainTrialsIn
// removes one that holds no checkpoint).
func savedTrials(err error, runDir, what string) error {
	if !train.StoppedInTrials(runDir) {
		return err
	}
	return fmt.Errorf("%w; the %s saved so far are in %s: emclust train --resume %s goes on with them, or remove %s to start over", err, what, filepath.Join(runDir, train.TrialsDir), data.ShellQuote(runDir), data.ShellQuote(runDir))
}

// trainTrials trains cfg.Restarts trials of cfg.TrialEpochs epochs, keeps the one
// whose clustering settled most (train.TrainTrials) in the run folder, trains it on to
// cfg's epochs, and finishes it like a single run.
//
// Each trial trains in RUN/trials/seed-S and saves every epoch, beside the trials'
// config.json (RUN/trials/config.json, which the kept run's own does not replace): a
// run stopped among them (Ctrl-C, a killed job) goes on with --resume (resumed), from
// the trial it was in; the trials' folder goes once the trial kept is saved as the run.
func trainTrials(ctx context.Context, cfg train.Config, src train.Source, dev torch.Device, folder *runFolder, resumed, quiet, asJSON bool, stdout, log, warn io.Writer) error {
	start := time.Now()
	runDir := folder.dir
	n := max(cfg.Restarts, 1)
	// Checked before anything is written: a refused resume leaves the plan as it was.
	if full := cfg.EpochsFor(src.Len()); cfg.TrialEpochs > full {
		if resumed {
			return usageError{fmt.Errorf("--epochs %d with --resume: the trials of %s train %d epochs each; the run needs more", full, runDir, cfg.TrialEpochs)}
		}
		return usageError{fmt.Errorf("--trial-epochs %d: more than the %d epochs the run trains on %d rows", cfg.TrialEpochs, full, src.Len())}
	}
	if ctx.Err() != nil {
		if resumed {
			return interruptedError{fmt.Errorf("interrupted before the trials went on; emclust train --resume %s goes on with them", data.ShellQuote(runDir))}
		}
		return interruptedError{errors.New("interrupted before the first trial began; nothing was saved: start the run again")}
	}
	how := fmt.Sprintf("%d trials of %s (seeds %d–%d)", n, plural(cfg.TrialEpochs, "epoch"), cfg.Seed, cfg.Seed+uint64(n)-1)
	if resumed {
		how = "resuming " + how
	}
	fmt.Fprintf(log, "emclust: %s on %v (libtorch %s, %s); %s, then the one whose clustering agreed most with its own earlier evaluations goes on to %s\n",
		describeData(src, cfg), dev, torch.Version(), plural(torch.NumThreads(), "thread"), how, plural(cfg.EpochsFor(src.Len()), "epoch"))
	warnData(warn, src)
	var trialsDone int
	hooks := newRestartsProgress(log, log == io.Discard, n, "trials").hooks(func(i int, r train.Restart) {
		trialsDone = i + 1
		empty := ""
		if r.EmptyClusters > 0 {
			empty = fmt.Sprintf(" (%s empty)", plural(r.EmptyClusters, "cluster"))
		}
		fmt.Fprintf(log, "emclust: trial %d/%d, seed %d: agreement %.4f at epoch %d%s, max posterior %.4f\n",
			i+1, n, r.Seed, *r.SelfAgreement, r.ChosenEpoch, empty, r.Criteria.MaxPosterior)
	})
	run, _, err := train.TrainTrialsIn(ctx, cfg, src, dev, runDir, hooks)
	if run != nil {
		defer run.Close()
	}
	if errors.Is(err, context.Canceled) {
		// Each trial's folder holds its last epoch: the resume goes on from there.
		return interruptedError{fmt.Errorf("interrupted in trial %d of %d; emclust train --resume %s goes on with the trials",
			min(trialsDone+1, n), n, data.ShellQuote(runDir))}
	}
	if err != nil {
		return savedTrials(train.ExplainOOM(err, oomAdvice(cfg)), runDir, "trials")
	}
	if err := run.KeepTrial(runDir, folder.take()); err != nil {
		return err
	}
	chosen := run.Chosen()
	fmt.Fprintf(log, "emclust: kept seed %d (agreement %.4f at epoch %d): %s net, %d params, K=%d, objective %s, γ=%.4g, batch %d, on to %s → %s\n",
		run.Cfg.Seed, *chosen.Agreement, chosen.Epoch, run.Spec.Layers(), run.Net.NumParams(), run.Cfg.K, run.Cfg.Objective, run.Cfg.GammaVal,
		run.Cfg.BatchSize, plural(run.Cfg.Epochs, "epoch"), runDir)
	run.Progress = newProgress(log, quiet)
	if err := trainRun(ctx, run, runDir, nil, nil); err != nil {
		return err
	}
	return finishRun(ctx, run, src, dev, time.Since(start), asJSON, stdout, log, warn)
}

// trainRestarts trains cfg.Restarts seeds, keeps the run cfg.KeepBy chooses in
// runDir, and finishes it like a single run.
//
// Image restarts, whole runs of hours each, train in RUN/trials/seed-S and save as
// they go, as trials do (train.TrainRestartsIn): a run stopped among them goes on
// with --resume (resumed), and the folders go once the kept one is saved as the run.
// Vector restarts take seconds and train in memory: an interrupt keeps the choice
// among those that finished.
func trainRestarts(ctx context.Context, cfg train.Config, src train.Source, dev torch.Device, folder *runFolder, resumed, asJSON bool, stdout, log, warn io.Writer) error {
	start := time.Now()
	runDir := folder.dir
	restartsDir := ""
	if _, vectors := src.(*train.VectorSource); !vectors && train.RestartsInFolders(cfg, src, dev) {
		restartsDir = runDir
	}
	by := map[string]string{train.KeepBySilhouette: "the silhouette of their clusterings",
		train.KeepByAgreement: "the agreement between their clusterings"}[train.KeptBy(cfg.KeepBy, cfg.Restarts)]
	if by == "" {
		by = "the mean max posterior"
	}
	networks := ""
	if cfg.RestartRuns() > cfg.Restarts {
		networks = " for each of the MLP and the linear map (learned prior), then the one of higher silhouette of those that use at least 70% of the clusters"
	}
	total := cfg.RestartRuns()
	atOnce := ""
	if n, stack := train.RestartsSideBySide(cfg, src, dev), train.RestartsStacked(cfg, src, dev); n > 1 && stack > 1 {
		atOnce = fmt.Sprintf(", in stacks of up to %d, %d at a time,", stack, n)
	} else if n > 1 {
		atOnce = fmt.Sprintf(", %d at a time,", n)
	} else if stack > 1 {
		atOnce = fmt.Sprintf(", in stacks of up to %d,", stack)
	}
	how := fmt.Sprintf("%d restarts", max(cfg.Restarts, 1))
	if resumed {
		how = "resuming " + how
	}
	fmt.Fprintf(log, "emclust: %s on %v (libtorch %s, %s); %s%s kept by %s%s\n",
		describeData(src, cfg), dev, torch.Version(), plural(torch.NumThreads(), "thread"), how, atOnce, by, networks)
	warnData(warn, src)
	done := 0
	hooks := newRestartsProgress(log, log == io.Discard, total, "restarts").hooks(func(_ int, r train.Restart) {
		done++
		net := ""
		if r.Network != "" {
			net = " " + r.Network
		}
		fmt.Fprintf(log, "emclust: restart %d/%d%s, seed %d: max posterior %.4f, EM objective %.4f\n",
			done, total, net, r.Seed, r.Criteria.MaxPosterior, r.Criteria.EMObjective)
	})
	run, restarts, err := train.TrainRestartsIn(ctx, cfg, src, dev, restartsDir, hooks)
	if run != nil {
		defer run.Close()
	}
	if restartsDir != "" && errors.Is(err, context.Canceled) {
		// Each restart's folder holds its last epoch: the resume goes on from there.
		return interruptedError{fmt.Errorf("interrupted in restart %d of %d; emclust train --resume %s goes on with the restarts",
			min(done+1, total), total, data.ShellQuote(runDir))}
	}
	interrupted, err := keepChoice(run, cfg, err, folder)
	if err != nil {
		if restartsDir != "" {
			err = savedTrials(err, runDir, "restarts")
		}
		return err
	}
	if restartsDir != "" {
		if err := train.RemoveTrials(runDir); err != nil {
			return err
		}
	}
	if interrupted {
		// The choice among the restarts that finished is a whole run; a resume
		// writes the assignments and summary this exit leaves out.
		return interruptedError{fmt.Errorf("interrupted after %d of %d restarts; kept seed %d of those in %s: emclust train --resume %s writes its assignments and scores, and trains none of the other %d (a new run trains them all)",
			len(restarts), total, run.Cfg.Seed, runDir, data.ShellQuote(runDir), total-len(restarts))}
	}
	agree := ""
	var kept, other *train.Restart // each network's kept restart, when two trained
	for i, r := range restarts {
		mine := r.Network == train.NetworkName(run.Cfg)
		switch {
		case !mine || r.Seed != run.Cfg.Seed:
		case r.Silhouette != nil:
			agree = fmt.Sprintf(" (silhouette %.4f)", *r.Silhouette)
		case r.Agreement != nil:
			agree = fmt.Sprintf(" (mean ARI %.4f with the other restarts)", *r.Agreement)
		}
		if r.NetworkSilhouette != nil && mine {
			kept = &restarts[i]
		} else if r.NetworkSilhouette != nil {
			other = &restarts[i]
		}
	}
	if kept != nil && other != nil {
		agree += fmt.Sprintf("; silhouette %.4f against the %s's %.4f", *kept.NetworkSilhouette, networkLabel(other.Network), *other.NetworkSilhouette)
		if other.NetworkClusters < kept.NetworkClusters {
			agree += fmt.Sprintf(", which uses %d of %d clusters", other.NetworkClusters, run.Cfg.K)
		}
	}
	fmt.Fprintf(log, "emclust: kept seed %d%s: %s net, %d params, K=%d, γ=%.4g, %s → %s\n",
		run.Cfg.Seed, agree, run.Spec.Layers(), run.Net.NumParams(), run.Cfg.K, run.Cfg.GammaVal, plural(run.Cfg.Epochs, "epoch"), runDir)
	return finishRun(ctx, run, src, dev, time.Since(start), asJSON, stdout, log, warn)
}

// networkLabel names a network of train.NetworkCandidates for people.
func networkLabel(name string) string {
	if name == "linear" {
		return "linear map"
	}
	return strings.ToUpper(name)
}

// finishRun writes assignments and the summary, runs the k-means baseline and prints.
// An interrupt (ctx done) leaves out the baselines not yet done: the run is whole,
// and the command still exits as interrupted.
func finishRun(ctx context.Context, run *train.Run, src train.Source, dev torch.Device, elapsed time.Duration, asJSON bool, stdout, log, warn io.Writer) error {
	pred, err := train.PredictWithCriteria(run.Net, src, dev, run.Prior(), run.Cfg.GammaVal)
	if err != nil {
		return err
	}
	labels := src.Labels()
	if err := writeAssignments(filepath.Join(run.Dir, "assignments.csv"), pred, src); err != nil {
		return err
	}
	pred.Posterior = nil // K numbers a row, not needed past the file: let the baselines have the room
	sum := summary{Run: run.Dir, Epochs: run.EpochsDone(), ResumedAfter: run.ResumedAfter(), Seconds: round3(elapsed.Seconds()), K: run.Cfg.K,
		Sizes: eval.ClusterSizes(pred.Cluster, run.Cfg.K), Criteria: pred.Criteria, Restarts: run.Restarts}
	if is, ok := src.(*train.ImageSource); ok {
		sum.SkippedImages = is.Images().Skipped
	}
	if h := run.Spec.NumHeads(); h > 1 {
		sum.Heads = h
		for _, m := range run.History {
			if m.Head != nil {
				sum.Head = &m.Heads[*m.Head]
			}
		}
	}
	chosen, err := run.ExportChosen()
	if err != nil {
		return err
	}
	if chosen != "" {
		ch := run.Chosen()
		sum.Chosen = &chosenEpoch{Chosen: *ch, Model: chosen}
		if m := run.History[ch.Epoch-1]; m.ACC != nil {
			// Scored as eval.ScoreLabelled scored the epoch.
			sum.Chosen.Scores = &eval.Scores{ACC: *m.ACC, NMI: *m.NMI, ARI: *m.ARI, Scored: eval.ScoredRows(labels)}
		}
	}
	baselinesInterrupted := false
	if labels != nil {
		sc, err := eval.ScoreLabelled(labels, pred.Cluster)
		if err != nil {
			return err
		}
		sum.Scores = &sc
		if run.Cfg.KMeans {
			// The baselines only inform: one that fails (features too large for
			// float32 distances, say) is named and left out, and the run finishes.
			// Failing here would leave a run that no --resume could finish.
			baseline := func(what, short string, fit func(step func(restarts int)) (*eval.Scores, error)) *eval.Scores {
				var sc *eval.Scores
				err := ctx.Err() // interrupted already: build no copy of the data for it
				if err == nil {
					// Ten restarts on a large table take a while after the last epoch.
					var step func(int)
					if launch.IsTerminal(log) {
						bar := newBar(log, compare.KMeansRestarts, "restart", short) // short: within 80 columns with the rest of the bar
						step = func(done int) { bar.Set(done) }
						defer bar.Finish()
					}
					sc, err = fit(step)
				}
				if errors.Is(err, context.Canceled) {
					err = errors.New("interrupted")
					baselinesInterrupted = true
				}
				if err != nil {
					sum.BaselinesSkipped = append(sum.BaselinesSkipped, fmt.Sprintf("%s: %v", what, err))
					return nil
				}
				return sc
			}
			t0 := time.Now()
			sum.KMeans = baseline("k-means baseline", "k-means", func(step func(int)) (*eval.Scores, error) {
				return kmeansScores(ctx, src, run.Cfg, labels, false, step)
			})
			if sum.KMeans != nil {
				sum.KMeansSeconds = round3(time.Since(t0).Seconds())
			}
			// k-means does better on the raw digits (0.79 against 0.58) and on the
			// standardized wine (0.97 against 0.70): show it on the features the run
			// did not use too, so that the stronger baseline is in view.
			if run.Cfg.Standardize {
				sum.KMeansRaw = baseline("k-means baseline on the raw features", "k-means, raw", func(step func(int)) (*eval.Scores, error) {
					return kmeansScores(ctx, src, run.Cfg, labels, true, step)
				})
			} else if vs, ok := src.(*train.VectorSource); ok {
				sum.KMeansStandardized = baseline("k-means baseline on the standardized features", "k-means, standardized", func(step func(int)) (*eval.Scores, error) {
					return kmeansStandardized(ctx, vs, run.Cfg, labels, step)
				})
			}
		}
	}
	if vs, ok := src.(*train.VectorSource); ok && labels == nil && run.Cfg.KMeans {
		// Without labels a user cannot see how k-means would do: show how compact
		// and apart each clustering is, and how far the two agree. Interrupted
		// already, it is left out as interrupted (was skipped without a word, exit 0).
		if err = ctx.Err(); err == nil {
			sum.Unlabelled, err = kmeansBeside(ctx, vs, run.Cfg, pred.Cluster)
		}
		if err != nil {
			if errors.Is(err, context.Canceled) {
				baselinesInterrupted = true
				err = errors.New("interrupted")
			}
			sum.BaselinesSkipped = append(sum.BaselinesSkipped, fmt.Sprintf("k-means beside the run: %v", err))
		}
	}
	if err := writeJSONFile(filepath.Join(run.Dir, "summary.json"), sum); err != nil {
		return err
	}
	sum.emptyHint = emptyClustersHint(run.Cfg)
	if err := printSummary(sum, asJSON, stdout, log, warn); err != nil {
		return err
	}
	if baselinesInterrupted {
		// The run is whole, but the command did not do all it was asked: a script
		// running train && next should stop as for any other interrupt.
		return interruptedError{fmt.Errorf("interrupted in the baselines; the run in %s is whole, and its summary leaves them out", run.Dir)}
	}
	return nil
}

type summary struct {
	Run    string `json:"run"`
	Epochs int    `json:"epochs"`
	// ResumedAfter is the epochs of the earlier sittings: Seconds counts the rest.
	ResumedAfter  int          `json:"resumed_after,omitempty"`
	Seconds       float64      `json:"seconds"`
	K             int          `json:"k"`
	Sizes         []int        `json:"sizes"`
	Scores        *eval.Scores `json:"scores,omitempty"`
	KMeans        *eval.Scores `json:"kmeans,omitempty"`
	KMeansSeconds float64      `json:"kmeans_seconds,omitempty"`
	// KMeansRaw is k-means on the unstandardized features of a --standardize run.
	KMeansRaw *eval.Scores `json:"kmeans_raw,omitempty"`
	// KMeansStandardized is k-means on the standardized features of a vector run
	// that kept them raw.
	KMeansStandardized *eval.Scores `json:"kmeans_standardized,omitempty"`
	// Unlabelled compares k-means with the run where the data have no labels.
	Unlabelled *unlabelledBaseline `json:"kmeans_unlabelled,omitempty"`
	// BaselinesSkipped says why a baseline above is missing.
	BaselinesSkipped []string `json:"baselines_skipped,omitempty"`
	// Criteria judge the clustering without labels (train.Criteria).
	Criteria *train.Criteria `json:"criteria,omitempty"`
	// Restarts are the seeds trained (restarts or trials) and their criteria, when
	// --restarts > 1, as the run's checkpoint keeps them through a resume.
	Restarts []train.Restart `json:"restarts,omitempty"`
	// Chosen is the epoch the criteria ranked first, when it is not the last.
	Chosen *chosenEpoch `json:"chosen,omitempty"`
	// Head is the head a run with several predicts with, chosen at its last
	// evaluation (train.HeadMetrics); Heads is how many it has.
	Head  *train.HeadMetrics `json:"head,omitempty"`
	Heads int                `json:"heads,omitempty"`
	// SkippedImages are the images --skip-bad-images left out, each with why.
	SkippedImages []string `json:"skipped_images,omitempty"`
	// emptyHint is what may help a run that left clusters empty (emptyClustersHint).
	emptyHint string
}

// emptyClustersHint is what may help a run of cfg that left clusters empty: not
// --standardize on images, which refuse it, and nothing after --no-norm, whose
// collapse is what it shows.
func emptyClustersHint(cfg train.Config) string {
	switch {
	case cfg.Objective == "supervised":
		return "" // which has no relevance normalisation to turn off
	case !cfg.Norm:
		return "as the relevance normalisation is off (--no-norm)"
	case train.IsImageSet(cfg.Dataset) && cfg.DataFile == "":
		return "fewer may fit these data, or another --seed or a lower --lr may help"
	}
	return "fewer may fit these data, or another --seed, a lower --lr or the other choice of --standardize may help"
}

// chosenEpoch is the epoch a run keeps beside its last (train.Chosen), where its
// model is, and its scores when the data have labels.
type chosenEpoch struct {
	train.Chosen
	Model  string       `json:"model"`
	Scores *eval.Scores `json:"scores,omitempty"`
}

func printSummary(s summary, asJSON bool, stdout, log, warn io.Writer) error {
	// Warnings go to stderr with --quiet and --json too.
	for _, why := range s.BaselinesSkipped {
		fmt.Fprintf(warn, "emclust: warning: %s; left out\n", why)
	}
	used := 0
	for _, n := range s.Sizes {
		if n > 0 {
			used++
		}
	}
	if used < s.K {
		hint := ""
		if s.emptyHint != "" {
			hint = "; " + s.emptyHint
		}
		fmt.Fprintf(warn, "emclust: warning: the clustering uses %d of its %d clusters%s\n", used, s.K, hint)
	}
	if asJSON {
		b, _ := json.Marshal(s)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	empty := 0
	for _, n := range s.Sizes {
		if n == 0 {
			empty++
		}
	}
	epochs := plural(s.Epochs, "epoch")
	if s.ResumedAfter > 0 && s.Epochs > s.ResumedAfter {
		epochs += fmt.Sprintf(", the last %d", s.Epochs-s.ResumedAfter) // "300 epochs in 24.6s" read as all of them
	}
	fmt.Fprintf(log, "emclust: %s in %.1fs; cluster sizes %v (%d empty); run saved in %s\n", epochs, s.Seconds, s.Sizes, empty, s.Run)
	if h := s.Head; h != nil {
		fmt.Fprintf(log, "emclust: predicting with head %d of %d, which agreed best with the other heads (mean ARI %.4f)\n", h.Head, s.Heads, h.Agreement)
	}
	if c := s.Chosen; c != nil {
		scores := ""
		if c.Scores != nil {
			scores = " " + c.Scores.String() + ";"
		}
		agree := ""
		if c.Agreement != nil {
			agree = fmt.Sprintf(" (mean ARI %.4f)", *c.Agreement)
		}
		fmt.Fprintf(log, "emclust: epoch %d agreed best with the evaluations before it%s:%s its model is %s\n",
			c.Epoch, agree, scores, c.Model)
	}
	if s.Scores == nil {
		if u := s.Unlabelled; u != nil {
			// No winner is named: k-means had the higher silhouette on all eight
			// tables measured, five of which emclust clustered the more accurately
			// (docs/RESULTS.md section 70).
			fmt.Fprintf(log, "k-means  ARI %.4f with this clustering  (same features, %d restarts; without labels no score says which is the better)\n",
				u.Agreement, compare.KMeansRestarts)
		}
		fmt.Fprintf(stdout, "clusters %d sizes %s\n", s.K, strings.Trim(fmt.Sprint(s.Sizes), "[]"))
		return nil
	}
	if s.KMeans != nil {
		fmt.Fprintf(log, "emclust  %s\nk-means  %s  (%.1fs, same features, %d restarts)\n", s.Scores, s.KMeans, s.KMeansSeconds, compare.KMeansRestarts)
	}
	if s.KMeansRaw != nil {
		fmt.Fprintf(log, "k-means  %s  (raw features, before standardizing)\n", s.KMeansRaw)
	}
	if s.KMeansStandardized != nil {
		fmt.Fprintf(log, "k-means  %s  (standardized features, as --standardize would)\n", s.KMeansStandardized)
	}
	fmt.Fprintln(stdout, s.Scores.String())
	return nil
}

// kmeansScores scores the k-means baseline on src's features; with unstandardize, on
// the features as they were before the run's standardisation, less their means, which
// change no clustering (x·std on the device, rather than reading the data again).
func kmeansScores(ctx context.Context, src train.Source, cfg train.Config, labels []int, unstandardize bool, step func(int)) (*eval.Scores, error) {
	s := torch.NoGrad()
	defer s.Close()
	x := src.Features(s)
	if unstandardize {
		d := len(cfg.InputStd)
		x = s.Mul(x, s.FromFloat32(toFloat32(cfg.InputStd), []int{1, d}, x.Device()))
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	// Standardized features are centred already, and so are they times their scales.
	return kmeansOn(ctx, x, cfg, labels, cfg.Standardize, step)
}

// unlabelledBaseline sets k-means beside a run on data without labels: how far the
// two partitions agree, and the mean silhouette of each on the run's features (of a
// sample of 4000 rows at most). k-means, which minimises the distances within
// clusters, scored the higher silhouette on all eight tables measured, also where
// emclust was the more accurate: the silhouettes rank nothing between the two.
type unlabelledBaseline struct {
	Silhouette       float64 `json:"silhouette"`
	KMeansSilhouette float64 `json:"kmeans_silhouette"`
	Agreement        float64 `json:"agreement_ari"`
}

// kmeansBeside clusters vs's features as the run trained on them with k-means (ten
// restarts) and compares the result with the run's clustering.
func kmeansBeside(ctx context.Context, vs *train.VectorSource, cfg train.Config, cluster []int) (*unlabelledBaseline, error) {
	s := torch.NoGrad()
	defer s.Close()
	res, err := baseline.KMeans(ctx, vs.Features(s), baseline.KMeansConfig{K: cfg.K, Restarts: compare.KMeansRestarts, Seed: cfg.Seed, Centred: cfg.Standardize})
	if err != nil {
		return nil, err
	}
	sil, err := train.Silhouettes(vs, [][]int{cluster, res.Labels}, cfg.K, cfg.Seed)
	if err != nil {
		return nil, err
	}
	agree, err := eval.Score(res.Labels, cluster)
	if err != nil {
		return nil, err
	}
	return &unlabelledBaseline{Silhouette: round4(sil[0]), KMeansSilhouette: round4(sil[1]), Agreement: round4(agree.ARI)}, nil
}

// kmeansStandardized scores the k-means baseline on vs's features z-scored as
// --standardize would (data.Vectors.Standardize, on a copy).
func kmeansStandardized(ctx context.Context, vs *train.VectorSource, cfg train.Config, labels []int, step func(int)) (*eval.Scores, error) {
	s := torch.NoGrad()
	defer s.Close()
	x := vs.Standardized(s)
	if err := s.Err(); err != nil {
		return nil, err
	}
	return kmeansOn(ctx, x, cfg, labels, true, step)
}

// kmeansOn scores ten k-means++ restarts on the rows of x against labels; centred
// says x's columns have mean 0 already; step, when set, hears of each restart done.
func kmeansOn(ctx context.Context, x *torch.Tensor, cfg train.Config, labels []int, centred bool, step func(int)) (*eval.Scores, error) {
	res, err := baseline.KMeans(ctx, x, baseline.KMeansConfig{K: cfg.K, Restarts: compare.KMeansRestarts, Seed: cfg.Seed, Centred: centred, Step: step})
	if err != nil {
		return nil, err
	}
	sc, err := eval.ScoreLabelled(labels, res.Labels)
	return &sc, err
}

func toFloat32(xs []float64) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = float32(x)
	}
	return out
}

// warnData warns of what the data hold that the user may not know: the images
// --skip-bad-images left out, and the feature columns that count the rows (an ID, or
// the index pandas' to_csv writes, clustered as a feature, splits the rows into bands).
func warnData(log io.Writer, src train.Source) {
	warnSkippedImages(log, src)
	warnDuplicateIDs(log, src)
	vs, ok := src.(*train.VectorSource)
	if !ok {
		return
	}
	for _, c := range vs.RowCounters() {
		fmt.Fprintf(log, "emclust: warning: %s counts the rows, one up each row, as an ID or the index pandas' to_csv writes does; it is clustered as a feature unless --id-col %s (to name the rows by it) or --drop-cols %s leaves it out\n", c.What, c.Flag, c.Flag)
	}
}

// warnDuplicateIDs warns where src's IDs (--id-col) name two rows alike: the
// assignments name the rows by them, and score pairs two such files by them (and
// refuses a name given twice). Sorted row numbers, 4 bytes a row, find them.
func warnDuplicateIDs(log io.Writer, src train.Source) {
	named, ok := src.(interface{ IDs() ([]string, string) })
	if !ok {
		return
	}
	ids, col := named.IDs()
	if len(ids) < 2 || len(ids) > math.MaxInt32 {
		return
	}
	rows := make([]int32, len(ids))
	for i := range rows {
		rows[i] = int32(i)
	}
	slices.SortStableFunc(rows, func(a, b int32) int { return strings.Compare(ids[a], ids[b]) })
	dup, first, second := 0, -1, -1
	for i := 1; i < len(rows); i++ {
		if ids[rows[i]] != ids[rows[i-1]] {
			continue
		}
		dup++
		if a, b := int(rows[i-1]), int(rows[i]); first < 0 || a < first {
			first, second = a, b
		}
	}
	if dup == 0 {
		return
	}
	fmt.Fprintf(log, "emclust: warning: %d of the IDs in column %q name a row named before (%q names rows %d and %d): the assignments name rows by them, and score cannot pair rows by them\n",
		dup, col, ids[first], first+1, second+1)
}

// warnSkippedImages warns of the images --skip-bad-images left out of src, which
// the assignments lack; predict inherits the setting from the run.
func warnSkippedImages(log io.Writer, src train.Source) {
	if is, ok := src.(*train.ImageSource); ok {
		if skipped := is.Images().Skipped; len(skipped) > 0 {
			more := ""
			if n := len(skipped); n > 1 {
				more = fmt.Sprintf(", and %d more", n-1)
			}
			fmt.Fprintf(log, "emclust: warning: left out %s that cannot be read (--skip-bad-images): %s%s\n", plural(len(skipped), "image"), skipped[0], more)
		}
	}
}

// describeData is src's description, and, where the features were standardized,
// why: a rule the user did not invoke must say when it acted.
func describeData(src train.Source, cfg train.Config) string {
	d := src.Describe()
	if labels := src.Labels(); labels != nil {
		if n := data.CountLabelled(labels); n < len(labels) {
			d += fmt.Sprintf(", %d of them labelled (the rest have an empty or NA label: the scores count the %d)", n, n)
		}
	}
	switch {
	case !cfg.Standardize || train.IsImageSet(cfg.Dataset):
	case !cfg.StandardizeAuto:
		d += ", standardized"
	case cfg.FeatureSpread > data.SpreadToStandardize:
		d += fmt.Sprintf(", standardized as their spreads differ by %.0f× (--standardize=false keeps them raw)", cfg.FeatureSpread)
	default:
		d += fmt.Sprintf(", standardized as a column's mean lies %.0f of its standard deviations from 0 (--standardize=false keeps them raw)", cfg.FeatureOffset)
	}
	return d
}

package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
		&cli.StringFlag{Name: "resume", Usage: "continue the run in this folder from its last checkpoint (--epochs may extend it, --data or --data-dir name where its data lies now, and --device, --threads, --precision, --channels-last, --deterministic, --nproc and the --dist-* flags may change how it computes; the run's other settings are kept)", DefaultText: "off"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only the summary line"},
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

// resumeOverrides are the settings a resumed run may change: how to compute, like the
// device, for how long, and where its data now lies (a run moved to another machine,
// or into a container), but not what. Nil keeps the saved setting.
type resumeOverrides struct {
	Epochs, Threads             *int
	Device, Precision           *string
	ChannelsLast, Deterministic *bool
	NoMemoryCheck               *bool
	DataFile, DataDir           *string
}

func (o resumeOverrides) apply(cfg *train.Config) {
	if o.Epochs != nil {
		cfg.SetEpochs(*o.Epochs)
	}
	if o.Threads != nil {
		cfg.Threads = *o.Threads
	}
	if o.Device != nil {
		cfg.Device = *o.Device
	}
	if o.Precision != nil {
		cfg.Precision = *o.Precision
	}
	if o.ChannelsLast != nil {
		cfg.ChannelsLast = *o.ChannelsLast
	}
	if o.Deterministic != nil {
		cfg.Deterministic = *o.Deterministic
	}
	if o.NoMemoryCheck != nil {
		cfg.NoMemoryCheck = *o.NoMemoryCheck
	}
	if o.DataFile != nil {
		cfg.DataFile = absPath(*o.DataFile)
	}
	if o.DataDir != nil {
		cfg.DataDir = absPath(*o.DataDir)
	}
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

// openResumed reads the checkpoint of the run to resume and its config with the
// overrides applied. It refuses, before anything is written, a resume that would
// train nothing: a refused resume must leave the run's config.json as it was.
func openResumed(dir string, o resumeOverrides) (*torch.SafeFile, train.Config, error) {
	if err := checkRunDir(dir); err != nil {
		return nil, train.Config{}, err
	}
	f, saved, _, err := train.ReadCheckpoint(dir)
	if err != nil {
		return nil, train.Config{}, fmt.Errorf("resume: %w", err)
	}
	done, err := train.CheckpointEpochs(f)
	if err != nil {
		return nil, train.Config{}, fmt.Errorf("resume: %w", err)
	}
	if o.Epochs != nil && *o.Epochs <= done {
		return nil, train.Config{}, usageError{fmt.Errorf("--epochs %d with --resume: %s already finished %d epochs; pass --epochs N with N > %d to train longer", *o.Epochs, dir, done, done)}
	}
	if o.Epochs == nil && done >= saved.Epochs && summaryEpochs(dir) == done {
		// A run killed, or out of disk, between its last checkpoint and its summary
		// is finished by resuming it; a complete one is not redone. summary.json is
		// the last file a run writes, and says which epoch.
		return nil, train.Config{}, usageError{fmt.Errorf("resume: %s already finished %d of %d epochs; pass --epochs N with N > %d to train longer", dir, done, saved.Epochs, done)}
	}
	if err := checkMovedData(dir, o, saved); err != nil {
		return nil, train.Config{}, err
	}
	cfg := *saved
	// Recompute the standardisation from the same training data: bit-for-bit the
	// inputs of the first sitting, which the saved float32 statistics are not.
	cfg.InputMean, cfg.InputStd = nil, nil
	resumedThreads(&cfg)
	// The saved settings, then with the flags given: the threads are set before New
	// checks them, and a count past the CPUs would hang there.
	if err := cfg.Validate(); err != nil {
		return nil, train.Config{}, fmt.Errorf("resume: %s: %w", f.Path, err)
	}
	o.apply(&cfg)
	if err := cfg.Validate(); err != nil {
		return nil, train.Config{}, usageError{err}
	}
	return f, cfg, nil
}

// resumedThreads drops a first sitting's --threads that this machine has too few
// CPUs for: a resume on a smaller machine takes one thread per CPU, as --threads 0
// would say, instead of being refused for a flag not given.
func resumedThreads(cfg *train.Config) {
	if cfg.Threads > runtime.NumCPU() {
		cfg.Threads = 0
	}
}

// checkMovedData refuses a resume's --data or --data-dir that would change the kind
// of the data: they may move, a file stays a file, an image set a folder.
func checkMovedData(dir string, o resumeOverrides, saved *train.Config) error {
	switch {
	case o.DataFile != nil && saved.DataFile == "":
		return usageError{fmt.Errorf("--data with --resume: %s was trained on %s, not on a file", dir, train.DataName(*saved))}
	case o.DataDir != nil && (saved.DataFile != "" || !train.IsImageSet(saved.Dataset)):
		return usageError{fmt.Errorf("--data-dir with --resume: %s was trained on %s, which is not an image set; --data names a moved file", dir, train.DataName(*saved))}
	case o.DataFile == nil && o.DataDir == nil:
		return savedDataGone(dir, saved, true)
	}
	return nil
}

// streamInRanks refuses a pipe as the data of world processes: each reads the data,
// and a pipe holds them once (they would share one stream between them).
func streamInRanks(file string, world int) error {
	if file != "" && data.IsStream(file) {
		return usageError{fmt.Errorf("--data %s is a pipe, which %d processes cannot each read; save it to a file first", file, world)}
	}
	return nil
}

// trialsInRanks refuses to resume a run stopped among its trials (or whole-run
// restarts) in world processes.
func trialsInRanks(dir string, world int) error {
	return usageError{fmt.Errorf("--resume %s with %d processes: the run stopped among its trials or restarts, which train in one process; resume it in one", dir, world)}
}

// openResumedTrials reads the config of a run stopped among its trials, or among its
// whole-run image restarts, which train in the same folder (train.TrainRestartsIn),
// with the overrides applied, and locks its folder.
func openResumedTrials(dir string, o resumeOverrides) (train.Config, *runFolder, error) {
	saved, err := train.ReadConfig(filepath.Join(dir, train.TrialsDir))
	if err != nil {
		return train.Config{}, nil, fmt.Errorf("resume: %s holds trials but not their config: %w", dir, err)
	}
	if saved.Restarts < 2 || saved.TrialEpochs == 1 {
		return train.Config{}, nil, fmt.Errorf("resume: %s holds a trials folder, but its config.json trains no trials or restarts", dir)
	}
	if err := checkMovedData(dir, o, saved); err != nil {
		return train.Config{}, nil, err
	}
	// Whole restarts are chosen among as they end: trained alike, so that the choice is
	// fair and the config kept says how the one kept trained.
	if o.Epochs != nil && saved.TrialEpochs == 0 && (*o.Epochs != saved.Epochs || saved.MinSteps != 0 || saved.MaxSteps != 0) {
		return train.Config{}, nil, usageError{fmt.Errorf("--epochs %d with --resume: the restarts of %s train %d epochs each, as they began; resume without --epochs", *o.Epochs, dir, saved.Epochs)}
	}
	if o.Precision != nil && saved.TrialEpochs == 0 && *o.Precision != saved.Precision {
		return train.Config{}, nil, usageError{fmt.Errorf("--precision %s with --resume: the restarts of %s train in %s, as they began; resume without --precision", *o.Precision, dir, saved.Precision)}
	}
	cfg := *saved
	resumedThreads(&cfg)
	if err := cfg.Validate(); err != nil {
		return train.Config{}, nil, fmt.Errorf("resume: %s: %w", filepath.Join(dir, train.TrialsDir, "config.json"), err)
	}
	o.apply(&cfg)
	if o.Epochs != nil && cfg.TrialEpochs > cfg.Epochs {
		return train.Config{}, nil, usageError{fmt.Errorf("--epochs %d with --resume: the trials of %s train %d epochs each; the run needs more", cfg.Epochs, dir, cfg.TrialEpochs)}
	}
	if err := cfg.Validate(); err != nil {
		// Before trials/config.json is written again: a typo must not make the
		// saved config one that no resume can read.
		return train.Config{}, nil, usageError{err}
	}
	lock, err := train.LockDir(dir)
	if err != nil {
		return train.Config{}, nil, err
	}
	return cfg, &runFolder{dir: dir, lock: lock}, nil
}

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
		return err
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
		return spawnRanks(ctx, opts.Dist, stdout, stderr)
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
func runRank(ctx context.Context, opts trainOptions, role *launch.Role, stdout, stderr io.Writer) error {
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
		runDir = opts.Resume
	} else if speaks {
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
				if opts.Resume != "" {
					return interruptedError{fmt.Errorf("interrupted while the ranks joined; %s is as it was: continue with emclust train --resume %s", opts.Resume, opts.Resume)}
				}
				return interruptedError{errors.New("interrupted while the ranks joined, before any training: start the run again")}
			}
			return err
		}
		defer group.Close()
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
	} else if err := checkResumedData(ckpt, began, beganLabels, cfg, src, runDir); err != nil {
		return err
	}
	if err := checkK(&cfg, src); err != nil {
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
		if err := run.Join(group); err != nil {
			if errors.As(err, new(train.SettingsError)) {
				return usageError{err}
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
	fmt.Fprintf(log, "emclust: %s on %v (libtorch %s, %s, %v)\n", src.Describe(), dev, torch.Version(), plural(torch.NumThreads(), "thread"), run.Net.Compute())
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
			plural(run.EpochsDone(), "epoch"), se.Err, runDir)}
	}
	if errors.Is(err, context.Canceled) {
		if run.EpochsSaved() == 0 {
			return interruptedError{fmt.Errorf("interrupted before the first epoch ended, so %s holds no checkpoint to resume: start the run again", runDir)}
		}
		return interruptedError{fmt.Errorf("interrupted after %s; the checkpoint in %s holds %s: continue with emclust train --resume %s",
			plural(run.EpochsDone(), "epoch"), runDir, plural(run.EpochsSaved(), "epoch"), runDir)}
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
	return fmt.Errorf("%w; the %s saved so far are in %s: emclust train --resume %s goes on with them, or remove %s to start over", err, what, filepath.Join(runDir, train.TrialsDir), runDir, runDir)
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
			return interruptedError{fmt.Errorf("interrupted before the trials went on; emclust train --resume %s goes on with them", runDir)}
		}
		return interruptedError{errors.New("interrupted before the first trial began; nothing was saved: start the run again")}
	}
	how := fmt.Sprintf("%d trials of %s (seeds %d–%d)", n, plural(cfg.TrialEpochs, "epoch"), cfg.Seed, cfg.Seed+uint64(n)-1)
	if resumed {
		how = "resuming " + how
	}
	fmt.Fprintf(log, "emclust: %s on %v (libtorch %s, %s); %s, then the one whose clustering agreed most with its own earlier evaluations goes on to %s\n",
		src.Describe(), dev, torch.Version(), plural(torch.NumThreads(), "thread"), how, plural(cfg.EpochsFor(src.Len()), "epoch"))
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
			min(trialsDone+1, n), n, runDir)}
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
		networks = " for each of the MLP and the linear map (learned prior), then the one whose clustering uses more clusters and has the higher silhouette"
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
		src.Describe(), dev, torch.Version(), plural(torch.NumThreads(), "thread"), how, atOnce, by, networks)
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
			min(done+1, total), total, runDir)}
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
			len(restarts), total, run.Cfg.Seed, runDir, runDir, total-len(restarts))}
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
	sum := summary{Run: run.Dir, Epochs: run.EpochsDone(), Seconds: round3(elapsed.Seconds()), K: run.Cfg.K,
		Sizes: eval.ClusterSizes(pred.Cluster, run.Cfg.K), Criteria: pred.Criteria, Restarts: run.Restarts}
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
			sum.Chosen.Scores = &eval.Scores{ACC: *m.ACC, NMI: *m.NMI, ARI: *m.ARI}
		}
	}
	baselinesInterrupted := false
	if labels != nil {
		sc, err := eval.Score(labels, pred.Cluster)
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
	Run           string       `json:"run"`
	Epochs        int          `json:"epochs"`
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
	fmt.Fprintf(log, "emclust: %s in %.1fs; cluster sizes %v (%d empty); run saved in %s\n", plural(s.Epochs, "epoch"), s.Seconds, s.Sizes, empty, s.Run)
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
		fmt.Fprintf(stdout, "clusters %d sizes %s\n", s.K, strings.Trim(fmt.Sprint(s.Sizes), "[]"))
		return nil
	}
	if s.KMeans != nil {
		fmt.Fprintf(log, "emclust  %s\nk-means  %s  (%.1fs, same features, %d restarts)\n", s.Scores, s.KMeans, s.KMeansSeconds, compare.KMeansRestarts)
	}
	if s.KMeansRaw != nil {
		fmt.Fprintf(log, "k-means  %s  (raw features, before --standardize)\n", s.KMeansRaw)
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
	sc, err := eval.Score(labels, res.Labels)
	return &sc, err
}

// resumeFlags are the train flags that apply to a resumed run; the rest of its
// settings come from the checkpoint.
var resumeFlags = map[string]bool{"resume": true, "epochs": true, "device": true, "threads": true,
	"precision": true, "channels-last": true, "deterministic": true, "no-memory-check": true, "quiet": true, "json": true,
	"nproc": true, "dist-timeout": true, "dist-backend": true, "data": true, "data-dir": true}

func checkResumeFlags(c *cli.Context) error {
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if c.IsSet(name) && !resumeFlags[name] {
			if name == "out" && c.String("out") == c.String("resume") {
				continue
			}
			return usageError{fmt.Errorf("--%s with --resume: a resumed run keeps the settings saved with its checkpoint in %s; only --epochs, --device, --threads, --precision, --channels-last, --deterministic, --no-memory-check, --nproc, --dist-timeout, --dist-backend, --data, --data-dir (the same data in a new place), --quiet and --json apply",
				name, c.String("resume"))}
		}
	}
	return nil
}

// summaryEpochs is the epoch count of RUN/summary.json, or -1 when it is missing or
// unreadable.
func summaryEpochs(dir string) int {
	b, err := atomicfile.ReadFile(filepath.Join(dir, "summary.json"), train.MaxJSONBytes)
	if err != nil {
		return -1
	}
	var sum struct {
		Epochs *int `json:"epochs"`
	}
	if json.Unmarshal(b, &sum) != nil || sum.Epochs == nil {
		return -1
	}
	return *sum.Epochs
}

// checkNewRunDir refuses a folder that holds a run already, or files a run did not
// write there: a new run writes config.json, assignments.csv and others over
// whatever has those names. A run stopped before its first checkpoint leaves only
// its own files, and its folder can be taken again.
func checkNewRunDir(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "checkpoint.safetensors")); err == nil {
		return usageError{fmt.Errorf("%s already holds a run; continue it with --resume %s or pick another --out", dir, dir)}
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		if st, serr := os.Stat(dir); serr == nil && !st.IsDir() {
			return usageError{fmt.Errorf("--out %s is a file; name a new folder for the run", dir)}
		}
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	var foreign, named []string // named: files of a run's names, a run's only beside its config
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == train.TrialsDir && e.IsDir() && isRunConfig(filepath.Join(dir, name, "config.json")):
			return usageError{fmt.Errorf("%s holds the trials or restarts of a run that stopped among them; continue it with --resume %s or pick another --out", dir, dir)}
		case name == train.LockName && train.IsRunLock(filepath.Join(dir, name)), isPartialRunFile(name):
		case slices.Contains(train.RunFiles, name):
			named = append(named, name)
		default:
			foreign = append(foreign, name)
		}
	}
	if len(named) > 0 && !isRunConfig(filepath.Join(dir, "config.json")) {
		foreign = append(foreign, named...)
	}
	if len(foreign) > 0 {
		return usageError{fmt.Errorf("--out %s holds files no emclust run wrote (%s), which a run could write over or mix with its own; name a new or empty folder", dir, someNames(foreign))}
	}
	return nil
}

// someNames lists the first three of names, and "…" for the rest.
func someNames(names []string) string {
	if len(names) > 3 {
		names = append(names[:3:3], "…")
	}
	return strings.Join(names, ", ")
}

// isPartialRunFile says whether name is what atomicfile leaves of a run file a
// process was killed while writing.
func isPartialRunFile(name string) bool {
	return slices.ContainsFunc(train.RunFiles, func(f string) bool { return atomicfile.IsTemp(name, f) })
}

// isRunConfig says whether path is a run's config.json rather than a file of the
// same name of the user's.
func isRunConfig(path string) bool {
	b, err := atomicfile.ReadFile(path, train.MaxJSONBytes)
	if err != nil {
		return false
	}
	var cfg map[string]json.RawMessage
	if json.Unmarshal(b, &cfg) != nil {
		return false
	}
	_, k := cfg["k"]
	_, obj := cfg["objective"]
	return k && obj
}

// runFolder is a new run's folder, locked from before its data are read until the
// run takes it: no other run can take it between the check and the first write.
type runFolder struct {
	dir  string
	lock *os.File // nil once the run has it
	// made is the highest folder of dir's path this command made ("" if none):
	// it and the folders below it on the way to dir go again if no run takes dir.
	made string
}

// takeNewRunFolder makes out (runs/<name>-<time> when empty), or takes it when it is
// empty or a run left it before its first checkpoint (checkNewRunDir), and locks it.
func takeNewRunFolder(out, name string) (*runFolder, error) {
	f := &runFolder{dir: out}
	if out == "" {
		f.made = firstMissing("runs")
		dir, err := newRunDirName(name, time.Now())
		if err != nil {
			f.removeMade()
			return nil, err
		}
		f.dir = dir
		if f.made == "" {
			f.made = dir
		}
	} else {
		if err := checkNewRunDir(out); err != nil {
			return nil, err
		}
		f.made = firstMissing(out)
	}
	lock, err := train.LockDir(f.dir)
	if err != nil {
		f.removeMade()
		return nil, err
	}
	f.lock = lock
	// Again under the lock: another run may have written it meanwhile.
	if err := checkNewRunDir(f.dir); err != nil {
		f.release()
		return nil, err
	}
	return f, nil
}

// take hands the lock to the run that attaches the folder.
func (f *runFolder) take() *os.File {
	lock := f.lock
	f.lock = nil
	return lock
}

// release unlocks a folder no run took, and removes it when this command made it:
// a command that fails before training leaves no empty run folder behind.
func (f *runFolder) release() {
	if f.lock == nil {
		return
	}
	f.lock.Close()
	f.lock = nil
	os.Remove(filepath.Join(f.dir, train.LockName))
	f.removeMade()
}

// removeMade removes the folders this command made on the way to dir, deepest
// first; os.Remove leaves any that is not empty.
func (f *runFolder) removeMade() {
	if f.made == "" {
		return
	}
	for d := filepath.Clean(f.dir); ; d = filepath.Dir(d) {
		os.Remove(d)
		if d == filepath.Clean(f.made) || d == filepath.Dir(d) {
			return
		}
	}
}

// firstMissing is the highest folder of path that does not exist yet (path itself
// when only it is missing), or "" when path exists. Lstat: a dangling link is
// something the user made, not a folder to make and remove.
func firstMissing(path string) string {
	missing := ""
	for d := filepath.Clean(path); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			return missing
		}
		missing = d
		if d == filepath.Dir(d) || d == "." {
			return missing
		}
	}
}

// newRunDirName makes a new folder runs/<name>-<time> for a run given no --out,
// with -2, -3, ... added when two runs start in the same second.
func newRunDirName(name string, now time.Time) (string, error) {
	base := filepath.Join("runs", fmt.Sprintf("%s-%s", name, now.Format("20060102-150405")))
	if err := os.MkdirAll("runs", 0o755); err != nil {
		return "", fmt.Errorf("run folder: %w", err)
	}
	for i := 1; ; i++ {
		dir := base
		if i > 1 {
			dir = fmt.Sprintf("%s-%d", base, i)
		}
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) || i == 1000 {
			return "", fmt.Errorf("run folder: %w", err)
		}
	}
}

// checkResumedData refuses data other than those a resumed run began on, before the
// run folder is written: by their digest, or, for runs saved before config.json had
// one, by the rows of the clusterings the checkpoint keeps. Other labels are refused
// too: the epochs' scores would not compare.
func checkResumedData(ckpt *torch.SafeFile, began, beganLabels string, cfg train.Config, src train.Source, runDir string) error {
	name := cfg.DataFile
	if name == "" {
		name = train.DataName(cfg)
		if cfg.DataDir != "" {
			name += " in " + cfg.DataDir
		}
	}
	if began != "" && cfg.DataDigest != began {
		return usageError{fmt.Errorf("resume: %s are not the data the run in %s began on (their SHA-256 digest differs from the data_digest saved with its checkpoint); a resumed run needs the same data", name, runDir)}
	}
	if beganLabels != "" && cfg.LabelsDigest != beganLabels {
		return usageError{fmt.Errorf("resume: the labels of %s are not those the run in %s was scored against (their SHA-256 digest differs from the labels_digest saved with its checkpoint); a resumed run needs the same labels, or a new run", name, runDir)}
	}
	if ckpt == nil {
		return nil // trials resumed: their checkpoints are checked as each is opened
	}
	if shape, ok := ckpt.Shape("recent.0"); ok && len(shape) == 1 && shape[0] != src.Len() {
		return usageError{fmt.Errorf("resume: the run in %s trained on %d rows, and %s hold %d; a resumed run needs the data it trained on", runDir, shape[0], name, src.Len())}
	}
	return nil
}

// checkRunDir explains a --resume folder without a checkpoint better than the error
// from opening it would.
func checkRunDir(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("resume: %s does not exist", dir)
	}
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if !st.IsDir() {
		// A run writes its folder: a checkpoint file alone has none to write.
		return usageError{fmt.Errorf("resume: %s is a file; --resume takes the run folder that holds checkpoint.safetensors (%s?)", dir, filepath.Dir(dir))}
	}
	if abs := absPath(dir); filepath.Base(filepath.Dir(abs)) == train.TrialsDir && strings.HasPrefix(filepath.Base(abs), "seed-") {
		// Trained on alone, the trial would pass --trial-epochs and be scored there.
		run := filepath.Dir(filepath.Dir(abs))
		for _, conf := range []string{filepath.Join(run, "config.json"), filepath.Join(run, train.TrialsDir, "config.json")} {
			if _, err := os.Stat(conf); err == nil {
				return usageError{fmt.Errorf("resume: %s is a trial or restart of the run in %s; resume that run", dir, run)}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint.safetensors")); errors.Is(err, os.ErrNotExist) {
		// A run killed while writing its first checkpoint left the partial file.
		if err := train.RemoveStale(dir); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		return fmt.Errorf("resume: %s has no checkpoint.safetensors (a run saves one after each epoch); start a new run with --out %s", dir, dir)
	}
	return nil
}

func toFloat32(xs []float64) []float32 {
	out := make([]float32, len(xs))
	for i, x := range xs {
		out[i] = float32(x)
	}
	return out
}

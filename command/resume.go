package command

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"emclust/atomicfile"
	"emclust/data"
	"emclust/torch"
	"emclust/train"
)

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

// openResumed reads the checkpoint of the run to resume and its config with the
// overrides applied. It refuses, before anything is written, a resume that would
// train nothing: a refused resume must leave the run's config.json as it was.
func openResumed(dir string, o resumeOverrides) (_ *torch.SafeFile, _ train.Config, err error) {
	if err := checkRunDir(dir); err != nil {
		return nil, train.Config{}, err
	}
	f, saved, _, err := train.ReadCheckpoint(dir)
	if err != nil {
		return nil, train.Config{}, fmt.Errorf("resume: %w", err)
	}
	defer func() {
		if err != nil {
			f.Release()
		}
	}()
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
		why := ""
		if labels := src.Labels(); data.CountLabelled(labels) < len(labels) {
			// The data alike, a run of before 2026-11-29 read those cells as a class.
			why = " (label cells such as NA, NaN or null now mark rows without a class, which emclust read as a class of their own before 2026-11-29)"
		}
		return usageError{fmt.Errorf("resume: the labels of %s are not those the run in %s was scored against (their SHA-256 digest differs from the labels_digest saved with its checkpoint)%s; a resumed run needs the same labels, or a new run", name, runDir, why)}
	}
	if ckpt == nil {
		return nil // trials resumed: their checkpoints are checked as each is opened
	}
	if shape, ok := ckpt.Shape("recent.0"); ok && len(shape) == 1 && shape[0] != src.Len() {
		return usageError{fmt.Errorf("resume: the run in %s trained on %d rows, and %s hold %d; a resumed run needs the data it trained on", runDir, shape[0], name, src.Len())}
	}
	return nil
}

// madeByRun says whether dir holds what a run leaves before its first checkpoint:
// its config.json, its lock (a table's restarts train in memory, with the folder
// locked, before the kept one writes it), or a file it was writing.
func madeByRun(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return true
	}
	if train.IsRunLock(filepath.Join(dir, train.LockName)) {
		return true
	}
	entries, _ := os.ReadDir(dir)
	return slices.ContainsFunc(entries, func(e os.DirEntry) bool { return isPartialRunFile(e.Name()) })
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
	ckpt := filepath.Join(dir, "checkpoint.safetensors")
	if _, err := os.Stat(ckpt); errors.Is(err, os.ErrNotExist) {
		if err := atomicfile.LinkToNothing(ckpt); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if !madeByRun(dir) {
			// Not a run's folder: say so, not how to train into it.
			return fmt.Errorf("resume: %s holds no run (no config.json, no checkpoint.safetensors); --resume takes the folder emclust train --out made", dir)
		}
		// A run killed while writing its first checkpoint left the partial file.
		if err := train.RemoveStale(dir); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		return fmt.Errorf("resume: %s has no checkpoint.safetensors: its run stopped before it saved one (one run saves one after each epoch; the restarts of a table save the kept run once all have trained); start it again with --out %s", dir, data.ShellQuote(dir))
	}
	return nil
}

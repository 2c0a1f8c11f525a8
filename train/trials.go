package train

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

	"emclust/torch"
)

// TrainTrials trains max(cfg.Restarts, 1) runs of seeds cfg.Seed, cfg.Seed+1, ... for
// cfg.TrialEpochs epochs each, one after another and evaluating every epoch, and
// returns the one whose chosen epoch agreed most with its own earlier evaluations
// (Chosen.AgreesMore), set to go on to cfg's epochs with Train. On Fashion-MNIST that
// agreement ranked ten seeds by ACC (Spearman 0.95), and keeping the more stable of
// two gained 0.024 (docs/RESULTS.md section 44), while ACC stops rising after about
// 20 of 250 epochs (section 43): a short trial of several seeds costs less than one
// run to the end. Whether a given trial length ranks seeds is the data's (on a CPU
// subset after 780 steps it did not yet).
//
// Unlike TrainRestarts' restarts, a trial's agreement is its own, so each trial is
// compared as it ends and the loser closed: at most two runs are held at once. The
// records give each trial's seed, the criteria of its last epoch, and its chosen
// epoch, agreement and (scored only for the record, when the data have labels) ACC.
//
// The run comes back without a folder; it carries its chosen epoch's tensors, so that
// Attach and Save keep them. Cancelling ctx stops the trial in training; the best
// of those that finished comes back with ctx's error, and Train would continue it.
func TrainTrials(ctx context.Context, cfg Config, src Source, dev torch.Device, hooks RestartHooks) (*Run, []Restart, error) {
	return TrainTrialsIn(ctx, cfg, src, dev, "", hooks)
}

// TrialsDir is the folder of a run folder in which TrainTrialsIn trains the trials,
// and TrainRestartsIn whole-run restarts, one folder each, named for its seed.
const TrialsDir = "trials"

// TrainTrialsIn is TrainTrials with each trial trained as a run of its own in
// dir/trials/seed-S, saved every epoch, where dir is not "": trials of several
// epochs each on a CPU take hours, and a job killed among them would lose them all.
// Called again on the same dir, it takes the trials that finished from their
// checkpoints, goes on with the one that was stopped, and trains the rest: the run it
// keeps is the one an uninterrupted call keeps. The plan, cfg, is dir/trials/
// config.json, for the resume to read. The caller saves the run kept with KeepTrial.
func TrainTrialsIn(ctx context.Context, cfg Config, src Source, dev torch.Device, dir string, hooks RestartHooks) (*Run, []Restart, error) {
	if cfg.TrialEpochs < 2 {
		return nil, nil, fmt.Errorf("--trial-epochs %d: want at least 2", cfg.TrialEpochs)
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, err // before config.json, which a resume must be able to read
	}
	n := max(cfg.Restarts, 1)
	full := cfg.EpochsFor(src.Len())
	if cfg.TrialEpochs > full {
		// Validate saw cfg.Epochs; MaxSteps may have lowered it for these data.
		return nil, nil, fmt.Errorf("--trial-epochs %d: more than the %d epochs the run trains on %d rows", cfg.TrialEpochs, full, src.Len())
	}
	if dir != "" {
		trials := filepath.Join(dir, TrialsDir)
		if err := os.MkdirAll(trials, 0o755); err != nil {
			return nil, nil, fmt.Errorf("run folder: %w", err)
		}
		if err := WriteConfig(trials, cfg); err != nil {
			return nil, nil, err
		}
	}
	var steps *stepCounter
	if hooks.Progress != nil {
		steps = newStepCounter(new(sync.Mutex), hooks.Progress, n)
	}
	var best *Run
	var records []Restart
	for i := range n {
		if err := ctx.Err(); err != nil { // build no network for a trial that will not train
			if best != nil {
				goOn(best, cfg, records)
			}
			return best, records, err
		}
		c := cfg
		c.Seed = cfg.Seed + uint64(i)
		c.SetEpochs(cfg.TrialEpochs)
		c.EvalEvery, c.Restarts, c.TrialEpochs = 1, 1, 0
		trialDir := ""
		if dir != "" {
			trialDir = filepath.Join(dir, TrialsDir, fmt.Sprintf("seed-%d", c.Seed))
		}
		r, err := trainTrial(ctx, c, src, dev, steps, i, trialDir)
		if err != nil {
			if best != nil && ctx.Err() != nil {
				goOn(best, cfg, records)
				return best, records, err
			}
			best.closeIfAny()
			if ctx.Err() == nil {
				dropUnsavedTrials(dir)
			}
			return nil, nil, err
		}
		rec := Restart{Seed: c.Seed, Criteria: *r.History[len(r.History)-1].Criteria, ChosenEpoch: r.chosen.Epoch,
			EmptyClusters: r.chosen.Empty, SelfAgreement: r.chosen.Agreement, ACC: r.History[r.chosen.Epoch-1].ACC}
		records = append(records, rec)
		if hooks.Done != nil {
			hooks.Done(i, rec)
		}
		if best == nil || r.better(*r.chosen, *best.chosen) {
			best.closeIfAny()
			best = r
		} else {
			r.Close()
		}
	}
	goOn(best, cfg, records)
	return best, records, nil
}

// KeepTrial makes dir the folder of r, the trial TrainTrialsIn kept there, with dir's
// lock from LockDir (nil: take it now), saves it, and removes the trials' folders,
// which a resume no longer needs.
func (r *Run) KeepTrial(dir string, lock *os.File) error {
	if err := r.AttachLocked(dir, lock); err != nil {
		return err
	}
	if err := r.Save(); err != nil {
		return err
	}
	return RemoveTrials(dir)
}

// RemoveTrials removes the trials' folders of the run in dir: the files runs write
// there (RunFiles, their partial copies and locks), then the folders they leave
// empty. Anything else is the user's, and stays with the folders that hold it.
func RemoveTrials(dir string) error {
	trials := filepath.Join(dir, TrialsDir)
	seeds, err := filepath.Glob(filepath.Join(trials, "seed-*"))
	if err != nil {
		return err
	}
	for _, d := range append(seeds, trials) {
		if st, err := os.Lstat(d); err != nil || !st.IsDir() {
			continue // not a trial's folder (a file of the user's named seed-…), or gone
		}
		removeStale(d)
		for _, f := range append(slices.Clone(RunFiles), LockName) {
			if err := os.Remove(filepath.Join(d, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove the trials' folders: %w", err)
			}
		}
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotEmpty(err) {
			return fmt.Errorf("remove the trials' folders: %w", err)
		}
	}
	return nil
}

// dropUnsavedTrials removes dir's trials folder where no trial or restart in it has
// saved a checkpoint: a run that failed before any did (a setting refused, memory
// short) leaves nothing a resume could go on with, and with the folder gone the run
// folder goes as a failed run's does, free for the command again with other flags.
func dropUnsavedTrials(dir string) {
	if dir == "" {
		return
	}
	if saved, _ := filepath.Glob(filepath.Join(dir, TrialsDir, "seed-*", checkpointName)); len(saved) > 0 {
		return
	}
	RemoveTrials(dir) // the plan, config.json, with the rest
}

// isNotEmpty says whether err is a folder's removal refused for what it holds.
func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}

// StoppedInTrials says whether dir is a run stopped among its trials (or whole-run
// restarts, TrainRestartsIn): their folder, and no checkpoint of the run yet.
func StoppedInTrials(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, checkpointName)); err == nil {
		return false
	}
	st, err := os.Stat(filepath.Join(dir, TrialsDir))
	return err == nil && st.IsDir()
}

// detach lets go of the run's folder (a trial's), so that the run can be attached
// to another and go on there; what the folder holds stays.
func (r *Run) detach() {
	if r.lock != nil {
		r.lock.Close()
		r.lock = nil
	}
	r.Dir = ""
	r.chosenFile = 0 // written in the trial's folder: the next one must write its own
}

// goOn sets the kept trial r to go on to the epochs of cfg's own run, kept from records.
// It trains on as its seed's run would have: its own shuffles and augmentations
// (epochSeed), every other hyper-parameter cfg's. (Its chosen epoch may differ from
// that run's where cfg evaluates less often than every epoch, as trials do.)
func goOn(r *Run, cfg Config, records []Restart) {
	r.detach()
	r.Progress = nil // the trials' counter
	r.Restarts = records
	trained := len(records)
	// The epochs and evaluations of cfg's own run on these rows, as New resolves them.
	whole := cfg
	resolveEpochs(&whole, r.Src.Len())
	r.Cfg.Epochs, r.Cfg.MinSteps, r.Cfg.MaxSteps = whole.Epochs, cfg.MinSteps, cfg.MaxSteps
	r.Cfg.EvalEvery, r.Cfg.Restarts, r.Cfg.TrialEpochs = whole.EvalEvery, trained, cfg.TrialEpochs
}

// trainTrial trains one trial of cfg, its progress counted as trial i in steps, in
// dir when not "": from its checkpoint there, if it has one.
func trainTrial(ctx context.Context, cfg Config, src Source, dev torch.Device, steps *stepCounter, i int, dir string) (*Run, error) {
	var ckpt *torch.SafeFile
	if dir != "" {
		// Lstat: a link to nothing is read, and its error named, not trained over.
		if _, err := os.Lstat(filepath.Join(dir, checkpointName)); err == nil {
			if ckpt, _, _, err = ReadCheckpoint(dir); err != nil {
				// A trial's folder missing is trained again: say so, rather than leave
				// the whole run unable to resume over one damaged file.
				return nil, fmt.Errorf("trial %d (seed %d): %w (remove %s to train that trial again)", i+1, cfg.Seed, err, dir)
			}
			defer ckpt.Release() // where New fails before Restore
		}
	}
	r, err := New(cfg, src, dev, dir)
	if err != nil {
		return nil, fmt.Errorf("trial %d (seed %d): %w", i+1, cfg.Seed, err)
	}
	r.keepChosen = true
	if ckpt != nil {
		if err := r.Restore(ckpt); err != nil {
			r.Close()
			return nil, fmt.Errorf("trial %d (seed %d): %w", i+1, cfg.Seed, err)
		}
	}
	if steps != nil {
		r.Progress = &restartSteps{c: steps, j: i}
		if done := r.EpochsDone(); done > 0 {
			per := r.stepsPerEpoch()
			steps.restore(i, done*per, r.Cfg.Epochs*per)
		}
	}
	if r.EpochsDone() < r.Cfg.Epochs {
		if err := r.Train(ctx); err != nil {
			r.Close()
			return nil, fmt.Errorf("trial %d (seed %d): %w", i+1, cfg.Seed, err)
		}
	}
	if r.chosen == nil || r.chosen.Agreement == nil {
		r.Close()
		return nil, fmt.Errorf("trial %d (seed %d): no evaluation agreed with an earlier one", i+1, cfg.Seed)
	}
	return r, nil
}

// closeIfAny closes r unless it is nil.
func (r *Run) closeIfAny() {
	if r != nil {
		r.Close()
	}
}

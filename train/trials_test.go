package train

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"emclust/torch"
)

func TestTrialEpochsValidate(t *testing.T) {
	for _, tc := range []struct {
		trial, epochs int
		want          string // "" when valid
	}{
		{0, 10, ""},
		{2, 10, ""},
		{10, 10, ""},
		{1, 10, "--trial-epochs 1"},
		{-3, 10, "--trial-epochs -3"},
		{11, 10, "--trial-epochs 11"},
	} {
		cfg := ImageDefaults()
		cfg.Epochs, cfg.TrialEpochs = tc.epochs, tc.trial
		err := cfg.Validate()
		if tc.want == "" && err != nil {
			t.Errorf("trial %d of %d epochs: %v", tc.trial, tc.epochs, err)
		}
		if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("trial %d of %d epochs: error %v, want one naming %q", tc.trial, tc.epochs, err, tc.want)
		}
	}
}

// Trials keep the seed whose chosen epoch agreed most with its own earlier
// evaluations, and the kept trial goes on as that seed's run would have trained
// straight through: the same losses, weights and chosen epoch.
func TestTrainTrials(t *testing.T) {
	im := mnistSet(t, 128)
	src := imageSource(t, im)
	// One thread count for both runs, as in straightAndResumed.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := torch.SetNumThreads(runtime.NumCPU()); err != nil {
		t.Fatal(err)
	}
	cfg := imageConfig("twofold", 4, 32)
	cfg.EvalEvery, cfg.Restarts, cfg.TrialEpochs = 1, 3, 3

	var done []int
	var lastDone, lastTotal int
	hooks := RestartHooks{
		Done:     func(i int, _ Restart) { done = append(done, i) },
		Progress: func(d, total int) { lastDone, lastTotal = d, total },
	}
	kept, recs, err := TrainTrials(context.Background(), cfg, src, testDevice, hooks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kept.Close)
	if len(recs) != 3 || len(done) != 3 {
		t.Fatalf("%d records, %d done, want 3 each", len(recs), len(done))
	}
	steps := 3 * 3 * (im.N / cfg.BatchSize)
	if lastDone != steps || lastTotal != steps {
		t.Errorf("progress ended at %d of %d steps, want %d of %d", lastDone, lastTotal, steps, steps)
	}
	best := 0
	for i, r := range recs {
		if r.Seed != cfg.Seed+uint64(i) || r.SelfAgreement == nil || r.ACC == nil || r.ChosenEpoch < 2 || r.ChosenEpoch > 3 {
			t.Fatalf("trial %d: %+v, want seed %d, an agreement and ACC, chosen epoch 2 or 3", i+1, r, cfg.Seed+uint64(i))
		}
		if b := recs[best]; r.EmptyClusters < b.EmptyClusters || (r.EmptyClusters == b.EmptyClusters && *r.SelfAgreement > *b.SelfAgreement) {
			best = i
		}
	}
	if kept.Cfg.Seed != recs[best].Seed {
		t.Fatalf("kept seed %d; seed %d left fewest clusters empty and agreed most with itself (%+v)", kept.Cfg.Seed, recs[best].Seed, recs)
	}
	if kept.EpochsDone() != 3 || kept.Cfg.Epochs != 4 || kept.Cfg.Restarts != 3 || kept.Cfg.TrialEpochs != 3 {
		t.Fatalf("kept run: %d epochs done, to %d, restarts %d, trial epochs %d; want 3, 4, 3, 3",
			kept.EpochsDone(), kept.Cfg.Epochs, kept.Cfg.Restarts, kept.Cfg.TrialEpochs)
	}
	dir := t.TempDir()
	if err := kept.Attach(dir); err != nil {
		t.Fatal(err)
	}
	if err := kept.Save(); err != nil {
		t.Fatal(err)
	}
	if err := kept.Train(context.Background()); err != nil {
		t.Fatal(err)
	}

	one := cfg
	one.Seed, one.Restarts, one.TrialEpochs = kept.Cfg.Seed, 1, 0
	straight := newRun(t, one, src, t.TempDir())
	if err := straight.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameLosses(t, straight, kept, 4, "after a trial")
	s := torch.NoGrad()
	defer s.Close()
	sameBits(t, s, "parameter", "after a trial", straight.Net.Params(), kept.Net.Params())
	sameBits(t, s, "buffer", "after a trial", straight.Net.Buffers(), kept.Net.Buffers())
	sc, kc := straight.Chosen(), kept.Chosen()
	if sc == nil || kc == nil || sc.Epoch != kc.Epoch || *sc.Agreement != *kc.Agreement {
		t.Fatalf("chosen %+v straight vs %+v after a trial", sc, kc)
	}
	// The trial's chosen epoch, if earlier than the last, is the file's model.
	path := filepath.Join(dir, ChosenName)
	if _, err := os.Stat(path); (err == nil) != (kc.Epoch < 4) {
		t.Fatalf("chosen epoch %d of 4, %s: %v", kc.Epoch, ChosenName, err)
	}
	if kc.Epoch < 4 {
		if got, want := modelCriteria(t, path, kept), *kept.History[kc.Epoch-1].Criteria; !criteriaNear(got, want) {
			t.Errorf("%s scores %+v; its epoch %d scored %+v", ChosenName, got, kc.Epoch, want)
		}
	}
}

// Trials longer than the run, once MaxSteps has cut its epochs for the data, are
// refused before any trains.
func TestTrainTrialsLongerThanRun(t *testing.T) {
	im := mnistSet(t, 64)
	src := imageSource(t, im)
	cfg := imageConfig("em", 10, 32)
	cfg.Restarts, cfg.TrialEpochs, cfg.MaxSteps = 2, 5, 3 // 2 steps an epoch: 2 epochs
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the config alone should pass: %v", err)
	}
	kept, _, err := TrainTrials(context.Background(), cfg, src, testDevice, RestartHooks{})
	if err == nil || !strings.Contains(err.Error(), "--trial-epochs 5") || !strings.Contains(err.Error(), "the 2 epochs") {
		t.Errorf("error %v, want trial epochs 5 refused against the 2 epochs", err)
	}
	if kept != nil {
		kept.Close()
		t.Error("a run came back")
	}
}

// An interrupt keeps the best trial of those that finished, set to go on.
func TestTrainTrialsInterrupted(t *testing.T) {
	im := mnistSet(t, 64)
	src := imageSource(t, im)
	cfg := imageConfig("em", 5, 32)
	cfg.Restarts, cfg.TrialEpochs = 3, 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kept, recs, err := TrainTrials(ctx, cfg, src, testDevice, RestartHooks{Done: func(int, Restart) { cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want the context's", err)
	}
	if kept == nil || len(recs) != 1 {
		t.Fatalf("kept %v with %d records, want the first trial", kept, len(recs))
	}
	defer kept.Close()
	if kept.Cfg.Seed != cfg.Seed || kept.EpochsDone() != 2 || kept.Cfg.Epochs != 5 || kept.Cfg.Restarts != 1 {
		t.Errorf("kept seed %d after %d epochs, to %d, of %d trials; want seed %d after 2, to 5, of 1",
			kept.Cfg.Seed, kept.EpochsDone(), kept.Cfg.Epochs, kept.Cfg.Restarts, cfg.Seed)
	}
}

// Trials in a folder survive an interrupt: called again, TrainTrialsIn takes the
// trial that finished from its checkpoint, goes on with the one stopped, trains the
// last, and keeps what one uninterrupted call keeps, to the bit.
func TestTrainTrialsResumed(t *testing.T) {
	im := mnistSet(t, 64)
	src := imageSource(t, im)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := torch.SetNumThreads(runtime.NumCPU()); err != nil {
		t.Fatal(err)
	}
	cfg := imageConfig("em", 5, 32)
	cfg.Restarts, cfg.TrialEpochs = 3, 2 // 2 steps an epoch, 4 a trial

	straight, want, err := TrainTrials(context.Background(), cfg, src, testDevice, RestartHooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer straight.Close()

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stop := RestartHooks{Progress: func(done, _ int) {
		if done >= 6 { // the second trial's first epoch
			cancel()
		}
	}}
	first, _, err := TrainTrialsIn(ctx, cfg, src, testDevice, dir, stop)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want the context's", err)
	}
	first.closeIfAny()
	for _, seed := range []int{1, 2} {
		if _, err := os.Stat(filepath.Join(dir, TrialsDir, fmt.Sprintf("seed-%d", seed), checkpointName)); err != nil {
			t.Fatalf("trial of seed %d left no checkpoint: %v", seed, err)
		}
	}

	// A damaged trial's checkpoint is named, with the way on.
	damagedSeed2(t, dir, "trial", func() (*Run, []Restart, error) {
		return TrainTrialsIn(context.Background(), cfg, src, testDevice, dir, RestartHooks{})
	})

	var firstCount, last [2]int // the resumed call's counts: the restored trials' steps are not this call's
	resumed, got, err := TrainTrialsIn(context.Background(), cfg, src, testDevice, dir, RestartHooks{Progress: func(done, total int) {
		if firstCount == [2]int{} {
			firstCount = [2]int{done, total}
		}
		last = [2]int{done, total}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	if firstCount[0] != 0 || last[0] != last[1] || last[1] < 4 || last[1] > 12-4-2 {
		t.Errorf("resumed trials counted %v first and %v last; want 0 first, and at the end all of at most the 6 steps the first trial and a half left", firstCount, last)
	}
	if len(got) != len(want) {
		t.Fatalf("%d trials resumed, %d straight", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		if w.Seed != g.Seed || w.ChosenEpoch != g.ChosenEpoch || *w.SelfAgreement != *g.SelfAgreement {
			t.Errorf("trial %d: %+v resumed, %+v straight", i+1, g, w)
		}
	}
	if resumed.Cfg.Seed != straight.Cfg.Seed || resumed.Dir != "" || resumed.EpochsDone() != 2 || resumed.Cfg.Epochs != 5 {
		t.Fatalf("kept seed %d in %q after %d epochs, to %d; want seed %d without a folder, after 2, to 5",
			resumed.Cfg.Seed, resumed.Dir, resumed.EpochsDone(), resumed.Cfg.Epochs, straight.Cfg.Seed)
	}
	s := torch.NoGrad()
	defer s.Close()
	sameBits(t, s, "parameter", "resumed", straight.Net.Params(), resumed.Net.Params())
	sameBits(t, s, "buffer", "resumed", straight.Net.Buffers(), resumed.Net.Buffers())
}

// damagedSeed2 cuts dir's seed-2 trial or restart (what) checkpoint in half, then
// makes it a link to nothing, checks each time that call names it and the way on, and
// puts it back.
func damagedSeed2(t *testing.T, dir, what string, call func() (*Run, []Restart, error)) {
	t.Helper()
	seed2 := filepath.Join(dir, TrialsDir, "seed-2")
	ckpt2, err := os.ReadFile(filepath.Join(seed2, checkpointName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(seed2, checkpointName), ckpt2[:len(ckpt2)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(damage string) {
		if r, _, err := call(); err == nil || !strings.Contains(err.Error(), what+" 2 (seed 2)") ||
			!strings.Contains(err.Error(), "(remove "+seed2+" to train that "+what+" again)") {
			r.closeIfAny()
			t.Fatalf("a %s %s: %v", damage, what, err)
		}
	}
	check("damaged")
	os.Remove(filepath.Join(seed2, checkpointName))
	if err := os.Symlink(filepath.Join(dir, "gone"), filepath.Join(seed2, checkpointName)); err != nil {
		t.Fatal(err)
	}
	check("linked to nothing")
	os.Remove(filepath.Join(seed2, checkpointName))
	if err := os.WriteFile(filepath.Join(seed2, checkpointName), ckpt2, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A run detached from its trial's folder has written no chosen model where it goes
// next: the kept trial's chosen.safetensors was in its own folder, which the run
// removes, and a save in the run folder skipped it as written.
func TestDetachForgetsChosenFile(t *testing.T) {
	r := &Run{Dir: "trials/seed-1", chosenFile: 3}
	r.detach()
	if r.Dir != "" || r.chosenFile != 0 {
		t.Errorf("detached run: folder %q, chosen file of epoch %d; want none and none", r.Dir, r.chosenFile)
	}
}

// The trial kept goes on to the epochs and evaluations New gives its seed's own run:
// epochs raised to make MinSteps evaluate as often as the epochs asked for would have.
func TestGoOnResolvesAsNew(t *testing.T) {
	src := digitsSource(t)
	cfg := VectorDefaults() // 30 epochs of 14 steps, raised to 72 for 1000 steps
	cfg.EvalEvery, cfg.Restarts, cfg.TrialEpochs = 1, 2, 3
	whole := newRun(t, cfg, src, "")
	kept := &Run{Src: src, Cfg: cfg}
	goOn(kept, cfg, make([]Restart, 2))
	if kept.Cfg.Epochs != whole.Cfg.Epochs || kept.Cfg.EvalEvery != whole.Cfg.EvalEvery {
		t.Errorf("kept trial goes on to %d epochs evaluating every %d; its seed's run trains %d, every %d",
			kept.Cfg.Epochs, kept.Cfg.EvalEvery, whole.Cfg.Epochs, whole.Cfg.EvalEvery)
	}
	if whole.Cfg.Epochs != 72 || whole.Cfg.EvalEvery != 2 {
		t.Errorf("the run: %d epochs, every %d; want 72, every 2", whole.Cfg.Epochs, whole.Cfg.EvalEvery)
	}
}

// The trials' folders go with the files runs write there; a file of the user's stays,
// with the folders that hold it.
func TestRemoveTrials(t *testing.T) {
	write := func(dir string, names ...string) {
		for _, n := range names {
			p := filepath.Join(dir, n)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ours := []string{"trials/config.json", "trials/seed-1/checkpoint.safetensors", "trials/seed-1/metrics.jsonl",
		"trials/seed-1/.lock", "trials/seed-1/.checkpoint.safetensors.tmp123", "trials/seed-2/config.json", "trials/seed-2/chosen.safetensors"}

	dir := t.TempDir()
	write(dir, ours...)
	if err := RemoveTrials(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, TrialsDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the trials' folder of run files only stayed: %v", err)
	}

	dir = t.TempDir()
	mine := []string{"trials/mine.txt", "trials/seed-2/notes.txt", "trials/seed-2/report/index.html"}
	write(dir, append(ours, mine...)...)
	if err := RemoveTrials(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range mine {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the user's %s went: %v", f, err)
		}
	}
	for _, f := range ours {
		if _, err := os.Stat(filepath.Join(dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s stayed: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "trials", "seed-1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the emptied trials/seed-1 stayed: %v", err)
	}
}

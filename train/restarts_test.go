package train

import (
	"context"
	"testing"
)

// TrainRestarts trains one run per seed from cfg.Seed on and keeps the one whose
// criteria are best; the kept run is whole (its criteria are those of its restart).
func TestTrainRestarts(t *testing.T) {
	src := digitsSource(t)
	cfg := VectorDefaults()
	cfg.MinSteps = 0 // the epochs as set
	cfg.Epochs, cfg.EvalEvery, cfg.Seed, cfg.Restarts = 2, 1, 7, 3
	var heard []uint64
	r, all, err := TrainRestarts(context.Background(), cfg, src, testDevice, func(i int, rs Restart) {
		if i != len(heard) {
			t.Errorf("restart %d reported as %d", len(heard), i)
		}
		heard = append(heard, rs.Seed)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(all) != 3 || len(heard) != 3 {
		t.Fatalf("%d restarts, %d reported; want 3", len(all), len(heard))
	}
	best := all[0]
	for i, rs := range all {
		if rs.Seed != cfg.Seed+uint64(i) || heard[i] != rs.Seed {
			t.Errorf("restart %d has seed %d (reported %d), want %d", i, rs.Seed, heard[i], cfg.Seed+uint64(i))
		}
		if rs.Criteria.Better(best.Criteria) {
			best = rs
		}
	}
	if r.Cfg.Seed != best.Seed || r.EpochsDone() != 2 {
		t.Fatalf("kept seed %d after %d epochs, want seed %d (max posterior %.4f) after 2", r.Cfg.Seed, r.EpochsDone(), best.Seed, best.Criteria.MaxPosterior)
	}
	// Only the last epoch was scored.
	if h := r.History; len(h) != 2 || h[0].ACC != nil || h[1].ACC == nil || r.Cfg.EvalEvery != 0 {
		t.Errorf("kept run: eval-every %d, %d epochs, scored %v; want 0, 2, the last only", r.Cfg.EvalEvery, len(h), []bool{len(h) > 0 && h[0].ACC != nil, len(h) > 1 && h[1].ACC != nil})
	}
	pred, err := PredictWithCriteria(r.Net, src, r.Dev, r.Prior(), r.Cfg.GammaVal)
	if err != nil {
		t.Fatal(err)
	}
	if *pred.Criteria != best.Criteria {
		t.Errorf("kept run's criteria %+v, want its restart's %+v", *pred.Criteria, best.Criteria)
	}
	if err := r.Attach(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if err := r.Attach(t.TempDir()); err == nil {
		t.Error("a run was attached to a second folder")
	}
}

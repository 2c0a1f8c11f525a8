package train

import (
	"context"
	"fmt"

	"emclust/torch"
)

// Restart is one of the runs TrainRestarts trained: its seed and criteria.
type Restart struct {
	Seed     uint64   `json:"seed"`
	Criteria Criteria `json:"criteria"`
}

// TrainRestarts trains max(cfg.Restarts, 1) runs, of seeds cfg.Seed, cfg.Seed+1, ...,
// without a run folder and scoring only their last epoch, and returns the one whose
// criteria Better prefers, and every restart's seed and criteria. The caller owns the returned run (Attach gives it a
// folder); the others are closed. done, if not nil, hears of each restart as it ends.
func TrainRestarts(ctx context.Context, cfg Config, src Source, dev torch.Device, done func(i int, r Restart)) (*Run, []Restart, error) {
	n := max(cfg.Restarts, 1)
	var best *Run
	var bestCrit Criteria
	var all []Restart
	for i := range n {
		c := cfg
		c.Seed = cfg.Seed + uint64(i)
		// Only the last epoch is scored: the criteria choose, and scoring every
		// epoch of runs that are mostly dropped took 3/4 of the time (10 restarts
		// of the digits: 12.8 s against 3.2 s).
		c.EvalEvery = 0
		r, err := New(c, src, dev, "")
		if err != nil {
			best.closeIfSet()
			return nil, nil, err
		}
		if err := r.Train(ctx); err != nil {
			r.Close()
			best.closeIfSet()
			return nil, nil, fmt.Errorf("restart %d (seed %d): %w", i+1, c.Seed, err)
		}
		pred, err := PredictWithCriteria(r.Net, src, dev, r.prior, r.Cfg.GammaVal)
		if err != nil {
			r.Close()
			best.closeIfSet()
			return nil, nil, err
		}
		all = append(all, Restart{Seed: c.Seed, Criteria: *pred.Criteria})
		if done != nil {
			done(i, all[i])
		}
		if best == nil || pred.Criteria.Better(bestCrit) {
			best.closeIfSet()
			best, bestCrit = r, *pred.Criteria
		} else {
			r.Close()
		}
	}
	// The kept run's config names its own seed, which a resume's later epochs draw
	// from, and the count of restarts it won over.
	return best, all, nil
}

func (r *Run) closeIfSet() {
	if r != nil {
		r.Close()
	}
}

// Better reports whether a clustering with criteria c is to be kept over one with o:
// the higher mean max posterior. Of the criteria, it ranked 20 seeds closest to their
// ACC on digits, iris, wine and breast cancer (scripts/study/restart_criteria.py,
// docs/RESULTS.md section 14); the EM objective and the log-likelihood did worse.
func (c Criteria) Better(o Criteria) bool { return c.MaxPosterior > o.MaxPosterior }

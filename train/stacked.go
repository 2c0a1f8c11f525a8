package train

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"time"

	"emclust/loss"
	"emclust/model"
	"emclust/torch"
)

// stackable reports whether restarts of cfg on src train stacked (trainStacked):
// the EM objective on vectors, one head, float32, on one process.
func stackable(cfg Config, src Source) bool {
	_, vectors := src.(*VectorSource)
	return vectors && cfg.Objective == "em" && cfg.Heads <= 1 && cfg.Compute().Precision != "bf16" && cfg.WorldSize <= 1
}

// restartError is an error of one restart of a stack: the i-th.
type restartError struct {
	i   int
	err error
}

func (e *restartError) Error() string { return e.err.Error() }
func (e *restartError) Unwrap() error { return e.err }

// trainStacked trains runs, fresh restarts of one network that differ in their seeds
// alone, through all their epochs as one model.Stacked, and leaves each run as Train
// would have: its parameters, running statistics, prior, optimiser state, history and
// last evaluation. Each restart draws its own batches, in the order its own epochs
// would (epochOrder), and its loss is its own batch's, so each computes what it would
// alone, up to the order of float sums in the batched products. Each run's Progress
// hears its epochs start and its steps as they go, and their ends after the last.
//
// The runs must not evaluate before their last epoch (EvalEvery 0) nor have a
// folder: their networks hold the stacked weights only at the end. Cancelling ctx
// stops after the current step, and no run finishes. An error of one restart, such as
// the first whose epoch loss is not finite, is a *restartError.
func trainStacked(ctx context.Context, runs []*Run) error {
	cfg := runs[0].Cfg
	if !stackable(cfg, runs[0].Src) {
		return fmt.Errorf("stacked training: objective %s, %d heads, %s: only the EM objective on vectors with one head in fp32 stacks",
			cfg.Objective, max(cfg.Heads, 1), cfg.Compute())
	}
	nets := make([]*model.Net, len(runs))
	for i, r := range runs {
		c := r.Cfg
		c.Seed = cfg.Seed
		if !reflect.DeepEqual(c, cfg) || r.Src != runs[0].Src {
			return &restartError{i, fmt.Errorf("stacked training: the restarts differ in more than their seeds")}
		}
		if r.epoch != 0 || r.Cfg.EvalEvery != 0 || r.Dir != "" {
			return &restartError{i, fmt.Errorf("stacked training needs a fresh run without a folder")}
		}
		nets[i] = r.Net
	}
	st, err := model.Stack(nets)
	if err != nil {
		return err
	}
	defer st.Close()
	lrs := make([]float64, len(st.Params()))
	for i := range lrs {
		lrs[i] = cfg.LR
	}
	opt, err := torch.NewAdam(st.Params(), lrs, torch.AdamConfig{})
	if err != nil {
		return err
	}
	defer opt.Close()

	// The learned priors, R×1×K.
	keep := torch.NoGrad()
	defer keep.Close()
	var prior *torch.Tensor
	if runs[0].prior != nil {
		priors := make([]*torch.Tensor, len(runs))
		for i, r := range runs {
			priors[i] = r.prior
		}
		prior = keep.Stack(0, priors...)
	}
	if err := keep.Err(); err != nil {
		return err
	}

	history := make([][]EpochMetrics, len(runs))
	for epoch := range cfg.Epochs {
		ms, err := stackedEpoch(ctx, runs, st, opt, prior, epoch)
		if err != nil {
			return err
		}
		for i := range runs {
			history[i] = append(history[i], ms[i])
		}
	}

	// Each run as if it had trained alone.
	if err := st.Unstack(nets); err != nil {
		return err
	}
	s := torch.NoGrad()
	defer s.Close()
	type moments struct {
		avg, avgSq *torch.Tensor
		step       int64
	}
	state := make([]moments, len(st.Params()))
	for j := range state {
		state[j].avg, state[j].avgSq, state[j].step = opt.State(s, j)
	}
	for i, r := range runs {
		if prior != nil {
			s.CopyInto(r.prior, s.Reshape(s.Narrow(prior, 0, i, 1), 1, cfg.K))
		}
		for j, m := range state {
			if s.Err() == nil {
				s.Fail(r.optA.SetState(j, st.Part(s, m.avg, j, i), st.Part(s, m.avgSq, j, i), m.step))
			}
		}
		if err := s.Err(); err != nil {
			return &restartError{i, err}
		}
		for _, m := range history[i] {
			if err := r.endEpoch(m); err != nil {
				return &restartError{i, err}
			}
		}
	}
	return nil
}

// stackedEpoch is one epoch of every run in st, as trainEpoch makes one of each: its
// steps and, for each run, its metrics.
func stackedEpoch(ctx context.Context, runs []*Run, st *model.Stacked, opt *torch.Adam, prior *torch.Tensor, epoch int) ([]EpochMetrics, error) {
	cfg := &runs[0].Cfg
	n, batch, rs := runs[0].Src.Len(), cfg.BatchSize, len(runs)
	steps := n / batch
	ep := torch.NoGrad()
	defer ep.Close()
	// Row i is restart i's order, copied in one restart at a time: on a table of
	// millions of rows a host copy of all of them would hold as much again. On the
	// CPU, where stacks train (index_select takes either there), they are int32 in
	// half the room.
	dt := torch.Int64
	if n <= math.MaxInt32 && !runs[0].Src.IndexDevice().CUDA {
		dt = torch.Int32
	}
	orderT := ep.Empty([]int{rs, n}, dt, runs[0].Src.IndexDevice())
	perm := make([]int64, n)
	for i, r := range runs {
		r.epochOrder(perm, epochSeed(r.Cfg.Seed, epoch))
		s := torch.NoGrad()
		s.CopyInto(s.Narrow(orderT, 0, i, 1), s.FromInt64(perm, []int{1, n}, runs[0].Src.IndexDevice()))
		if err := s.Close(); err != nil {
			return nil, err
		}
	}
	lossSum := ep.Zeros([]int{rs}, torch.Float32, runs[0].Dev)
	hSum := ep.Zeros([]int{rs, cfg.K}, torch.Float32, runs[0].Dev)
	if err := ep.Err(); err != nil {
		return nil, err
	}
	for _, r := range runs {
		if r.Progress != nil {
			r.Progress.Start(epoch+1, cfg.Epochs, steps)
		}
	}
	start := time.Now()
	for step := range steps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("epoch %d: %w", epoch+1, err)
		}
		s := torch.NewScope()
		idx := s.Reshape(s.Narrow(orderT, 1, step*batch, batch), rs*batch)
		x, _ := runs[0].Src.Batch(s, idx, nil)
		a := st.Forward(s, s.Reshape(x, rs, batch, st.Spec.In), true)
		var logPrior *torch.Tensor
		if prior != nil {
			logPrior = s.Log(prior)
		}
		// loss.EM per restart, over its own batch.
		p := loss.Posterior(s, a, logPrior)
		perRun := s.DivScalar(s.Neg(s.Sum(s.Mul(p, loss.LogLikelihood(s, a, cfg.GammaVal)), false, 1, 2)), float64(batch))
		h := batchMeanH(s, a, cfg.GammaVal, 1)
		// The sum's gradient in each restart's weights is that of its own loss.
		if s.Err() == nil {
			s.Fail(opt.ZeroGrad())
			s.Backward(s.Sum(perRun, false))
		}
		if s.Err() == nil {
			s.Fail(opt.Step())
		}
		if prior != nil {
			updatePrior(s, prior, s.Mean(p, true, 1))
		}
		lossSum = swap(ep, lossSum, s.Add(lossSum, s.Detach(perRun)))
		hSum = swap(ep, hSum, s.Add(hSum, h))
		if err := s.Close(); err != nil {
			return nil, err
		}
		for _, r := range runs {
			if r.Progress != nil {
				r.Progress.Step(step+1, 0, false)
			}
		}
	}
	losses := ep.Float32s(lossSum)
	hs := ep.Float32s(ep.DivScalar(hSum, float64(steps)))
	if err := ep.Err(); err != nil {
		return nil, err
	}
	seconds := time.Since(start).Seconds()
	ms := make([]EpochMetrics, rs)
	for i, r := range runs {
		m := EpochMetrics{Epoch: epoch + 1, Steps: steps, Loss: float64(losses[i]) / float64(steps), Seconds: seconds}
		m.HMean = make([]float64, cfg.K)
		for j := range m.HMean {
			m.HMean[j] = round6(float64(hs[i*cfg.K+j]))
		}
		if err := r.diverged(m.Loss); err != nil {
			return nil, &restartError{i, fmt.Errorf("epoch %d: %w", epoch+1, err)}
		}
		ms[i] = m
	}
	return ms, nil
}

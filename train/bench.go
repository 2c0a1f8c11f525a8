package train

import (
	"fmt"
	"time"

	"emclust/torch"
)

// BenchResult is the speed of training steps on one device.
type BenchResult struct {
	Arch         string  `json:"arch"`
	Objective    string  `json:"objective"`
	Device       string  `json:"device"`
	Batch        int     `json:"batch"`
	Steps        int     `json:"steps"`
	StepMS       float64 `json:"ms_per_step"`
	StepsPerSec  float64 `json:"steps_per_second"`
	ImagesPerSec float64 `json:"rows_per_second"`
	EpochRows    int     `json:"epoch_rows"`
	EpochSeconds float64 `json:"epoch_seconds"` // EpochRows/Batch steps at the measured rate
	PeakBytes    int64   `json:"peak_device_bytes"`
	Params       int     `json:"params"`
	Threads      int     `json:"cpu_threads"`
}

// Bench times steps training steps (after warmup ones) of cfg on src. It waits for the
// device only at the ends, as training does.
func Bench(cfg Config, src Source, dev torch.Device, warmup, steps, epochRows int) (*BenchResult, error) {
	r, err := New(cfg, src, dev, "")
	if err != nil {
		return nil, err
	}
	defer r.Close()
	n := src.Len()
	bs := r.Cfg.BatchSize
	ep := torch.NoGrad()
	defer ep.Close()
	perm := ep.RandPerm(n, dev)
	if err := ep.Err(); err != nil {
		return nil, err
	}
	run := func(count int) error {
		for i := 0; i < count; i++ {
			s := torch.NewScope()
			off := (i * bs) % (n - bs + 1)
			idx := s.Narrow(perm, 0, off, bs)
			r.step(s, idx)
			if err := s.Close(); err != nil {
				return err
			}
		}
		return torch.Synchronize(dev)
	}
	if err := run(warmup); err != nil {
		return nil, err
	}
	if err := torch.ResetPeakMemory(dev); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := run(steps); err != nil {
		return nil, err
	}
	el := time.Since(start).Seconds()
	if steps == 0 || el == 0 {
		return nil, fmt.Errorf("bench: no steps timed")
	}
	res := &BenchResult{
		Arch: r.Spec.Arch, Objective: cfg.Objective, Device: dev.String(), Batch: bs, Steps: steps,
		StepMS: 1000 * el / float64(steps), StepsPerSec: float64(steps) / el,
		ImagesPerSec: float64(steps*bs) / el, EpochRows: epochRows,
		PeakBytes: torch.PeakMemory(dev), Params: r.Net.NumParams(), Threads: torch.NumThreads(),
	}
	res.EpochSeconds = float64(epochRows/bs) / res.StepsPerSec
	return res, nil
}

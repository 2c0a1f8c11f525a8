package train

import (
	"fmt"
	"syscall"
	"time"

	"emclust/torch"
)

// BenchResult is the speed of training steps on one device.
type BenchResult struct {
	Arch         string  `json:"arch"`
	Objective    string  `json:"objective"`
	Device       string  `json:"device"`
	Precision    string  `json:"precision"`
	ChannelsLast bool    `json:"channels_last"`
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
	// GFLOPPerStep is the network's arithmetic in one training step (see StepFLOPs);
	// AchievedTFLOPS is that over the measured step time.
	GFLOPPerStep   float64 `json:"gflop_per_step"`
	AchievedTFLOPS float64 `json:"achieved_tflops"`
	// FaultsPerStep is the process's minor page faults per timed step: memory the
	// allocator gave back and the step touched again (see torch.KeepFreedMemory).
	FaultsPerStep float64 `json:"minor_faults_per_step"`
}

// minorFaults is the process's minor page-fault count, -1 where unknown.
func minorFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return ru.Minflt
}

// ForwardEquivalents is the work of one training step of objective in forward passes
// of the batch: a forward that backpropagates counts 3 (its backward computes the
// gradients of both the activations and the weights, about twice the forward), a
// forward without a graph counts 1.
//
//	em        forward x with grad                                       3
//	em-aug    forward x and T(x) with grad                              6
//	iic       forward x and T(x) with grad                              6
//	twofold   EM step: x and T(x) with grad (6); KL step: x without
//	          grad (1), T(x) with grad (3)                             10
//
// It slightly overstates the backward: the first layer needs no input gradient.
func ForwardEquivalents(objective string) int {
	o, _ := LookupObjective(objective)
	return o.ForwardEquivalents
}

// StepFLOPs is the network's FLOPs in one training step: per-input forward FLOPs
// (model.Net.ForwardFLOPs) × batch × ForwardEquivalents. Optimiser updates, losses and
// the augmentation and Sobel preprocessing are not counted.
func StepFLOPs(forwardPerInput int64, batch int, objective string) int64 {
	return forwardPerInput * int64(batch) * int64(ForwardEquivalents(objective))
}

// Bench times steps training steps (after warmup ones) of cfg on src. It waits for the
// device only at the ends, as training does.
func Bench(cfg Config, src Source, dev torch.Device, warmup, steps, epochRows int) (*BenchResult, error) {
	r, err := New(cfg, src, dev, "")
	if err != nil {
		return nil, err
	}
	defer r.Close()
	defer r.oneThreadForSmallSteps()()
	defer oneBLASThreadForConvolutions(r.Net, r.Dev)()
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
	start, faults := time.Now(), minorFaults()
	if err := run(steps); err != nil {
		return nil, err
	}
	el := time.Since(start).Seconds()
	faults = minorFaults() - faults
	if steps == 0 || el == 0 {
		return nil, fmt.Errorf("bench: no steps timed")
	}
	res := &BenchResult{
		Arch: r.Spec.Arch, Objective: cfg.Objective, Device: dev.String(), Batch: bs, Steps: steps,
		Precision: r.Net.Compute().Precision, ChannelsLast: r.Net.Compute().ChannelsLast,
		StepMS: 1000 * el / float64(steps), StepsPerSec: float64(steps) / el,
		ImagesPerSec: float64(steps*bs) / el, EpochRows: epochRows,
		PeakBytes: torch.PeakMemory(dev), Params: r.Net.NumParams(), Threads: torch.NumThreads(),
	}
	res.EpochSeconds = float64(epochRows/bs) / res.StepsPerSec
	res.FaultsPerStep = float64(faults) / float64(steps)
	flops := float64(StepFLOPs(r.Net.ForwardFLOPs(), bs, cfg.Objective))
	res.GFLOPPerStep = flops / 1e9
	res.AchievedTFLOPS = flops * res.StepsPerSec / 1e12
	return res, nil
}

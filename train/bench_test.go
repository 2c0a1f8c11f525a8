package train

import (
	"context"
	"runtime"
	"testing"

	"emclust/torch"
)

// BenchmarkStepMLPDigits times one EM training step of the paper's vector setting
// (MLP 2×32, batch 128) on the embedded digits, on the CPU.
func BenchmarkStepMLPDigits(b *testing.B) {
	// As the emclust binary does: libtorch calls from one OS thread, one OpenMP team.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	src := digitsSource(b)
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	r, err := New(cfg, src, testDevice, "")
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	s := torch.NoGrad()
	defer s.Close()
	perm := s.RandPerm(src.Len(), testDevice)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st := torch.NewScope()
		idx := st.Narrow(perm, 0, (i*128)%(src.Len()-128), 128)
		r.step(st, idx)
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

// BenchmarkTenRestartsDigits trains ten fresh restarts of the digits MLP for one
// epoch (14 steps each) and evaluates them, on one thread: one after another, and
// stacked as one network (trainStacked).
func BenchmarkTenRestartsDigits(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer torch.SetNumThreads(torch.NumThreads())
	if err := torch.SetNumThreads(1); err != nil {
		b.Fatal(err)
	}
	src := digitsSourceOn(b, torch.CPU)
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps, cfg.Epochs, cfg.HiddenAuto, cfg.EvalEvery = 0, 0, 1, false, 0 // as restarts train
	for _, stacked := range []bool{false, true} {
		name := map[bool]string{false: "alone", true: "stacked"}[stacked]
		b.Run(name, func(b *testing.B) {
			for range b.N {
				runs := make([]*Run, 10)
				for i := range runs {
					c := cfg
					c.Seed = uint64(i + 1)
					r, err := New(c, src, torch.CPU, "")
					if err != nil {
						b.Fatal(err)
					}
					runs[i] = r
				}
				var err error
				if stacked {
					err = trainStacked(context.Background(), runs)
				}
				for _, r := range runs {
					if !stacked && err == nil {
						err = r.Train(context.Background())
					}
					r.Close()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

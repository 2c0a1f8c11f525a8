package train

import (
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
	cfg.MinSteps = 0 // the epochs as set
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

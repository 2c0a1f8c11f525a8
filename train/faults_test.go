package train

import (
	"os"
	"runtime"
	"slices"
	"testing"

	"emclust/torch"
)

// The binary does its libtorch work on the main OS thread (cmd/emclust), where glibc's
// malloc uses the main arena, the one KeepFreedMemory's settings keep from shrinking;
// another thread's arena still unmaps whole heaps. onMainThread runs f there, so the
// page-fault test measures what the binary does.
var mainThread = make(chan func())

func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	torch.AllowInProcessRanks() // the dist tests' ranks share this process
	done := make(chan int)
	go func() { done <- m.Run() }()
	for {
		select {
		case f := <-mainThread:
			f()
		case code := <-done:
			os.Exit(code)
		}
	}
}

// f must not call t.Fatal: runtime.Goexit there would end the loop in TestMain and
// hang every test after.
func onMainThread(f func()) {
	finished := make(chan struct{})
	mainThread <- func() { defer close(finished); f() }
	<-finished
}

// A CPU training step reuses its memory: after warm-up the median step costs at most
// 1 000 minor page faults, for the MLP and for each CNN objective. Without KeepFreedMemory glibc
// unmaps a step's large buffers at free and faults them in again on the next step
// (about 40 000 faults per MNIST twofold step at batch 128). A count, not a time: the
// same on any machine. Always on the CPU, whatever EMCLUST_TEST_DEVICE says.
func TestStepPageFaults(t *testing.T) {
	if !torch.KeepFreedMemory() {
		t.Fatal("glibc refused the malloc settings")
	}
	const warmup, steps, maxPerStep = 3, 10, 1000
	images := synthImages(11, 256, 1, 28)
	for _, tc := range []struct {
		name   string
		cfg    Config
		images bool
	}{
		{"mlp em", VectorDefaults(), false},
		{"mnist em", imageConfig("em", 1, 128), true},
		{"mnist em-aug", imageConfig("em-aug", 1, 128), true},
		{"mnist twofold", imageConfig("twofold", 1, 128), true},
		{"mnist iic", imageConfig("iic", 1, 128), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var src Source
			if tc.images {
				s, err := NewImageSource(images, torch.CPU)
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				src = s
			} else {
				src = digitsSourceOn(t, torch.CPU)
			}
			r, err := New(tc.cfg, src, torch.CPU, "")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			bs := r.Cfg.BatchSize
			step := func() error {
				s := torch.NewScope()
				r.step(s, s.Arange(bs, torch.Int64, torch.CPU))
				return s.Close()
			}
			perStep := make([]int64, steps)
			onMainThread(func() {
				for i := 0; i < warmup && err == nil; i++ {
					err = step()
				}
				for i := 0; i < steps && err == nil; i++ {
					f0 := minorFaults()
					err = step()
					perStep[i] = minorFaults() - f0
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			// Churn costs every step; the heap still growing to its high-water mark
			// (em-aug's crops vary in size) costs an occasional step once, so the
			// median step is the one held to the bound.
			sorted := slices.Sorted(slices.Values(perStep))
			median := sorted[len(sorted)/2]
			t.Logf("%s: minor faults per step %v (batch %d)", tc.name, perStep, bs)
			if median > maxPerStep {
				t.Errorf("%s: the median step took %d minor page faults (%v), want at most %d", tc.name, median, perStep, maxPerStep)
			}
		})
	}
}

// The evaluation pass reuses its memory too: a second Predict over the same 4 096
// images costs at most 1 000 minor faults per 1 024-image chunk. With glibc's defaults
// each chunk's activations (a few hundred MB) are unmapped and faulted in again: the
// binary's pass over the 70 000 Fashion-MNIST images took 23 million faults and 197 s
// that way, against 61 000 and 19 s (docs/RESULTS.md section 10).
func TestPredictPageFaults(t *testing.T) {
	if !torch.KeepFreedMemory() {
		t.Fatal("glibc refused the malloc settings")
	}
	torch.AdviseHugePages()
	const n, chunk, maxPerChunk = 4096, 1024, 1000
	src, err := NewImageSource(synthImages(12, n, 1, 28), torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	r, err := New(imageConfig("em", 1, 128), src, torch.CPU, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var faults int64
	onMainThread(func() {
		if _, err = Predict(r.Net, src, torch.CPU, r.Prior()); err != nil {
			return
		}
		f0 := minorFaults()
		_, err = Predict(r.Net, src, torch.CPU, r.Prior())
		faults = minorFaults() - f0
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("minor faults of a second pass over %d images: %d", n, faults)
	if per := faults / (n / chunk); per > maxPerChunk {
		t.Errorf("the evaluation pass took %d minor page faults per %d-image chunk, want at most %d", per, chunk, maxPerChunk)
	}
}

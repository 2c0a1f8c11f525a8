package train

import (
	"errors"
	"strings"
	"testing"

	"emclust/model"
	"emclust/sysmem"
	"emclust/torch"
)

func TestCheckNetworkFits(t *testing.T) {
	const gb = 1_000_000_000
	mlp := func(hidden ...int) model.Spec {
		return model.Spec{Arch: "mlp", In: 13, Hidden: hidden, K: 3, Norm: true}
	}
	em, twofold := &Config{Objective: "em", BatchSize: 256}, &Config{Objective: "twofold", BatchSize: 256}
	// 13→50000→50000→3: 2 500 900 003 weights, 16 bytes each under em's one Adam and
	// 24 under twofold's two, and 8 for each of the largest layer's 2 500 050 000.
	big := mlp(50000, 50000)
	weights := 13*50000 + 50000 + 50000*50000 + 50000 + 50000*3 + 3
	state := 16*weights + 8*(50000*50000+50000)
	// Two rows: a batch holds each layer's output, its ReLU and a gradient.
	acts2 := 4 * 2 * (13 + 3*3 + 3*100000)
	stl10 := model.Spec{Arch: "stl10", InC: 2, H: 96, W: 96, K: 10, Norm: true}
	mnist := model.Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 10, Norm: true}
	twofold128 := &Config{Objective: "twofold", BatchSize: 128, Dataset: "fashion-mnist"}
	for _, tc := range []struct {
		name string
		spec model.Spec
		cfg  *Config
		n    int // rows
		free uint64
		ok   bool
		want []string // nil: fits
	}{
		{"small", mlp(32, 32), em, 1000, 1 * gb, true, nil},
		{"memory unknown", mlp(3_000_000_000, 3_000_000_000), em, 1000, 0, false, nil},
		{"just fits", big, em, 2, uint64(state + acts2), true, nil},
		{"a byte short", big, em, 2, uint64(state+acts2) - 1, true, []string{"--hidden: the network mlp 13→50000→50000→3 has 2.5 G weights and computes 2.4 MB of activations", "a batch of 2 to train, 2 to evaluate", "needs 60 GB", "more than the 60 GB of memory free: use a smaller --hidden", "add --no-memory-check"}},
		{"two optimisers", big, twofold, 2, uint64(state + acts2), true, []string{"needs 80 GB"}},
		{"widths past int32", mlp(3_000_000_000, 3_000_000_000), em, 1000, 64 * gb, true, []string{"--hidden", "9.00e+18 weights", "more than the 64 GB"}},
		{"many clusters", model.Spec{Arch: "mlp", In: 13, Hidden: []int{32}, K: 1 << 32}, em, 1000, 64 * gb, true, []string{"--k: the network mlp 13→32→4294967296"}},
		{"cnn of many clusters", model.Spec{Arch: "cifar", InC: 2, H: 32, W: 32, K: 1 << 30}, em, 1000, 64 * gb, true, []string{"--k: the network cifar"}},
		{"cnn of large images", model.Spec{Arch: "mnist", InC: 2, H: 16384, W: 16384, K: 10}, &Config{Objective: "em", BatchSize: 256, Dataset: "folder"}, 1000, 64 * gb, true, []string{"--image-size: the network mnist", "use a smaller --image-size"}},
		// 13→20000000→3: 340 M weights, 280 M in the first layer (7.68 GB to
		// train). An evaluation takes
		// 2^30/(4·2·20000000) = 6 rows at once, 0.96 GB; a batch of 256 holds
		// 4·256·(13 + 3·20000000 + 3·3) bytes, 61.4 GB. Was the OOM killer.
		{"activations", mlp(20_000_000), em, 1000, 24 * gb, true, []string{"--hidden: the network mlp 13→20000000→3 has 340 M weights and computes 61.4 GB of activations", "(a batch of 256 to train, 6 to evaluate)", "needs 69.1 GB", "use a smaller --hidden or --batch-size"}},
		{"activations of few rows", mlp(20_000_000), em, 10, 24 * gb, true, nil},
		{"activations of a linear map", model.Spec{Arch: "mlp", In: 100_000_000, K: 3}, em, 1000, 24 * gb, true, []string{"--batch-size: the network linear 100000000→3", "use a smaller --batch-size"}},
		// An STL-10 image's convolutions output 2 138 112 units, the largest layer
		// 589 824; an evaluation takes 2^30/(4·4·589824) = 113 images at once.
		// Twofold's batch of 512 images and their copies: 4·512·2·3·2138112 bytes,
		// 26.3 GB; in bf16 half that, as under em's one view.
		{"images and their copies", stl10, &Config{Objective: "twofold", BatchSize: 512}, 5000, 16 * gb, true, []string{"--batch-size: the network stl10 has 2.7 M weights and computes 26.3 GB of activations", "(a batch of 512 to train, 113 to evaluate)", "use a smaller --batch-size"}},
		{"images in bf16", stl10, &Config{Objective: "twofold", BatchSize: 512, Precision: "bf16"}, 5000, 16 * gb, true, nil},
		{"images without copies", stl10, &Config{Objective: "em", BatchSize: 512}, 5000, 16 * gb, true, nil},
		// MNIST's evaluation, 1024 images of 4·64·28·28 floats (822 MB), outweighs
		// a batch of 128 (270 MB): no batch size helps, and a built-in set's images
		// cannot be made smaller.
		{"an evaluation chunk", mnist, twofold128, 60000, 600_000_000, true, []string{"--dataset fashion-mnist: the network mnist", "(a batch of 128 to train, 1024 to evaluate)", "--precision bf16 halves the activations; else free memory, or use a machine with more"}},
		{"an evaluation chunk in bf16", mnist, &Config{Objective: "twofold", BatchSize: 128, Dataset: "fashion-mnist", Precision: "bf16"}, 60000, 400_000_000, true, []string{"--dataset fashion-mnist: the network mnist", "largest layer, in float32, and the activations, in bfloat16)", ": free memory, or use a machine with more"}},
		// A linear map of 20 000 000 features: 960 MB of weights' state alone.
		{"a linear map's features", model.Spec{Arch: "mlp", In: 20_000_000, K: 3}, em, 20, 500_000_000, true, []string{"--hidden none: the network linear 20000000→3", "reduce the data's 20000000 features first (PCA, say)"}},
		{"mnist's default", mnist, twofold128, 60000, 1 * gb, true, nil},
		// Four ranks train 128 images each of the global 512: 6.6 GB a rank, where
		// the whole batch would take 26.3 GB.
		{"a rank's share", stl10, &Config{Objective: "twofold", BatchSize: 512, WorldSize: 4}, 5000, 8 * gb, true, nil},
		// The same four ranks on one machine share its 8 GB: 2 GB each.
		{"ranks sharing a machine", stl10, &Config{Objective: "twofold", BatchSize: 512, WorldSize: 4, LocalRanks: 4}, 5000, 8 * gb, true, []string{"more than the 2 GB of memory free for each of the 4 processes on this machine", "use a smaller --batch-size"}},
		{"a rank's share too large", stl10, &Config{Objective: "twofold", BatchSize: 2048, WorldSize: 4}, 5000, 8 * gb, true, []string{"(a rank's 512 rows of the batch to train, 113 to evaluate)", "use a smaller --batch-size"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkNetworkFits(tc.spec, tc.cfg, tc.n, sysmem.Room{Shared: tc.free, SharedKnown: tc.ok})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s with %d bytes free: accepted", tc.spec.Layers(), tc.free)
			}
			if !errors.As(err, new(SettingsError)) {
				t.Errorf("%v: not a SettingsError (the command line's exit status 2)", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
}

// Where a limit other than the memory binds, the refusal names it and how to raise
// it; an address-space limit is each rank's own, not a share of the machine's.
func TestCheckNetworkFitsLimits(t *testing.T) {
	const gb = 1_000_000_000
	stl10 := model.Spec{Arch: "stl10", InC: 2, H: 96, W: 96, K: 10, Norm: true}
	ranks := &Config{Objective: "twofold", BatchSize: 512, WorldSize: 4, LocalRanks: 4}
	for _, tc := range []struct {
		name string
		cfg  *Config
		room sysmem.Room
		want []string // nil: fits
		not  []string
	}{
		// 6.6 GB a rank, in 7 GB of each one's own address space.
		{"ranks under ulimit -v", ranks, sysmem.Room{Shared: 32 * gb, SharedKnown: true, AddressLimit: 9 * gb, AddressLeft: 7 * gb}, nil, nil},
		{"ranks under a smaller ulimit -v", ranks, sysmem.Room{Shared: 32 * gb, SharedKnown: true, AddressLimit: 5 * gb, AddressLeft: 4 * gb},
			[]string{"more than the 4 GB of address space left under its limit of 5 GB (ulimit -v): use a smaller --batch-size (or raise the address-space limit of 5 GB: ulimit -v)"},
			[]string{"for each of", "--no-memory-check"}},
		{"ranks sharing less memory than their limit", ranks, sysmem.Room{Shared: 8 * gb, SharedKnown: true, AddressLimit: 10 * gb, AddressLeft: 8 * gb},
			[]string{"more than the 2 GB of memory free for each of the 4 processes on this machine", "add --no-memory-check"}, []string{"ulimit"}},
		// Twofold's batch of 512 images and their copies: 26.3 GB.
		{"strict overcommit", &Config{Objective: "twofold", BatchSize: 512}, sysmem.Room{Shared: 16 * gb, SharedKnown: true, SharedBy: sysmem.ByCommit},
			[]string{"more than the 16 GB of memory left to commit under strict overcommit (vm.overcommit_memory=2): use a smaller --batch-size (or raise the commit limit: vm.overcommit_ratio or vm.overcommit_kbytes, or swap)"},
			[]string{"--no-memory-check"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkNetworkFits(stl10, tc.cfg, 5000, tc.room)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%+v: accepted", tc.room)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(err.Error(), w) {
					t.Errorf("%q has %q", err, w)
				}
			}
		})
	}
}

func TestWithUnit(t *testing.T) {
	for _, tc := range []struct {
		n    float64
		unit string
		want string
	}{
		{0, "", "0"},
		{999, "B", "999 B"},
		{1000, "", "1 k"},
		{2.5e9, "", "2.5 G"},
		{40.0136e9, "B", "40 GB"},
		{310.4e6, "B", "310 MB"},
		{999e15, "B", "999 PB"},
		{1.44e20, "B", "1.44e+20 B"},
		{999.6e6, "B", "1 GB"},
		{999.5e9, "B", "1 TB"},
		{999.6, "B", "1 kB"},
		{999.4e6, "", "999 M"},
	} {
		if got := withUnit(tc.n, tc.unit); got != tc.want {
			t.Errorf("withUnit(%g, %q) = %q, want %q", tc.n, tc.unit, got, tc.want)
		}
	}
}

// On a GPU the allocator's error is the first word of a network too large: it names
// the setting as the CPU's check does.
func TestBuildOOM(t *testing.T) {
	spec := model.Spec{Arch: "mlp", In: 13, Hidden: []int{200000, 200000}, K: 3, Norm: true}
	oom := &torch.Error{Op: "empty", Msg: "CUDA out of memory. Tried to allocate 149.01 GiB"}
	err := buildOOM(spec, &Config{Objective: "em"}, torch.Device{CUDA: true}, oom)
	if !errors.As(err, new(SettingsError)) {
		t.Errorf("%v: not a SettingsError", err)
	}
	for _, w := range []string{"--hidden: the network mlp 13→200000→200000→3 has 40 G weights", "needs 960 GB", "ran out of memory on cuda:0", "Tried to allocate 149.01 GiB", "use a smaller --hidden"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
}

func TestEvalRows(t *testing.T) {
	for _, tc := range []struct {
		spec model.Spec
		want int
	}{
		{model.Spec{Arch: "mlp", In: 64, Hidden: []int{512, 512}, K: 10}, evalChunk},
		{model.Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 10}, evalChunk},
		{model.Spec{Arch: "cifar", InC: 2, H: 32, W: 32, K: 10}, evalChunk},
		{model.Spec{Arch: "stl10", InC: 2, H: 96, W: 96, K: 10}, 113},         // 2^30/(4·4·64·96·96)
		{model.Spec{Arch: "mlp", In: 13, Hidden: []int{20_000_000}, K: 3}, 6}, // 2^30/(4·2·20000000)
		{model.Spec{Arch: "mlp", In: 1_000_000_000, K: 3}, 1},
	} {
		if got := evalRows(tc.spec); got != tc.want {
			t.Errorf("%s: evalRows = %d, want %d", tc.spec.Layers(), got, tc.want)
		}
	}
}

// Restarts stay open until all have trained: R networks' weights, gradients and
// moments must fit at once, or none trains.
func TestCheckRestartsFit(t *testing.T) {
	src := digitsSource(t) // 64 features, 10 classes
	const gb = 1_000_000_000
	cfg := func(restarts int, hidden ...int) Config {
		c := VectorDefaults()
		c.K, c.Restarts, c.Hidden, c.HiddenAuto = 10, restarts, hidden, false
		return c
	}
	auto := cfg(10, 4000, 4000)
	auto.HiddenAuto = true // each seed also trains a linear map, 64→10: 650 weights
	// 64→4000→4000→10: 16 310 010 weights, 16 bytes each: 261 MB a restart.
	weights := 64*4000 + 4000 + 4000*4000 + 4000 + 4000*10 + 10
	one := 16 * weights
	for _, tc := range []struct {
		name string
		cfg  Config
		free uint64
		want []string // nil: fits
	}{
		{"ten fit", cfg(10, 4000, 4000), uint64(10 * one), nil},
		{"ten a byte short", cfg(10, 4000, 4000), uint64(10*one) - 1, []string{"--restarts 10: the 10 networks (mlp 64→4000→4000→10, 16.3 M weights)", "2.61 GB", "use fewer --restarts or a smaller --hidden", "--no-memory-check"}},
		{"one restart is New's to check", cfg(1, 4000, 4000), 1, nil},
		{"one network too large is New's to say", cfg(10, 4000, 4000), uint64(one) - 1, nil},
		{"linear maps beside", auto, uint64(10*one + 10*16*650), nil},
		{"linear maps beside, a byte short", auto, uint64(10*one+10*16*650) - 1, []string{"--restarts 10: the 20 networks (mlp 64→4000→4000→10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRestartsFit(tc.cfg, src, sysmem.Room{Shared: tc.free, SharedKnown: true})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !errors.As(err, new(SettingsError)) {
				t.Fatalf("%v: want a SettingsError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q lacks %q", err, w)
				}
			}
		})
	}
	if err := checkRestartsFit(cfg(10, 4000, 4000), src, sysmem.Room{}); err != nil {
		t.Errorf("memory unknown: %v", err)
	}
	limited := sysmem.Room{Shared: 64 * gb, SharedKnown: true, AddressLimit: 3 * gb, AddressLeft: uint64(10*one) - 1}
	if err := checkRestartsFit(cfg(10, 4000, 4000), src, limited); err == nil || !strings.Contains(err.Error(), "(ulimit -v): use fewer --restarts or a smaller --hidden (or raise the address-space limit of 3 GB: ulimit -v)") {
		t.Errorf("under ulimit -v: %v", err)
	}
}

// The checks run on the CPU alone, and not under --no-memory-check.
func TestMemoryToCheck(t *testing.T) {
	_, known := sysmem.Free().Bytes()
	for _, tc := range []struct {
		name string
		off  bool
		dev  torch.Device
		want bool
	}{
		{"cpu", false, torch.CPU, known},
		{"cpu, --no-memory-check", true, torch.CPU, false},
		{"cuda", false, torch.Device{CUDA: true}, false},
	} {
		if _, ok := memoryToCheck(&Config{NoMemoryCheck: tc.off}, tc.dev).Bytes(); ok != tc.want {
			t.Errorf("%s: checked %v, want %v", tc.name, ok, tc.want)
		}
	}
	if !known {
		t.Log("this machine's free memory is not known: the CPU case checks nothing")
	}
}

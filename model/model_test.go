package model

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"emclust/torch"
)

func build(t *testing.T, sp Spec) *Net {
	t.Helper()
	n, err := New(sp, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	// Spec.NumParams counts without building; every network the tests build checks it.
	if got, want := sp.NumParams(), n.NumParams(); got != float64(want) {
		t.Errorf("%s: Spec.NumParams() = %.0f, the built network has %d", sp.Layers(), got, want)
	}
	return n
}

// Widths no memory holds are counted, not overflowed: the count that refuses them.
func TestNumParamsOfHugeNetworks(t *testing.T) {
	sp := Spec{Arch: "mlp", In: 13, Hidden: []int{3_000_000_000, 3_000_000_000}, K: 3}
	if got, min := sp.NumParams(), 9e18; !(got >= min) || math.IsInf(got, 0) {
		t.Fatalf("NumParams() = %g, want at least %g and finite", got, min)
	}
	wide := Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 1 << 40}
	if got := wide.NumParams(); got < 33*(1<<40) { // F32 → K, with biases
		t.Fatalf("mnist with K = 2^40: NumParams() = %g", got)
	}
}

// The paper's Table net_archi gives ≈0.8M, ≈1.3M and ≈2.7M parameters for 2-plane
// (Sobel) inputs and 10 clusters. The exact counts follow from the layer plans.
func TestParamCountsMatchPaper(t *testing.T) {
	for _, tc := range []struct {
		arch      string
		h         int
		exact     int
		paper     float64
		wantShape []int
	}{
		// conv weights + BN (2 per channel) + F32 + F10
		{"mnist", 28, 1152 + 128 + 73728 + 256 + 294912 + 512 + (256*7*7*32 + 32) + (32*10 + 10), 0.8e6, nil},
		{"cifar", 32, 1152 + 36864 + 73728 + 147456 + 294912 + 589824 + 2*(64+64+128+128+256+256) + (256*8*8*10 + 10), 1.3e6, nil},
		{"stl10", 96, 1152 + 36864 + 73728 + 147456 + 294912 + 3*589824 + 2*(64+64+128+128+4*256) + (256*12*12*10 + 10), 2.7e6, nil},
	} {
		n := build(t, Spec{Arch: tc.arch, InC: 2, H: tc.h, W: tc.h, K: 10, Norm: true})
		got := n.NumParams()
		if got != tc.exact {
			t.Errorf("%s: %d params, want %d", tc.arch, got, tc.exact)
		}
		if math.Abs(float64(got)-tc.paper)/tc.paper > 0.05 {
			t.Errorf("%s: %d params is not within 5%% of the paper's %.1fM", tc.arch, got, tc.paper/1e6)
		}
		s := torch.NoGrad()
		a := n.Forward(s, s.Randn([]int{3, 2, tc.h, tc.h}, torch.Float32, testDevice), false)
		if sh := a.Shape(); len(sh) != 2 || sh[0] != 3 || sh[1] != 10 {
			t.Errorf("%s: output shape %v, want [3 10]", tc.arch, sh)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// CIFAR-100-20 takes K=20: only the last layer grows.
	n := build(t, Spec{Arch: "cifar", InC: 2, H: 32, W: 32, K: 20, Norm: true})
	base := build(t, Spec{Arch: "cifar", InC: 2, H: 32, W: 32, K: 10, Norm: true})
	if d := n.NumParams() - base.NumParams(); d != 10*(256*8*8+1) {
		t.Errorf("K=20 adds %d params, want %d", d, 10*(256*8*8+1))
	}
}

func TestMLPParamCount(t *testing.T) {
	for _, tc := range []struct {
		in, k  int
		hidden []int
		want   int
		layers string
	}{
		{2, 10, []int{32, 32}, (2*32 + 32) + (32*32 + 32) + (32*10 + 10), "mlp 2→32→32→10"},
		{13, 3, []int{16}, (13*16 + 16) + (16*3 + 3), "mlp 13→16→3"},
		// No hidden layer: the scores are a linear map of the features.
		{30, 2, nil, 30*2 + 2, "linear 30→2"},
	} {
		n := build(t, Spec{Arch: "mlp", In: tc.in, Hidden: tc.hidden, K: tc.k, Norm: true})
		if got := n.NumParams(); got != tc.want {
			t.Errorf("mlp %d→%v→%d: %d params, want %d", tc.in, tc.hidden, tc.k, got, tc.want)
		}
		if got := n.Spec.Layers(); got != tc.layers {
			t.Errorf("Layers() = %q, want %q", got, tc.layers)
		}
	}
}

// In training the normalised scores have zero mean and unit (biased) variance per
// cluster over the batch; in eval the running statistics make batch size 1 work.
func TestRelevanceNormalisation(t *testing.T) {
	n := build(t, Spec{Arch: "mlp", In: 5, Hidden: []int{16}, K: 4, Norm: true})
	s := torch.NewScope()
	defer s.Close()
	x := s.Randn([]int{64, 5}, torch.Float32, testDevice)
	// Batch norm divides by √(v+ε), ε = 1e-5, so a raw (biased) batch variance v
	// leaves v/(v+ε): near 1 only when v ≫ ε, and v depends on the initial weights.
	rawVar := s.Float32s(s.Var(n.Relevance(s, x, true), false, 0))
	a := n.Forward(s, x, true)
	mean := s.Float32s(s.Mean(a, false, 0))
	v := s.Float32s(s.Var(a, false, 0))
	for j := range mean {
		want := float64(rawVar[j]) / (float64(rawVar[j]) + 1e-5)
		if math.Abs(float64(mean[j])) > 1e-5 || math.Abs(float64(v[j])-want) > 1e-4 {
			t.Fatalf("cluster %d: mean %v var %v, want 0 and %v (raw variance %v)", j, mean[j], v[j], want, rawVar[j])
		}
	}
	one := n.Forward(s, s.Narrow(x, 0, 0, 1), false)
	if sh := one.Shape(); sh[0] != 1 || sh[1] != 4 {
		t.Fatalf("eval on one row: shape %v", sh)
	}
	vals := s.Float32s(one)
	for _, f := range vals {
		if math.IsNaN(float64(f)) {
			t.Fatal("NaN in eval output for batch of 1")
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	// Without normalisation the output is the raw relevance.
	off := build(t, Spec{Arch: "mlp", In: 5, Hidden: []int{16}, K: 4, Norm: false})
	raw := s.Float32s(off.Relevance(s, x, true))
	got := s.Float32s(off.Forward(s, x, true))
	for i := range raw {
		if raw[i] != got[i] {
			t.Fatal("norm off changed the scores")
		}
	}
}

// Eval mode normalises by the running statistics, which a training forward moves by
// the momentum toward the batch's (mean, and unbiased variance): checked on the
// linear map, whose raw scores no hidden BatchNorm changes between the forwards. A
// forward that ignored train=false would give the batch's own normalisation.
func TestRelevanceRunningStatistics(t *testing.T) {
	n := build(t, Spec{Arch: "mlp", In: 5, K: 4, Norm: true})
	s := torch.NewScope()
	defer s.Close()
	x := s.Add(s.MulScalar(s.Randn([]int{32, 5}, torch.Float32, testDevice), 3), s.Full([]int{1, 5}, 2, torch.Float32, testDevice))
	raw := s.Float32s(n.Relevance(s, x, false))
	mean := s.Float32s(s.Mean(n.Relevance(s, x, false), false, 0))
	biased := s.Float32s(s.Var(n.Relevance(s, x, false), false, 0))
	n.Forward(s, x, true) // running mean 0.9·0 + 0.1·mean, variance 0.9·1 + 0.1·unbiased
	got := s.Float32s(n.Forward(s, x, false))
	const k = 4
	for i, a := range raw {
		j := i % k
		rm, rv := 0.1*float64(mean[j]), 0.9+0.1*float64(biased[j])*32/31
		want := (float64(a) - rm) / math.Sqrt(rv+1e-5)
		if math.Abs(float64(got[i])-want) > 1e-4*(1+math.Abs(want)) {
			t.Fatalf("row %d cluster %d: eval score %v, want %v (running mean %v, variance %v)", i/k, j, got[i], want, rm, rv)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestCheckpointLoadChecksShapes(t *testing.T) {
	sp := Spec{Arch: "mlp", In: 3, Hidden: []int{8}, K: 4, Norm: true}
	a := build(t, sp)
	path := filepath.Join(t.TempDir(), "m.safetensors")
	all := append(a.Params(), a.Buffers()...)
	if err := torch.SaveSafetensors(path, all, map[string]string{"spec": sp.JSON()}); err != nil {
		t.Fatal(err)
	}
	f, err := torch.ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	b := build(t, sp)
	if err := b.Load(f, ""); err != nil {
		t.Fatal(err)
	}
	s := torch.NoGrad()
	defer s.Close()
	wa, wb := s.Float32s(a.Params()[0].Tensor), s.Float32s(b.Params()[0].Tensor)
	for i := range wa {
		if wa[i] != wb[i] {
			t.Fatal("loaded weights differ")
		}
	}
	other := build(t, Spec{Arch: "mlp", In: 3, Hidden: []int{8}, K: 5, Norm: true})
	err = other.Load(f, "")
	if err == nil || !strings.Contains(err.Error(), "out.weight") || !strings.Contains(err.Error(), "[4 8]") {
		t.Fatalf("wrong-K load: %v", err)
	}
	cnn := build(t, Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 10, Norm: true})
	if err := cnn.Load(f, ""); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Fatalf("wrong-arch load: %v", err)
	}
	// A weight saved in float64 (or an edited dtype) would be converted without a word.
	s64 := torch.NoGrad()
	defer s64.Close()
	wide := append([]torch.Named(nil), all...)
	wide[0].Tensor = s64.Cast(wide[0].Tensor, torch.Float64)
	if err := torch.SaveSafetensors(path, wide, nil); err != nil {
		t.Fatal(err)
	}
	if f, err = torch.ReadSafetensors(path); err != nil {
		t.Fatal(err)
	}
	if err := b.Load(f, ""); err == nil || !strings.Contains(err.Error(), wide[0].Name) || !strings.Contains(err.Error(), "float64") {
		t.Fatalf("float64 weight into a float32 model: %v", err)
	}
}

func TestSpecErrors(t *testing.T) {
	for _, sp := range []Spec{
		{Arch: "mlp", In: 0, K: 3},
		{Arch: "mlp", In: 3, K: 0},
		{Arch: "resnet", K: 3},
		{Arch: "cifar", InC: 2, H: 30, W: 30, K: 10},
		{Arch: "mlp", In: 3, K: 3, Heads: -1},
		{Arch: "mlp", In: 3, K: 3, Heads: MaxHeads + 1},
	} {
		if _, err := New(sp, testDevice); err == nil {
			t.Errorf("New(%+v) succeeded", sp)
		}
	}
}

func TestBottleneckNet(t *testing.T) {
	n := build(t, Spec{Arch: "mnist2d", InC: 2, H: 28, W: 28, K: 10})
	s := torch.NoGrad()
	defer s.Close()
	x := s.Randn([]int{5, 2, 28, 28}, torch.Float32, testDevice)
	z := n.Bottleneck(s, x)
	if sh := z.Shape(); len(sh) != 2 || sh[0] != 5 || sh[1] != 2 {
		t.Fatalf("bottleneck shape %v, want [5 2]", sh)
	}
	if sh := n.Relevance(s, x, false).Shape(); sh[1] != 10 {
		t.Fatalf("logits shape %v", sh)
	}
	// F32 → B2 → F10 replaces the 32→10 output layer of mnist.
	if got, want := n.NumParams(), 772458-(32*10+10)+(32*2+2)+(2*10+10); got != want {
		t.Fatalf("params %d, want %d", got, want)
	}
	mlp := build(t, Spec{Arch: "mlp", In: 3, K: 2, Norm: true})
	mlp.Bottleneck(s, x)
	if s.Err() == nil {
		t.Fatal("mlp has no bottleneck but no error")
	}
}

// A model with heads has one out layer of Heads·K units and normalises each column on
// its own; Forward is the selected head's K columns of ForwardHeads.
func TestHeads(t *testing.T) {
	for _, tc := range []struct {
		name    string
		one, sp Spec
		x       []int
		outIn   int // inputs of the out layer
	}{
		{"mlp", Spec{Arch: "mlp", In: 5, Hidden: []int{16}, K: 4, Norm: true}, Spec{Arch: "mlp", In: 5, Hidden: []int{16}, K: 4, Heads: 3, Norm: true}, []int{32, 5}, 16},
		{"mnist", Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 10, Norm: true}, Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 10, Heads: 5, Norm: true}, []int{8, 2, 28, 28}, 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			one, n := build(t, tc.one), build(t, tc.sp)
			k, heads := tc.sp.K, tc.sp.Heads
			last := n.Params()[len(n.Params())-1].Tensor.Shape() // out.bias
			if d, want := n.NumParams()-one.NumParams(), (heads-1)*k*(tc.outIn+1); d != want || last[0] != heads*k {
				t.Fatalf("%d heads add %d params (out bias %v), want %d (%d)", heads, d, last, want, heads*k)
			}
			s := torch.NoGrad()
			defer s.Close()
			x := s.Randn(tc.x, torch.Float32, testDevice)
			all := n.ForwardHeads(s, x, true)
			if sh := all.Shape(); sh[0] != tc.x[0] || sh[1] != heads*k {
				t.Fatalf("ForwardHeads shape %v, want [%d %d]", sh, tc.x[0], heads*k)
			}
			// Per-column normalisation: every head's columns have zero batch mean.
			for j, m := range s.Float32s(s.Mean(all, false, 0)) {
				if math.Abs(float64(m)) > 1e-4 {
					t.Fatalf("column %d: batch mean %v, want 0", j, m)
				}
			}
			allV := s.Float32s(n.ForwardHeads(s, x, false))
			for _, h := range []int{0, heads - 1, 1} {
				if err := n.SetHead(h); err != nil {
					t.Fatal(err)
				}
				if n.Head() != h {
					t.Fatalf("Head() = %d after SetHead(%d)", n.Head(), h)
				}
				got := s.Float32s(n.Forward(s, x, false))
				for i := 0; i < tc.x[0]; i++ {
					for j := 0; j < k; j++ {
						if got[i*k+j] != allV[i*heads*k+h*k+j] {
							t.Fatalf("head %d row %d col %d: Forward %v, ForwardHeads %v", h, i, j, got[i*k+j], allV[i*heads*k+h*k+j])
						}
					}
				}
			}
			if err := n.SetHead(heads); err == nil {
				t.Fatalf("SetHead(%d) of %d heads succeeded", heads, heads)
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A checkpoint carries the selected head; a value that names no head is refused.
func TestHeadsCheckpoint(t *testing.T) {
	sp := Spec{Arch: "mlp", In: 3, Hidden: []int{8}, K: 4, Heads: 3, Norm: true}
	a := build(t, sp)
	if err := a.SetHead(2); err != nil {
		t.Fatal(err)
	}
	save := func(t *testing.T, net *Net) *torch.SafeFile {
		path := filepath.Join(t.TempDir(), "m.safetensors")
		if err := torch.SaveSafetensors(path, append(net.Params(), net.Buffers()...), map[string]string{"spec": sp.JSON()}); err != nil {
			t.Fatal(err)
		}
		f, err := torch.ReadSafetensors(path)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	b := build(t, sp)
	if err := b.Load(save(t, a), ""); err != nil {
		t.Fatal(err)
	}
	if b.Head() != 2 {
		t.Fatalf("loaded head %d, saved 2", b.Head())
	}
	for _, bad := range []float64{3, -1, 0.5} {
		c := build(t, sp)
		s := torch.NoGrad()
		s.CopyInto(c.selected, s.Full([]int{1}, bad, torch.Float32, testDevice))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		err := build(t, sp).Load(save(t, c), "")
		if err == nil || !strings.Contains(err.Error(), "heads.selected") {
			t.Errorf("selected head %v: load error %v, want one naming heads.selected", bad, err)
		}
	}
	// One head: no buffer, and the spec's JSON is that of models before heads.
	one := Spec{Arch: "mlp", In: 3, Hidden: []int{8}, K: 4, Norm: true}
	for _, nt := range build(t, one).Buffers() {
		if strings.HasPrefix(nt.Name, "heads.") {
			t.Fatalf("one-head model has buffer %s", nt.Name)
		}
	}
	if strings.Contains(one.JSON(), "heads") {
		t.Fatalf("one-head spec JSON %s names heads", one.JSON())
	}
}

// ArchFor names an image's size as the image loader does, width first.
func TestArchForNamesWidthFirst(t *testing.T) {
	if _, err := ArchFor(3, 64); err == nil || !strings.Contains(err.Error(), "takes 64x3 images") {
		t.Errorf("ArchFor(3, 64): %v, want it to name 64x3", err)
	}
	if arch, err := ArchFor(96, 96); arch != "stl10" || err != nil {
		t.Errorf("ArchFor(96, 96) = %q, %v", arch, err)
	}
}

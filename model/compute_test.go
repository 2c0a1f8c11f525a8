package model

import (
	"math"
	"strings"
	"testing"

	"emclust/torch"
)

// outputsAndGrads runs a training-mode forward of x and the backward of the sum of
// squared scores, and returns the scores and the first convolution's gradient.
func outputsAndGrads(t *testing.T, n *Net, x []float32, shape []int) (out, grad []float32) {
	t.Helper()
	s := torch.NewScope()
	defer s.Close()
	zeroGrads(s, n)
	a := n.Relevance(s, s.FromFloat32(x, shape, testDevice), true)
	if a != nil && a.DType() != torch.Float32 {
		t.Fatalf("relevance scores are %v, want float32 for the normalisation and loss", a.DType())
	}
	s.Backward(s.Sum(s.Mul(a, a), false))
	g := s.Grad(n.FirstConv())
	if g != nil && g.DType() != torch.Float32 {
		t.Fatalf("weight gradient is %v, want float32 for the optimiser", g.DType())
	}
	out, grad = s.Float32s(a), s.Float32s(g)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out, grad
}

// zeroGrads sets every parameter's gradient to zero, for a fresh backward.
func zeroGrads(s *torch.Scope, n *Net) {
	for _, p := range n.Params() {
		if g := s.Grad(p.Tensor); g != nil {
			s.Fill(g, 0)
		}
	}
}

func cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

func maxAbsDiff(a, b []float32) float64 {
	m := 0.0
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

func randomBatch(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*0.37) + 0.3*math.Cos(float64(i)*1.91))
	}
	return x
}

// bf16 must change the arithmetic (else the flag does nothing) but stay within
// bfloat16's 8-bit mantissa of float32, and leave the optimiser float32 gradients
// pointing the same way. Channels-last changes only the memory layout. The bf16
// kernels differ by CPU (oneDNN with AVX512-BF16 or AMX, libtorch's fallback on
// AVX2-only CPUs, oneDNN 3 in libtorch 2.x): an AVX-512 machine measured a gradient
// cosine of 0.992, so the bound is 0.95, room for other kernels and still far from a
// wrong gradient (an unrelated direction has a cosine near 0).
//
// On CUDA, fp32 convolutions are TF32 (cuDNN's default in libtorch, kept by emclust:
// a 10-bit mantissa), and the layouts pick different cuDNN algorithms, whose weight
// gradients also sum in a nondeterministic order: an H100 measured scores 8.6e-4 apart
// and a gradient cosine of 0.99902 between the layouts.
func TestComputeModes(t *testing.T) {
	fp32Diff, fp32Cos, sameCos := 1e-4, 0.99999, 1-1e-12
	if testDevice.CUDA {
		fp32Diff, fp32Cos, sameCos = 1e-2, 0.995, 1-1e-6
	}
	shape := []int{16, 2, 28, 28}
	x := randomBatch(16 * 2 * 28 * 28)
	if err := torch.ManualSeed(3); err != nil {
		t.Fatal(err)
	}
	n := build(t, Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 10, Norm: true})
	refOut, refGrad := outputsAndGrads(t, n, x, shape)

	for _, tc := range []struct {
		c                 Compute
		minDiff, maxDiff  float64 // on the raw scores, whose spread is about 1
		minCos            float64
		wantChannelsLast  bool
		wantDifferentBits bool
	}{
		{c: Compute{Precision: "fp32", ChannelsLast: true}, maxDiff: fp32Diff, minCos: fp32Cos, wantChannelsLast: true},
		{c: Compute{Precision: "bf16"}, minDiff: 1e-4, maxDiff: 0.15, minCos: 0.95, wantDifferentBits: true},
		{c: Compute{Precision: "bf16", ChannelsLast: true}, minDiff: 1e-4, maxDiff: 0.15, minCos: 0.95, wantChannelsLast: true, wantDifferentBits: true},
		{c: Compute{}, maxDiff: 0, minCos: sameCos},
	} {
		if err := n.SetCompute(tc.c); err != nil {
			t.Fatal(err)
		}
		if got := n.FirstConv().ChannelsLast(); got != tc.wantChannelsLast {
			t.Errorf("%+v: conv weight channels-last %v, want %v", tc.c, got, tc.wantChannelsLast)
		}
		out, grad := outputsAndGrads(t, n, x, shape)
		d := maxAbsDiff(out, refOut)
		if d < tc.minDiff || d > tc.maxDiff {
			t.Errorf("%+v: scores differ from float32 by %.3g, want in [%g, %g]", tc.c, d, tc.minDiff, tc.maxDiff)
		}
		if c := cosine(grad, refGrad); c < tc.minCos {
			t.Errorf("%+v: gradient cosine to float32's %.6f, want ≥ %g", tc.c, c, tc.minCos)
		}
	}

	// A channels-last network keeps the layout through its convolution blocks.
	if err := n.SetCompute(Compute{ChannelsLast: true}); err != nil {
		t.Fatal(err)
	}
	s := torch.NoGrad()
	defer s.Close()
	act := n.ForwardTo(s, s.FromFloat32(x, shape, testDevice), n.ConvLayers()[1])
	if !act.ChannelsLast() {
		t.Error("second conv block's output is not channels-last")
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestComputeErrors(t *testing.T) {
	mlp := build(t, Spec{Arch: "mlp", In: 4, Hidden: []int{8}, K: 2, Norm: true})
	if err := mlp.SetCompute(Compute{ChannelsLast: true}); err == nil || !strings.Contains(err.Error(), "channels-last") {
		t.Errorf("channels-last MLP: got %v, want an error naming channels-last", err)
	}
	if err := mlp.SetCompute(Compute{Precision: "fp16"}); err == nil || !strings.Contains(err.Error(), "fp16") {
		t.Errorf("fp16: got %v, want an error naming it", err)
	}
	// bf16 MLP: products in bfloat16, float32 scores.
	if err := mlp.SetCompute(Compute{Precision: "bf16"}); err != nil {
		t.Fatal(err)
	}
	s := torch.NoGrad()
	defer s.Close()
	a := mlp.Forward(s, s.Randn([]int{5, 4}, torch.Float32, testDevice), true)
	if a.DType() != torch.Float32 {
		t.Errorf("bf16 MLP scores are %v, want float32", a.DType())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestComputeString(t *testing.T) {
	for c, want := range map[Compute]string{
		{}:                                      "fp32",
		{Precision: "fp32", ChannelsLast: true}: "fp32, channels-last",
		{Precision: "bf16", ChannelsLast: true}: "bf16, channels-last",
	} {
		if got := c.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", c, got, want)
		}
	}
}

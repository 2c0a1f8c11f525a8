package model

import (
	"testing"

	"emclust/torch"
	"emclust/torch/torchtest"
)

// planOrder is the forward of the layer plan as the paper writes it, each op out of
// place: conv, BatchNorm, ReLU, then the max-pool as a layer of its own. It is what
// relevance computes with its pooled blocks and in-place ReLUs.
func planOrder(s *torch.Scope, n *Net, x *torch.Tensor) *torch.Tensor {
	x = n.input(s, x)
	for _, l := range n.layers {
		switch l := l.(type) {
		case *convBN:
			y := s.Conv2d(x, l.w, nil, 1, 1)
			x = s.ReLU(s.BatchNorm(y, l.gamma, l.beta, l.runMean, l.runVar, true, l.momentum, 1e-5))
		case maxPool:
			x = s.MaxPool2d(x, 2, 2)
		case relu:
			x = s.ReLU(x)
		default:
			x = l.forward(s, x, true)
		}
	}
	return n.norm.forward(s, n.output(s, x), true)
}

// scoresAndGrads runs forward (training mode) and the backward of a weighted sum of
// the scores, and returns the scores and every parameter's gradient.
func scoresAndGrads(t *testing.T, n *Net, x []float32, shape []int, forward func(*torch.Scope, *torch.Tensor) *torch.Tensor) (scores []float32, grads [][]float32) {
	t.Helper()
	s := torch.NewScope()
	defer s.Close()
	zeroGrads(s, n)
	a := forward(s, s.FromFloat32(x, shape, testDevice))
	// Weights that differ per score, so that no gradient is zero by symmetry.
	w := s.Sin(s.Arange(a.Numel(), torch.Float32, testDevice))
	s.Backward(s.Sum(s.Mul(a, s.Reshape(w, a.Shape()...)), false))
	scores = s.Float32s(a)
	for _, p := range n.Params() {
		grads = append(grads, s.Float32s(s.Grad(p.Tensor)))
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return scores, grads
}

// The pooled blocks (conv, BatchNorm, max-pool, ReLU) and the in-place ReLUs give the
// scores and gradients of the plan's order: max-pool and ReLU commute exactly.
func TestPooledBlocksComputeThePlan(t *testing.T) {
	for _, tc := range []struct {
		arch         string
		h            int
		channelsLast bool
	}{
		{"mnist", 28, false},
		{"mnist", 28, true},
		{"cifar", 32, false},
		{"mlp", 0, false},
	} {
		sp := Spec{Arch: tc.arch, InC: 2, H: tc.h, W: tc.h, K: 10, Norm: true}
		shape := []int{16, 2, tc.h, tc.h}
		if tc.arch == "mlp" {
			sp = Spec{Arch: "mlp", In: 64, Hidden: []int{32, 32}, K: 10, Norm: true}
			shape = []int{16, 64}
		}
		if err := torch.ManualSeed(3); err != nil {
			t.Fatal(err)
		}
		n := build(t, sp)
		if tc.channelsLast {
			if err := n.SetCompute(Compute{ChannelsLast: true}); err != nil {
				t.Fatal(err)
			}
		}
		numel := 1
		for _, d := range shape {
			numel *= d
		}
		x := randomBatch(numel)
		// Half the inputs negative, so that whole pooling windows are below zero.
		for i := range x {
			x[i] -= 0.2
		}
		got, gotGrad := scoresAndGrads(t, n, x, shape, func(s *torch.Scope, x *torch.Tensor) *torch.Tensor {
			return n.ForwardHeads(s, x, true)
		})
		want, wantGrad := scoresAndGrads(t, n, x, shape, func(s *torch.Scope, x *torch.Tensor) *torch.Tensor {
			return planOrder(s, n, x)
		})
		name := tc.arch
		if tc.channelsLast {
			name += " channels-last"
		}
		if !torchtest.Near(got, want, 1e-5) {
			t.Errorf("%s: scores differ from the plan's order (max diff %g)", name, maxAbsDiff(got, want))
		}
		params := n.Params()
		if len(gotGrad) != len(params) || len(wantGrad) != len(params) {
			t.Fatalf("%s: %d and %d gradients, want %d", name, len(gotGrad), len(wantGrad), len(params))
		}
		// Each parameter against its own scale: the ops are the same, so every
		// gradient, however small, agrees.
		for i, p := range params {
			if len(gotGrad[i]) != p.Tensor.Numel() || !torchtest.Near(gotGrad[i], wantGrad[i], 1e-5) {
				t.Errorf("%s: %s's gradient differs from the plan's order (max diff %g)", name, p.Name, maxAbsDiff(gotGrad[i], wantGrad[i]))
			}
		}
	}
}

package model

import (
	"math"
	"slices"
	"testing"

	"emclust/torch"
)

// ConvLayers finds the C blocks of each plan, and ForwardTo stops after any layer:
// after a conv block it gives that block's planes, after the last layer the raw
// relevance of Relevance in eval mode.
func TestConvLayersAndForwardTo(t *testing.T) {
	for _, tc := range []struct {
		arch string
		h    int
		conv []int
	}{
		{"mnist", 28, []int{0, 2, 4}},
		{"cifar", 32, []int{0, 1, 3, 4, 6, 7}},
	} {
		n := build(t, Spec{Arch: tc.arch, InC: 2, H: tc.h, W: tc.h, K: 5, Norm: true})
		if got := n.ConvLayers(); !slices.Equal(got, tc.conv) {
			t.Errorf("%s: conv layers %v, want %v", tc.arch, got, tc.conv)
		}
		s := torch.NoGrad()
		x := s.Randn([]int{2, 2, tc.h, tc.h}, torch.Float32, testDevice)
		first := n.ForwardTo(s, x, tc.conv[0])
		if sh := first.Shape(); !slices.Equal(sh, []int{2, 64, tc.h, tc.h}) {
			t.Errorf("%s: first conv output %v", tc.arch, sh)
		}
		last := s.Float32s(n.ForwardTo(s, x, n.NumLayers()-1))
		want := s.Float32s(n.Relevance(s, x, false))
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Abs(float64(last[i]-want[i])) > 1e-5 {
				t.Fatalf("%s: ForwardTo(last)[%d] = %v, Relevance %v", tc.arch, i, last[i], want[i])
			}
		}
		n.ForwardTo(s, x, n.NumLayers())
		if s.Err() == nil {
			t.Errorf("%s: ForwardTo past the last layer did not fail", tc.arch)
		}
		s.Close()
	}
	if got := build(t, Spec{Arch: "mlp", In: 4, Hidden: []int{8}, K: 3}).ConvLayers(); got != nil {
		t.Errorf("mlp: conv layers %v, want none", got)
	}
}

// ConvOutputs, counted from the plan without building, agrees with the outputs of
// the built networks' convolution blocks, run on one image.
func TestConvOutputsOfBuiltNetworks(t *testing.T) {
	for _, tc := range []struct {
		arch string
		h    int
	}{{"mnist", 28}, {"mnist2d", 28}, {"cifar", 32}, {"stl10", 96}} {
		n := build(t, Spec{Arch: tc.arch, InC: 2, H: tc.h, W: tc.h, K: 5, Norm: true})
		s := torch.NoGrad()
		x := s.Randn([]int{1, 2, tc.h, tc.h}, torch.Float32, testDevice)
		var sum, largest float64
		for _, l := range n.ConvLayers() {
			units := 1.0
			for _, d := range n.ForwardTo(s, x, l).Shape() {
				units *= float64(d)
			}
			sum, largest = sum+units, max(largest, units)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if gotSum, gotLargest := n.Spec.ConvOutputs(); gotSum != sum || gotLargest != largest {
			t.Errorf("%s: ConvOutputs() = %g, %g; the built network's are %g, %g", tc.arch, gotSum, gotLargest, sum, largest)
		}
	}
	if sum, largest := (Spec{Arch: "mlp", In: 4, Hidden: []int{8}, K: 3}).ConvOutputs(); sum != 0 || largest != 0 {
		t.Errorf("mlp: ConvOutputs() = %g, %g, want 0, 0", sum, largest)
	}
}

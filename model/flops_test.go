package model

import "testing"

// The mnist network (C64 M C128 M C256 F32 F10 on 2×28×28 Sobel planes), by hand,
// 2 FLOPs per multiply-add:
//
//	conv0  2→64   at 28×28: 2·2·64·9·784    =  1,806,336
//	conv1  64→128 at 14×14: 2·64·128·9·196  = 28,901,376
//	conv2 128→256 at  7×7 : 2·128·256·9·49  = 28,901,376
//	fc0   12544→32        : 2·12544·32      =    802,816
//	out      32→10        : 2·32·10         =        640
//	total                                   = 60,412,544
func TestForwardFLOPsMNIST(t *testing.T) {
	n := build(t, Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 10, Norm: true})
	const want = 1806336 + 28901376 + 28901376 + 802816 + 640
	if want != 60412544 {
		t.Fatalf("hand sum %d", int64(want))
	}
	if got := n.ForwardFLOPs(); got != want {
		t.Errorf("mnist forward: %d FLOPs, want %d", got, int64(want))
	}
	// Element-wise: BN+ReLU on 64·784, 128·196, 256·49; pools read 64·784 and 128·196;
	// ReLU after fc0 on 32; K = 10 normalised scores.
	wantEW := int64(2*(64*784+128*196+256*49) + 64*784 + 128*196 + 32 + 10)
	if got := n.ElementwiseOps(); got != wantEW {
		t.Errorf("mnist element-wise: %d, want %d", got, wantEW)
	}
}

// The MLP 64→32→32→10: 2·(64·32 + 32·32 + 32·10) = 6,848; the spec alone gives the
// same, and so it does for a linear map and for several heads.
func TestForwardFLOPsMLP(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want int64
	}{
		{Spec{Arch: "mlp", In: 64, Hidden: []int{32, 32}, K: 10, Norm: true}, 2 * (64*32 + 32*32 + 32*10)},
		{Spec{Arch: "mlp", In: 30, K: 2, Norm: true}, 2 * 30 * 2},
		{Spec{Arch: "mlp", In: 13, Hidden: []int{16}, K: 3, Heads: 4, Norm: true}, 2 * (13*16 + 16*3*4)},
	} {
		n := build(t, tc.spec)
		if got, fromSpec := n.ForwardFLOPs(), tc.spec.MLPForwardFLOPs(); got != tc.want || fromSpec != tc.want {
			t.Errorf("%s: %d FLOPs built, %d from the spec; want %d", tc.spec.Layers(), got, fromSpec, tc.want)
		}
	}
}

// CIFAR and STL10 grow with the plan: every conv's count follows from its channels
// and the resolution it runs at.
func TestForwardFLOPsCNNs(t *testing.T) {
	conv := func(in, out, hw int) int64 { return int64(2 * in * out * 9 * hw * hw) }
	for _, tc := range []struct {
		arch string
		h    int
		want int64
	}{
		{"cifar", 32, conv(2, 64, 32) + conv(64, 64, 32) + conv(64, 128, 16) + conv(128, 128, 16) +
			conv(128, 256, 8) + conv(256, 256, 8) + 2*256*8*8*10},
		{"stl10", 96, conv(2, 64, 96) + conv(64, 64, 96) + conv(64, 128, 48) + conv(128, 128, 48) +
			conv(128, 256, 24) + conv(256, 256, 24) + conv(256, 256, 12) + conv(256, 256, 12) +
			2*256*12*12*10},
	} {
		n := build(t, Spec{Arch: tc.arch, InC: 2, H: tc.h, W: tc.h, K: 10, Norm: true})
		if got := n.ForwardFLOPs(); got != tc.want {
			t.Errorf("%s forward: %d FLOPs, want %d", tc.arch, got, tc.want)
		}
	}
}

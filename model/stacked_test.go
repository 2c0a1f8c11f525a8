package model

import (
	"testing"

	"emclust/torch"
	"emclust/torch/torchtest"
)

// A stacked network computes what its networks compute, each on its own batch: the
// scores and the relevance normalisation in training, its statistics, the gradients
// of a loss that sums theirs, and after Unstack each network's evaluation scores.
func TestStackedIsItsNetworks(t *testing.T) {
	const r, n = 3, 32
	for _, sp := range []Spec{
		{Arch: "mlp", In: 5, Hidden: []int{16, 8}, K: 4, Norm: true},
		{Arch: "mlp", In: 5, K: 3, Norm: true}, // a linear map
		{Arch: "mlp", In: 5, Hidden: []int{16}, K: 4},
	} {
		t.Run(sp.Layers(), func(t *testing.T) {
			s := torch.NewScope()
			defer s.Close()
			nets := make([]*Net, r)
			for i := range nets {
				nets[i] = build(t, sp) // each draws its own weights
				// Running statistics of their own, for Stack to carry over.
				nets[i].Forward(s, s.Randn([]int{n, sp.In}, torch.Float32, testDevice), true)
			}
			st, err := Stack(nets)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			x := s.Randn([]int{r, n, sp.In}, torch.Float32, testDevice)
			w := s.Randn([]int{r, n, sp.K}, torch.Float32, testDevice)
			a := st.Forward(s, x, true)
			s.Backward(s.Sum(s.Mul(a, w), false))
			for i, net := range nets {
				xi := s.Reshape(s.Narrow(x, 0, i, 1), n, sp.In)
				wi := s.Reshape(s.Narrow(w, 0, i, 1), n, sp.K)
				ai := net.Forward(s, xi, true)
				s.Backward(s.Sum(s.Mul(ai, wi), false))
				if got := s.Float32s(s.Narrow(a, 0, i, 1)); !torchtest.Near(got, s.Float32s(ai), 1e-5) {
					t.Errorf("network %d: stacked scores %v, alone %v", i, got, s.Float32s(ai))
				}
				for j, p := range net.Params() {
					if p.Name == "out.bias" && sp.Norm {
						// Zero before a normalisation in exact arithmetic: rounding is
						// all it has.
						continue
					}
					got := s.Float32s(st.Part(s, s.Grad(st.Params()[j]), j, i))
					if want := s.Float32s(s.Grad(p.Tensor)); !torchtest.Near(got, want, 1e-4) {
						t.Errorf("network %d: gradient of %s stacked %v, alone %v", i, p.Name, got, want)
					}
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			// Both updated the running statistics once; Unstack overwrites the
			// networks' with the stacked ones.
			var stats []float32
			for _, net := range nets {
				for _, b := range net.Buffers() {
					stats = append(stats, s.Float32s(b.Tensor)...)
				}
			}
			// New weights in the stack, then each network's evaluation is its part's.
			for _, p := range st.Params() {
				s.CopyInto(p, s.Randn(p.Shape(), torch.Float32, testDevice))
			}
			if err := st.Unstack(nets); err != nil {
				t.Fatal(err)
			}
			var unstacked []float32
			for _, net := range nets {
				for _, b := range net.Buffers() {
					unstacked = append(unstacked, s.Float32s(b.Tensor)...)
				}
			}
			if !torchtest.Near(unstacked, stats, 1e-5) {
				t.Errorf("running statistics stacked %v, alone %v", unstacked, stats)
			}
			a = st.Forward(s, x, false)
			for i, net := range nets {
				ai := net.Forward(s, s.Reshape(s.Narrow(x, 0, i, 1), n, sp.In), false)
				if got, want := s.Float32s(s.Narrow(a, 0, i, 1)), s.Float32s(ai); !torchtest.Near(got, want, 1e-5) {
					t.Errorf("network %d after unstacking: evaluation %v, stacked %v", i, want, got)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Only MLPs of one Spec and one head, in float32, stack.
func TestStackRefuses(t *testing.T) {
	mlp := Spec{Arch: "mlp", In: 5, Hidden: []int{8}, K: 3, Norm: true}
	wider := mlp
	wider.Hidden = []int{9}
	heads := mlp
	heads.Heads = 2
	bf16 := build(t, mlp)
	if err := bf16.SetCompute(Compute{Precision: "bf16"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		nets []*Net
	}{
		{"none", nil},
		{"different widths", []*Net{build(t, mlp), build(t, wider)}},
		{"two heads", []*Net{build(t, heads), build(t, heads)}},
		{"bf16", []*Net{build(t, mlp), bf16}},
		{"a CNN", []*Net{build(t, Spec{Arch: "mnist", InC: 2, H: 28, W: 28, K: 3, Norm: true})}},
	} {
		if st, err := Stack(tc.nets); err == nil {
			st.Close()
			t.Errorf("%s: stacked", tc.name)
		}
	}
}

package model

import (
	"fmt"

	"emclust/torch"
)

// ConvLayers returns the indices, in the layer list ForwardTo counts, of the
// convolution blocks (3×3 conv, BatchNorm, ReLU) in network order. An MLP has none.
// Reports use it to find the first and the last convolution without knowing the
// architecture's layer plan.
func (n *Net) ConvLayers() []int {
	var out []int
	for i, l := range n.layers {
		if _, ok := l.(*convBN); ok {
			out = append(out, i)
		}
	}
	return out
}

// NumLayers is the number of layers ForwardTo can stop after.
func (n *Net) NumLayers() int { return len(n.layers) }

// ForwardTo runs x through layers 0..layer in eval mode (running statistics) and
// returns that layer's output: for a convolution block, its N×C×H×W activations
// after BatchNorm and ReLU. It is there to inspect what intermediate units respond
// to, such as maximising one channel's activation; training never stops half-way.
// An out-of-range layer fails the scope.
func (n *Net) ForwardTo(s *torch.Scope, x *torch.Tensor, layer int) *torch.Tensor {
	if layer < 0 || layer >= len(n.layers) {
		s.Fail(fmt.Errorf("model: ForwardTo layer %d: %s has layers 0..%d", layer, n.Spec.Arch, len(n.layers)-1))
		return nil
	}
	x = n.input(s, x)
	for _, l := range n.layers[:layer+1] {
		x = l.forward(s, x, false)
	}
	return n.output(s, x)
}

package model

// ForwardFLOPs is the floating-point work of one forward pass of one input through
// the network, counting each multiply-add of a convolution or fully connected layer as
// two FLOPs — the convention of published GFLOP figures and of PyTorch's profiler.
//
// Counted: every 3×3 convolution (2·Cin·Cout·9 per output pixel; stride 1 and padding
// 1 keep the input's size) and every linear layer (2·in·out). Not counted: biases,
// BatchNorm, ReLU, max-pooling and the relevance normalisation, which are one to a few
// element-wise operations per activation (ElementwiseOps gives their size), nor the
// Sobel preprocessing, which runs before the network. On the paper's CNNs the
// convolutions are over 98% of the total.
//
// A training step costs about three forward passes per forward that backpropagates
// (the backward pass computes gradients for both the inputs and the weights of each
// layer, about twice the forward's work); see train.BenchResult.GFLOPPerStep.
func (n *Net) ForwardFLOPs() int64 {
	var total int64
	h, w := int64(n.Spec.H), int64(n.Spec.W)
	for _, l := range n.layers {
		switch l := l.(type) {
		case *convBN:
			sh := l.w.Shape() // out × in × kh × kw
			total += 2 * int64(sh[0]) * int64(sh[1]) * int64(sh[2]) * int64(sh[3]) * h * w
		case maxPool:
			h, w = h/2, w/2
		case *linear:
			sh := l.w.Shape() // out × in
			total += 2 * int64(sh[0]) * int64(sh[1])
		}
	}
	return total
}

// MLPForwardFLOPs is ForwardFLOPs of the MLP sp describes, without building it: for
// deciding how to train a network before its weights are drawn.
func (sp Spec) MLPForwardFLOPs() int64 {
	var total int64
	widths := sp.MLPWidths()
	for i := 1; i < len(widths); i++ {
		total += 2 * int64(widths[i-1]) * int64(widths[i])
	}
	return total
}

// ElementwiseOps is the number of activations that the element-wise stages of one
// forward pass of one input touch (BatchNorm and ReLU after each convolution, ReLU
// after each hidden linear layer, the max-pool inputs, and the K relevance scores that
// are normalised). ForwardFLOPs leaves these out; each costs a few FLOPs at most and
// they are memory-bound rather than compute-bound.
func (n *Net) ElementwiseOps() int64 {
	var total int64
	c, h, w := int64(n.Spec.InC), int64(n.Spec.H), int64(n.Spec.W)
	for _, l := range n.layers {
		switch l := l.(type) {
		case *convBN:
			c = int64(l.w.Shape()[0])
			total += 2 * c * h * w // BatchNorm, ReLU
		case maxPool:
			total += c * h * w
			h, w = h/2, w/2
		case *linear:
			c, h, w = int64(l.w.Shape()[0]), 1, 1
		case relu:
			total += c * h * w
		}
	}
	return total + int64(n.Spec.K*n.Spec.NumHeads())
}

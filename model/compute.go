package model

import (
	"fmt"

	"emclust/torch"
)

// Precisions lists the values Compute.Precision takes.
var Precisions = []string{"fp32", "bf16"}

// Compute says how a network does its arithmetic. It is a run setting, not part of
// the architecture: a checkpoint trained one way loads into a network set up another.
type Compute struct {
	// Precision "bf16" runs convolutions and fully connected layers in bfloat16, the
	// way PyTorch's autocast does: weights stay float32 (the optimiser updates them
	// there) and are cast for each product, activations between products stay
	// bfloat16, and the relevance scores are cast back to float32 before the
	// normalisation and the loss. "" and "fp32" run everything in float32.
	Precision string `json:"precision,omitempty"`
	// ChannelsLast lays images and convolution weights out N,H,W,C in memory, the
	// layout cuDNN's and oneDNN's fastest convolutions read without transposing.
	ChannelsLast bool `json:"channels_last,omitempty"`
}

// Validate checks the precision's name.
func (c Compute) Validate() error {
	switch c.Precision {
	case "", "fp32", "bf16":
		return nil
	}
	return fmt.Errorf("--precision %q: want fp32 or bf16", c.Precision)
}

func (c Compute) bf16() bool { return c.Precision == "bf16" }

// String names the arithmetic for logs: "fp32", "bf16, channels-last".
func (c Compute) String() string {
	out := c.Precision
	if out == "" {
		out = "fp32"
	}
	if c.ChannelsLast {
		out += ", channels-last"
	}
	return out
}

// SetCompute switches the network to c. Channels-last re-lays the convolution
// weights in place (their handles, and so the optimisers holding them, stay valid);
// it needs a CNN.
func (n *Net) SetCompute(c Compute) error {
	if err := c.Validate(); err != nil {
		return err
	}
	convs := n.ConvLayers()
	if c.ChannelsLast && len(convs) == 0 {
		return fmt.Errorf("channels-last lays out images for convolutions; the %s network has none", n.Spec.Arch)
	}
	s := torch.NoGrad()
	defer s.Close()
	for _, i := range convs {
		w := n.layers[i].(*convBN).w
		var laid *torch.Tensor
		if c.ChannelsLast {
			laid = s.ToChannelsLast(w)
		} else {
			laid = s.Contiguous(w)
		}
		if err := s.Err(); err != nil {
			return fmt.Errorf("model: lay out %s weights: %w", n.Spec.Arch, err)
		}
		if err := w.SetData(laid); err != nil {
			return fmt.Errorf("model: lay out %s weights: %w", n.Spec.Arch, err)
		}
	}
	for _, l := range n.layers {
		switch l := l.(type) {
		case *linear:
			l.bf16 = c.bf16()
		case *convBN:
			l.bf16 = c.bf16()
		}
	}
	n.compute = c
	return nil
}

// Compute returns the network's current arithmetic settings.
func (n *Net) Compute() Compute { return n.compute }

// input lays an image batch out as the network computes on it.
func (n *Net) input(s *torch.Scope, x *torch.Tensor) *torch.Tensor {
	if n.compute.ChannelsLast && x != nil && len(x.Shape()) == 4 {
		return s.ToChannelsLast(x)
	}
	return x
}

// output returns a layer stack's result in float32. In fp32 it is that already, and
// no dtype is asked of libtorch on the way.
func (n *Net) output(s *torch.Scope, y *torch.Tensor) *torch.Tensor {
	if n.compute.bf16() && y != nil && y.DType() != torch.Float32 {
		return s.Cast(y, torch.Float32)
	}
	return y
}

// lowp casts a float32 operand of a product to bfloat16 when on is set.
func lowp(s *torch.Scope, t *torch.Tensor, on bool) *torch.Tensor {
	if !on || t == nil || t.DType() == torch.BFloat16 {
		return t
	}
	return s.Cast(t, torch.BFloat16)
}

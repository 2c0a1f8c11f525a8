package torch

/*
#include <stdlib.h>
#include "csrc/emtorch.h"
*/
import "C"

import (
	"errors"
)

// Linear is x·wᵀ + b; b may be nil.
func (s *Scope) Linear(x, w, b *Tensor) *Tensor {
	if !s.ok("linear", x, w) {
		return nil
	}
	var h C.et_tensor
	return s.done("linear", C.et_linear(s.flags(), x.h, w.h, handle(b), &h), h)
}

// Conv2d is a 2-d convolution with square stride and padding; b may be nil.
func (s *Scope) Conv2d(x, w, b *Tensor, stride, padding int) *Tensor {
	if !s.ok("conv2d", x, w) {
		return nil
	}
	var h C.et_tensor
	return s.done("conv2d", C.et_conv2d(s.flags(), x.h, w.h, handle(b), C.int64_t(stride), C.int64_t(padding), &h), h)
}

// MaxPool2d pools square windows.
func (s *Scope) MaxPool2d(x *Tensor, kernel, stride int) *Tensor {
	if !s.ok("max_pool2d", x) {
		return nil
	}
	var h C.et_tensor
	return s.done("max_pool2d", C.et_max_pool2d(s.flags(), x.h, C.int64_t(kernel), C.int64_t(stride), &h), h)
}

// BatchNorm normalises over dim 1. weight, bias, runningMean and runningVar may be
// nil; in training it updates the running statistics in place.
func (s *Scope) BatchNorm(x, weight, bias, runningMean, runningVar *Tensor, training bool, momentum, eps float64) *Tensor {
	if !s.ok("batch_norm", x) {
		return nil
	}
	var h C.et_tensor
	e := C.et_batch_norm(s.flags(), x.h, handle(weight), handle(bias), handle(runningMean), handle(runningVar),
		cbool(training), C.double(momentum), C.double(eps), &h)
	return s.done("batch_norm", e, h)
}

// AffineGrid makes sampling grids (N, H, W, 2) from affine matrices theta (N, 2, 3).
func (s *Scope) AffineGrid(theta *Tensor, n, c, h, w int, alignCorners bool) *Tensor {
	if !s.ok("affine_grid", theta) {
		return nil
	}
	var out C.et_tensor
	e := C.et_affine_grid(s.flags(), theta.h, C.int64_t(n), C.int64_t(c), C.int64_t(h), C.int64_t(w), cbool(alignCorners), &out)
	return s.done("affine_grid", e, out)
}

// Grid-sample interpolation and padding modes.
const (
	Bilinear = C.ET_BILINEAR
	Nearest  = C.ET_NEAREST

	PadZeros      = C.ET_PAD_ZEROS
	PadBorder     = C.ET_PAD_BORDER
	PadReflection = C.ET_PAD_REFLECTION
)

// GridSample samples x at grid positions.
func (s *Scope) GridSample(x, grid *Tensor, mode, padding int, alignCorners bool) *Tensor {
	if !s.ok("grid_sample", x, grid) {
		return nil
	}
	var h C.et_tensor
	return s.done("grid_sample", C.et_grid_sample(s.flags(), x.h, grid.h, C.int(mode), C.int(padding), cbool(alignCorners), &h), h)
}

// NLLLoss is the mean negative log-likelihood of int64 targets under log-probabilities.
func (s *Scope) NLLLoss(logp, target *Tensor) *Tensor {
	if !s.ok("nll_loss", logp, target) {
		return nil
	}
	var h C.et_tensor
	return s.done("nll_loss", C.et_nll_loss(s.flags(), logp.h, target.h, &h), h)
}

// Grad returns t's accumulated gradient, or nil when it has none.
func (s *Scope) Grad(t *Tensor) *Tensor {
	if !s.ok("grad", t) {
		return nil
	}
	var h C.et_tensor
	return s.done("grad", C.et_grad(t.h, &h), h)
}

// Backward accumulates the gradients of a scalar loss into the leaves.
func (s *Scope) Backward(loss *Tensor) {
	if !s.ok("backward", loss) {
		return
	}
	if s.noGrad {
		s.err = errors.New("torch: backward in a no-grad scope")
		return
	}
	s.Fail(check("backward", C.et_backward(loss.h)))
}

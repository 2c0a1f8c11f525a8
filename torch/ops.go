package torch

/*
#include <stdlib.h>
#include "csrc/emtorch.h"
*/
import "C"

import (
	"fmt"
)

func (s *Scope) create(op C.int, name string, shape []int, v float64, dt DType, dev Device) *Tensor {
	if s.err != nil {
		return nil
	}
	var h C.et_tensor
	sp, nd := cshape(shape)
	e := C.et_create(s.flags(), op, sp, nd, C.double(v), C.int(dt), dev.ctype(), C.int(dev.Index), &h)
	return s.done(name, e, h)
}

// Zeros makes a tensor of zeros.
func (s *Scope) Zeros(shape []int, dt DType, dev Device) *Tensor {
	return s.create(C.ET_ZEROS, "zeros", shape, 0, dt, dev)
}

// Ones makes a tensor of ones.
func (s *Scope) Ones(shape []int, dt DType, dev Device) *Tensor {
	return s.create(C.ET_ONES, "ones", shape, 0, dt, dev)
}

// Empty makes an uninitialised tensor, to be filled in place.
func (s *Scope) Empty(shape []int, dt DType, dev Device) *Tensor {
	return s.create(C.ET_EMPTY, "empty", shape, 0, dt, dev)
}

// Full makes a tensor filled with v.
func (s *Scope) Full(shape []int, v float64, dt DType, dev Device) *Tensor {
	return s.create(C.ET_FULL, "full", shape, v, dt, dev)
}

// Rand draws uniform [0, 1) values from libtorch's seeded generator.
func (s *Scope) Rand(shape []int, dt DType, dev Device) *Tensor {
	return s.create(C.ET_RAND, "rand", shape, 0, dt, dev)
}

// Randn draws standard normal values.
func (s *Scope) Randn(shape []int, dt DType, dev Device) *Tensor {
	return s.create(C.ET_RANDN, "randn", shape, 0, dt, dev)
}

// Arange makes 0, 1, ..., n-1.
func (s *Scope) Arange(n int, dt DType, dev Device) *Tensor {
	if s.err != nil {
		return nil
	}
	var h C.et_tensor
	return s.done("arange", C.et_arange(C.int64_t(n), C.int(dt), dev.ctype(), C.int(dev.Index), &h), h)
}

// RandInt draws int64 values uniformly from [low, high).
func (s *Scope) RandInt(low, high int, shape []int, dev Device) *Tensor {
	if s.err != nil {
		return nil
	}
	var h C.et_tensor
	sp, nd := cshape(shape)
	return s.done("randint", C.et_randint(C.int64_t(low), C.int64_t(high), sp, nd, dev.ctype(), C.int(dev.Index), &h), h)
}

// RandPerm is a random permutation of 0..n-1 (int64).
func (s *Scope) RandPerm(n int, dev Device) *Tensor {
	if s.err != nil {
		return nil
	}
	var h C.et_tensor
	return s.done("randperm", C.et_randperm(C.int64_t(n), dev.ctype(), C.int(dev.Index), &h), h)
}

func (s *Scope) unary(op C.int, name string, a *Tensor) *Tensor {
	if !s.ok(name, a) {
		return nil
	}
	var h C.et_tensor
	return s.done(name, C.et_unary(s.flags(), op, a.h, &h), h)
}

func (s *Scope) Neg(a *Tensor) *Tensor { return s.unary(C.ET_NEG, "neg", a) }

func (s *Scope) Exp(a *Tensor) *Tensor { return s.unary(C.ET_EXP, "exp", a) }

func (s *Scope) Log(a *Tensor) *Tensor { return s.unary(C.ET_LOG, "log", a) }

func (s *Scope) Sqrt(a *Tensor) *Tensor { return s.unary(C.ET_SQRT, "sqrt", a) }

func (s *Scope) Abs(a *Tensor) *Tensor { return s.unary(C.ET_ABS, "abs", a) }

func (s *Scope) ReLU(a *Tensor) *Tensor { return s.unary(C.ET_RELU, "relu", a) }

// ReLUInPlace overwrites a with relu(a) and returns a new handle to it: no new
// activation to allocate and fill. Autograd refuses it where a's old values are
// still needed for a backward pass.
func (s *Scope) ReLUInPlace(a *Tensor) *Tensor { return s.unary(C.ET_RELU_INPLACE, "relu_", a) }

func (s *Scope) Sigmoid(a *Tensor) *Tensor { return s.unary(C.ET_SIGMOID, "sigmoid", a) }

func (s *Scope) LogSigmoid(a *Tensor) *Tensor { return s.unary(C.ET_LOGSIGMOID, "log_sigmoid", a) }

func (s *Scope) Sin(a *Tensor) *Tensor { return s.unary(C.ET_SIN, "sin", a) }

func (s *Scope) Cos(a *Tensor) *Tensor { return s.unary(C.ET_COS, "cos", a) }

func (s *Scope) Floor(a *Tensor) *Tensor { return s.unary(C.ET_FLOOR, "floor", a) }

func (s *Scope) Square(a *Tensor) *Tensor { return s.unary(C.ET_SQUARE, "square", a) }

func (s *Scope) Reciprocal(a *Tensor) *Tensor { return s.unary(C.ET_RECIPROCAL, "reciprocal", a) }

func (s *Scope) OnesLike(a *Tensor) *Tensor { return s.unary(C.ET_ONES_LIKE, "ones_like", a) }

func (s *Scope) Not(a *Tensor) *Tensor { return s.unary(C.ET_LOGICAL_NOT, "logical_not", a) }

func (s *Scope) IsFinite(a *Tensor) *Tensor { return s.unary(C.ET_ISFINITE, "isfinite", a) }

// CountNotFinite is how many of a's values are NaN or infinite (a sync on a GPU).
func (s *Scope) CountNotFinite(a *Tensor) int64 {
	return int64(s.Item(s.Sum(s.Not(s.IsFinite(a)), false)))
}

// Detach returns a view of a that autograd treats as a constant.
func (s *Scope) Detach(a *Tensor) *Tensor { return s.unary(C.ET_DETACH, "detach", a) }

// Contiguous returns a in row-major memory order.
func (s *Scope) Contiguous(a *Tensor) *Tensor { return s.unary(C.ET_CONTIGUOUS, "contiguous", a) }

// ToChannelsLast copies a 4-d tensor into N,H,W,C memory order (shape unchanged);
// convolutions then run their channels-last kernels and keep that layout.
func (s *Scope) ToChannelsLast(a *Tensor) *Tensor {
	return s.unary(C.ET_CHANNELS_LAST, "channels_last", a)
}

// Clone copies a into new memory.
func (s *Scope) Clone(a *Tensor) *Tensor { return s.unary(C.ET_CLONE, "clone", a) }

func (s *Scope) binary(op C.int, name string, a, b *Tensor) *Tensor {
	if !s.ok(name, a, b) {
		return nil
	}
	var h C.et_tensor
	return s.done(name, C.et_binary(s.flags(), op, a.h, b.h, &h), h)
}

func (s *Scope) Add(a, b *Tensor) *Tensor { return s.binary(C.ET_ADD, "add", a, b) }

func (s *Scope) Sub(a, b *Tensor) *Tensor { return s.binary(C.ET_SUB, "sub", a, b) }

func (s *Scope) Mul(a, b *Tensor) *Tensor { return s.binary(C.ET_MUL, "mul", a, b) }

func (s *Scope) Div(a, b *Tensor) *Tensor { return s.binary(C.ET_DIV, "div", a, b) }

func (s *Scope) MatMul(a, b *Tensor) *Tensor { return s.binary(C.ET_MATMUL, "matmul", a, b) }

func (s *Scope) Pow(a, b *Tensor) *Tensor { return s.binary(C.ET_POW, "pow", a, b) }

func (s *Scope) Minimum(a, b *Tensor) *Tensor { return s.binary(C.ET_MINIMUM, "minimum", a, b) }

func (s *Scope) scalar(op C.int, name string, a *Tensor, v float64) *Tensor {
	if !s.ok(name, a) {
		return nil
	}
	var h C.et_tensor
	return s.done(name, C.et_scalar(s.flags(), op, a.h, C.double(v), &h), h)
}

func (s *Scope) AddScalar(a *Tensor, v float64) *Tensor { return s.scalar(C.ET_ADD_S, "add", a, v) }

func (s *Scope) SubScalar(a *Tensor, v float64) *Tensor { return s.scalar(C.ET_SUB_S, "sub", a, v) }

func (s *Scope) MulScalar(a *Tensor, v float64) *Tensor { return s.scalar(C.ET_MUL_S, "mul", a, v) }

func (s *Scope) DivScalar(a *Tensor, v float64) *Tensor { return s.scalar(C.ET_DIV_S, "div", a, v) }

func (s *Scope) ClampMin(a *Tensor, v float64) *Tensor {
	return s.scalar(C.ET_CLAMP_MIN, "clamp_min", a, v)
}

func (s *Scope) LtScalar(a *Tensor, v float64) *Tensor { return s.scalar(C.ET_LT_S, "lt", a, v) }

// RSubScalar is v - a.
func (s *Scope) RSubScalar(a *Tensor, v float64) *Tensor { return s.scalar(C.ET_RSUB_S, "rsub", a, v) }

// Clamp limits a to [lo, hi].
func (s *Scope) Clamp(a *Tensor, lo, hi float64) *Tensor {
	if !s.ok("clamp", a) {
		return nil
	}
	var h C.et_tensor
	return s.done("clamp", C.et_clamp(s.flags(), a.h, C.double(lo), C.double(hi), &h), h)
}

func (s *Scope) reduce(op C.int, name string, a *Tensor, keepdim bool, dims []int) *Tensor {
	if !s.ok(name, a) {
		return nil
	}
	var h C.et_tensor
	dp, nd := cshape(dims)
	return s.done(name, C.et_reduce(s.flags(), op, a.h, dp, nd, cbool(keepdim), &h), h)
}

func (s *Scope) Sum(a *Tensor, keepdim bool, dims ...int) *Tensor {
	return s.reduce(C.ET_SUM, "sum", a, keepdim, dims)
}

func (s *Scope) Mean(a *Tensor, keepdim bool, dims ...int) *Tensor {
	return s.reduce(C.ET_MEAN, "mean", a, keepdim, dims)
}

func (s *Scope) Max(a *Tensor, keepdim bool, dims ...int) *Tensor {
	return s.reduce(C.ET_AMAX, "amax", a, keepdim, dims)
}

func (s *Scope) Min(a *Tensor, keepdim bool, dims ...int) *Tensor {
	return s.reduce(C.ET_AMIN, "amin", a, keepdim, dims)
}

// Var is the biased (population) variance.
func (s *Scope) Var(a *Tensor, keepdim bool, dims ...int) *Tensor {
	return s.reduce(C.ET_VAR_BIASED, "var", a, keepdim, dims)
}

func (s *Scope) LogSumExp(a *Tensor, keepdim bool, dims ...int) *Tensor {
	return s.reduce(C.ET_LOGSUMEXP, "logsumexp", a, keepdim, dims)
}

// ArgMax along dim (int64 indices). Like every reduction, keepdim comes before the
// dims.
func (s *Scope) ArgMax(a *Tensor, keepdim bool, dim int) *Tensor {
	return s.reduce(C.ET_ARGMAX, "argmax", a, keepdim, []int{dim})
}

func (s *Scope) dim(op C.int, name string, a *Tensor, d int) *Tensor {
	if !s.ok(name, a) {
		return nil
	}
	var h C.et_tensor
	return s.done(name, C.et_dim(s.flags(), op, a.h, C.int64_t(d), &h), h)
}

func (s *Scope) Softmax(a *Tensor, dim int) *Tensor { return s.dim(C.ET_SOFTMAX, "softmax", a, dim) }

func (s *Scope) LogSoftmax(a *Tensor, dim int) *Tensor {
	return s.dim(C.ET_LOG_SOFTMAX, "log_softmax", a, dim)
}

func (s *Scope) Unsqueeze(a *Tensor, dim int) *Tensor {
	return s.dim(C.ET_UNSQUEEZE, "unsqueeze", a, dim)
}

// Flatten merges dims from start on into one.
func (s *Scope) Flatten(a *Tensor, start int) *Tensor {
	return s.dim(C.ET_FLATTEN_FROM, "flatten", a, start)
}

func (s *Scope) shapeOp(name string, a *Tensor, shape []int, f func(C.int, C.et_tensor, *C.int64_t, C.int, *C.et_tensor) C.et_error) *Tensor {
	if !s.ok(name, a) {
		return nil
	}
	var h C.et_tensor
	sp, nd := cshape(shape)
	return s.done(name, f(s.flags(), a.h, sp, nd, &h), h)
}

// Reshape returns a with a new shape (one dim may be -1).
func (s *Scope) Reshape(a *Tensor, shape ...int) *Tensor {
	return s.shapeOp("reshape", a, shape, func(f C.int, t C.et_tensor, p *C.int64_t, n C.int, h *C.et_tensor) C.et_error {
		return C.et_reshape(f, t, p, n, h)
	})
}

// Expand broadcasts a to shape without copying.
func (s *Scope) Expand(a *Tensor, shape ...int) *Tensor {
	return s.shapeOp("expand", a, shape, func(f C.int, t C.et_tensor, p *C.int64_t, n C.int, h *C.et_tensor) C.et_error {
		return C.et_expand(f, t, p, n, h)
	})
}

// Transpose swaps two dims.
func (s *Scope) Transpose(a *Tensor, d0, d1 int) *Tensor {
	if !s.ok("transpose", a) {
		return nil
	}
	var h C.et_tensor
	return s.done("transpose", C.et_transpose(s.flags(), a.h, C.int64_t(d0), C.int64_t(d1), &h), h)
}

// Narrow is the view a[..., start:start+length, ...] along dim.
func (s *Scope) Narrow(a *Tensor, dim, start, length int) *Tensor {
	if !s.ok("narrow", a) {
		return nil
	}
	var h C.et_tensor
	return s.done("narrow", C.et_narrow(s.flags(), a.h, C.int64_t(dim), C.int64_t(start), C.int64_t(length), &h), h)
}

// IndexSelect gathers the slices of a at index along dim: int64, or int32 on the CPU
// (libtorch 1.13's kernel takes either).
func (s *Scope) IndexSelect(a *Tensor, dim int, index *Tensor) *Tensor {
	if !s.ok("index_select", a, index) {
		return nil
	}
	var h C.et_tensor
	return s.done("index_select", C.et_index_select(s.flags(), a.h, C.int64_t(dim), index.h, &h), h)
}

// IndexAdd returns a with the slices of src along dim added at the positions index
// names; repeated positions accumulate. On the CPU it is one pass over src, where a
// one-hot matrix product would be a pass of K times the work.
func (s *Scope) IndexAdd(a *Tensor, dim int, index, src *Tensor) *Tensor {
	if !s.ok("index_add", a, index, src) {
		return nil
	}
	var h C.et_tensor
	return s.done("index_add", C.et_index_add(s.flags(), a.h, C.int64_t(dim), index.h, src.h, &h), h)
}

// SqDist is the M×K squared distances between the rows of x (M×D) and of c (K×D),
// given x's squared row norms xsq (M×1): ||x||² − 2x·cᵀ + ||c||², clamped at 0, made
// in one tensor, where the same expression in ops makes four temporaries of its size.
func (s *Scope) SqDist(x, xsq, c *Tensor) *Tensor {
	if !s.ok("sq_dist", x, xsq, c) {
		return nil
	}
	var h C.et_tensor
	return s.done("sq_dist", C.et_sq_dist(s.flags(), x.h, xsq.h, c.h, &h), h)
}

// Cat joins tensors along an existing dim.
func (s *Scope) Cat(dim int, ts ...*Tensor) *Tensor { return s.cat("cat", dim, false, ts) }

// Stack joins tensors along a new dim.
func (s *Scope) Stack(dim int, ts ...*Tensor) *Tensor { return s.cat("stack", dim, true, ts) }

func (s *Scope) cat(name string, dim int, stack bool, ts []*Tensor) *Tensor {
	if !s.ok(name, ts...) {
		return nil
	}
	if len(ts) == 0 {
		s.err = fmt.Errorf("torch: %s: no tensors", name)
		return nil
	}
	// A Go slice of C handles holds no Go pointers, so C may read it.
	hs := make([]C.et_tensor, len(ts))
	for i, t := range ts {
		hs[i] = t.h
	}
	var h C.et_tensor
	return s.done(name, C.et_cat(s.flags(), &hs[0], C.int(len(ts)), C.int64_t(dim), cbool(stack), &h), h)
}

// OneHot encodes int64 indices as k-wide rows of 0/1 (int64).
func (s *Scope) OneHot(index *Tensor, k int) *Tensor {
	if !s.ok("one_hot", index) {
		return nil
	}
	var h C.et_tensor
	return s.done("one_hot", C.et_one_hot(s.flags(), index.h, C.int64_t(k), &h), h)
}

// CopyInto copies src into dst (broadcasting, converting).
func (s *Scope) CopyInto(dst, src *Tensor) {
	if s.ok("copy_", dst, src) {
		s.Fail(check("copy_", C.et_copy_(dst.h, src.h)))
	}
}

// Uniform fills t with uniform values in [lo, hi).
func (s *Scope) Uniform(t *Tensor, lo, hi float64) {
	if s.ok("uniform_", t) {
		s.Fail(check("uniform_", C.et_uniform_(t.h, C.double(lo), C.double(hi))))
	}
}

// Fill sets every element of t to v.
func (s *Scope) Fill(t *Tensor, v float64) {
	if s.ok("fill_", t) {
		s.Fail(check("fill_", C.et_fill_(t.h, C.double(v))))
	}
}

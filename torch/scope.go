package torch

/*
#include <stdlib.h>
#include "csrc/emtorch.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Scope owns the tensors its ops make and holds the first error among them.
// The zero value is not usable; call NewScope.
type Scope struct {
	live   map[*Tensor]struct{}
	err    error
	noGrad bool
}

// NewScope returns an empty scope with gradients on. Its error starts as CheckABI's,
// so a mismatched shim runs none of its ops.
func NewScope() *Scope { return &Scope{live: make(map[*Tensor]struct{}), err: CheckABI()} }

// NoGrad returns an empty scope whose ops record no autograd graph.
func NoGrad() *Scope {
	s := NewScope()
	s.noGrad = true
	return s
}

// Err is the first error of any op in the scope.
func (s *Scope) Err() error { return s.err }

// Fail records err as the scope's error unless it already has one; use it to stop a
// computation for a reason found in Go.
func (s *Scope) Fail(err error) {
	if s.err == nil && err != nil {
		s.err = err
	}
}

// Close frees every tensor the scope still owns and returns the scope's error.
func (s *Scope) Close() error {
	for t := range s.live {
		t.scope = nil
		C.et_free(t.h)
		t.h = nil
	}
	clear(s.live)
	return s.err
}

// Len is the number of tensors the scope owns.
func (s *Scope) Len() int { return len(s.live) }

// Keep moves t out of the scope: the caller now owns it and must Free it.
func (s *Scope) Keep(t *Tensor) *Tensor {
	if t == nil {
		return nil
	}
	if t.scope == s {
		delete(s.live, t)
		t.scope = nil
	}
	return t
}

// Adopt moves a caller-owned tensor into the scope, to be freed with it.
func (s *Scope) Adopt(t *Tensor) *Tensor {
	if t == nil || t.h == nil {
		return t
	}
	if t.scope != nil {
		t.scope.forget(t)
	}
	t.scope = s
	s.live[t] = struct{}{}
	return t
}

func (s *Scope) forget(t *Tensor) { delete(s.live, t) }

func (s *Scope) flags() C.int {
	if s.noGrad {
		return C.ET_NO_GRAD
	}
	return 0
}

// ok reports whether the scope can run an op on ts: no earlier error and no nil or
// freed input.
func (s *Scope) ok(op string, ts ...*Tensor) bool {
	if s.err != nil {
		return false
	}
	for i, t := range ts {
		if t == nil || t.h == nil {
			s.err = fmt.Errorf("torch: %s: input %d is nil or freed", op, i)
			return false
		}
	}
	return true
}

// done turns the result of a shim call into a scoped tensor.
func (s *Scope) done(op string, e C.et_error, h C.et_tensor) *Tensor {
	if err := check(op, e); err != nil {
		s.err = err
		return nil
	}
	if h == nil {
		return nil
	}
	t := &Tensor{h: h, scope: s}
	s.live[t] = struct{}{}
	return t
}

// Host data.

// FromFloat32 copies data into a new tensor of the given shape on dev.
func (s *Scope) FromFloat32(data []float32, shape []int, dev Device) *Tensor {
	return fromHost(s, hostPtr(data), len(data), Float32, shape, dev)
}

// FromInt64 copies data into a new int64 tensor.
func (s *Scope) FromInt64(data []int64, shape []int, dev Device) *Tensor {
	return fromHost(s, hostPtr(data), len(data), Int64, shape, dev)
}

// FromUint8 copies data into a new uint8 tensor.
func (s *Scope) FromUint8(data []uint8, shape []int, dev Device) *Tensor {
	return fromHost(s, hostPtr(data), len(data), Uint8, shape, dev)
}

func fromHost(s *Scope, p unsafe.Pointer, n int, dt DType, shape []int, dev Device) *Tensor {
	if s.err != nil {
		return nil
	}
	want := 1
	for _, d := range shape {
		want *= d
	}
	if want != n {
		s.err = fmt.Errorf("torch: from_host: %d values do not fill shape %v", n, shape)
		return nil
	}
	var h C.et_tensor
	sp, nd := cshape(shape)
	var buf unsafe.Pointer
	if p == nil {
		// from_blob needs a pointer even for zero elements.
		buf = C.malloc(1)
		defer C.free(buf)
		p = buf
	}
	e := C.et_from_host(p, C.int(dt), sp, nd, dev.ctype(), C.int(dev.Index), &h)
	return s.done("from_host", e, h)
}

// Float32s copies t to the host as float32 values (converting its dtype).
func (s *Scope) Float32s(t *Tensor) []float32 {
	if !s.ok("to_host", t) {
		return nil
	}
	out := make([]float32, t.Numel())
	s.toHost(t, Float32, hostPtr(out), len(out))
	return out
}

// Int64s copies t to the host as int64 values.
func (s *Scope) Int64s(t *Tensor) []int64 {
	if !s.ok("to_host", t) {
		return nil
	}
	out := make([]int64, t.Numel())
	s.toHost(t, Int64, hostPtr(out), len(out))
	return out
}

// Uint8s copies t to the host as bytes.
func (s *Scope) Uint8s(t *Tensor) []uint8 {
	if !s.ok("to_host", t) {
		return nil
	}
	out := make([]uint8, t.Numel())
	s.toHost(t, Uint8, hostPtr(out), len(out))
	return out
}

// Item returns the single value of a one-element tensor as float64.
func (s *Scope) Item(t *Tensor) float64 {
	if !s.ok("item", t) {
		return 0
	}
	if n := t.Numel(); n != 1 {
		s.err = fmt.Errorf("torch: item: tensor has %d elements, want 1", n)
		return 0
	}
	var v float64
	s.toHost(t, Float64, unsafe.Pointer(&v), 1)
	return v
}

func (s *Scope) toHost(t *Tensor, dt DType, p unsafe.Pointer, n int) {
	if n == 0 {
		return
	}
	if err := check("to_host", C.et_to_host(t.h, C.int(dt), p, C.int64_t(n))); err != nil {
		s.err = err
	}
}

// Creation.

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

// Moves and casts.

// To moves t to dev, converting to dt.
func (s *Scope) To(t *Tensor, dev Device, dt DType) *Tensor {
	return s.to(t, dev, C.int(dt), false)
}

// ToDevice moves t to dev, keeping its dtype. nonBlocking lets a copy from pinned
// memory overlap with compute.
func (s *Scope) ToDevice(t *Tensor, dev Device, nonBlocking bool) *Tensor {
	return s.to(t, dev, -1, nonBlocking)
}

// Cast converts t's dtype on its device.
func (s *Scope) Cast(t *Tensor, dt DType) *Tensor {
	if !s.ok("to", t) {
		return nil
	}
	return s.to(t, t.Device(), C.int(dt), false)
}

func (s *Scope) to(t *Tensor, dev Device, dt C.int, nonBlocking bool) *Tensor {
	if !s.ok("to", t) {
		return nil
	}
	var h C.et_tensor
	return s.done("to", C.et_to(s.flags(), t.h, dt, dev.ctype(), C.int(dev.Index), cbool(nonBlocking), &h), h)
}

// PinMemory copies a CPU tensor into page-locked memory (CUDA builds only).
func (s *Scope) PinMemory(t *Tensor) *Tensor {
	if !s.ok("pin_memory", t) {
		return nil
	}
	var h C.et_tensor
	return s.done("pin_memory", C.et_pin_memory(t.h, &h), h)
}

// Elementwise.

func (s *Scope) unary(op C.int, name string, a *Tensor) *Tensor {
	if !s.ok(name, a) {
		return nil
	}
	var h C.et_tensor
	return s.done(name, C.et_unary(s.flags(), op, a.h, &h), h)
}

func (s *Scope) Neg(a *Tensor) *Tensor        { return s.unary(C.ET_NEG, "neg", a) }
func (s *Scope) Exp(a *Tensor) *Tensor        { return s.unary(C.ET_EXP, "exp", a) }
func (s *Scope) Log(a *Tensor) *Tensor        { return s.unary(C.ET_LOG, "log", a) }
func (s *Scope) Sqrt(a *Tensor) *Tensor       { return s.unary(C.ET_SQRT, "sqrt", a) }
func (s *Scope) Abs(a *Tensor) *Tensor        { return s.unary(C.ET_ABS, "abs", a) }
func (s *Scope) ReLU(a *Tensor) *Tensor       { return s.unary(C.ET_RELU, "relu", a) }
func (s *Scope) Sigmoid(a *Tensor) *Tensor    { return s.unary(C.ET_SIGMOID, "sigmoid", a) }
func (s *Scope) LogSigmoid(a *Tensor) *Tensor { return s.unary(C.ET_LOGSIGMOID, "log_sigmoid", a) }
func (s *Scope) Tanh(a *Tensor) *Tensor       { return s.unary(C.ET_TANH, "tanh", a) }
func (s *Scope) Sin(a *Tensor) *Tensor        { return s.unary(C.ET_SIN, "sin", a) }
func (s *Scope) Cos(a *Tensor) *Tensor        { return s.unary(C.ET_COS, "cos", a) }
func (s *Scope) Floor(a *Tensor) *Tensor      { return s.unary(C.ET_FLOOR, "floor", a) }
func (s *Scope) Square(a *Tensor) *Tensor     { return s.unary(C.ET_SQUARE, "square", a) }
func (s *Scope) Reciprocal(a *Tensor) *Tensor { return s.unary(C.ET_RECIPROCAL, "reciprocal", a) }
func (s *Scope) ZerosLike(a *Tensor) *Tensor  { return s.unary(C.ET_ZEROS_LIKE, "zeros_like", a) }
func (s *Scope) OnesLike(a *Tensor) *Tensor   { return s.unary(C.ET_ONES_LIKE, "ones_like", a) }
func (s *Scope) RandLike(a *Tensor) *Tensor   { return s.unary(C.ET_RAND_LIKE, "rand_like", a) }
func (s *Scope) RandnLike(a *Tensor) *Tensor  { return s.unary(C.ET_RANDN_LIKE, "randn_like", a) }
func (s *Scope) Not(a *Tensor) *Tensor        { return s.unary(C.ET_LOGICAL_NOT, "logical_not", a) }
func (s *Scope) IsFinite(a *Tensor) *Tensor   { return s.unary(C.ET_ISFINITE, "isfinite", a) }

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

func (s *Scope) Add(a, b *Tensor) *Tensor       { return s.binary(C.ET_ADD, "add", a, b) }
func (s *Scope) Sub(a, b *Tensor) *Tensor       { return s.binary(C.ET_SUB, "sub", a, b) }
func (s *Scope) Mul(a, b *Tensor) *Tensor       { return s.binary(C.ET_MUL, "mul", a, b) }
func (s *Scope) Div(a, b *Tensor) *Tensor       { return s.binary(C.ET_DIV, "div", a, b) }
func (s *Scope) MatMul(a, b *Tensor) *Tensor    { return s.binary(C.ET_MATMUL, "matmul", a, b) }
func (s *Scope) Pow(a, b *Tensor) *Tensor       { return s.binary(C.ET_POW, "pow", a, b) }
func (s *Scope) Maximum(a, b *Tensor) *Tensor   { return s.binary(C.ET_MAXIMUM, "maximum", a, b) }
func (s *Scope) Minimum(a, b *Tensor) *Tensor   { return s.binary(C.ET_MINIMUM, "minimum", a, b) }
func (s *Scope) Eq(a, b *Tensor) *Tensor        { return s.binary(C.ET_EQ, "eq", a, b) }
func (s *Scope) Lt(a, b *Tensor) *Tensor        { return s.binary(C.ET_LT, "lt", a, b) }
func (s *Scope) Gt(a, b *Tensor) *Tensor        { return s.binary(C.ET_GT, "gt", a, b) }
func (s *Scope) Remainder(a, b *Tensor) *Tensor { return s.binary(C.ET_REMAINDER, "remainder", a, b) }
func (s *Scope) Atan2(a, b *Tensor) *Tensor     { return s.binary(C.ET_ATAN2, "atan2", a, b) }

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
func (s *Scope) PowScalar(a *Tensor, v float64) *Tensor { return s.scalar(C.ET_POW_S, "pow", a, v) }
func (s *Scope) ClampMin(a *Tensor, v float64) *Tensor {
	return s.scalar(C.ET_CLAMP_MIN, "clamp_min", a, v)
}
func (s *Scope) ClampMax(a *Tensor, v float64) *Tensor {
	return s.scalar(C.ET_CLAMP_MAX, "clamp_max", a, v)
}
func (s *Scope) LtScalar(a *Tensor, v float64) *Tensor { return s.scalar(C.ET_LT_S, "lt", a, v) }
func (s *Scope) GtScalar(a *Tensor, v float64) *Tensor { return s.scalar(C.ET_GT_S, "gt", a, v) }
func (s *Scope) EqScalar(a *Tensor, v float64) *Tensor { return s.scalar(C.ET_EQ_S, "eq", a, v) }

// RSubScalar is v - a.
func (s *Scope) RSubScalar(a *Tensor, v float64) *Tensor { return s.scalar(C.ET_RSUB_S, "rsub", a, v) }

// RemainderScalar is a mod v with the sign of v (Python's %).
func (s *Scope) RemainderScalar(a *Tensor, v float64) *Tensor {
	return s.scalar(C.ET_REMAINDER_S, "remainder", a, v)
}

// Clamp limits a to [lo, hi].
func (s *Scope) Clamp(a *Tensor, lo, hi float64) *Tensor {
	if !s.ok("clamp", a) {
		return nil
	}
	var h C.et_tensor
	return s.done("clamp", C.et_clamp(s.flags(), a.h, C.double(lo), C.double(hi), &h), h)
}

// Where picks a where cond is true, else b.
func (s *Scope) Where(cond, a, b *Tensor) *Tensor {
	if !s.ok("where", cond, a, b) {
		return nil
	}
	var h C.et_tensor
	return s.done("where", C.et_where(s.flags(), cond.h, a.h, b.h, &h), h)
}

// Reductions. With no dims they reduce over all elements.

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

// Std is the biased (population) standard deviation.
func (s *Scope) Std(a *Tensor, keepdim bool, dims ...int) *Tensor {
	return s.reduce(C.ET_STD_BIASED, "std", a, keepdim, dims)
}

func (s *Scope) LogSumExp(a *Tensor, keepdim bool, dims ...int) *Tensor {
	return s.reduce(C.ET_LOGSUMEXP, "logsumexp", a, keepdim, dims)
}

// ArgMax along dim (int64 indices).
func (s *Scope) ArgMax(a *Tensor, dim int, keepdim bool) *Tensor {
	return s.reduce(C.ET_ARGMAX, "argmax", a, keepdim, []int{dim})
}

// ArgMin along dim.
func (s *Scope) ArgMin(a *Tensor, dim int, keepdim bool) *Tensor {
	return s.reduce(C.ET_ARGMIN, "argmin", a, keepdim, []int{dim})
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
func (s *Scope) Squeeze(a *Tensor, dim int) *Tensor { return s.dim(C.ET_SQUEEZE, "squeeze", a, dim) }
func (s *Scope) CumSum(a *Tensor, dim int) *Tensor  { return s.dim(C.ET_CUMSUM, "cumsum", a, dim) }

// Flatten merges dims from start on into one.
func (s *Scope) Flatten(a *Tensor, start int) *Tensor {
	return s.dim(C.ET_FLATTEN_FROM, "flatten", a, start)
}

// Shapes and indexing.

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

// Permute reorders dims.
func (s *Scope) Permute(a *Tensor, dims ...int) *Tensor {
	return s.shapeOp("permute", a, dims, func(f C.int, t C.et_tensor, p *C.int64_t, n C.int, h *C.et_tensor) C.et_error {
		return C.et_permute(f, t, p, n, h)
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

// IndexSelect gathers the slices of a at index (int64) along dim.
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

// Gather picks a's elements at index along dim.
func (s *Scope) Gather(a *Tensor, dim int, index *Tensor) *Tensor {
	if !s.ok("gather", a, index) {
		return nil
	}
	var h C.et_tensor
	return s.done("gather", C.et_gather(s.flags(), a.h, C.int64_t(dim), index.h, &h), h)
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

// Neural-network functions.

func handle(t *Tensor) C.et_tensor {
	if t == nil {
		return nil
	}
	return t.h
}

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

// In-place updates, never recorded by autograd.

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

// Autograd.

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

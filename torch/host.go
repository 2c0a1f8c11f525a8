package torch

/*
#include <stdlib.h>
#include "csrc/emtorch.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// FromFloat32 copies data into a new tensor of the given shape on dev.
func (s *Scope) FromFloat32(data []float32, shape []int, dev Device) *Tensor {
	return fromHost(s, hostPtr(data), len(data), Float32, shape, dev)
}

// FromFloat64 copies data into a new float64 tensor.
func (s *Scope) FromFloat64(data []float64, shape []int, dev Device) *Tensor {
	return fromHost(s, hostPtr(data), len(data), Float64, shape, dev)
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
	// Checked: a product that wraps could match n for a shape far larger.
	if want, ok := shapeBytes(shape, 1, math.MaxInt); !ok || want != n {
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

// copyFromHost copies n bytes at p, laid out as dst's dtype and shape, into dst.
func copyFromHost(dst *Tensor, p unsafe.Pointer, n int) error {
	return check("copy_from_host", C.et_copy_from_host(dst.h, p, C.int64_t(n)))
}

// HostFloats is float32 memory outside Go's heap that a CPU tensor can take over
// without a copy (Scope.AdoptFloat32): a large table parsed into it is held once,
// not twice, on its way to a tensor. Go code reads and writes it through Slice.
type HostFloats struct {
	p unsafe.Pointer
	n int
}

// NewHostFloats allocates room for n float32 values, uninitialised (fresh pages from
// the kernel are zero, and touched only when written).
func NewHostFloats(n int) (*HostFloats, error) {
	if n < 0 || n > math.MaxInt64/4 {
		return nil, fmt.Errorf("torch: host_alloc: %d values", n)
	}
	var p unsafe.Pointer
	if err := check("host_alloc", C.et_host_alloc(C.int64_t(n)*4, &p)); err != nil {
		return nil, err
	}
	return &HostFloats{p: p, n: n}, nil
}

// Slice is the memory as n float32 values; nil once freed or adopted.
func (h *HostFloats) Slice() []float32 {
	if h == nil || h.p == nil {
		return nil
	}
	return unsafe.Slice((*float32)(h.p), h.n)
}

// Holds reports whether x's values start at h's first: whether a parser that may
// have outgrown h left them there.
func (h *HostFloats) Holds(x []float32) bool {
	return h != nil && h.p != nil && len(x) > 0 && unsafe.Pointer(unsafe.SliceData(x)) == h.p
}

// Free gives the memory back unless a tensor took it; h may be nil, and freed twice.
func (h *HostFloats) Free() {
	if h == nil || h.p == nil {
		return
	}
	C.et_host_free(h.p)
	h.p = nil
}

// AdoptFloat32 makes a CPU tensor of the given shape of h's first values, without a
// copy: the tensor owns the memory from then on, and h is empty (Slice is nil), even
// when the tensor could not be made. Slices taken from h before must not be used after.
func (s *Scope) AdoptFloat32(h *HostFloats, shape []int) *Tensor {
	if s.err != nil {
		h.Free()
		return nil
	}
	if h == nil || h.p == nil {
		s.err = errors.New("torch: adopt_host: no memory to adopt")
		return nil
	}
	if want, ok := shapeBytes(shape, 1, math.MaxInt); !ok || want > h.n {
		s.err = fmt.Errorf("torch: adopt_host: %d values do not fill shape %v", h.n, shape)
		h.Free()
		return nil
	}
	p := h.p
	h.p = nil
	var t C.et_tensor
	sp, nd := cshape(shape)
	e := C.et_adopt_host(p, C.int(Float32), sp, nd, &t)
	return s.done("adopt_host", e, t)
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

// Float32sInto is Float32s into buf's room when it has enough, so that a loop
// copying large tensors to the host reuses one buffer.
func (s *Scope) Float32sInto(buf []float32, t *Tensor) []float32 {
	if !s.ok("to_host", t) {
		return nil
	}
	n := t.Numel()
	if cap(buf) < n {
		buf = make([]float32, n)
	}
	buf = buf[:n]
	s.toHost(t, Float32, hostPtr(buf), n)
	return buf
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

package torch

/*
#include <stdlib.h>
#include "csrc/emtorch.h"
*/
import "C"

import (
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

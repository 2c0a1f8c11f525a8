// Package torch is emclust's small binding to libtorch: a C ABI shim (csrc/) of opaque
// handles over the C++ API, and Go types on top.
//
// Memory and errors go through a Scope. Every op is a Scope method; the tensor it makes
// belongs to the scope and is freed when the scope closes, so a training step frees all
// of its temporaries at once, deterministically (the Go GC cannot see GPU memory).
// A tensor that must outlive the step is moved out with Keep and freed by its owner.
//
// The files follow that split: scope.go (ownership and errors), host.go (copies between
// Go memory and devices), ops.go (tensor ops), nn.go (layers and autograd), adam.go,
// safetensors.go. An op joins ops.go when code needs it, not before.
//
// A Scope also holds the first error of its ops (the errWriter pattern): after a failure
// every later op is a no-op returning nil, and Err reports what went wrong. The error
// comes back from the failing call itself, never from a thread-local slot read later.
//
// Thread-local libtorch state (grad mode) is passed with each call from the Scope's
// settings, so results do not depend on the OS thread a goroutine runs on. Speed does:
// the CPU kernels' OpenMP team and thread count belong to the calling OS thread, which
// is why cmd/emclust locks its main goroutine to one. A Scope is not safe for
// concurrent use; use one per goroutine.
package torch

/*
#cgo CXXFLAGS: -std=c++17
#cgo LDFLAGS: -L${SRCDIR}/../build -lemtorch -Wl,-rpath,$ORIGIN -Wl,-rpath,${SRCDIR}/../build
#include <stdlib.h>
#include "csrc/emtorch.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// DType is a tensor element type.
type DType int

// Element types the binding moves across the C boundary.
const (
	Float32  DType = C.ET_FLOAT32
	Float64  DType = C.ET_FLOAT64
	Int64    DType = C.ET_INT64
	Uint8    DType = C.ET_UINT8
	BFloat16 DType = C.ET_BFLOAT16
	Bool     DType = C.ET_BOOL
	Int32    DType = C.ET_INT32
	Float16  DType = C.ET_FLOAT16
	// NoDType is the DType of a nil or freed tensor, which has none.
	NoDType DType = -1
)

func (d DType) String() string {
	switch d {
	case NoDType:
		return "no dtype (nil or freed tensor)"
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	case Int64:
		return "int64"
	case Uint8:
		return "uint8"
	case BFloat16:
		return "bfloat16"
	case Bool:
		return "bool"
	case Int32:
		return "int32"
	case Float16:
		return "float16"
	}
	return fmt.Sprintf("dtype(%d)", int(d))
}

// Size is the element size in bytes.
func (d DType) Size() int {
	switch d {
	case Float64, Int64:
		return 8
	case Float32, Int32:
		return 4
	case BFloat16, Float16:
		return 2
	}
	return 1
}

// Device names where a tensor lives.
type Device struct {
	CUDA  bool
	Index int
}

// CPU is the host device.
var CPU = Device{}

func (d Device) String() string {
	if d.CUDA {
		return fmt.Sprintf("cuda:%d", d.Index)
	}
	return "cpu"
}

func (d Device) ctype() C.int {
	if d.CUDA {
		return C.ET_CUDA
	}
	return C.ET_CPU
}

// ParseDevice accepts cpu, cuda, cuda:N and auto (CUDA when present, else CPU), and
// checks that a CUDA device exists.
func ParseDevice(s string) (Device, error) {
	switch {
	case s == "" || s == "auto":
		if CUDAAvailable() {
			return Device{CUDA: true}, nil
		}
		return CPU, nil
	case s == "cpu":
		return CPU, nil
	case s == "cuda" || strings.HasPrefix(s, "cuda:"):
		idx := 0
		if s != "cuda" {
			if _, err := fmt.Sscanf(s, "cuda:%d", &idx); err != nil || idx < 0 || fmt.Sprintf("cuda:%d", idx) != s {
				return CPU, fmt.Errorf("device %q: want cuda:N with N a device number", s)
			}
		}
		n := CUDADeviceCount()
		if !CUDAAvailable() || n == 0 {
			if BuiltWithCUDA() {
				return CPU, fmt.Errorf("device %q: no CUDA device found (libtorch %s with CUDA, driver sees none)", s, Version())
			}
			return CPU, fmt.Errorf("device %q: the emtorch shim is a CPU build (libtorch %s); build it against a CUDA libtorch (make cuda-lib LIBTORCH=...) and put it first on LD_LIBRARY_PATH", s, Version())
		}
		if idx >= n {
			return CPU, fmt.Errorf("device %q: only %d CUDA device(s)", s, n)
		}
		return Device{CUDA: true, Index: idx}, nil
	}
	return CPU, fmt.Errorf("unknown device %q: want auto, cpu, cuda or cuda:N", s)
}

// Tensor is a handle to a libtorch tensor. It is owned by the scope that made it, or
// by the caller after Scope.Keep.
type Tensor struct {
	h     C.et_tensor
	scope *Scope
}

// Free releases the tensor now. Freeing twice or freeing nil is a no-op.
func (t *Tensor) Free() {
	if t == nil || t.h == nil {
		return
	}
	if t.scope != nil {
		t.scope.forget(t)
	}
	dropError(C.et_free(t.h))
	t.h = nil
}

// Shape returns the tensor's sizes; nil for a nil or freed tensor.
func (t *Tensor) Shape() []int {
	if t == nil || t.h == nil {
		return nil
	}
	var small [16]C.int64_t
	dims := small[:]
	var n C.int
	e := C.et_shape(t.h, &dims[0], C.int(len(dims)), &n)
	if e != nil && int(n) > len(dims) {
		// More dimensions than most tensors have: et_shape said how many.
		C.et_free_error(e)
		dims = make([]C.int64_t, int(n))
		e = C.et_shape(t.h, &dims[0], C.int(len(dims)), &n)
	}
	if e != nil {
		C.et_free_error(e)
		return nil
	}
	out := make([]int, int(n))
	for i := range out {
		out[i] = int(dims[i])
	}
	return out
}

// Numel is the number of elements.
func (t *Tensor) Numel() int {
	s := t.Shape()
	if s == nil {
		return 0
	}
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Dim returns the size of dimension i (negative counts from the end); 0 for a nil
// tensor or a dimension it does not have, so code after a failed op need not check.
func (t *Tensor) Dim(i int) int {
	s := t.Shape()
	if i < 0 {
		i += len(s)
	}
	if i < 0 || i >= len(s) {
		return 0
	}
	return s[i]
}

func (t *Tensor) info() (dt DType, dev Device, grad bool) {
	if t == nil || t.h == nil {
		return NoDType, dev, false
	}
	var d, typ, idx, rg C.int
	if e := C.et_info(t.h, &d, &typ, &idx, &rg); e != nil {
		C.et_free_error(e)
		return NoDType, dev, false
	}
	return DType(d), Device{CUDA: typ == C.ET_CUDA, Index: int(idx)}, rg != 0
}

// DType is the element type.
func (t *Tensor) DType() DType { d, _, _ := t.info(); return d }

// Device is where the tensor lives.
func (t *Tensor) Device() Device { _, d, _ := t.info(); return d }

// RequiresGrad reports whether autograd tracks the tensor.
func (t *Tensor) RequiresGrad() bool { _, _, g := t.info(); return g }

// SetRequiresGrad marks a leaf tensor as a parameter whose gradient backward fills.
func (t *Tensor) SetRequiresGrad(on bool) error {
	if t == nil || t.h == nil {
		return errors.New("torch: SetRequiresGrad on a freed tensor")
	}
	return check("requires_grad", C.et_set_requires_grad(t.h, cbool(on)))
}

// SetData makes t hold src's data (PyTorch's `t.data = src`), keeping t's handle,
// its requires-grad flag and every reference to it: how a parameter that optimisers
// already hold changes its memory layout. It drops t's gradient, if any.
func (t *Tensor) SetData(src *Tensor) error {
	if t == nil || t.h == nil || src == nil || src.h == nil {
		return errors.New("torch: SetData on a freed tensor")
	}
	return check("set_data", C.et_set_data(t.h, src.h))
}

// ChannelsLast reports whether a 4-d tensor is laid out N,H,W,C in memory.
func (t *Tensor) ChannelsLast() bool {
	if t == nil || t.h == nil {
		return false
	}
	var v C.int
	if e := C.et_is_channels_last(t.h, &v); e != nil {
		C.et_free_error(e)
		return false
	}
	return v != 0
}

// check turns a shim error slot into a Go error and frees the C string.
func check(op string, e C.et_error) error {
	if e == nil {
		return nil
	}
	msg := strings.TrimSpace(C.GoString(e))
	C.et_free_error(e)
	return &Error{Op: op, Msg: msg}
}

// dropError frees the error of a call that frees, which has no caller to tell: a
// destructor's failure, which does not happen in practice, is not worth a panic.
func dropError(e C.et_error) {
	if e != nil {
		C.et_free_error(e)
	}
}

// Error is a failure reported by libtorch.
type Error struct {
	Op  string // the binding's name for the call
	Msg string // libtorch's message
}

func (e *Error) Error() string { return "torch: " + e.Op + ": " + e.Msg }

// OutOfMemory reports whether libtorch could not allocate: CUDA's "out of memory"
// (its message says how much was asked and what is free) or the CPU allocator's
// "can't allocate memory" (it says how many bytes).
func (e *Error) OutOfMemory() bool {
	m := strings.ToLower(e.Msg)
	return strings.Contains(m, "out of memory") || strings.Contains(m, "can't allocate memory")
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

func cshape(shape []int) (*C.int64_t, C.int) {
	if len(shape) == 0 {
		return nil, 0
	}
	s := make([]C.int64_t, len(shape))
	for i, d := range shape {
		s[i] = C.int64_t(d)
	}
	return &s[0], C.int(len(s))
}

// LiveTensors counts handles the shim has handed out and not yet freed: a leak detector.
func LiveTensors() int64 { return int64(C.et_live_tensors()) }

// ManualSeed seeds libtorch's default generators (CPU and every CUDA device).
func ManualSeed(seed uint64) error { return check("manual_seed", C.et_manual_seed(C.uint64_t(seed))) }

// seeding serialises Seeded: libtorch's default generators are one per process.
var seeding sync.Mutex

// Seeded seeds libtorch's default generators and runs draw before any other Seeded
// call may seed them again, so that goroutines building networks side by side each
// draw from their own seed. It guards only against other Seeded calls: code that
// draws while another goroutine builds a network gets draws from either seed.
func Seeded(seed uint64, draw func() error) error {
	seeding.Lock()
	defer seeding.Unlock()
	if err := ManualSeed(seed); err != nil {
		return err
	}
	return draw()
}

// SetNumThreads sets the intra-op CPU thread count: OpenMP's for the calling OS
// thread, and the BLAS's (MKL's, or OpenBLAS's for the whole process).
func SetNumThreads(n int) error { return check("set_num_threads", C.et_set_num_threads(C.int(n))) }

// BLASThreads is OpenBLAS's thread count, which SetNumThreads sets with libtorch's;
// -1 where libtorch uses another BLAS (MKL follows libtorch's count).
func BLASThreads() int { return int(C.et_get_blas_threads()) }

// SetBLASThreads sets OpenBLAS's thread count alone, leaving libtorch's, where
// OpenBLAS keeps a pool of its own (its pthreads build); it does nothing with another
// BLAS or OpenBLAS's OpenMP build, which runs on libtorch's OpenMP threads.
func SetBLASThreads(n int) error {
	return check("set_blas_threads", C.et_set_blas_threads(C.int(n)))
}

// NumThreads is the intra-op CPU thread count.
func NumThreads() int { return int(C.et_get_num_threads()) }

// CUDAAvailable reports whether libtorch sees a CUDA device.
func CUDAAvailable() bool { return C.et_cuda_available() != 0 }

// CUDADeviceCount is the number of CUDA devices libtorch sees.
func CUDADeviceCount() int { return int(C.et_cuda_device_count()) }

// BuiltWithCUDA reports whether the loaded shim was compiled against CUDA libtorch.
func BuiltWithCUDA() bool { return C.et_built_with_cuda() != 0 }

// Version is libtorch's version string.
func Version() string { return C.GoString(C.et_version()) }

// Synchronize waits for all work queued on a CUDA device; a no-op on CPU.
func Synchronize(d Device) error {
	if !d.CUDA {
		return nil
	}
	if !BuiltWithCUDA() {
		// A shim built without CUDA headers cannot call the runtime; a blocking copy
		// of one value to the host waits for the device's queue all the same.
		s := NoGrad()
		s.Item(s.Zeros([]int{1}, Float32, d))
		return s.Close()
	}
	return check("cuda_synchronize", C.et_cuda_synchronize(C.int(d.Index)))
}

// CUDADeviceInfo returns a CUDA device's name and total memory in bytes.
func CUDADeviceInfo(index int) (name string, totalBytes int64, err error) {
	var buf [256]C.char
	var mem C.int64_t
	if err := check("cuda_device_info", C.et_cuda_device_info(C.int(index), &buf[0], 256, &mem)); err != nil {
		return "", 0, err
	}
	return C.GoString(&buf[0]), int64(mem), nil
}

// PeakMemory is the peak bytes allocated on a CUDA device since ResetPeakMemory; -1
// where unknown (a CPU build).
func PeakMemory(d Device) int64 {
	if !d.CUDA {
		return -1
	}
	return int64(C.et_cuda_max_memory_allocated(C.int(d.Index)))
}

// ResetPeakMemory restarts the peak-memory counter of a CUDA device.
func ResetPeakMemory(d Device) error {
	if !d.CUDA {
		return nil
	}
	return check("cuda_reset_peak_memory", C.et_cuda_reset_peak_memory(C.int(d.Index)))
}

// KeepFreedMemory makes glibc's malloc keep freed CPU memory for reuse rather than
// return it to the kernel, which would fault it in again on the next training step;
// see emtorch.h. It reports whether the setting took (false where the C library is
// not glibc).
func KeepFreedMemory() bool { return C.et_keep_freed_memory() != 0 }

// AdviseHugePages makes libtorch's CPU allocator ask for transparent huge pages on
// every block of 2 MiB or more, so that a fresh large tensor is faulted in 2 MiB at a
// time instead of 4 KiB; see emtorch.h. It reports whether the allocator was
// installed (false off Linux).
func AdviseHugePages() bool { return C.et_advise_huge_pages() != 0 }

// SetCuDNNBenchmark turns cuDNN's autotuner on or off.
func SetCuDNNBenchmark(on bool) { C.et_set_cudnn_benchmark(cbool(on)) }

// SetCuDNNDeterministic restricts cuDNN to its deterministic algorithms. Others, the
// fastest backward convolutions among them, sum in an order that varies between runs.
func SetCuDNNDeterministic(on bool) { C.et_set_cudnn_deterministic(cbool(on)) }

// hostPtr returns a pointer to the first element of a Go slice (nil when empty).
func hostPtr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// WarmBLAS runs one matrix product on the CPU, so that the BLAS's threads take their
// work buffers now (OpenBLAS's: 128 MB of address space each, kept for the life of
// the process). Under an address-space limit OpenBLAS retries forever where a buffer
// no longer fits; taken early, they fit, and running out later is libtorch's error.
func WarmBLAS() error {
	s := NewScope()
	a := s.Rand([]int{512, 512}, Float32, CPU)
	s.MatMul(a, a)
	return s.Close()
}

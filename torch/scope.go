package torch

/*
#include <stdlib.h>
#include "csrc/emtorch.h"
*/
import "C"

import (
	"fmt"
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
		dropError(C.et_free(t.h))
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

// Creation.

// Moves and casts.

// Elementwise.

// Reductions. With no dims they reduce over all elements.

// Shapes and indexing.

// Neural-network functions.

// handles are ts's C handles, for a call that takes an array; an error names the
// first nil or freed one. A Go slice of C handles holds no Go pointers, so C may read it.
func handles(op string, ts []*Tensor) ([]C.et_tensor, error) {
	hs := make([]C.et_tensor, len(ts))
	for i, t := range ts {
		if t == nil || t.h == nil {
			return nil, fmt.Errorf("torch: %s: tensor %d is nil or freed", op, i)
		}
		hs[i] = t.h
	}
	return hs, nil
}

func handle(t *Tensor) C.et_tensor {
	if t == nil {
		return nil
	}
	return t.h
}

// In-place updates, never recorded by autograd.

// Autograd.

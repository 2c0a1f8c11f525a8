package torch

/*
#include "csrc/emtorch.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// Adam is torch.optim.Adam (no weight decay, amsgrad off) over a fixed list of
// parameters, each with its own learning rate. Its state is plain tensors so that a
// checkpoint can save and restore it exactly.
type Adam struct {
	h      C.et_adam
	params []*Tensor
	lrs    []float64
}

// AdamConfig holds Adam's hyper-parameters; zero values take PyTorch's defaults.
type AdamConfig struct {
	Beta1, Beta2, Eps float64
}

// NewAdam makes an optimiser for params with learning rate lrs[i] for params[i].
func NewAdam(params []*Tensor, lrs []float64, cfg AdamConfig) (*Adam, error) {
	if len(params) != len(lrs) {
		return nil, fmt.Errorf("torch: adam: %d params but %d learning rates", len(params), len(lrs))
	}
	if len(params) == 0 {
		return nil, errors.New("torch: adam: no parameters")
	}
	if cfg.Beta1 == 0 {
		cfg.Beta1 = 0.9
	}
	if cfg.Beta2 == 0 {
		cfg.Beta2 = 0.999
	}
	if cfg.Eps == 0 {
		cfg.Eps = 1e-8
	}
	hs, err := handles("adam", params)
	if err != nil {
		return nil, err
	}
	var h C.et_adam
	if err := check("adam_new", C.et_adam_new(&hs[0], (*C.double)(&lrs[0]), C.int(len(params)),
		C.double(cfg.Beta1), C.double(cfg.Beta2), C.double(cfg.Eps), &h)); err != nil {
		return nil, err
	}
	return &Adam{h: h, params: params, lrs: append([]float64(nil), lrs...)}, nil
}

// ZeroGrad drops the parameters' gradients (PyTorch's set_to_none).
func (a *Adam) ZeroGrad() error { return check("adam_zero_grad", C.et_adam_zero_grad(a.h)) }

// Step applies one update from the accumulated gradients.
func (a *Adam) Step() error { return check("adam_step", C.et_adam_step(a.h)) }

// Close frees the optimiser state.
func (a *Adam) Close() {
	if a.h != nil {
		dropError(C.et_adam_free(a.h))
		a.h = nil
	}
}

// Len is the number of parameters.
func (a *Adam) Len() int { return len(a.params) }

// State returns parameter i's first and second moments (owned by s, aliasing the
// optimiser's memory) and its step count.
func (a *Adam) State(s *Scope, i int) (expAvg, expAvgSq *Tensor, step int64) {
	if s.err != nil {
		return nil, nil, 0
	}
	if i < 0 || i >= len(a.params) {
		s.err = fmt.Errorf("torch: adam: no parameter %d of %d", i, len(a.params))
		return nil, nil, 0
	}
	var m, v C.et_tensor
	var st C.int64_t
	if err := check("adam_get_state", C.et_adam_get_state(a.h, C.int(i), &m, &v, &st)); err != nil {
		s.err = err
		return nil, nil, 0
	}
	return s.done("adam_get_state", nil, m), s.done("adam_get_state", nil, v), int64(st)
}

// SetState copies saved moments and step count into parameter i's state.
func (a *Adam) SetState(i int, expAvg, expAvgSq *Tensor, step int64) error {
	if expAvg == nil || expAvgSq == nil {
		return fmt.Errorf("torch: adam: state %d: missing tensor", i)
	}
	if i < 0 || i >= len(a.params) {
		return fmt.Errorf("torch: adam: no parameter %d of %d", i, len(a.params))
	}
	return check("adam_set_state", C.et_adam_set_state(a.h, C.int(i), expAvg.h, expAvgSq.h, C.int64_t(step)))
}

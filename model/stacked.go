package model

import (
	"errors"
	"fmt"

	"emclust/torch"
)

// Stacked is R MLPs of one Spec trained as one network: a layer's weights of all R
// are one R×in×out tensor, so a step makes one batched product per layer for all of
// them. The default MLP's step is so small that libtorch's cost per operation is
// most of its time, and R steps stacked take little longer than one
// (docs/RESULTS.md section 33). Each network keeps its own batches, relevance
// normalisation and gradients: nothing mixes the R.
type Stacked struct {
	Spec Spec
	R    int
	// Per linear layer, in Net.Params' order: R×in×out weights and R×1×out biases.
	params []*torch.Tensor
	// The relevance normalisation's running statistics, R·K: network i's are
	// i·K to (i+1)·K.
	runMean, runVar *torch.Tensor
	store           *torch.Scope
}

// Stack copies nets, MLPs of one Spec with one head in float32, into a Stacked
// network; the nets are left as they are.
func Stack(nets []*Net) (*Stacked, error) {
	if len(nets) == 0 {
		return nil, fmt.Errorf("model: stack: no networks")
	}
	spec := nets[0].Spec
	for _, n := range nets {
		if !Stackable(n.Spec) || n.Spec.JSON() != spec.JSON() || n.compute.bf16() {
			return nil, fmt.Errorf("model: stack: a %s network in %v does not stack with a %s in fp32", n.Spec.Layers(), n.compute, spec.Layers())
		}
	}
	st := &Stacked{Spec: spec, R: len(nets), store: torch.NoGrad()}
	s := st.store
	views := torch.NoGrad()
	defer views.Close()
	for j := range nets[0].Params() {
		parts := make([]*torch.Tensor, len(nets))
		for i, n := range nets {
			p := n.Params()[j].Tensor
			if len(p.Shape()) == 2 { // out×in: as in×out, for x·w
				p = views.Transpose(p, 0, 1)
			} else { // out: as 1×out, added to every row
				p = views.Unsqueeze(p, 0)
			}
			parts[i] = p
		}
		st.params = append(st.params, s.Stack(0, parts...))
	}
	var means, vars []*torch.Tensor
	for _, n := range nets {
		means, vars = append(means, n.norm.runMean), append(vars, n.norm.runVar)
	}
	st.runMean, st.runVar = s.Cat(0, means...), s.Cat(0, vars...)
	if err := s.Err(); err != nil || views.Err() != nil {
		st.Close()
		return nil, fmt.Errorf("model: stack: %w", errors.Join(err, views.Err()))
	}
	for _, p := range st.params {
		if err := p.SetRequiresGrad(true); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

// Stackable reports whether networks of spec stack: MLPs (a linear map included)
// with one head.
func Stackable(spec Spec) bool { return spec.Arch == "mlp" && spec.NumHeads() == 1 }

// Close frees the stacked parameters and statistics.
func (st *Stacked) Close() {
	if st.store != nil {
		st.store.Close()
		st.store = nil
	}
}

// Params are the stacked parameters, in the order of each network's Params.
func (st *Stacked) Params() []*torch.Tensor { return st.params }

// Forward returns the normalised relevance scores a* of x, R×n×in (network i's
// batch in x[i]): R×n×K.
func (st *Stacked) Forward(s *torch.Scope, x *torch.Tensor, train bool) *torch.Tensor {
	h := x
	for l := 0; l < len(st.params); l += 2 {
		if l > 0 {
			h = s.ReLUInPlace(h) // the sum's backward does not need it
		}
		h = s.Add(s.MatMul(h, st.params[l]), st.params[l+1])
	}
	if !st.Spec.Norm {
		return h
	}
	// Normalised over the batch per network and cluster: one BatchNorm over R·K
	// columns.
	r, n, k := h.Dim(0), h.Dim(1), h.Dim(2)
	cols := s.Reshape(s.Transpose(h, 0, 1), n, r*k)
	a := s.BatchNorm(cols, nil, nil, st.runMean, st.runVar, train, st.Spec.Momentum, 1e-5)
	return s.Transpose(s.Reshape(a, n, r, k), 0, 1)
}

// Part returns network i's part of t, a tensor shaped like stacked parameter j (the
// parameter, its gradient or its optimiser state), shaped like the networks'
// parameter j.
func (st *Stacked) Part(s *torch.Scope, t *torch.Tensor, j, i int) *torch.Tensor {
	shape := t.Shape()
	part := s.Reshape(s.Narrow(t, 0, i, 1), shape[1:]...)
	if j%2 == 0 { // in×out as out×in
		return s.Transpose(part, 0, 1)
	}
	return s.Reshape(part, shape[2])
}

// Unstack copies the stacked parameters and running statistics back into nets, the
// networks Stack was given, in the same order.
func (st *Stacked) Unstack(nets []*Net) error {
	if len(nets) != st.R {
		return fmt.Errorf("model: unstack: %d networks for %d stacked", len(nets), st.R)
	}
	s := torch.NoGrad()
	defer s.Close()
	k := st.runMean.Dim(0) / st.R
	for i, n := range nets {
		for j, p := range n.Params() {
			s.CopyInto(p.Tensor, st.Part(s, st.params[j], j, i))
		}
		s.CopyInto(n.norm.runMean, s.Narrow(st.runMean, 0, i*k, k))
		s.CopyInto(n.norm.runVar, s.Narrow(st.runVar, 0, i*k, k))
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("model: unstack: %w", err)
	}
	return nil
}

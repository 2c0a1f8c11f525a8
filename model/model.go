// Package model holds the networks g_θ of the paper — an MLP for vectors and the three
// CNNs of Table net_archi for images — each ending in K relevance scores and the
// relevance normalisation that turns them into a*.
package model

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"emclust/torch"
)

// Spec is everything needed to rebuild a network; it is saved in every checkpoint.
type Spec struct {
	Arch   string `json:"arch"`             // mlp, mnist, cifar, stl10
	In     int    `json:"in,omitempty"`     // MLP input features
	Hidden []int  `json:"hidden,omitempty"` // MLP hidden widths
	InC    int    `json:"in_c,omitempty"`   // CNN input planes (2: Sobel x and y)
	H      int    `json:"h,omitempty"`      // CNN input height
	W      int    `json:"w,omitempty"`      // CNN input width
	K      int    `json:"k"`                // clusters
	// Heads is the number of clustering heads on the shared network (0 or 1: one):
	// the last layer has Heads×K outputs, each head K of them, and the model predicts
	// with the head SetHead selected.
	Heads int `json:"heads,omitempty"`
	// Norm turns the relevance normalisation on; off only for the paper's ablation.
	Norm bool `json:"norm"`
	// Momentum of the running mean/var used at inference (BatchNorm-style).
	Momentum float64 `json:"momentum"`
}

// Archs lists the architectures New builds.
var Archs = []string{"mlp", "mnist", "cifar", "stl10", "mnist2d"}

// CNN layer plans of Table net_archi: C = 3×3 conv (pad 1) + BatchNorm + ReLU,
// M = 2×2 max-pool, F = fully connected; the last F has K outputs.
var cnnPlans = map[string]string{
	"mnist": "C64 M C128 M C256 F32 FK",
	"cifar": "C64 C64 M C128 C128 M C256 C256 FK",
	"stl10": "C64 C64 M C128 C128 M C256 C256 M C256 C256 FK",
	// §8.1's supervised network for 2-d data: the MNIST CNN with a linear 2-unit
	// bottleneck (B2) before the K-way output.
	"mnist2d": "C64 M C128 M C256 F32 B2 FK",
}

// ArchFor picks the paper's network for an image size: 28×28 → mnist, 32×32 →
// cifar, 96×96 → stl10.
func ArchFor(h, w int) (string, error) {
	switch {
	case h == 28 && w == 28:
		return "mnist", nil
	case h == 32 && w == 32:
		return "cifar", nil
	case h == 96 && w == 96:
		return "stl10", nil
	}
	return "", fmt.Errorf("no network of the paper takes %dx%d images, width by height (28x28 mnist, 32x32 cifar, 96x96 stl10); resize the images", w, h)
}

// MaxHeads bounds Spec.Heads.
const MaxHeads = 32

// NumHeads is the number of clustering heads: Heads, or 1 when unset.
func (sp Spec) NumHeads() int { return max(sp.Heads, 1) }

// Layers names the network for logs and reports: "mlp 64→32→32→10", "linear 30→2" for
// an MLP without hidden layers, or the CNN's name.
func (sp Spec) Layers() string {
	if sp.Arch != "mlp" {
		return sp.Arch
	}
	if len(sp.Hidden) == 0 {
		return fmt.Sprintf("linear %d→%d", sp.In, sp.K)
	}
	parts := []string{"mlp " + strconv.Itoa(sp.In)}
	for _, h := range sp.Hidden {
		parts = append(parts, strconv.Itoa(h))
	}
	return strings.Join(append(parts, strconv.Itoa(sp.K)), "→")
}

// MLPWidths lists the widths of the MLP sp describes, input to output: In, the hidden
// widths, and K·Heads.
func (sp Spec) MLPWidths() []int {
	return append(append([]int{sp.In}, sp.Hidden...), sp.K*sp.NumHeads())
}

// planLayer is one layer of a CNN's plan with its sizes: kind 'C', a 3×3 conv from in
// to out planes; 'M', a 2×2 max-pool; 'F', a fully connected layer and its ReLU, 'B',
// the linear bottleneck, and 'K', the output layer, each from in (the input
// flattened) to out units.
type planLayer struct {
	kind    byte
	in, out int
}

// cnnLayers lays out the plan of sp's CNN for its input size.
func (sp Spec) cnnLayers() []planLayer {
	var layers []planLayer
	c, h, w := sp.InC, sp.H, sp.W
	for _, tok := range strings.Fields(cnnPlans[sp.Arch]) {
		switch {
		case tok == "M":
			layers = append(layers, planLayer{kind: 'M'})
			h, w = h/2, w/2
		case tok == "FK":
			layers = append(layers, planLayer{'K', c * h * w, sp.K * sp.NumHeads()})
		case tok[0] == 'C':
			out, _ := strconv.Atoi(tok[1:])
			layers = append(layers, planLayer{'C', c, out})
			c = out
		default: // F or B
			out, _ := strconv.Atoi(tok[1:])
			layers = append(layers, planLayer{tok[0], c * h * w, out})
			c, h, w = out, 1, 1
		}
	}
	return layers
}

// NumParams counts the weights New would build for sp, without building them: the
// count a network too large for memory is refused by, in float64 so that widths past
// any memory cannot overflow it.
func (sp Spec) NumParams() float64 {
	total := 0.0
	if sp.Arch == "mlp" {
		widths := sp.MLPWidths()
		for i := 1; i < len(widths); i++ {
			total += float64(widths[i-1])*float64(widths[i]) + float64(widths[i])
		}
		return total
	}
	for _, l := range sp.cnnLayers() {
		in, out := float64(l.in), float64(l.out)
		switch l.kind {
		case 'C': // no bias; BatchNorm's scale and shift
			total += in*out*9 + 2*out
		case 'F', 'B', 'K':
			total += in*out + out
		}
	}
	return total
}

// ConvOutputs counts the outputs of a CNN's convolutions for one image: their sum
// over the layers, and the largest layer's; both 0 for an MLP. Training keeps each
// for the backward pass, and evaluation holds the largest: what a batch of images
// asks of memory beyond the weights.
func (sp Spec) ConvOutputs() (sum, largest float64) {
	if sp.Arch == "mlp" {
		return 0, 0
	}
	h, w := float64(sp.H), float64(sp.W)
	for _, l := range sp.cnnLayers() {
		switch l.kind {
		case 'M':
			h, w = math.Floor(h/2), math.Floor(w/2)
		case 'C':
			units := float64(l.out) * h * w
			sum += units
			largest = max(largest, units)
		}
	}
	return sum, largest
}

func (sp Spec) validate() error {
	if sp.K < 1 {
		return fmt.Errorf("model: K = %d, want at least 1", sp.K)
	}
	if sp.Heads < 0 || sp.Heads > MaxHeads {
		return fmt.Errorf("model: %d heads, want 1 to %d", sp.Heads, MaxHeads)
	}
	switch sp.Arch {
	case "mlp":
		if sp.In < 1 {
			return fmt.Errorf("model: mlp needs input features, got %d", sp.In)
		}
		for _, h := range sp.Hidden {
			if h < 1 {
				return fmt.Errorf("model: hidden width %d", h)
			}
		}
	case "mnist", "cifar", "stl10", "mnist2d":
		if sp.InC < 1 || sp.H < 1 || sp.W < 1 {
			return fmt.Errorf("model: %s needs input planes and size, got %dx%dx%d", sp.Arch, sp.InC, sp.H, sp.W)
		}
		if p := poolFactor(sp.Arch); sp.H%p != 0 || sp.W%p != 0 {
			return fmt.Errorf("model: %s pools %d times; %dx%d is not divisible by %d", sp.Arch, strings.Count(cnnPlans[sp.Arch], "M"), sp.H, sp.W, p)
		}
	default:
		return fmt.Errorf("model: unknown arch %q (want one of %s)", sp.Arch, strings.Join(Archs, ", "))
	}
	return nil
}

// poolFactor is what a CNN's poolings divide its input's sides by: they must be
// multiples of it.
func poolFactor(arch string) int { return 1 << strings.Count(cnnPlans[arch], "M") }

// ArchsTaking are the paper's clustering networks that take h×w images: those whose
// pooling divides them.
func ArchsTaking(h, w int) []string {
	var archs []string
	for _, a := range []string{"mnist", "cifar", "stl10"} {
		if p := poolFactor(a); h > 0 && w > 0 && h%p == 0 && w%p == 0 {
			archs = append(archs, a)
		}
	}
	return archs
}

// layer is one stage of a network.
type layer interface {
	forward(s *torch.Scope, x *torch.Tensor, train bool) *torch.Tensor
	params() []torch.Named
	buffers() []torch.Named
}

// Net is a network g_θ followed by the relevance normalisation.
type Net struct {
	Spec   Spec
	Device torch.Device
	layers []layer
	norm   *relevanceNorm
	store  *torch.Scope // owns parameters and buffers
	// bottleneck is the number of layers up to and including the bottleneck; 0: none.
	bottleneck int
	compute    Compute
	// head is the head that Forward and Relevance return; selected mirrors it as a
	// 1-element float32 buffer, so that checkpoints carry it (models with heads only).
	head     int
	selected *torch.Tensor
}

// New builds the network of spec on dev with PyTorch's default initialisation, drawn
// from libtorch's generator (seed it first for reproducible runs).
func New(spec Spec, dev torch.Device) (*Net, error) {
	if spec.Momentum == 0 {
		spec.Momentum = 0.1
	}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	n := &Net{Spec: spec, Device: dev, store: torch.NoGrad()}
	s := n.store
	if spec.Arch == "mlp" {
		in := spec.In
		for i, h := range spec.Hidden {
			n.layers = append(n.layers, newLinear(s, fmt.Sprintf("fc%d", i), in, h, dev), relu{})
			in = h
		}
		n.layers = append(n.layers, newLinear(s, "out", in, spec.K*spec.NumHeads(), dev))
	} else {
		flat := false
		nconv, nfc := 0, 0
		for _, l := range spec.cnnLayers() {
			if !flat && (l.kind == 'F' || l.kind == 'K') {
				n.layers = append(n.layers, flatten{})
				flat = true
			}
			switch l.kind {
			case 'M':
				n.layers = append(n.layers, maxPool{})
			case 'C':
				n.layers = append(n.layers, newConvBN(s, fmt.Sprintf("conv%d", nconv), l.in, l.out, dev, spec.Momentum))
				nconv++
			case 'F':
				n.layers = append(n.layers, newLinear(s, fmt.Sprintf("fc%d", nfc), l.in, l.out, dev), relu{})
				nfc++
			case 'B':
				n.layers = append(n.layers, newLinear(s, "bottleneck", l.in, l.out, dev))
				n.bottleneck = len(n.layers)
			case 'K':
				n.layers = append(n.layers, newLinear(s, "out", l.in, l.out, dev))
			}
		}
	}
	n.norm = newRelevanceNorm(s, spec.K*spec.NumHeads(), dev, spec.Norm, spec.Momentum)
	if spec.NumHeads() > 1 {
		n.selected = s.Zeros([]int{1}, torch.Float32, dev)
	}
	if err := s.Err(); err != nil {
		n.Close()
		return nil, fmt.Errorf("model: build %s: %w", spec.Arch, err)
	}
	for _, p := range n.Params() {
		if err := p.Tensor.SetRequiresGrad(true); err != nil {
			n.Close()
			return nil, err
		}
	}
	return n, nil
}

// Close frees the parameters and buffers.
func (n *Net) Close() {
	if n.store != nil {
		n.store.Close()
		n.store = nil
	}
}

// Relevance returns the raw relevance scores a = g_θ(x) of the selected head, n×K.
func (n *Net) Relevance(s *torch.Scope, x *torch.Tensor, train bool) *torch.Tensor {
	return n.SelectHead(s, n.relevance(s, x, train))
}

// relevance returns the raw scores of every head, n×(Heads·K).
//
// Each layer's output handle is freed as soon as the next layer has used it: autograd
// keeps what backward needs, and the rest returns to the allocator now rather than
// when the step's scope closes (this halves the peak memory of a CNN step).
//
// A C block followed by M runs as conv, BatchNorm, max-pool, ReLU (convBN.pooled):
// the same values and gradients as the plan's order, with the ReLU on a quarter of
// the activations.
func (n *Net) relevance(s *torch.Scope, x *torch.Tensor, train bool) *torch.Tensor {
	in := x
	x = n.input(s, x)
	for i := 0; i < len(n.layers); i++ {
		var y *torch.Tensor
		if c, ok := n.layers[i].(*convBN); ok && i+1 < len(n.layers) && isPool(n.layers[i+1]) {
			y = c.pooled(s, x, train)
			i++
		} else {
			y = n.layers[i].forward(s, x, train)
		}
		if x != in {
			x.Free()
		}
		x = y
	}
	out := n.output(s, x)
	if out != x {
		x.Free()
	}
	return out
}

// SelectHead narrows n×(Heads·K) scores to the selected head's K columns.
func (n *Net) SelectHead(s *torch.Scope, a *torch.Tensor) *torch.Tensor {
	if n.Spec.NumHeads() == 1 {
		return a
	}
	return s.Narrow(a, 1, n.head*n.Spec.K, n.Spec.K)
}

// Head is the head that Forward and Relevance return (0 for a one-head model).
func (n *Net) Head() int { return n.head }

// SetHead selects the head that Forward and Relevance return from now on, and that
// a checkpoint of the network records.
func (n *Net) SetHead(h int) error {
	if h < 0 || h >= n.Spec.NumHeads() {
		return fmt.Errorf("model: head %d, this model has %d", h, n.Spec.NumHeads())
	}
	if n.selected != nil {
		s := torch.NoGrad()
		s.CopyInto(n.selected, s.Full([]int{1}, float64(h), torch.Float32, n.Device))
		if err := s.Close(); err != nil {
			return fmt.Errorf("model: select head %d: %w", h, err)
		}
	}
	n.head = h
	return nil
}

// Bottleneck returns the output of the 2-unit bottleneck of a mnist2d network.
func (n *Net) Bottleneck(s *torch.Scope, x *torch.Tensor) *torch.Tensor {
	if n.bottleneck == 0 {
		s.Fail(fmt.Errorf("model: %s has no bottleneck layer", n.Spec.Arch))
		return nil
	}
	x = n.input(s, x)
	for _, l := range n.layers[:n.bottleneck] {
		x = l.forward(s, x, false)
	}
	return n.output(s, x)
}

// Forward returns the normalised relevance a* (n×K) of the selected head. In
// training the normalisation uses the batch's statistics and updates the running
// ones; in eval it uses the running ones, so any batch size works, even 1.
func (n *Net) Forward(s *torch.Scope, x *torch.Tensor, train bool) *torch.Tensor {
	return n.SelectHead(s, n.ForwardHeads(s, x, train))
}

// ForwardHeads is Forward for every head: n×(Heads·K), head h in columns h·K to
// h·K+K−1. The normalisation is per column, so each head's is its own.
func (n *Net) ForwardHeads(s *torch.Scope, x *torch.Tensor, train bool) *torch.Tensor {
	return n.norm.forward(s, n.relevance(s, x, train), train)
}

// SyncStats makes training-mode batch statistics — every BatchNorm and the relevance
// normalisation — those of the batch of all ranks of g together, as if one process
// held it, with the matching gradient. nil goes back to each process's own batch.
// Eval mode uses the running statistics either way.
func (n *Net) SyncStats(g *torch.Group) {
	for _, l := range n.layers {
		if c, ok := l.(*convBN); ok {
			c.group = g
		}
	}
	n.norm.group = g
}

// Params lists the trainable tensors by checkpoint name, in a fixed order.
func (n *Net) Params() []torch.Named {
	var out []torch.Named
	for _, l := range n.layers {
		out = append(out, l.params()...)
	}
	return out
}

// Buffers lists the running statistics by checkpoint name.
func (n *Net) Buffers() []torch.Named {
	var out []torch.Named
	for _, l := range n.layers {
		out = append(out, l.buffers()...)
	}
	out = append(out, n.norm.buffers()...)
	if n.selected != nil {
		out = append(out, torch.Named{Name: "heads.selected", Tensor: n.selected})
	}
	return out
}

// NumParams counts trainable scalars.
func (n *Net) NumParams() int {
	total := 0
	for _, p := range n.Params() {
		total += p.Tensor.Numel()
	}
	return total
}

// FirstConv returns the first convolution's weight (out×in×3×3), or nil for an MLP.
func (n *Net) FirstConv() *torch.Tensor {
	for _, l := range n.layers {
		if c, ok := l.(*convBN); ok {
			return c.w
		}
	}
	return nil
}

// SpecJSON is the spec as stored in checkpoint metadata.
func (sp Spec) JSON() string {
	b, _ := json.Marshal(sp)
	return string(b)
}

// Load copies a checkpoint's parameters and buffers into n. Every tensor of the
// network must be present with the same shape, else the error names what differs.
func (n *Net) Load(f *torch.SafeFile, prefix string) error {
	s := torch.NoGrad()
	defer s.Close()
	all := append(n.Params(), n.Buffers()...)
	for _, nt := range all {
		name := prefix + nt.Name
		if _, ok := f.Shape(name); !ok {
			return fmt.Errorf("checkpoint %s: no tensor %q: it was saved from another model (this one is %s, K=%d)", f.Path, name, n.Spec.Arch, n.Spec.K)
		}
		if err := f.CheckLike(name, nt.Tensor, fmt.Sprintf("this %s model's (K=%d)", n.Spec.Arch, n.Spec.K)); err != nil {
			return fmt.Errorf("checkpoint %w: it was saved from another model", err)
		}
		// Straight into the network, and the file's copy goes before the next.
		s.LoadInto(nt.Tensor, f, name)
		f.Drop(name)
	}
	if n.selected == nil {
		return s.Err()
	}
	h := s.Float32s(n.selected)
	if err := s.Err(); err != nil {
		return err
	}
	if len(h) != 1 || h[0] != float32(int(h[0])) || int(h[0]) < 0 || int(h[0]) >= n.Spec.NumHeads() {
		return fmt.Errorf("checkpoint %s: %sheads.selected is %v, want a head from 0 to %d", f.Path, prefix, h, n.Spec.NumHeads()-1)
	}
	n.head = int(h[0])
	return nil
}

// linear is a fully connected layer with PyTorch's default init:
// U(-1/√fan_in, 1/√fan_in) for weight and bias.
type linear struct {
	name string
	w, b *torch.Tensor
	bf16 bool // compute in bfloat16 (see Compute)
}

func newLinear(s *torch.Scope, name string, in, out int, dev torch.Device) *linear {
	bound := 1 / math.Sqrt(float64(in))
	l := &linear{name: name, w: s.Empty([]int{out, in}, torch.Float32, dev), b: s.Empty([]int{out}, torch.Float32, dev)}
	s.Uniform(l.w, -bound, bound)
	s.Uniform(l.b, -bound, bound)
	return l
}

func (l *linear) forward(s *torch.Scope, x *torch.Tensor, _ bool) *torch.Tensor {
	return s.Linear(lowp(s, x, l.bf16), lowp(s, l.w, l.bf16), lowp(s, l.b, l.bf16))
}
func (l *linear) params() []torch.Named {
	return []torch.Named{{Name: l.name + ".weight", Tensor: l.w}, {Name: l.name + ".bias", Tensor: l.b}}
}
func (l *linear) buffers() []torch.Named { return nil }

// convBN is the paper's C block: 3×3 conv (pad 1, no bias: BatchNorm's shift makes
// one redundant), BatchNorm with affine and running statistics, ReLU.
type convBN struct {
	name            string
	w, gamma, beta  *torch.Tensor
	runMean, runVar *torch.Tensor
	momentum        float64
	bf16            bool         // compute in bfloat16 (see Compute)
	group           *torch.Group // batch statistics over all ranks (see SyncStats)
}

func newConvBN(s *torch.Scope, name string, in, out int, dev torch.Device, momentum float64) *convBN {
	bound := 1 / math.Sqrt(float64(in*9))
	c := &convBN{
		name:     name,
		w:        s.Empty([]int{out, in, 3, 3}, torch.Float32, dev),
		gamma:    s.Ones([]int{out}, torch.Float32, dev),
		beta:     s.Zeros([]int{out}, torch.Float32, dev),
		runMean:  s.Zeros([]int{out}, torch.Float32, dev),
		runVar:   s.Ones([]int{out}, torch.Float32, dev),
		momentum: momentum,
	}
	s.Uniform(c.w, -bound, bound)
	return c
}

func (c *convBN) forward(s *torch.Scope, x *torch.Tensor, train bool) *torch.Tensor {
	z := c.normalized(s, x, train)
	// BatchNorm's backward needs its input, not its output: ReLU may overwrite it.
	out := s.ReLUInPlace(z)
	z.Free()
	return out
}

// pooled is the block followed by the 2×2 max-pool, ReLU last: max and ReLU commute
// (ReLU is monotone), values and gradients alike, so this is forward then maxPool
// with a quarter of the ReLU's work. The max-pool's backward keeps its input, not its
// output, so the ReLU overwrites the output.
func (c *convBN) pooled(s *torch.Scope, x *torch.Tensor, train bool) *torch.Tensor {
	z := c.normalized(s, x, train)
	p := s.MaxPool2d(z, 2, 2)
	z.Free()
	out := s.ReLUInPlace(p)
	p.Free()
	return out
}

// normalized is the block before its ReLU: convolution, then BatchNorm.
func (c *convBN) normalized(s *torch.Scope, x *torch.Tensor, train bool) *torch.Tensor {
	// In bf16 BatchNorm takes the bfloat16 activations with its float32 affine and
	// running statistics, as under autocast, and returns bfloat16.
	y := s.Conv2d(lowp(s, x, c.bf16), lowp(s, c.w, c.bf16), nil, 1, 1)
	z := batchNorm(s, c.group, y, c.gamma, c.beta, c.runMean, c.runVar, train, c.momentum)
	y.Free()
	return z
}
func (c *convBN) params() []torch.Named {
	return []torch.Named{
		{Name: c.name + ".weight", Tensor: c.w},
		{Name: c.name + ".bn.weight", Tensor: c.gamma},
		{Name: c.name + ".bn.bias", Tensor: c.beta},
	}
}
func (c *convBN) buffers() []torch.Named {
	return []torch.Named{
		{Name: c.name + ".bn.running_mean", Tensor: c.runMean},
		{Name: c.name + ".bn.running_var", Tensor: c.runVar},
	}
}

type relu struct{}

// forward overwrites x: a linear layer's backward needs its input, not its output.
func (relu) forward(s *torch.Scope, x *torch.Tensor, _ bool) *torch.Tensor {
	return s.ReLUInPlace(x)
}
func (relu) params() []torch.Named  { return nil }
func (relu) buffers() []torch.Named { return nil }

type maxPool struct{}

func (maxPool) forward(s *torch.Scope, x *torch.Tensor, _ bool) *torch.Tensor {
	return s.MaxPool2d(x, 2, 2)
}
func (maxPool) params() []torch.Named  { return nil }
func (maxPool) buffers() []torch.Named { return nil }

// isPool reports whether l is the 2×2 max-pool.
func isPool(l layer) bool {
	_, ok := l.(maxPool)
	return ok
}

type flatten struct{}

func (flatten) forward(s *torch.Scope, x *torch.Tensor, _ bool) *torch.Tensor {
	return s.Flatten(x, 1)
}
func (flatten) params() []torch.Named  { return nil }
func (flatten) buffers() []torch.Named { return nil }

// relevanceNorm is a* = (a − μ_j)/σ_j per cluster over the batch, biased σ, with no
// affine parameters: an affine would let the network undo the normalisation that
// keeps every cluster's h integrating to the same value.
type relevanceNorm struct {
	on              bool
	runMean, runVar *torch.Tensor
	momentum        float64
	group           *torch.Group
}

func newRelevanceNorm(s *torch.Scope, k int, dev torch.Device, on bool, momentum float64) *relevanceNorm {
	return &relevanceNorm{
		on:       on,
		runMean:  s.Zeros([]int{k}, torch.Float32, dev),
		runVar:   s.Ones([]int{k}, torch.Float32, dev),
		momentum: momentum,
	}
}

func (r *relevanceNorm) forward(s *torch.Scope, a *torch.Tensor, train bool) *torch.Tensor {
	if !r.on {
		return a
	}
	return batchNorm(s, r.group, a, nil, nil, r.runMean, r.runVar, train, r.momentum)
}

// batchNorm is BatchNorm with eps 1e-5, over the batch of all ranks of g in training
// when g is set.
func batchNorm(s *torch.Scope, g *torch.Group, x, w, b, runMean, runVar *torch.Tensor, train bool, momentum float64) *torch.Tensor {
	if train && g != nil {
		return s.SyncBatchNorm(g, x, w, b, runMean, runVar, momentum, 1e-5)
	}
	return s.BatchNorm(x, w, b, runMean, runVar, train, momentum, 1e-5)
}

func (r *relevanceNorm) buffers() []torch.Named {
	return []torch.Named{
		{Name: "relevance_norm.running_mean", Tensor: r.runMean},
		{Name: "relevance_norm.running_var", Tensor: r.runVar},
	}
}

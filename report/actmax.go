package report

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"emclust/model"
	"emclust/torch"
	"emclust/transform"
)

// ActMaxConfig holds the settings of activation maximisation (Erhan et al., 2009, the
// paper's act_max): gradient ascent on an input image, started from a faint random
// image, to find what a unit responds to most. Zero fields take the defaults noted.
type ActMaxConfig struct {
	Steps int     // Adam steps; 150
	LR    float64 // Adam learning rate, in pixel units; 0.05
	// L2 is the weight of Σ(x − ½)² per image, which keeps pixels the unit does not
	// care about at mid-gray instead of letting them drift to noise; 0.01.
	L2 float64
	// BlurEvery smooths the image with a 3×3 Gaussian every this many steps
	// (Yosinski et al., 2015), which trades the high-frequency patterns a network
	// also responds to for the shapes a person can read; 4, negative for never.
	BlurEvery int
	Seed      uint64 // the starting images
}

func (c *ActMaxConfig) defaults() {
	if c.Steps == 0 {
		c.Steps = 150
	}
	if c.LR == 0 {
		c.LR = 0.05
	}
	if c.L2 == 0 {
		c.L2 = 0.01
	}
	if c.BlurEvery == 0 {
		c.BlurEvery = 4
	}
}

// gradientTries is how many times a step computes its gradient before it gives up on
// a non-finite one (see ascend).
const gradientTries = 3

// gauss3 is a 3×3 Gaussian kernel with σ = 0.5, normalised.
var gauss3 = func() []float32 {
	w := []float64{math.Exp(-2), 1, math.Exp(-2)} // exp(−d²/2σ²) at d = −1, 0, 1
	var k []float32
	var sum float64
	for _, a := range w {
		for _, b := range w {
			sum += a * b
		}
	}
	for _, a := range w {
		for _, b := range w {
			k = append(k, float32(a*b/sum))
		}
	}
	return k
}()

// ActMax is the result of one activation maximisation: Images (n×C×H×W in [0,1],
// planar) and, for each image, its target's score at the random start and at the end.
type ActMax struct {
	Images        []float32
	N, C, H, W    int
	Before, After []float64
}

// MaximizeRelevance synthesises, for each cluster in targets, the C×H×W image in
// [0,1] whose normalised relevance a*_j (eval mode, running statistics) is highest,
// as the network sees it: through transform.Preprocess (grayscale, Sobel). a*_j is
// an increasing affine map of the raw a_j, so the optimum is the same; a* puts every
// cluster's score on the same scale, so one L2 weight suits them all.
func MaximizeRelevance(net *model.Net, c, h, w int, targets []int, cfg ActMaxConfig) (*ActMax, error) {
	k := net.Spec.K
	for _, j := range targets {
		if j < 0 || j >= k {
			return nil, fmt.Errorf("activation maximisation: cluster %d of %d", j, k)
		}
	}
	return ascend(net, c, h, w, len(targets), k, targets, cfg, func(s *torch.Scope, x *torch.Tensor) *torch.Tensor {
		return net.Forward(s, x, false)
	})
}

// MaximizeChannels synthesises, for each channel in targets of the layer-th layer
// (see model.Net.ConvLayers), the image that maximises that channel's mean
// activation: what the filter has learnt to detect.
func MaximizeChannels(net *model.Net, layer int, c, h, w int, targets []int, cfg ActMaxConfig) (*ActMax, error) {
	s := torch.NoGrad()
	probe := net.ForwardTo(s, s.Zeros([]int{1, net.Spec.InC, h, w}, torch.Float32, net.Device), layer)
	width := probe.Dim(1)
	if err := s.Close(); err != nil {
		return nil, fmt.Errorf("activation maximisation: layer %d: %w", layer, err)
	}
	for _, ch := range targets {
		if ch < 0 || ch >= width {
			return nil, fmt.Errorf("activation maximisation: channel %d of layer %d's %d", ch, layer, width)
		}
	}
	return ascend(net, c, h, w, len(targets), width, targets, cfg, func(s *torch.Scope, x *torch.Tensor) *torch.Tensor {
		return s.Mean(net.ForwardTo(s, x, layer), false, 2, 3)
	})
}

// ascend runs the gradient ascent for n images at once: image i maximises column
// targets[i] of unit(Preprocess(x)), an n×width score matrix. In eval mode the
// network treats every image of a batch alone, so batching changes nothing but speed.
func ascend(net *model.Net, c, h, w, n, width int, targets []int, cfg ActMaxConfig,
	unit func(s *torch.Scope, x *torch.Tensor) *torch.Tensor) (*ActMax, error) {
	cfg.defaults()
	if n == 0 {
		return nil, errors.New("activation maximisation: no targets")
	}
	dev := net.Device
	// Only the input is optimised: freezing the weights spares their gradients.
	params := net.Params()
	for _, p := range params {
		if err := p.Tensor.SetRequiresGrad(false); err != nil {
			return nil, err
		}
	}
	defer func() {
		for _, p := range params {
			p.Tensor.SetRequiresGrad(true)
		}
	}()

	rng := rand.New(rand.NewPCG(cfg.Seed, 0xac7))
	start := make([]float32, n*c*h*w)
	for i := range start {
		start[i] = float32(0.45 + 0.1*rng.Float64())
	}
	mask := make([]float32, n*width)
	for i, t := range targets {
		mask[i*width+t] = 1
	}
	vars := torch.NoGrad()
	defer vars.Close()
	x := vars.FromFloat32(start, []int{n, c, h, w}, dev)
	m := vars.FromFloat32(mask, []int{n, width}, dev)
	blur := vars.FromFloat32(gauss3, []int{1, 1, 3, 3}, dev)
	if err := vars.Err(); err != nil {
		return nil, err
	}
	if err := x.SetRequiresGrad(true); err != nil {
		return nil, err
	}
	opt, err := torch.NewAdam([]*torch.Tensor{x}, []float64{cfg.LR}, torch.AdamConfig{})
	if err != nil {
		return nil, err
	}
	defer opt.Close()

	// scores reads each image's target score without a graph.
	scores := func() ([]float64, error) {
		s := torch.NoGrad()
		defer s.Close()
		v := s.Float32s(s.Sum(s.Mul(unit(s, transform.Preprocess(s, x)), m), false, 1))
		if err := s.Err(); err != nil {
			return nil, err
		}
		out := make([]float64, len(v))
		for i, f := range v {
			out[i] = float64(f)
		}
		return out, nil
	}
	res := &ActMax{N: n, C: c, H: h, W: w}
	if res.Before, err = scores(); err != nil {
		return nil, fmt.Errorf("activation maximisation: %w", err)
	}
	// gradient computes the loss's gradient in x.grad, within s, and reports whether it
	// is finite. Under libtorch 2.6 on the CPU, with two threads, some processes get
	// NaN gradients from a finite input (from some step of 25 on, in about one process
	// of eight; not seen with one thread or with 1.13), and Adam would spread them over
	// the image. So a step retries, and skips the update when its gradient stays
	// non-finite: the image is then the last finite one.
	gradient := func(s *torch.Scope) bool {
		score := s.Sum(s.Mul(unit(s, transform.Preprocess(s, x)), m), false)
		penalty := s.Sum(s.Square(s.SubScalar(x, 0.5)), false)
		loss := s.Sub(s.MulScalar(penalty, cfg.L2), score)
		s.Fail(opt.ZeroGrad())
		s.Backward(loss)
		return s.CountNotFinite(s.Grad(x)) == 0
	}
	for step := 0; step < cfg.Steps; step++ {
		s := torch.NewScope()
		finite := gradient(s)
		for try := 1; !finite && try < gradientTries && s.Err() == nil; try++ {
			finite = gradient(s)
		}
		if finite && s.Err() == nil {
			s.Fail(opt.Step())
		}
		next := s.Detach(x)
		if cfg.BlurEvery > 0 && (step+1)%cfg.BlurEvery == 0 && step+1 < cfg.Steps {
			// Blur x − ½ so that the zero padding at the border is mid-gray.
			planes := s.Reshape(s.SubScalar(next, 0.5), n*c, 1, h, w)
			next = s.AddScalar(s.Reshape(s.Conv2d(planes, blur, nil, 1, 1), n, c, h, w), 0.5)
		}
		s.CopyInto(x, s.Clamp(next, 0, 1))
		if err := s.Close(); err != nil {
			return nil, fmt.Errorf("activation maximisation step %d: %w", step, err)
		}
	}
	if res.After, err = scores(); err != nil {
		return nil, fmt.Errorf("activation maximisation: %w", err)
	}
	s := torch.NoGrad()
	res.Images = s.Float32s(x)
	if err := s.Close(); err != nil {
		return nil, err
	}
	return res, nil
}

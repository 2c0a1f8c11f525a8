// Package transform holds the image side of the paper's pipeline: the fixed
// preprocessing (grayscale, then horizontal and vertical Sobel gradients) that the CNNs
// take as their two input planes, and the random augmentation T that the EM loss with
// augmentation compares each image against.
//
// Everything works on whole batches with tensor ops on the batch's own device: there is
// no per-image Go loop and no copy to or from host memory, so a training step never
// waits for the GPU to drain. Random parameters come from libtorch's generator on that
// device, which torch.ManualSeed makes reproducible. Ops report failure through the
// scope, like the rest of emclust: a function returns nil and the scope's Err says why.
package transform

import (
	"fmt"

	"emclust/torch"
)

// Luma weights of ITU-R BT.601, the ones torchvision's rgb_to_grayscale uses.
const (
	lumaR = 0.299
	lumaG = 0.587
	lumaB = 0.114
)

// sobelKernel is the conv2d weight of Sobel: output channel 0 is the horizontal
// gradient Gx, channel 1 the vertical gradient Gy = Gxᵀ. conv2d is a
// cross-correlation, so Gx is positive where intensity rises to the right and Gy where
// it rises downwards.
var sobelKernel = [2 * 3 * 3]float64{
	-1, 0, 1,
	-2, 0, 2,
	-1, 0, 1,

	-1, -2, -1,
	0, 0, 0,
	1, 2, 1,
}

// Preprocess turns a batch of images (N×C×H×W, C = 1 or 3, uint8 in 0..255 or float
// in [0,1]) into the CNNs' input: grayscale, then Sobel gradients, N×2×H×W float32
// with channel 0 the horizontal gradient Gx and channel 1 the vertical Gy. The paper
// feeds gradients instead of colour so that the clusters cannot form around trivial
// colour statistics.
func Preprocess(s *torch.Scope, x *torch.Tensor) *torch.Tensor {
	return Sobel(s, Gray(s, ToFloat(s, x)))
}

// ToFloat converts a uint8 batch to float32 in [0,1] and any other dtype to float32;
// a float32 batch is returned as is.
func ToFloat(s *torch.Scope, x *torch.Tensor) *torch.Tensor {
	if s.Err() != nil {
		return nil
	}
	if x == nil {
		s.Fail(fmt.Errorf("transform: nil batch"))
		return nil
	}
	switch x.DType() {
	case torch.Float32:
		return x
	case torch.Uint8:
		return s.DivScalar(s.Cast(x, torch.Float32), 255)
	}
	return s.Cast(x, torch.Float32)
}

// Gray converts a float batch N×3×H×W to luma N×1×H×W with 0.299R + 0.587G + 0.114B;
// a one-channel batch is already gray and is returned as is. The weighted sum is done
// with scalar multiplies of channel views, so no weight tensor has to reach the device.
func Gray(s *torch.Scope, x *torch.Tensor) *torch.Tensor {
	if !checkBatch(s, "Gray", x) {
		return nil
	}
	switch c := x.Dim(1); c {
	case 1:
		return x
	case 3:
		r := s.MulScalar(s.Narrow(x, 1, 0, 1), lumaR)
		g := s.MulScalar(s.Narrow(x, 1, 1, 1), lumaG)
		b := s.MulScalar(s.Narrow(x, 1, 2, 1), lumaB)
		return s.Add(s.Add(r, g), b)
	default:
		s.Fail(fmt.Errorf("transform: Gray: %d channels, want 1 or 3", c))
		return nil
	}
}

// Sobel applies the horizontal and vertical 3×3 Sobel filters to a gray float batch
// N×1×H×W with zero padding of 1, giving N×2×H×W: channel 0 is Gx, channel 1 is Gy
// (see sobelKernel for the signs).
func Sobel(s *torch.Scope, gray *torch.Tensor) *torch.Tensor {
	if !checkBatch(s, "Sobel", gray) {
		return nil
	}
	if c := gray.Dim(1); c != 1 {
		s.Fail(fmt.Errorf("transform: Sobel: %d channels, want 1 (call Gray first)", c))
		return nil
	}
	w := constant(s, sobelKernel[:], gray.DType(), gray.Device(), 2, 1, 3, 3)
	return s.Conv2d(gray, w, nil, 1, 1)
}

// Pipeline is the whole image path of a training step: x (uint8 or float,
// N×C×H×W) to float in [0,1], then Augment with *aug unless aug is nil, then
// Preprocess, giving the N×2×H×W Sobel planes.
func Pipeline(s *torch.Scope, x *torch.Tensor, aug *AugmentConfig) *torch.Tensor {
	return PipelineRows(s, x, aug, Rows{})
}

// PipelineRows is Pipeline for x as the rows of a larger batch (see Rows).
func PipelineRows(s *torch.Scope, x *torch.Tensor, aug *AugmentConfig, rows Rows) *torch.Tensor {
	f := ToFloat(s, x)
	if aug != nil {
		f = AugmentRows(s, f, *aug, rows)
	}
	return Preprocess(s, f)
}

// checkBatch reports whether x is a usable N×C×H×W batch, failing the scope if not.
func checkBatch(s *torch.Scope, op string, x *torch.Tensor) bool {
	if s.Err() != nil {
		return false
	}
	if x == nil {
		s.Fail(fmt.Errorf("transform: %s: nil batch", op))
		return false
	}
	if sh := x.Shape(); len(sh) != 4 {
		s.Fail(fmt.Errorf("transform: %s: shape %v, want N×C×H×W", op, sh))
		return false
	}
	return true
}

// constant makes a small constant tensor on dev from Go values. On a GPU it is one
// copy from page-locked memory, which is queued like any kernel (one from pageable
// memory would wait for the stream, stalling every step until the previous one had
// finished); it was a fill per element, 18 launches for the Sobel kernel alone.
func constant(s *torch.Scope, vals []float64, dt torch.DType, dev torch.Device, shape ...int) *torch.Tensor {
	var t *torch.Tensor
	if dt == torch.Float64 {
		t = s.FromFloat64(vals, shape, torch.CPU)
	} else {
		f := make([]float32, len(vals))
		for i, v := range vals {
			f[i] = float32(v) // rounded as a fill of v would be
		}
		t = s.FromFloat32(f, shape, torch.CPU)
	}
	if dev.CUDA {
		t = s.ToDevice(s.PinMemory(t), dev, true)
	}
	if dt != torch.Float32 && dt != torch.Float64 {
		t = s.Cast(t, dt)
	}
	return t
}

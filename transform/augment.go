package transform

import (
	"fmt"
	"math"

	"emclust/torch"
)

// AugmentConfig sets the strengths of the random transformation T of the paper:
// "random crop, shift, rotation, scale, and random adjustment of image brightness,
// contrast, saturation, and hue". Every strength has 0 as "off", so the zero value is
// the identity.
type AugmentConfig struct {
	// Crop is the smallest fraction of the image area a random square crop keeps; the
	// crop is resized back to the full image, i.e. zoomed in by 1/sqrt(area). 0 and 1
	// both turn cropping off.
	Crop float64
	// MaxScale is an extra random zoom: the image is scaled by a factor in
	// [1-MaxScale, 1+MaxScale] on top of the crop's zoom (below 1 zooms out).
	MaxScale float64
	// Shift is the largest translation along each axis as a fraction of the image size.
	Shift float64
	// Rotate is the largest rotation in degrees, either way.
	Rotate float64
	// Brightness, Contrast and Saturation draw a factor in [max(0, 1-v), 1+v], like
	// torchvision's ColorJitter: brightness multiplies, contrast blends with the
	// image's mean gray, saturation blends with each pixel's gray.
	Brightness, Contrast, Saturation float64
	// Hue is the largest rotation of the chroma, as a fraction of a full turn (at most
	// 0.5, which already reaches the opposite hue).
	Hue float64
	// Flip mirrors half of the images left to right. DefaultAugment leaves it off: the
	// paper lists no flip, and mirrored digits and letters are different symbols.
	// Turn it on for natural images.
	Flip bool
}

// DefaultAugment returns the strengths used for the paper's image experiments: crop to
// at least 70% of the area, ±10% scale and shift, ±15°, and ColorJitter(0.4, 0.4, 0.4,
// 0.1); no flip.
func DefaultAugment() AugmentConfig {
	return AugmentConfig{
		Crop:       0.7,
		MaxScale:   0.1,
		Shift:      0.1,
		Rotate:     15,
		Brightness: 0.4,
		Contrast:   0.4,
		Saturation: 0.4,
		Hue:        0.1,
	}
}

// Validate reports a strength outside its range.
func (c AugmentConfig) Validate() error {
	for _, f := range []struct {
		name    string
		v, hi   float64
		openTop bool
	}{
		{"crop", c.Crop, 1, false},
		{"scale", c.MaxScale, 1, true},
		{"shift", c.Shift, 1, false},
		{"rotate", c.Rotate, 180, false},
		{"brightness", c.Brightness, math.Inf(1), false},
		{"contrast", c.Contrast, math.Inf(1), false},
		{"saturation", c.Saturation, math.Inf(1), false},
		{"hue", c.Hue, 0.5, false},
	} {
		// Written so that NaN fails too.
		if !(f.v >= 0 && f.v <= f.hi) || (f.openTop && f.v == f.hi) {
			top := "]"
			if f.openTop {
				top = ")"
			}
			return fmt.Errorf("transform: augment %s = %v, want a value in [0, %v%s", f.name, f.v, f.hi, top)
		}
	}
	return nil
}

// geometric reports whether the config moves pixels at all.
func (c AugmentConfig) geometric() bool {
	return (c.Crop > 0 && c.Crop < 1) || c.MaxScale > 0 || c.Shift > 0 || c.Rotate > 0 || c.Flip
}

// Columns of the per-image uniform draws. Augment draws all of them whatever the
// config, so turning one strength off does not change the others' random values.
const (
	pArea = iota
	pCropX
	pCropY
	pScale
	pShiftX
	pShiftY
	pAngle
	pFlip
	pBrightness
	pContrast
	pSaturation
	pHue
	nParams
)

// Augment applies the random transformation T to a batch x of float images N×C×H×W in
// [0,1] (C = 1 or 3) on x's device, every image with parameters of its own drawn from
// libtorch's generator for that device, and returns N×C×H×W in [0,1]. Stages whose
// strength is 0 are skipped; with nothing to do it returns x itself.
//
// Colour comes first, in a fixed order — brightness, contrast, saturation, hue — each
// clamped to [0,1] as torchvision does. (ColorJitter shuffles the order per call;
// choosing an order per image would need either four times the work or a read of the
// random draw back to the host.) One-channel images get brightness and contrast only.
// Hue is a rotation of the I/Q chroma plane of YIQ, a linear stand-in for HSV's hue
// shift that keeps gray pixels gray and costs one batched 3×3 matmul.
//
// Geometry follows as a single bilinear resampling through one affine map per image
// (AffineGrid + GridSample, align_corners false), so the crop, zoom, rotation, shift
// and flip blur the image once, not five times. Pixels sampled from outside the image
// repeat the border (padding "border"): zero padding would draw a false edge around
// natural images that the Sobel filters then pick up, while on dark-background images
// such as digits both paddings give the same result.
func Augment(s *torch.Scope, x *torch.Tensor, cfg AugmentConfig) *torch.Tensor {
	return AugmentRows(s, x, cfg, Rows{})
}

// Rows places a batch within a larger one whose random draws it shares: it is rows
// Offset to Offset+n of Total. A data-parallel rank holding a slice of the global
// batch then transforms its images as one process holding the whole batch would.
// The zero value is a batch of its own.
type Rows struct{ Offset, Total int }

// AugmentRows is Augment for x as the rows of a larger batch.
func AugmentRows(s *torch.Scope, x *torch.Tensor, cfg AugmentConfig, rows Rows) *torch.Tensor {
	if !checkBatch(s, "Augment", x) {
		return nil
	}
	if err := cfg.Validate(); err != nil {
		s.Fail(err)
		return nil
	}
	dt := x.DType()
	if dt != torch.Float32 && dt != torch.Float64 {
		s.Fail(fmt.Errorf("transform: Augment: %v batch, want float32 in [0,1] (see ToFloat)", dt))
		return nil
	}
	sh := x.Shape()
	n, c, h, w := sh[0], sh[1], sh[2], sh[3]
	if c != 1 && c != 3 {
		s.Fail(fmt.Errorf("transform: Augment: %d channels, want 1 or 3", c))
		return nil
	}

	var u *torch.Tensor
	if rows.Total == 0 {
		u = s.Rand([]int{n, nParams}, dt, x.Device())
	} else if rows.Offset < 0 || rows.Offset+n > rows.Total {
		s.Fail(fmt.Errorf("transform: Augment: rows %d to %d of a batch of %d", rows.Offset, rows.Offset+n, rows.Total))
		return nil
	} else {
		u = s.Narrow(s.Rand([]int{rows.Total, nParams}, dt, x.Device()), 0, rows.Offset, n)
	}
	// draw maps column i of u to per-image values uniform in [lo, hi], shaped N×1.
	draw := func(i int, lo, hi float64) *torch.Tensor {
		return s.AddScalar(s.MulScalar(s.Narrow(u, 1, i, 1), hi-lo), lo)
	}
	// perImage reshapes an N×1 draw to broadcast over N×C×H×W.
	perImage := func(t *torch.Tensor) *torch.Tensor { return s.Reshape(t, n, 1, 1, 1) }

	if v := cfg.Brightness; v > 0 {
		b := perImage(draw(pBrightness, math.Max(0, 1-v), 1+v))
		x = s.Clamp(s.Mul(x, b), 0, 1)
	}
	if v := cfg.Contrast; v > 0 {
		f := perImage(draw(pContrast, math.Max(0, 1-v), 1+v))
		x = blend(s, x, s.Mean(Gray(s, x), true, 1, 2, 3), f)
	}
	if v := cfg.Saturation; v > 0 && c == 3 {
		f := perImage(draw(pSaturation, math.Max(0, 1-v), 1+v))
		x = blend(s, x, Gray(s, x), f)
	}
	if v := cfg.Hue; v > 0 && c == 3 {
		x = hueRotate(s, x, draw(pHue, -v, v))
	}

	if cfg.geometric() {
		minArea := 1.0
		if cfg.Crop > 0 {
			minArea = cfg.Crop
		}
		// A square crop of side r (as a fraction of the image) has its centre at most
		// 1-r from the image centre in normalised coordinates, which span [-1, 1].
		r := s.Sqrt(draw(pArea, minArea, 1))
		free := s.RSubScalar(r, 1)
		tx := s.Add(s.Mul(free, draw(pCropX, -1, 1)), draw(pShiftX, -2*cfg.Shift, 2*cfg.Shift))
		ty := s.Add(s.Mul(free, draw(pCropY, -1, 1)), draw(pShiftY, -2*cfg.Shift, 2*cfg.Shift))
		zoom := s.Div(draw(pScale, 1-cfg.MaxScale, 1+cfg.MaxScale), r)
		rad := cfg.Rotate * math.Pi / 180
		angle := draw(pAngle, -rad, rad)
		var flip *torch.Tensor
		if cfg.Flip {
			// -1 for the images whose draw is below one half, else +1.
			lt := s.Cast(s.LtScalar(s.Narrow(u, 1, pFlip, 1), 0.5), dt)
			flip = s.RSubScalar(s.MulScalar(lt, 2), 1)
		}
		x = warp(s, x, affineTheta(s, angle, zoom, tx, ty, flip, h, w))
	}
	return x
}

// blend is base + f·(x − base) clamped to [0,1]: torchvision's _blend, with f = 1
// leaving x unchanged and f = 0 giving base.
func blend(s *torch.Scope, x, base, f *torch.Tensor) *torch.Tensor {
	return s.Clamp(s.Add(base, s.Mul(f, s.Sub(x, base))), 0, 1)
}

// affineTheta builds the N×2×3 matrices that AffineGrid takes, one per image, from
// per-image parameters given as N×1 tensors: angle in radians (positive turns the
// picture counter-clockwise as displayed, the way numpy's rot90 does), zoom (> 1
// magnifies), translation tx, ty of the sampling window in normalised coordinates
// (the image spans [-1, 1] along each axis, so 0.2 is a tenth of its size), and flip
// (±1, -1 mirrors left to right; nil means no flip).
//
// theta maps an output position p to the input position θ·[p; 1] it samples:
// p_in = (1/zoom)·D⁻¹RD·F·p + t, where R is the rotation, F the flip and
// D = diag(W/2, H/2) turns normalised into pixel units, so that a non-square image
// is rotated rigidly in pixels rather than sheared.
func affineTheta(s *torch.Scope, angle, zoom, tx, ty, flip *torch.Tensor, h, w int) *torch.Tensor {
	cos, sin := s.Cos(angle), s.Sin(angle)
	inv := s.Reciprocal(zoom)
	a00 := s.Mul(cos, inv)
	a01 := s.Mul(s.MulScalar(sin, -float64(h)/float64(w)), inv)
	a10 := s.Mul(s.MulScalar(sin, float64(w)/float64(h)), inv)
	a11 := s.Mul(cos, inv)
	if flip != nil {
		a00 = s.Mul(a00, flip)
		a10 = s.Mul(a10, flip)
	}
	return s.Reshape(s.Cat(1, a00, a01, tx, a10, a11, ty), -1, 2, 3)
}

// warp resamples x through the affine maps theta (see affineTheta): bilinear,
// border padding, align_corners false.
func warp(s *torch.Scope, x, theta *torch.Tensor) *torch.Tensor {
	sh := x.Shape()
	if sh == nil {
		s.Fail(fmt.Errorf("transform: warp: nil batch"))
		return nil
	}
	grid := s.AffineGrid(theta, sh[0], sh[1], sh[2], sh[3], false)
	return s.GridSample(x, grid, torch.Bilinear, torch.PadBorder, false)
}

// hueRotate turns the chroma of an RGB batch N×3×H×W by turns (N×1, fractions of a
// full turn) and clamps to [0,1]. Per image the map is M = T⁻¹·Rot·T with T the
// RGB→YIQ matrix and Rot the rotation of the I/Q plane by 2π·turns; expanding Rot as
// 1·E₀ + cos·E₁ + sin·E₂ gives M = [1 cos sin]·K for a constant 3×9 K (hueBasis), so
// all N matrices come from one small matmul and are applied with one batched matmul.
func hueRotate(s *torch.Scope, x, turns *torch.Tensor) *torch.Tensor {
	sh := x.Shape()
	if sh == nil {
		s.Fail(fmt.Errorf("transform: hue: nil batch"))
		return nil
	}
	n, h, w := sh[0], sh[2], sh[3]
	phi := s.MulScalar(turns, 2*math.Pi)
	coef := s.Cat(1, s.OnesLike(phi), s.Cos(phi), s.Sin(phi))
	k := hueBasis()
	m := s.Reshape(s.MatMul(coef, constant(s, k[:], x.DType(), x.Device(), 3, 9)), n, 3, 3)
	y := s.MatMul(m, s.Reshape(x, n, 3, h*w))
	return s.Clamp(s.Reshape(y, n, 3, h, w), 0, 1)
}

// hueBasis returns K, row-major 3×9: rows are the flattened 3×3 matrices P₀, P₁, P₂
// with T⁻¹·Rot(φ)·T = P₀ + cos φ·P₁ + sin φ·P₂.
func hueBasis() [27]float64 {
	// RGB → YIQ (FCC NTSC). Gray pixels have I = Q = 0, so a hue turn leaves them.
	t := [3][3]float64{
		{0.299, 0.587, 0.114},
		{0.595716, -0.274453, -0.321263},
		{0.211456, -0.522591, 0.311135},
	}
	ti := inverse3(t)
	var k [27]float64
	for r := range 3 {
		for c := range 3 {
			k[r*3+c] = ti[r][0] * t[0][c]
			k[9+r*3+c] = ti[r][1]*t[1][c] + ti[r][2]*t[2][c]
			k[18+r*3+c] = ti[r][2]*t[1][c] - ti[r][1]*t[2][c]
		}
	}
	return k
}

// inverse3 inverts a 3×3 matrix by cofactors; the caller passes an invertible one.
func inverse3(m [3][3]float64) [3][3]float64 {
	var inv [3][3]float64
	for r := range 3 {
		for c := range 3 {
			// Cofactor of m[c][r], i.e. the adjugate's (r, c) entry; the cyclic
			// indices make the sign come out right without a (-1)^(r+c) factor.
			r1, r2 := (c+1)%3, (c+2)%3
			c1, c2 := (r+1)%3, (r+2)%3
			inv[r][c] = m[r1][c1]*m[r2][c2] - m[r1][c2]*m[r2][c1]
		}
	}
	det := m[0][0]*inv[0][0] + m[0][1]*inv[1][0] + m[0][2]*inv[2][0]
	for r := range 3 {
		for c := range 3 {
			inv[r][c] /= det
		}
	}
	return inv
}

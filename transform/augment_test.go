package transform

import (
	"math"
	"testing"

	"emclust/torch"
)

// column makes an N×1 float32 tensor of per-image parameters.
func column(s *torch.Scope, v ...float32) *torch.Tensor {
	return s.FromFloat32(v, []int{len(v), 1}, testDevice)
}

// ramp is an N×C×H×W test image whose pixels all differ, scaled into [0,1].
func ramp(s *torch.Scope, shape ...int) *torch.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return s.DivScalar(s.Reshape(s.Arange(n, torch.Float32, testDevice), shape...), float64(n))
}

func TestAugmentZeroConfigIsIdentity(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	x := s.Rand([]int{4, 3, 9, 7}, torch.Float32, testDevice)
	for _, cfg := range []AugmentConfig{{}, {Crop: 1}} {
		out := Augment(s, x, cfg)
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		closeTo(t, "identity augment", s.Float32s(out), s.Float32s(x), 1e-5)
	}
}

// The zero-strength path above skips every stage; these check that the stages
// themselves are the identity at zero.
func TestIdentityStages(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	x := s.Rand([]int{2, 3, 6, 5}, torch.Float32, testDevice)
	zero := column(s, 0, 0)
	one := column(s, 1, 1)
	theta := affineTheta(s, zero, one, zero, zero, one, 6, 5)
	closeTo(t, "identity warp", s.Float32s(warp(s, x, theta)), s.Float32s(x), 1e-5)
	closeTo(t, "blend f=1", s.Float32s(blend(s, x, Gray(s, x), s.Reshape(one, 2, 1, 1, 1))), s.Float32s(x), 1e-6)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestAugmentDefault(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	const n = 8
	img := s.Rand([]int{1, 3, 16, 16}, torch.Float32, testDevice)
	x := s.Contiguous(s.Expand(img, n, 3, 16, 16))
	cfg := DefaultAugment()
	cfg.Flip = true

	run := func(seed uint64) []float32 {
		if err := torch.ManualSeed(seed); err != nil {
			t.Fatal(err)
		}
		out := Augment(s, x, cfg)
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if sh := out.Shape(); !sameShape(sh, []int{n, 3, 16, 16}) || out.DType() != torch.Float32 {
			t.Fatalf("shape %v dtype %v", sh, out.DType())
		}
		return s.Float32s(out)
	}
	a := run(1)
	for i, v := range a {
		if !(v >= 0 && v <= 1) {
			t.Fatalf("value %d = %v outside [0,1]", i, v)
		}
	}
	// Every copy of the image drew its own parameters.
	per := len(a) / n
	for i := 1; i < n; i++ {
		diff := 0.0
		for j := range per {
			diff = math.Max(diff, math.Abs(float64(a[i*per+j]-a[j])))
		}
		if diff < 1e-3 {
			t.Fatalf("copies 0 and %d came out the same (max diff %v)", i, diff)
		}
	}
	closeTo(t, "same seed", run(1), a, 0)
	b := run(2)
	same := true
	for i := range a {
		if a[i] != b[i] {
			same = false
			break
		}
	}
	if same {
		t.Fatal("seeds 1 and 2 gave the same augmentation")
	}

	// Gray images take the brightness and contrast path.
	g := Augment(s, s.Rand([]int{5, 1, 10, 10}, torch.Float32, testDevice), DefaultAugment())
	if sh := g.Shape(); !sameShape(sh, []int{5, 1, 10, 10}) {
		t.Fatalf("gray shape %v", sh)
	}
	if lo, hi := s.Item(s.Min(g, false)), s.Item(s.Max(g, false)); lo < 0 || hi > 1 {
		t.Fatalf("gray range [%v, %v]", lo, hi)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestAugmentRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  AugmentConfig
		x    func(*torch.Scope) *torch.Tensor
	}{
		{"hue above half a turn", AugmentConfig{Hue: 0.6}, nil},
		{"negative brightness", AugmentConfig{Brightness: -0.1}, nil},
		{"scale 1", AugmentConfig{MaxScale: 1}, nil},
		{"NaN rotation", AugmentConfig{Rotate: math.NaN()}, nil},
		{"uint8 batch", DefaultAugment(), func(s *torch.Scope) *torch.Tensor {
			return s.Zeros([]int{1, 1, 4, 4}, torch.Uint8, testDevice)
		}},
		{"two channels", DefaultAugment(), func(s *torch.Scope) *torch.Tensor {
			return s.Zeros([]int{1, 2, 4, 4}, torch.Float32, testDevice)
		}},
		{"not a batch", DefaultAugment(), func(s *torch.Scope) *torch.Tensor {
			return s.Zeros([]int{4, 4}, torch.Float32, testDevice)
		}},
	} {
		s := torch.NoGrad()
		x := s.Zeros([]int{1, 3, 4, 4}, torch.Float32, testDevice)
		if c.x != nil {
			x = c.x(s)
		}
		if out := Augment(s, x, c.cfg); out != nil || s.Err() == nil {
			t.Errorf("%s: accepted", c.name)
		}
		s.Close()
	}
	if err := DefaultAugment().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestRotate90(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	const n = 5
	x := ramp(s, 1, 1, n, n)
	theta := affineTheta(s, column(s, math.Pi/2), column(s, 1), column(s, 0), column(s, 0), nil, n, n)
	got, in := s.Float32s(warp(s, x, theta)), s.Float32s(x)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	// numpy.rot90: out[i][j] = in[j][n-1-i]. Pixel centres land on pixel centres, so
	// bilinear sampling reproduces the values; check the interior.
	for i := 1; i < n-1; i++ {
		for j := 1; j < n-1; j++ {
			if w := in[j*n+n-1-i]; math.Abs(float64(got[i*n+j]-w)) > 1e-5 {
				t.Fatalf("out[%d][%d] = %v, want in[%d][%d] = %v", i, j, got[i*n+j], j, n-1-i, w)
			}
		}
	}

	// A flip alone mirrors the columns.
	mirror := affineTheta(s, column(s, 0), column(s, 1), column(s, 0), column(s, 0), column(s, -1), n, n)
	got = s.Float32s(warp(s, x, mirror))
	for i := range n {
		for j := range n {
			if w := in[i*n+n-1-j]; math.Abs(float64(got[i*n+j]-w)) > 1e-5 {
				t.Fatalf("flip: out[%d][%d] = %v, want %v", i, j, got[i*n+j], w)
			}
		}
	}
}

// On a non-square image a 90° turn must still be rigid in pixels: the centre H×H block
// of the output is the rotated centre of the input.
func TestRotate90NonSquare(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	const h, w = 4, 6
	x := ramp(s, 1, 1, h, w)
	theta := affineTheta(s, column(s, math.Pi/2), column(s, 1), column(s, 0), column(s, 0), nil, h, w)
	got, in := s.Float32s(warp(s, x, theta)), s.Float32s(x)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	// Input column = (w-1)/2 - (i - (h-1)/2) = 4 - i; input row = j - (w-1)/2 + (h-1)/2 = j - 1.
	for i := range h {
		for j := 1; j <= h; j++ {
			if v := in[(j-1)*w+4-i]; math.Abs(float64(got[i*w+j]-v)) > 1e-5 {
				t.Fatalf("out[%d][%d] = %v, want in[%d][%d] = %v", i, j, got[i*w+j], j-1, 4-i, v)
			}
		}
	}
}

func TestZoomAndShift(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	const n = 8
	x := ramp(s, 1, 1, n, n)
	in := s.Float32s(x)
	// A shift of the window by two pixels (0.5 in normalised units on 8 pixels)
	// moves the content two pixels left.
	shift := affineTheta(s, column(s, 0), column(s, 1), column(s, 0.5), column(s, 0), nil, n, n)
	got := s.Float32s(warp(s, x, shift))
	for i := range n {
		for j := range n - 2 {
			if v := in[i*n+j+2]; math.Abs(float64(got[i*n+j]-v)) > 1e-5 {
				t.Fatalf("shift: out[%d][%d] = %v, want %v", i, j, got[i*n+j], v)
			}
		}
	}
	// The ramp is linear in row and column, so bilinear sampling is exact, and a 2×
	// zoom about the centre has the mean of the input's centre half.
	zoom := warp(s, x, affineTheta(s, column(s, 0), column(s, 2), column(s, 0), column(s, 0), nil, n, n))
	centre := s.Narrow(s.Narrow(x, 2, n/4, n/2), 3, n/4, n/2)
	if a, b := s.Item(s.Mean(zoom, false)), s.Item(s.Mean(centre, false)); math.Abs(a-b) > 1e-5 {
		t.Fatalf("zoom ×2: mean %v, want the centre's %v", a, b)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestHueRotation(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	// Keep colours away from 0 and 1 so the clamp cannot hide an error.
	x := s.AddScalar(s.MulScalar(s.Rand([]int{3, 3, 4, 4}, torch.Float32, testDevice), 0.5), 0.25)
	want := s.Float32s(x)
	closeTo(t, "hue 0", s.Float32s(hueRotate(s, x, column(s, 0, 0, 0))), want, 1e-5)
	closeTo(t, "hue ±1 turn", s.Float32s(hueRotate(s, x, column(s, 1, -1, 1))), want, 1e-5)
	// A quarter turn there and back.
	half := hueRotate(s, hueRotate(s, x, column(s, 0.25, 0.25, 0.25)), column(s, -0.25, -0.25, -0.25))
	closeTo(t, "quarter turn and back", s.Float32s(half), want, 1e-5)
	// A real turn changes colours, but gray stays gray.
	turned := hueRotate(s, x, column(s, 0.3, 0.3, 0.3))
	if d := s.Item(s.Max(s.Abs(s.Sub(turned, x)), false)); d < 0.01 {
		t.Fatalf("0.3 turn changed colours by only %v", d)
	}
	grayImg := s.Full([]int{1, 3, 2, 2}, 0.4, torch.Float32, testDevice)
	closeTo(t, "gray under hue", s.Float32s(hueRotate(s, grayImg, column(s, 0.37))), s.Float32s(grayImg), 1e-5)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestInverse3(t *testing.T) {
	m := [3][3]float64{{2, -1, 0}, {1, 3, 4}, {0.5, 0, -2}}
	inv := inverse3(m)
	for r := range 3 {
		for c := range 3 {
			var v float64
			for k := range 3 {
				v += m[r][k] * inv[k][c]
			}
			want := 0.0
			if r == c {
				want = 1
			}
			if math.Abs(v-want) > 1e-12 {
				t.Fatalf("m·m⁻¹[%d][%d] = %v", r, c, v)
			}
		}
	}
}

// A crop keeps a square window of side r ≥ √Crop inside the image: on a gradient,
// every output line rises through the window and stops short of the border, where
// the border padding would make it flat. A window let past the image (a centre
// bound of 1 − r² instead of 1 − r, say) flattens several pixels at one end.
func TestAugmentCropStaysInside(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	const n, side = 256, 32
	if err := torch.ManualSeed(3); err != nil {
		t.Fatal(err)
	}
	// Pixel (row, col) holds (col + 0.5)/side: the value at a position is where it is.
	cols := s.DivScalar(s.AddScalar(s.Arange(side, torch.Float32, testDevice), 0.5), side)
	across := s.Contiguous(s.Expand(s.Reshape(cols, 1, 1, 1, side), n, 1, side, side))
	down := s.Contiguous(s.Transpose(across, 2, 3))
	cfg := AugmentConfig{Crop: 0.3}
	for _, tc := range []struct {
		name string
		x    *torch.Tensor
		at   func(img, line, k int) int // index of the k-th value along a line
	}{
		{"across", across, func(img, line, k int) int { return (img*side+line)*side + k }},
		{"down", down, func(img, line, k int) int { return (img*side+k)*side + line }},
	} {
		out := s.Float32s(Augment(s, tc.x, cfg))
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		minSpan, maxSpan := math.Inf(1), 0.0
		for img := range n {
			for line := range side {
				flat := 0
				for k := 0; k+1 < side; k++ {
					d := float64(out[tc.at(img, line, k+1)] - out[tc.at(img, line, k)])
					if d < -1e-6 {
						t.Fatalf("%s: image %d line %d falls at %d", tc.name, img, line, k)
					}
					if d < 1e-6 {
						flat++
					}
				}
				// Only the outermost half pixel of the window may reach the border.
				if flat > 2 {
					t.Fatalf("%s: image %d line %d is flat at %d steps: the window left the image", tc.name, img, line, flat)
				}
				span := float64(out[tc.at(img, line, side-1)] - out[tc.at(img, line, 0)])
				minSpan, maxSpan = math.Min(minSpan, span), math.Max(maxSpan, span)
			}
		}
		// The window's side is r·(side−1)/side pixels' worth of values, r from √0.3 to 1,
		// less up to half a pixel at each end.
		full := float64(side-1) / side
		if minSpan < math.Sqrt(0.3)*full-1.0/side-1e-4 || maxSpan > full+1e-4 || minSpan > 0.8*full {
			t.Errorf("%s: window spans %.4f to %.4f of the values, want %.4f to %.4f and some well below the whole", tc.name, minSpan, maxSpan, math.Sqrt(0.3)*full, full)
		}
	}
}

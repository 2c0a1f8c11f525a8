package transform

import (
	"math"
	"testing"

	"emclust/torch"
)

// closeTo fails the test unless got and want agree element by element within tol.
func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > tol {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSobelVerticalEdge(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	// 5×5, dark in columns 0-1, bright in 2-4.
	img := make([]float32, 25)
	for y := range 5 {
		for x := 2; x < 5; x++ {
			img[y*5+x] = 1
		}
	}
	out := Sobel(s, s.FromFloat32(img, []int{1, 1, 5, 5}, testDevice))
	got := s.Float32s(out)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if sh := out.Shape(); !sameShape(sh, []int{1, 2, 5, 5}) {
		t.Fatalf("shape %v", sh)
	}
	gx := func(y, x int) float32 { return got[y*5+x] }
	gy := func(y, x int) float32 { return got[25+y*5+x] }
	// Away from the top and bottom rows Gx = (1+2+1)·(I[x+1] − I[x−1]).
	for _, c := range []struct {
		y, x   int
		gx, gy float32
	}{
		{2, 1, 4, 0},  // 1 − 0
		{2, 2, 4, 0},  // 1 − 0
		{2, 3, 0, 0},  // 1 − 1: inside the bright part
		{2, 0, 0, 0},  // 0 − padding 0
		{2, 4, -4, 0}, // padding 0 − 1: the zero padding makes an edge
		{0, 1, 3, 1},  // top row: the rows below see the edge, the padding above does not
		{0, 3, 0, 4},  // Gy at the top: bright row below, zero padding above
		{4, 3, 0, -4}, // and at the bottom the other way
	} {
		if gx(c.y, c.x) != c.gx || gy(c.y, c.x) != c.gy {
			t.Errorf("at (%d,%d): Gx %v Gy %v, want %v %v", c.y, c.x, gx(c.y, c.x), gy(c.y, c.x), c.gx, c.gy)
		}
	}
}

func TestSobelConstantInteriorIsZero(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	out := Sobel(s, s.Full([]int{2, 1, 6, 7}, 0.37, torch.Float32, testDevice))
	inner := s.Narrow(s.Narrow(out, 2, 1, 4), 3, 1, 5)
	if v := s.Item(s.Max(s.Abs(inner), false)); v > 1e-6 {
		t.Fatalf("max |gradient| inside a constant image = %v", v)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestGrayPrimaries(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	// Pixels red, green / blue, white.
	x := s.FromFloat32([]float32{
		1, 0, 0, 1, // R plane
		0, 1, 0, 1, // G plane
		0, 0, 1, 1, // B plane
	}, []int{1, 3, 2, 2}, testDevice)
	g := Gray(s, x)
	if sh := g.Shape(); !sameShape(sh, []int{1, 1, 2, 2}) {
		t.Fatalf("shape %v", sh)
	}
	closeTo(t, "gray", s.Float32s(g), []float32{0.299, 0.587, 0.114, 1}, 1e-6)
	one := s.Rand([]int{1, 1, 2, 2}, torch.Float32, testDevice)
	if Gray(s, one) != one {
		t.Fatal("one-channel batch did not pass through")
	}
	if Gray(s, s.Zeros([]int{1, 2, 2, 2}, torch.Float32, testDevice)) != nil || s.Err() == nil {
		t.Fatal("two channels accepted")
	}
}

func TestPreprocessFromUint8(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	x := s.Cast(s.RandInt(0, 256, []int{3, 3, 8, 6}, testDevice), torch.Uint8)
	out := Preprocess(s, x)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if sh := out.Shape(); !sameShape(sh, []int{3, 2, 8, 6}) {
		t.Fatalf("shape %v, want [3 2 8 6]", sh)
	}
	if dt := out.DType(); dt != torch.Float32 {
		t.Fatalf("dtype %v, want float32", dt)
	}
	// Same as the steps done by hand on x/255.
	want := Sobel(s, Gray(s, s.DivScalar(s.Cast(x, torch.Float32), 255)))
	closeTo(t, "preprocess", s.Float32s(out), s.Float32s(want), 1e-6)

	// A gray uint8 batch takes the one-channel path.
	g := Preprocess(s, s.Cast(s.RandInt(0, 256, []int{2, 1, 5, 5}, testDevice), torch.Uint8))
	if sh := g.Shape(); !sameShape(sh, []int{2, 2, 5, 5}) || g.DType() != torch.Float32 {
		t.Fatalf("gray input: shape %v dtype %v", sh, g.DType())
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestPipelineNoLeak(t *testing.T) {
	before := torch.LiveTensors()
	s := torch.NoGrad()
	cfg := DefaultAugment()
	cfg.Flip = true
	x := s.Cast(s.RandInt(0, 256, []int{4, 3, 12, 10}, testDevice), torch.Uint8)
	out := Pipeline(s, x, &cfg)
	if sh := out.Shape(); !sameShape(sh, []int{4, 2, 12, 10}) {
		t.Fatalf("shape %v", sh)
	}
	plain := Pipeline(s, x, nil)
	closeTo(t, "pipeline without augmentation", s.Float32s(plain), s.Float32s(Preprocess(s, x)), 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := torch.LiveTensors(); after != before {
		t.Fatalf("live tensors %d after closing the scope, %d before", after, before)
	}
}

// benchPipeline times the per-step image path on a uint8 batch already on the
// training device (CUDA when present).
func benchPipeline(b *testing.B, shape []int) {
	dev := testDevice
	if torch.CUDAAvailable() {
		dev = torch.Device{CUDA: true}
	}
	setup := torch.NoGrad()
	defer setup.Close()
	x := setup.Cast(setup.RandInt(0, 256, shape, dev), torch.Uint8)
	if err := setup.Err(); err != nil {
		b.Fatal(err)
	}
	cfg := DefaultAugment()
	b.ResetTimer()
	for range b.N {
		s := torch.NoGrad()
		Pipeline(s, x, &cfg)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if err := torch.Synchronize(dev); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*shape[0]), "µs/image")
}

func BenchmarkPipelineMNISTBatch(b *testing.B) { benchPipeline(b, []int{128, 1, 28, 28}) }

func BenchmarkPipelineCIFARBatch(b *testing.B) { benchPipeline(b, []int{128, 3, 32, 32}) }

// A constant holds Go's values as its dtype rounds them: float64 exactly (the hue
// basis of a float64 batch went through float32), float32 to the nearest, and in the
// shape asked for, on the test device.
func TestConstant(t *testing.T) {
	vals := []float64{0.1, 1.0 / 3, -2, 0.587}
	s := torch.NoGrad()
	defer s.Close()
	for _, dt := range []torch.DType{torch.Float64, torch.Float32} {
		c := constant(s, vals, dt, testDevice, 2, 2)
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if c.DType() != dt || c.Device() != testDevice || !sameShape(c.Shape(), []int{2, 2}) {
			t.Fatalf("%v: %v %v %v, want %v on %v, 2×2", dt, c.DType(), c.Device(), c.Shape(), dt, testDevice)
		}
		flat := s.Reshape(c, 4)
		for i, v := range vals {
			want := v
			if dt == torch.Float32 {
				want = float64(float32(v))
			}
			if got := s.Item(s.Narrow(flat, 0, i, 1)); got != want {
				t.Errorf("%v: value %d is %v, want %v", dt, i, got, want)
			}
		}
	}
}

package torch

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestRoundTripAndArithmetic(t *testing.T) {
	s := NewScope()
	defer s.Close()
	a := s.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, []int{2, 3}, testDevice)
	b := s.FromFloat32([]float32{10, 20, 30}, []int{3}, testDevice)
	sum := s.Add(a, b) // broadcast
	got := s.Float32s(sum)
	want := []float32{11, 22, 33, 14, 25, 36}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("add = %v, want %v", got, want)
		}
	}
	mm := s.MatMul(a, s.Reshape(b, 3, 1))
	if g := s.Float32s(mm); g[0] != 140 || g[1] != 320 {
		t.Fatalf("matmul = %v", g)
	}
	if sh := mm.Shape(); len(sh) != 2 || sh[0] != 2 || sh[1] != 1 {
		t.Fatalf("shape %v", sh)
	}
	if v := s.Item(s.Sum(a, false)); v != 21 {
		t.Fatalf("sum = %v", v)
	}
	if v := s.Float32s(s.Mean(a, false, 0)); v[0] != 2.5 || v[2] != 4.5 {
		t.Fatalf("mean dim0 = %v", v)
	}
	// Biased variance of column [1,4] is 2.25.
	if v := s.Float32s(s.Var(a, false, 0)); v[0] != 2.25 {
		t.Fatalf("var = %v", v)
	}
	am := s.Int64s(s.ArgMax(a, false, 1))
	if am[0] != 2 || am[1] != 2 {
		t.Fatalf("argmax = %v", am)
	}
	sm := s.Float32s(s.Softmax(s.FromFloat32([]float32{0, 0}, []int{1, 2}, testDevice), 1))
	if sm[0] != 0.5 {
		t.Fatalf("softmax = %v", sm)
	}
	ls := s.Item(s.LogSigmoid(s.FromFloat32([]float32{-100}, []int{1}, testDevice)))
	if !near(ls, -100, 1e-4) {
		t.Fatalf("logsigmoid(-100) = %v, want -100 (stable)", ls)
	}
	u8 := s.FromUint8([]uint8{0, 255}, []int{2}, testDevice)
	if v := s.Float32s(u8); v[1] != 255 {
		t.Fatalf("uint8 -> float = %v", v)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

// Float32sInto copies into the buffer it is given when that has the room, and into a
// new one when not.
func TestFloat32sInto(t *testing.T) {
	s := NoGrad()
	defer s.Close()
	a := s.FromFloat32([]float32{1, 2, 3, 4}, []int{2, 2}, testDevice)
	buf := make([]float32, 1, 8)
	got := s.Float32sInto(buf, a)
	if !slices.Equal(got, []float32{1, 2, 3, 4}) || &got[0] != &buf[0] {
		t.Errorf("into room for 8: %v, same buffer %v", got, &got[0] == &buf[0])
	}
	small := make([]float32, 2)
	if got := s.Float32sInto(small, a); !slices.Equal(got, []float32{1, 2, 3, 4}) || &got[0] == &small[0] {
		t.Errorf("into room for 2: %v", got)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestErrorsAreValuesNotCrashes(t *testing.T) {
	s := NewScope()
	defer s.Close()
	a := s.Zeros([]int{2, 3}, Float32, testDevice)
	b := s.Zeros([]int{4, 5}, Float32, testDevice)
	c := s.MatMul(a, b)
	if c != nil {
		t.Fatal("matmul of mismatched shapes returned a tensor")
	}
	err := s.Err()
	var te *Error
	if !errors.As(err, &te) || te.Op != "matmul" || !strings.Contains(te.Msg, "2x3") {
		t.Fatalf("err = %v, want a matmul shape error naming 2x3", err)
	}
	// Later ops are no-ops and keep the first error.
	if d := s.Add(c, a); d != nil || s.Err() != err {
		t.Fatal("op after failure ran or replaced the error")
	}
	if fromHost := NewScope(); fromHost.FromFloat32([]float32{1, 2, 3}, []int{2, 2}, testDevice) != nil || fromHost.Err() == nil {
		t.Fatal("from_host with wrong element count did not fail")
	}
	// 3 × 6148914691236517206 wraps to 2 in int64 arithmetic; -1 × -2 is 2.
	for _, shape := range [][]int{{3, 6148914691236517206}, {-1, -2}} {
		if fromHost := NewScope(); fromHost.FromFloat32([]float32{1, 2}, shape, testDevice) != nil || fromHost.Err() == nil {
			t.Errorf("from_host of 2 values into shape %v did not fail", shape)
		}
	}
	// libtorch returns zeros for an interpolation or padding code it does not know.
	g := NewScope()
	defer g.Close()
	x, grid := g.Zeros([]int{1, 1, 2, 2}, Float32, testDevice), g.Zeros([]int{1, 2, 2, 2}, Float32, testDevice)
	if y := g.GridSample(x, grid, 7, 0, false); y != nil || g.Err() == nil || !strings.Contains(g.Err().Error(), "mode 7") {
		t.Errorf("grid_sample with mode 7: %v", g.Err())
	}
}

// An allocation larger than any address space is an error value that says so, not a
// crash, and OutOfMemory tells it from other errors.
func TestOutOfMemoryIsAnError(t *testing.T) {
	s := NewScope()
	defer s.Close()
	if x := s.Empty([]int{1 << 30, 1 << 20}, Float32, CPU); x != nil {
		t.Fatal("a 4 PiB tensor was allocated")
	}
	var te *Error
	if err := s.Err(); !errors.As(err, &te) || !te.OutOfMemory() {
		t.Fatalf("err = %v, want an out-of-memory error", err)
	}
	if !strings.Contains(te.Msg, "4503599627370496") {
		t.Errorf("message %q does not say how many bytes were asked", te.Msg)
	}
	shape := NewScope()
	defer shape.Close()
	shape.MatMul(shape.Zeros([]int{2, 3}, Float32, testDevice), shape.Zeros([]int{4, 5}, Float32, testDevice))
	if errors.As(shape.Err(), &te) && te.OutOfMemory() {
		t.Error("a shape error counts as out of memory")
	}
}

func TestScopeFreesAndKeep(t *testing.T) {
	before := LiveTensors()
	s := NewScope()
	a := s.Ones([]int{3}, Float32, testDevice)
	b := s.Add(a, a)
	kept := s.Keep(s.MulScalar(b, 2))
	if got := LiveTensors() - before; got != 3 {
		t.Fatalf("live = %d, want 3", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := LiveTensors() - before; got != 1 {
		t.Fatalf("after close live = %d, want 1 (the kept tensor)", got)
	}
	if a.Shape() != nil {
		t.Fatal("tensor usable after its scope closed")
	}
	// A freed tensor has no element type; it must not read as float32.
	if d := a.DType(); d != NoDType {
		t.Fatalf("freed tensor's dtype %v, want NoDType", d)
	}
	if d := (*Tensor)(nil).DType(); d != NoDType {
		t.Fatalf("nil tensor's dtype %v, want NoDType", d)
	}
	s2 := NewScope()
	if v := s2.Float32s(kept); v[0] != 4 {
		t.Fatalf("kept = %v", v)
	}
	s2.Close()
	kept.Free()
	kept.Free()
	if got := LiveTensors() - before; got != 0 {
		t.Fatalf("leak: %d live", got)
	}
}

func TestGradAndNoGrad(t *testing.T) {
	s := NewScope()
	defer s.Close()
	w := s.FromFloat32([]float32{1, 2, 3}, []int{3}, testDevice)
	if err := w.SetRequiresGrad(true); err != nil {
		t.Fatal(err)
	}
	x := s.FromFloat32([]float32{4, 5, 6}, []int{3}, testDevice)
	// loss = sum(w*x) + sum(detach(w)*w): grad = x + detach(w) = [5,7,9].
	loss := s.Add(s.Sum(s.Mul(w, x), false), s.Sum(s.Mul(s.Detach(w), w), false))
	s.Backward(loss)
	g := s.Float32s(s.Grad(w))
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if g[0] != 5 || g[1] != 7 || g[2] != 9 {
		t.Fatalf("grad = %v, want [5 7 9]", g)
	}
	ng := NoGrad()
	defer ng.Close()
	if y := ng.Mul(w, x); y.RequiresGrad() {
		t.Fatal("no-grad scope recorded a graph")
	}
	if ng.Backward(loss); ng.Err() == nil {
		t.Fatal("backward in a no-grad scope did not fail")
	}
}

// Grad mode travels with each call, so it holds whatever OS thread the goroutine runs on.
func TestGradModeAcrossGoroutines(t *testing.T) {
	p := NewScope()
	defer p.Close()
	w := p.Ones([]int{4}, Float32, testDevice)
	w.SetRequiresGrad(true)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			noGrad := g%2 == 0
			for i := 0; i < 200; i++ {
				s := NewScope()
				if noGrad {
					s = NoGrad()
				}
				y := s.MulScalar(w, 2)
				if y.RequiresGrad() == noGrad {
					errs <- errors.New("grad mode leaked between goroutines")
				}
				s.Close()
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// adamOfTwo is a parameter [1, -2] that requires its gradient and an Adam of
// learning rate 0.1 over it, both freed when the test ends.
func adamOfTwo(t *testing.T) (*Tensor, *Adam) {
	s := NewScope()
	p := s.Keep(s.FromFloat32([]float32{1, -2}, []int{2}, testDevice))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	p.SetRequiresGrad(true)
	opt, err := NewAdam([]*Tensor{p}, []float64{0.1}, AdamConfig{})
	if err != nil {
		p.Free()
		t.Fatal(err)
	}
	t.Cleanup(func() { opt.Close(); p.Free() })
	return p, opt
}

// Adam's first step moves every parameter by -lr·sign(g) (bias correction makes
// m̂/√v̂ = g/|g|), and later steps follow PyTorch's formula computed by hand here.
func TestAdamMatchesHandComputation(t *testing.T) {
	s := NewScope()
	defer s.Close()
	p, opt := adamOfTwo(t)
	// loss = sum(p^2): grad = 2p.
	ref := []float64{1, -2}
	m := []float64{0, 0}
	v := []float64{0, 0}
	for step := 1; step <= 3; step++ {
		opt.ZeroGrad()
		st := NewScope()
		st.Backward(st.Sum(st.Square(p), false))
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		for i := range ref {
			g := 2 * ref[i]
			m[i] = 0.9*m[i] + 0.1*g
			v[i] = 0.999*v[i] + 0.001*g*g
			mh := m[i] / (1 - math.Pow(0.9, float64(step)))
			vh := v[i] / (1 - math.Pow(0.999, float64(step)))
			ref[i] -= 0.1 * mh / (math.Sqrt(vh) + 1e-8)
		}
		got := s.Float32s(p)
		for i := range ref {
			if !near(float64(got[i]), ref[i], 1e-5) {
				t.Fatalf("step %d: p = %v, want %v", step, got, ref)
			}
		}
	}
	_, _, n := opt.State(s, 0)
	if n != 3 {
		t.Fatalf("step count %d, want 3", n)
	}
	// A saved state that does not fit the parameter is an error, not broadcast, cast
	// or (a negative step) a division by zero at the next step.
	for _, tc := range []struct {
		name  string
		m, v  *Tensor
		step  int64
		index int
	}{
		{"shape", s.Zeros([]int{7}, Float32, testDevice), s.Zeros([]int{2}, Float32, testDevice), 3, 0},
		{"scalar", s.Zeros([]int{2}, Float32, testDevice), s.Zeros(nil, Float32, testDevice), 3, 0},
		{"dtype", s.Zeros([]int{2}, Int64, testDevice), s.Zeros([]int{2}, Float32, testDevice), 3, 0},
		{"step", s.Zeros([]int{2}, Float32, testDevice), s.Zeros([]int{2}, Float32, testDevice), -1, 0},
		{"index", s.Zeros([]int{2}, Float32, testDevice), s.Zeros([]int{2}, Float32, testDevice), 3, 1 << 32},
	} {
		if err := opt.SetState(tc.index, tc.m, tc.v, tc.step); err == nil {
			t.Errorf("SetState with another %s: no error", tc.name)
		}
	}
	if _, _, n := opt.State(s, 0); n != 3 {
		t.Fatalf("refused states changed the step count to %d", n)
	}
	if got := s.Float32s(p); !near(float64(got[0]), ref[0], 1e-5) || s.Err() != nil {
		t.Fatalf("refused states: p = %v (%v), want %v", got, s.Err(), ref)
	}
	if m, _, _ := opt.State(s, 1<<32); m != nil || s.Err() == nil {
		t.Fatal("State of parameter 2^32: no error")
	}
}

// A step changes the parameters in place, as torch.optim.Adam does: a graph that
// saved them before it refuses to backward, rather than using the new values.
func TestAdamStepInvalidatesSavedGraph(t *testing.T) {
	s := NewScope()
	defer s.Close()
	p, opt := adamOfTwo(t)
	first := NewScope()
	defer first.Close()
	first.Backward(first.Sum(first.Square(p), false))
	saved := first.Sum(first.Square(p), false) // saves p for its backward
	if err := first.Err(); err != nil {
		t.Fatal(err)
	}
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
	if first.Backward(saved); first.Err() == nil || !strings.Contains(first.Err().Error(), "inplace") {
		t.Errorf("backward through a graph saved before the step: %v, want libtorch's in-place error", first.Err())
	}
}

// Adam over parameters large enough to be split among threads, in both float types
// and two learning rates (two groups), and with one parameter left without a
// gradient, against the same formula in float64 here.
func TestAdamLargeParameters(t *testing.T) {
	for _, tc := range []struct {
		name string
		dt   DType
		tol  float64 // of |p| ≤ 2 after five steps
	}{
		{"float32", Float32, 1e-5},
		{"float64", Float64, 1e-12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewScope()
			defer s.Close()
			const n = 70001 // above the update's grain of 2^15, and odd
			lrs := []float64{0.01, 0.003, 0.02}
			ref := make([][]float64, len(lrs))
			var params []*Tensor
			for k := range lrs {
				ref[k] = make([]float64, n)
				for i := range ref[k] {
					ref[k][i] = 2 * math.Sin(float64(i*(k+1))+0.5)
				}
				p := s.Keep(s.Cast(s.FromFloat64(ref[k], []int{n}, testDevice), tc.dt))
				defer p.Free()
				p.SetRequiresGrad(true)
				params = append(params, p)
			}
			opt, err := NewAdam(params, lrs, AdamConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer opt.Close()
			m := [2][]float64{make([]float64, n), make([]float64, n)}
			v := [2][]float64{make([]float64, n), make([]float64, n)}
			for step := 1; step <= 5; step++ {
				opt.ZeroGrad()
				st := NewScope()
				// loss = Σ p0² + Σ p1³; p2 gets no gradient and stays.
				st.Backward(st.Add(st.Sum(st.Square(params[0]), false), st.Sum(st.Mul(params[1], st.Square(params[1])), false)))
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
				if err := opt.Step(); err != nil {
					t.Fatal(err)
				}
				for k := range 2 {
					for i, x := range ref[k] {
						g := 2 * x
						if k == 1 {
							g = 3 * x * x
						}
						m[k][i] = 0.9*m[k][i] + 0.1*g
						v[k][i] = 0.999*v[k][i] + 0.001*g*g
						mh := m[k][i] / (1 - math.Pow(0.9, float64(step)))
						vh := v[k][i] / (1 - math.Pow(0.999, float64(step)))
						ref[k][i] -= lrs[k] * mh / (math.Sqrt(vh) + 1e-8)
					}
				}
			}
			for k, p := range params {
				want := s.FromFloat64(ref[k], []int{n}, testDevice)
				diff := s.Item(s.Max(s.Abs(s.Sub(s.Cast(p, Float64), want)), false))
				if err := s.Err(); err != nil {
					t.Fatal(err)
				}
				if !(diff <= tc.tol) {
					t.Errorf("parameter %d: largest difference from the formula %g, want ≤ %g", k, diff, tc.tol)
				}
				if _, _, steps := opt.State(s, k); steps != map[int]int64{0: 5, 1: 5, 2: 0}[k] {
					t.Errorf("parameter %d: %d steps", k, steps)
				}
			}
		})
	}
}

// Adam gives every layout the same update: channels-last and transposed parameters
// (dense, not contiguous) and a column slice (not dense), side by side in one group.
func TestAdamLayouts(t *testing.T) {
	s := NewScope()
	defer s.Close()
	start := func(shape ...int) *Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(2 * math.Sin(float64(7*i)+0.5))
		}
		return s.FromFloat32(x, shape, testDevice)
	}
	params := []*Tensor{
		s.Keep(s.ToChannelsLast(start(4, 3, 5, 5))),
		s.Keep(s.Transpose(start(6, 9), 0, 1)),
		s.Keep(s.Narrow(start(7, 5), 1, 1, 3)),
	}
	var before [][]float32
	for _, p := range params {
		defer p.Free()
		p.SetRequiresGrad(true)
		before = append(before, s.Float32s(s.Contiguous(p)))
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	const lr, steps = 0.05, 4
	opt, err := NewAdam(params, []float64{lr, lr, lr}, AdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	for range steps {
		opt.ZeroGrad()
		st := NewScope()
		st.Backward(sumOfSquares(st, params)) // each element's gradient is 2x
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
	}
	if !params[0].ChannelsLast() {
		t.Error("the channels-last parameter lost its layout")
	}
	for k, p := range params {
		got := s.Float32s(s.Contiguous(p))
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for i, x0 := range before[k] {
			x, m, v := float64(x0), 0.0, 0.0
			for step := 1; step <= steps; step++ {
				g := 2 * x
				m = 0.9*m + 0.1*g
				v = 0.999*v + 0.001*g*g
				mh := m / (1 - math.Pow(0.9, float64(step)))
				vh := v / (1 - math.Pow(0.999, float64(step)))
				x -= lr * mh / (math.Sqrt(vh) + 1e-8)
			}
			worst = max(worst, math.Abs(float64(got[i])-x))
		}
		if !(worst <= 1e-5) {
			t.Errorf("parameter %d %v: largest difference from the formula %g, want ≤ 1e-5", k, p.Shape(), worst)
		}
		if _, _, n := opt.State(s, k); n != steps {
			t.Errorf("parameter %d: %d steps, want %d", k, n, steps)
		}
	}
}

// Adam's one-pass CPU update rounds each operation on its own, in ATen's order, in
// float32, whichever vector width the CPU picked for it: the same bits as this
// reference, where every product and sum is rounded to float32 (a fused multiply-add
// in one build moved make run's clustering). The parameter's length leaves a tail
// after every vector width, and crosses the update's grain of 2^15 for the threads.
func TestAdamExactBits(t *testing.T) {
	if testDevice.CUDA {
		t.Skip("the one-pass update is the CPU's; CUDA takes _foreach")
	}
	s := NewScope()
	defer s.Close()
	const n, lr, steps = 70001, 0.01, 3
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(2 * math.Sin(float64(i)+0.5))
	}
	p := s.Keep(s.FromFloat32(x, []int{n}, testDevice))
	defer p.Free()
	p.SetRequiresGrad(true)
	opt, err := NewAdam([]*Tensor{p}, []float64{lr}, AdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	m, v := make([]float32, n), make([]float32, n)
	b1, b2 := float32(0.9), float32(0.999)
	a1, a2, eps := float32(1-0.9), float32(1-0.999), float32(1e-8)
	for step := 1; step <= steps; step++ {
		opt.ZeroGrad()
		st := NewScope()
		st.Backward(st.Sum(st.Square(p), false)) // gradient 2x, exact
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		ss := float32(-lr / (1 - math.Pow(0.9, float64(step))))
		c2 := float32(math.Sqrt(1 - math.Pow(0.999, float64(step))))
		for i := range x {
			g := 2 * x[i]
			m[i] = float32(m[i]*b1) + float32(a1*g)
			v[i] = float32(v[i]*b2) + float32(float32(a2*g)*g)
			root := float32(math.Sqrt(float64(v[i]))) // float32's sqrt, correctly rounded
			x[i] = x[i] + float32(float32(ss*m[i])/(float32(root/c2)+eps))
		}
	}
	got := s.Float32s(p)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i := range x {
		if got[i] != x[i] {
			if differ == 0 {
				t.Errorf("element %d: %v, want %v (%d ulp)", i, got[i], x[i], int64(math.Float32bits(got[i]))-int64(math.Float32bits(x[i])))
			}
			differ++
		}
	}
	if differ > 0 {
		t.Errorf("%d of %d elements differ from float32 arithmetic op by op", differ, n)
	}
}

func TestSafetensorsRoundTrip(t *testing.T) {
	s := NewScope()
	defer s.Close()
	a := s.FromFloat32([]float32{1.5, -2, 3.25, 4, 5, 6}, []int{2, 3}, testDevice)
	b := s.FromInt64([]int64{7, -8}, []int{2}, testDevice)
	c := s.Full(nil, 9, Float64, testDevice)
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	meta := map[string]string{"config": `{"k":10}`}
	if err := SaveSafetensors(path, []Named{{"a", a}, {"b", b}, {"c", c}}, meta); err != nil {
		t.Fatal(err)
	}
	f, err := ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Meta["config"] != `{"k":10}` {
		t.Fatalf("meta = %v", f.Meta)
	}
	if got := strings.Join(f.Names(), ","); got != "a,b,c" {
		t.Fatalf("names = %s", got)
	}
	a2 := s.Float32s(s.LoadTensor(f, "a", testDevice))
	b2 := s.Int64s(s.LoadTensor(f, "b", testDevice))
	c2 := s.Item(s.LoadTensor(f, "c", testDevice))
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if a2[2] != 3.25 || b2[1] != -8 || c2 != 9 {
		t.Fatalf("round trip: %v %v %v", a2, b2, c2)
	}
	if sh, _ := f.Shape("a"); len(sh) != 2 || sh[1] != 3 {
		t.Fatalf("shape %v", sh)
	}
	if s.LoadTensor(f, "missing", testDevice); s.Err() == nil || !strings.Contains(s.Err().Error(), `no tensor "missing"`) {
		t.Fatalf("missing tensor: %v", s.Err())
	}

	// A truncated file is an error naming the file, not a crash.
	raw, _ := os.ReadFile(path)
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	os.WriteFile(bad, raw[:len(raw)-5], 0o644)
	if _, err := ReadSafetensors(bad); err == nil || !strings.Contains(err.Error(), "bad.safetensors") {
		t.Fatalf("truncated: %v", err)
	}
	os.WriteFile(bad, []byte("hello world, not a checkpoint"), 0o644)
	if _, err := ReadSafetensors(bad); err == nil || !strings.Contains(err.Error(), "bad.safetensors") {
		t.Fatalf("garbage: %v", err)
	}
}

func TestParseDevice(t *testing.T) {
	for _, tc := range []struct {
		in  string
		ok  bool
		dev Device
	}{
		{"cpu", true, CPU},
		{"gpu", false, CPU},
		{"cuda:x", false, CPU},
		{"cuda:-1", false, CPU},
	} {
		d, err := ParseDevice(tc.in)
		if (err == nil) != tc.ok || (tc.ok && d != tc.dev) {
			t.Errorf("ParseDevice(%q) = %v, %v", tc.in, d, err)
		}
	}
	if !CUDAAvailable() {
		if _, err := ParseDevice("cuda"); err == nil {
			t.Error("cuda accepted without a CUDA device")
		}
		if d, err := ParseDevice("auto"); err != nil || d != CPU {
			t.Errorf("auto = %v, %v; want cpu", d, err)
		}
	}
}

func TestConvPoolBatchNormShapes(t *testing.T) {
	s := NewScope()
	defer s.Close()
	x := s.Randn([]int{4, 2, 8, 8}, Float32, testDevice)
	w := s.Randn([]int{5, 2, 3, 3}, Float32, testDevice)
	y := s.Conv2d(x, w, nil, 1, 1)
	rm := s.Zeros([]int{5}, Float32, testDevice)
	rv := s.Ones([]int{5}, Float32, testDevice)
	z := s.MaxPool2d(s.ReLU(s.BatchNorm(y, nil, nil, rm, rv, true, 0.1, 1e-5)), 2, 2)
	if sh := z.Shape(); len(sh) != 4 || sh[0] != 4 || sh[1] != 5 || sh[2] != 4 || sh[3] != 4 {
		t.Fatalf("shape %v", sh)
	}
	// Running mean moved toward the batch mean.
	bm := s.Float32s(s.Mean(y, false, 0, 2, 3))
	got := s.Float32s(rm)
	for i := range got {
		if !near(float64(got[i]), 0.1*float64(bm[i]), 1e-5) {
			t.Fatalf("running mean %v, want 0.1×%v", got, bm)
		}
	}
	theta := s.FromFloat32([]float32{1, 0, 0, 0, 1, 0}, []int{1, 2, 3}, testDevice)
	img := s.Rand([]int{1, 1, 5, 5}, Float32, testDevice)
	grid := s.AffineGrid(theta, 1, 1, 5, 5, false)
	out := s.GridSample(img, grid, Bilinear, PadZeros, false)
	a, b := s.Float32s(img), s.Float32s(out)
	for i := range a {
		if !near(float64(a[i]), float64(b[i]), 1e-5) {
			t.Fatalf("identity warp changed pixel %d: %v vs %v", i, a[i], b[i])
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

// The checkpoint layout is safetensors: a reader written from the format's spec alone
// (here in Python, standard library only) gets the same tensors back.
func TestSafetensorsReadableFromPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for this check (make deps installs it)")
	}
	s := NewScope()
	defer s.Close()
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	w := s.FromFloat32([]float32{0.5, -1.25, 3, 4}, []int{2, 2}, testDevice)
	steps := s.FromInt64([]int64{7}, []int{1}, testDevice)
	if err := SaveSafetensors(path, []Named{{"w", w}, {"steps", steps}}, map[string]string{"k": "4", "é": "<&>"}); err != nil {
		t.Fatal(err)
	}
	script := `
import hashlib, json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8+n])
data = b[8+n:]
fmt = {"F32": "f", "I64": "q"}
meta = h["__metadata__"]
header_sum = meta.pop("emclust.header_sha256")
canonical = json.dumps(h, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
out = {"sha256_ok": hashlib.sha256(data).hexdigest() == meta["emclust.data_sha256"],
       "header_ok": hashlib.sha256(canonical).hexdigest() == header_sum, "meta": meta}
meta.pop("emclust.data_sha256")
for name, e in h.items():
    if name == "__metadata__":
        continue
    lo, hi = e["data_offsets"]
    c = fmt[e["dtype"]]
    k = (hi - lo) // struct.calcsize(c)
    out[name] = {"shape": e["shape"], "values": list(struct.unpack("<%d%s" % (k, c), data[lo:hi]))}
print(json.dumps(out, sort_keys=True))
`
	got, err := exec.Command(py, "-c", script, path).CombinedOutput()
	if err != nil {
		t.Fatalf("python: %v: %s", err, got)
	}
	// The checksums are the SHA-256 of the data section and of the header in its
	// canonical form, as Python's hashlib and json compute them.
	want := `{"header_ok": true, "meta": {"k": "4", "\u00e9": "<&>"}, "sha256_ok": true, "steps": {"shape": [1], "values": [7]}, "w": {"shape": [2, 2], "values": [0.5, -1.25, 3.0, 4.0]}}`
	if strings.TrimSpace(string(got)) != want {
		t.Fatalf("python read\n%s\nwant\n%s", got, want)
	}
}

// The loaded shim is this binding's ABI, and the shim's own side refuses any other.
func TestHandshake(t *testing.T) {
	if err := CheckABI(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{0, ABIVersion - 1, ABIVersion + 1} {
		err := handshake(v)
		if err == nil {
			t.Errorf("the shim accepted a caller of ABI %d", v)
			continue
		}
		for _, want := range []string{fmt.Sprintf("built for emtorch ABI %d,", v), fmt.Sprintf("is ABI %d", ABIVersion)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("handshake(%d): %q does not say %q", v, err, want)
			}
		}
	}
}

func TestIndexAdd(t *testing.T) {
	s := NewScope()
	defer s.Close()
	base := s.FromFloat32([]float32{1, 1, 1, 1, 1, 1}, []int{3, 2}, testDevice)
	src := s.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8}, []int{4, 2}, testDevice)
	idx := s.FromInt64([]int64{2, 0, 2, 2}, []int{4}, testDevice)
	got := s.Float32s(s.IndexAdd(base, 0, idx, src))
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	// Row 0 gets src row 1; row 1 nothing; row 2 gets rows 0, 2 and 3.
	want := []float32{4, 5, 1, 1, 1 + 1 + 5 + 7, 1 + 2 + 6 + 8}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("index_add = %v, want %v", got, want)
		}
	}
	if v := s.Float32s(base); v[0] != 1 {
		t.Fatalf("index_add changed its input: %v", v)
	}
	s.IndexAdd(base, 0, s.FromInt64([]int64{3}, []int{1}, testDevice), s.Narrow(src, 0, 0, 1))
	if s.Err() == nil {
		t.Fatal("index 3 of a 3-row tensor was accepted")
	}
}

// SqDist agrees with squared distances from direct differences in float64, to within
// the rounding of the expansion, and is never negative, even for a row equal to a
// centre, where the expansion's rounding can go below zero.
func TestSqDist(t *testing.T) {
	s := NewScope()
	defer s.Close()
	const m, k, d = 37, 5, 9
	rng := rand.New(rand.NewPCG(4, 4))
	xs, cs := make([]float32, m*d), make([]float32, k*d)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64()*3 + 10)
	}
	for i := range cs {
		cs[i] = float32(rng.NormFloat64()*3 + 10)
	}
	copy(cs[2*d:3*d], xs[7*d:8*d]) // centre 2 is row 7
	x := s.FromFloat32(xs, []int{m, d}, testDevice)
	c := s.FromFloat32(cs, []int{k, d}, testDevice)
	got := s.Float32s(s.SqDist(x, s.Sum(s.Square(x), true, 1), c))
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != m*k {
		t.Fatalf("%d distances, want %d", len(got), m*k)
	}
	for i := range m {
		for j := range k {
			want, scale := 0.0, 0.0
			for e := range d {
				a, b := float64(xs[i*d+e]), float64(cs[j*d+e])
				want += (a - b) * (a - b)
				scale += a*a + b*b
			}
			v := float64(got[i*k+j])
			if v < 0 || math.Abs(v-want) > 1e-5*scale {
				t.Errorf("row %d, centre %d: %g, want %g (± %g)", i, j, v, want, 1e-5*scale)
			}
		}
	}
	for _, bad := range []struct {
		what    string
		x, n, c *Tensor
	}{
		{"centres of another width", x, s.Sum(s.Square(x), true, 1), s.Narrow(c, 1, 0, d-1)},
		{"norms as a vector (as many rows as centres)", s.Narrow(x, 0, 0, k), s.Sum(s.Square(s.Narrow(x, 0, 0, k)), false, 1), c},
		{"one norm for every row", x, s.Ones([]int{1, 1}, Float32, testDevice), c},
	} {
		b := NewScope()
		b.SqDist(bad.x, bad.n, bad.c)
		if b.Close() == nil {
			t.Errorf("%s: accepted", bad.what)
		}
	}
}

// hugeAdvisedBytes sums the sizes of this process's mappings that carry the kernel's
// huge-page advice ("hg" in /proc/self/smaps VmFlags).
func hugeAdvisedBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var total, size int64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "Size:":
			fmt.Sscan(f[1], &size)
		case len(f) > 0 && f[0] == "VmFlags:":
			for _, fl := range f[1:] {
				if fl == "hg" {
					total += size << 10
				}
			}
		}
	}
	return total
}

func TestAdviseHugePages(t *testing.T) {
	if testDevice.CUDA {
		t.Skip("the advice is for CPU tensors; this run tests CUDA")
	}
	if _, err := os.Stat("/sys/kernel/mm/transparent_hugepage"); err != nil {
		t.Skip("kernel without transparent huge pages")
	}
	before := hugeAdvisedBytes(t)
	if !AdviseHugePages() {
		t.Fatal("AdviseHugePages reported no allocator installed on Linux")
	}
	s := NewScope()
	defer s.Close()
	const n = 16 << 20 // 64 MiB of float32
	// Ones: every partial sum is an integer up to 2^24, exact in float32 whatever
	// the order the kernel and its threads add in.
	x := s.Full([]int{n}, 1, Float32, testDevice)
	sum := s.Item(s.Sum(x, false))
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if sum != n {
		t.Fatalf("sum of the advised tensor = %v, want %v", sum, n)
	}
	// All of it but the partial 2 MiB pages at either end must carry the advice.
	if got := hugeAdvisedBytes(t) - before; got < 60<<20 {
		t.Fatalf("huge-page advice grew by %d bytes for a 64 MiB tensor, want at least 60 MiB", got)
	}
	// A small tensor is left alone; its data must still be right.
	small := s.Float32s(s.Full([]int{3}, 1.5, Float32, testDevice))
	if s.Err() != nil || small[2] != 1.5 {
		t.Fatalf("small tensor after advice = %v, %v", small, s.Err())
	}
}

// Goroutines that draw side by side under Seeded each get the draws of their seed
// alone: no other Seeded call reseeds the generator between their draws.
func TestSeededSideBySide(t *testing.T) {
	draw := func(seed uint64) ([]float32, error) {
		var out []float32
		err := Seeded(seed, func() error {
			s := NoGrad()
			defer s.Close()
			for range 50 { // many draws, many chances for another goroutine to reseed
				out = append(out, s.Float32s(s.Rand([]int{64}, Float32, CPU))...)
			}
			return s.Err()
		})
		return out, err
	}
	var alone [2][]float32
	for i := range alone {
		var err error
		if alone[i], err = draw(uint64(i + 1)); err != nil {
			t.Fatal(err)
		}
	}
	if slices.Equal(alone[0], alone[1]) {
		t.Fatal("seeds 1 and 2 drew the same values")
	}
	const goroutines = 8
	got := make([][]float32, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[g], errs[g] = draw(uint64(g%2 + 1))
		}()
	}
	wg.Wait()
	for g := range goroutines {
		if errs[g] != nil {
			t.Fatal(errs[g])
		}
		if !slices.Equal(got[g], alone[g%2]) {
			t.Errorf("goroutine %d drew other values under seed %d than it alone", g, g%2+1)
		}
	}
}

// SetNumThreads sets OpenBLAS's count with libtorch's where OpenBLAS is loaded
// (Debian's libtorch): its pool would otherwise spin beside n threads of work.
func TestSetNumThreadsSetsBLAS(t *testing.T) {
	runtime.LockOSThread() // libtorch's count is this OS thread's
	defer runtime.UnlockOSThread()
	defer SetNumThreads(NumThreads())
	for _, n := range []int{1, 2, 1} {
		if err := SetNumThreads(n); err != nil {
			t.Fatal(err)
		}
		// A serial OpenBLAS has the setter but always runs on 1.
		if libtorch, blas := NumThreads(), BLASThreads(); libtorch != n || (blas != -1 && blas != 1 && blas != n) {
			t.Errorf("SetNumThreads(%d): libtorch %d, OpenBLAS %d threads; want %d (OpenBLAS -1 where not loaded)", n, libtorch, blas, n)
		}
	}
	if BLASThreads() == -1 {
		t.Log("OpenBLAS is not loaded: libtorch sets its BLAS's count itself")
	}
}

// SetBLASThreads changes OpenBLAS's count and leaves libtorch's; a count below one
// is an error.
func TestSetBLASThreadsAlone(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer SetNumThreads(NumThreads())
	if err := SetNumThreads(2); err != nil {
		t.Fatal(err)
	}
	pool := BLASThreads()
	if err := SetBLASThreads(1); err != nil {
		t.Fatal(err)
	}
	// Where OpenBLAS follows libtorch's 2 it has a pool of its own (or is the OpenMP
	// build, which SetBLASThreads leaves alone).
	if got := NumThreads(); got != 2 {
		t.Errorf("SetBLASThreads(1) changed libtorch's count to %d, want 2", got)
	}
	if got := BLASThreads(); got != 1 && got != pool {
		t.Errorf("SetBLASThreads(1): OpenBLAS %d threads, want 1 (or %d, untouched)", got, pool)
	}
	if err := SetBLASThreads(0); err == nil {
		t.Error("SetBLASThreads(0) gave no error")
	}
}

// TestNativeFramesLeaveGoFaultsToGo runs this test binary again with
// EMTORCH_BACKTRACE=1, whose fault handler the shim installs before Go's runtime
// starts: Go must still turn a nil dereference in Go code into a panic it can recover
// from, and torch calls must still work.
func TestNativeFramesLeaveGoFaultsToGo(t *testing.T) {
	if os.Getenv("EMTORCH_BACKTRACE_CHILD") == "1" {
		var p *int
		recovered := func() (r any) {
			defer func() { r = recover() }()
			return *p
		}()
		if recovered == nil {
			t.Fatal("a nil dereference in Go did not panic")
		}
		s := NewScope()
		defer s.Close()
		if got := s.Float32s(s.Add(s.Full([]int{2}, 1, Float32, CPU), s.Full([]int{2}, 2, Float32, CPU))); fmt.Sprint(got) != "[3 3]" {
			t.Fatalf("1 + 2 = %v", got)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNativeFramesLeaveGoFaultsToGo$", "-test.count=1")
	cmd.Env = append(os.Environ(), "EMTORCH_BACKTRACE=1", "EMTORCH_BACKTRACE_CHILD=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("with EMTORCH_BACKTRACE=1: %v\n%s", err, out)
	}
}

// A tensor of more dimensions than Shape's first buffer holds: its shape was nil and
// its Numel 0, so its data read back empty without an error.
func TestShapeOfManyDims(t *testing.T) {
	s := NoGrad()
	defer s.Close()
	dims := make([]int, 20)
	for i := range dims {
		dims[i] = 1
	}
	dims[19] = 3
	x := s.Reshape(s.Full([]int{3}, 2, Float32, CPU), dims...)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if got := x.Shape(); len(got) != 20 || got[19] != 3 || x.Numel() != 3 || len(s.Float32s(x)) != 3 {
		t.Errorf("shape %v, numel %d; want 20 dims, the last 3, and 3 elements", got, x.Numel())
	}
}

// BenchmarkAdamStepCNN times one update of about as many parameters as the MNIST
// CNN, its convolution weights channels-last as train keeps them on the CPU.
func BenchmarkAdamStepCNN(b *testing.B) {
	benchAdam(b, func(s *Scope) []*Tensor {
		return []*Tensor{
			s.ToChannelsLast(s.Full([]int{256, 128, 3, 3}, 0.5, Float32, testDevice)),
			s.ToChannelsLast(s.Full([]int{128, 64, 3, 3}, 0.5, Float32, testDevice)),
			s.Full([]int{1024, 400}, 0.5, Float32, testDevice),
			s.Full([]int{1024}, 0.5, Float32, testDevice),
		}
	})
}

// BenchmarkAdamStepStacked times the update of ten stacked restarts' MLPs (32, 32)
// on 768 features, a text embedding's width.
func BenchmarkAdamStepStacked(b *testing.B) {
	benchAdam(b, func(s *Scope) []*Tensor {
		return []*Tensor{
			s.Full([]int{10, 768, 32}, 0.5, Float32, testDevice),
			s.Full([]int{10, 32, 32}, 0.5, Float32, testDevice),
			s.Full([]int{10, 32, 10}, 0.5, Float32, testDevice),
			s.Full([]int{10, 1, 32}, 0.5, Float32, testDevice),
			s.Full([]int{10, 1, 32}, 0.5, Float32, testDevice),
			s.Full([]int{10, 1, 10}, 0.5, Float32, testDevice),
		}
	})
}

// benchAdam times Adam's step over the parameters made, each with the gradient of Σ p².
func benchAdam(b *testing.B, newParams func(*Scope) []*Tensor) {
	s := NewScope()
	defer s.Close()
	params := newParams(s)
	lrs := make([]float64, len(params))
	for i, p := range params {
		p.SetRequiresGrad(true)
		lrs[i] = 1e-3
	}
	opt, err := NewAdam(params, lrs, AdamConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer opt.Close()
	s.Backward(sumOfSquares(s, params))
	if err := s.Err(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := opt.Step(); err != nil {
			b.Fatal(err)
		}
	}
}

// sumOfSquares is Σ p² over params, whose gradient is 2p.
func sumOfSquares(s *Scope, params []*Tensor) *Tensor {
	loss := s.Sum(s.Square(params[0]), false)
	for _, p := range params[1:] {
		loss = s.Add(loss, s.Sum(s.Square(p), false))
	}
	return loss
}

// A tensor adopts HostFloats' memory without a copy: a value written there after
// shows in the tensor, which frees the memory when it goes (no tensor left behind);
// the HostFloats is empty from the call on, whether the tensor was made or not.
func TestAdoptFloat32(t *testing.T) {
	before := LiveTensors()
	h, err := NewHostFloats(7)
	if err != nil {
		t.Fatal(err)
	}
	x := h.Slice()
	for i := range x {
		x[i] = float32(i)
	}
	if !h.Holds(x[:6]) || h.Holds(slices.Clone(x)) {
		t.Fatal("Holds: wrong about where the values are")
	}
	s := NoGrad()
	a := s.AdoptFloat32(h, []int{2, 3})
	if h.Slice() != nil || h.Holds(x) {
		t.Error("the HostFloats still holds the memory it gave away")
	}
	h.Free()  // nothing to free: the tensor's
	x[4] = 40 // the tensor's memory now; written here only to show it is the same
	if got := s.Float32s(a); !slices.Equal(got, []float32{0, 1, 2, 3, 40, 5}) || !slices.Equal(a.Shape(), []int{2, 3}) {
		t.Errorf("adopted %v of shape %v, want 0 1 2 3 40 5 of [2 3]", got, a.Shape())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	small, err := NewHostFloats(3)
	if err != nil {
		t.Fatal(err)
	}
	s = NoGrad()
	if s.AdoptFloat32(small, []int{2, 2}); s.Err() == nil || small.Slice() != nil {
		t.Errorf("4 values adopted from 3: error %v, memory kept %v", s.Err(), small.Slice() != nil)
	}
	s.Close()
	if got := LiveTensors() - before; got != 0 {
		t.Errorf("%d tensors left", got)
	}
	if _, err := NewHostFloats(-1); err == nil {
		t.Error("room for -1 values")
	}
	// More than any address space: an error (cgo's C.malloc would end the process).
	if h, err := NewHostFloats(1 << 60); err == nil || !strings.Contains(err.Error(), "no room") {
		h.Free()
		t.Errorf("room for 2^60 values: %v", err)
	}
}

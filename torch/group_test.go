package torch

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMain: this package's groups put every rank in this process.
func TestMain(m *testing.M) {
	AllowInProcessRanks()
	os.Exit(m.Run())
}

// unusedPort is a TCP port nothing listens on at the time of the call.
func unusedPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// servedStore serves a store for world ranks until the test ends and returns its
// port, so that every rank joins as a client.
func servedStore(t testing.TB, world int) int {
	t.Helper()
	st, err := ServeStore("127.0.0.1", 0, world, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if st.Port() == 0 {
		t.Fatal("ServeStore on port 0: Port() is 0, want the port it listens on")
	}
	return st.Port()
}

// onRanks runs f for every rank of a fresh Gloo group of world ranks in this process
// and returns each rank's error.
func onRanks(t *testing.T, world int, f func(g *Group) error) []error {
	t.Helper()
	if !HasBackend(Gloo) {
		t.Fatal("the shim was built without Gloo (make lib builds it with)")
	}
	port := servedStore(t, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for r := 0; r < world; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := NewGroup(GroupConfig{Backend: Gloo, Host: "127.0.0.1", Port: port,
				Prefix: t.Name(), Rank: r, World: world, Timeout: 20 * time.Second, Interface: "lo"})
			if err != nil {
				errs[r] = err
				return
			}
			defer g.Close()
			errs[r] = f(g)
		}()
	}
	wg.Wait()
	return errs
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestGroupCollectives(t *testing.T) {
	const world = 3
	got := make([][]float32, world)
	errs := onRanks(t, world, func(g *Group) error {
		r := float64(g.Rank())
		s := NoGrad()
		defer s.Close()
		a := s.Full([]int{2}, r+1, Float32, CPU)
		b := s.Full([]int{3}, 10*(r+1), Float32, CPU)
		c := s.Full([]int{2}, r, Float32, CPU)
		if err := s.Err(); err != nil {
			return err
		}
		if err := g.AllReduce(a, b); err != nil {
			return err
		}
		if err := g.Broadcast(2, c); err != nil {
			return err
		}
		if err := g.Set(fmt.Sprintf("hello/%d", g.Rank()), fmt.Sprint("from ", g.Rank())); err != nil {
			return err
		}
		v, err := g.Get(fmt.Sprintf("hello/%d", (g.Rank()+1)%world))
		if err != nil {
			return err
		}
		if want := fmt.Sprint("from ", (g.Rank()+1)%world); v != want {
			return fmt.Errorf("store: got %q, want %q", v, want)
		}
		if err := g.Barrier(); err != nil {
			return err
		}
		got[g.Rank()] = append(append(s.Float32s(a), s.Float32s(b)...), s.Float32s(c)...)
		return s.Err()
	})
	noErrors(t, errs)
	want := []float32{6, 6, 60, 60, 60, 2, 2} // 1+2+3, 10+20+30, rank 2's c
	for r, g := range got {
		if fmt.Sprint(g) != fmt.Sprint(want) {
			t.Errorf("rank %d: got %v, want %v", r, g, want)
		}
	}
}

// TestSyncBatchNormGradient checks that two ranks each holding half a batch get
// the forward values, input gradients, affine gradients and running statistics of
// one process holding the whole batch under the native batch norm. At a mean a
// thousand times the spread (a year column left raw), E[x²] − E[x]² in float32 has
// lost the variance: the statistics must be centred before they are combined.
func TestSyncBatchNormGradient(t *testing.T) {
	for _, tc := range []struct {
		shape         []int
		offset        float64
		outTol, grTol float64 // relative, on the output and running statistics, and on the gradients
	}{
		{[]int{8, 3}, 3, 1e-5, 1e-4},
		{[]int{4, 3, 5, 5}, 3, 1e-5, 1e-4},
		// Centred, the ranks and one process differ by the rounding of the mean of
		// values near 2000 (an ulp there is 1.2e-4); E[x²] − E[x]² was off by 1–7 %.
		{[]int{8, 3}, 2000, 1e-3, 1e-3},
		{[]int{4, 3, 5, 5}, 2000, 1e-3, 1e-3},
	} {
		shape := tc.shape
		t.Run(fmt.Sprint(shape, " offset ", tc.offset), func(t *testing.T) {
			whole := runBatchNorm(t, shape, shape, nil, tc.offset)
			half := append([]int{shape[0] / 2}, shape[1:]...)
			parts := make([]bnResult, 2)
			errs := onRanks(t, 2, func(g *Group) error {
				parts[g.Rank()] = runBatchNorm(t, shape, half, g, tc.offset)
				return nil
			})
			noErrors(t, errs)
			n := len(whole.y) / 2
			for r, p := range parts {
				closeTo(t, fmt.Sprintf("rank %d output", r), p.y, whole.y[r*n:(r+1)*n], tc.outTol)
				closeTo(t, fmt.Sprintf("rank %d input gradient", r), p.dx, whole.dx[r*n:(r+1)*n], tc.grTol)
				// Each rank holds its own loss's share of the affine gradient; their sum
				// is the whole batch's.
				closeTo(t, fmt.Sprintf("rank %d running stats", r), p.running, whole.running, tc.outTol)
			}
			for _, f := range []struct {
				name string
				get  func(bnResult) []float32
			}{{"weight gradient", func(b bnResult) []float32 { return b.dw }}, {"bias gradient", func(b bnResult) []float32 { return b.db }}} {
				sum := make([]float32, len(f.get(whole)))
				for _, p := range parts {
					for i, v := range f.get(p) {
						sum[i] += v
					}
				}
				closeTo(t, f.name, sum, f.get(whole), tc.grTol)
			}
		})
	}
}

type bnResult struct{ y, dx, dw, db, running []float32 }

// runBatchNorm draws the whole batch x (offset + 2·sin) and loss weights c from a
// fixed seed, keeps the rows of its rank (all rows without a group), and returns the
// batch norm's output, gradients (of Σ c·y) and running statistics.
func runBatchNorm(t *testing.T, whole, local []int, g *Group, offset float64) bnResult {
	s := NewScope()
	defer s.Close()
	numel := 1
	for _, d := range whole {
		numel *= d
	}
	xs, cs := make([]float32, numel), make([]float32, numel)
	for i := range xs {
		// Offset and scale so that the mean matters, as after a convolution.
		xs[i] = float32(offset + 2*math.Sin(float64(i)*1.7))
		cs[i] = float32(math.Cos(float64(i) * 0.61))
	}
	rows := local[0]
	lo := 0
	if g != nil {
		lo = g.Rank() * rows
	}
	per := numel / whole[0]
	x := s.FromFloat32(xs[lo*per:(lo+rows)*per], local, CPU)
	c := s.FromFloat32(cs[lo*per:(lo+rows)*per], local, CPU)
	ch := whole[1]
	w := s.Keep(s.Full([]int{ch}, 1.5, Float32, CPU))
	b := s.Keep(s.Full([]int{ch}, -0.5, Float32, CPU))
	defer w.Free()
	defer b.Free()
	rm := s.Keep(s.Zeros([]int{ch}, Float32, CPU))
	rv := s.Keep(s.Full([]int{ch}, 1, Float32, CPU))
	defer rm.Free()
	defer rv.Free()
	for _, p := range []*Tensor{x, w, b} {
		s.Fail(p.SetRequiresGrad(true))
	}
	var y *Tensor
	if g == nil {
		y = s.BatchNorm(x, w, b, rm, rv, true, 0.1, 1e-5)
	} else {
		y = s.SyncBatchNorm(g, x, w, b, rm, rv, 0.1, 1e-5)
	}
	s.Backward(s.Sum(s.Mul(y, c), false))
	res := bnResult{y: s.Float32s(y), dx: s.Float32s(s.Grad(x)), dw: s.Float32s(s.Grad(w)), db: s.Float32s(s.Grad(b)),
		running: append(s.Float32s(rm), s.Float32s(rv)...)}
	if err := s.Err(); err != nil {
		t.Error(err)
	}
	return res
}

func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) || len(got) == 0 {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return
	}
	for i := range got {
		if d := math.Abs(float64(got[i] - want[i])); d > tol*(1+math.Abs(float64(want[i]))) {
			t.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
			return
		}
	}
}

// TestAllReduceSumGradient: the gradient of rank r's loss w.r.t. its input x_r reaches
// x_r through every rank's loss: d/dx_r Σ_q c_q·(Σ_p x_p) = Σ_q c_q.
func TestAllReduceSumGradient(t *testing.T) {
	grads := make([][]float32, 2)
	errs := onRanks(t, 2, func(g *Group) error {
		s := NewScope()
		defer s.Close()
		x := s.Full([]int{2}, float64(g.Rank()+1), Float32, CPU)
		s.Fail(x.SetRequiresGrad(true))
		c := s.Full([]int{2}, float64(10*(g.Rank()+1)), Float32, CPU)
		sum := s.AllReduceSum(g, x)
		s.Backward(s.Sum(s.Mul(sum, c), false))
		if v := s.Float32s(sum); len(v) == 2 && v[0] != 3 {
			return fmt.Errorf("sum %v, want 3", v)
		}
		grads[g.Rank()] = s.Float32s(s.Grad(x))
		return s.Err()
	})
	noErrors(t, errs)
	for r, gr := range grads {
		if fmt.Sprint(gr) != "[30 30]" {
			t.Errorf("rank %d: gradient %v, want [30 30]", r, gr)
		}
	}
}

func TestGroupErrors(t *testing.T) {
	port := unusedPort(t)
	cases := []struct {
		name string
		cfg  GroupConfig
		want string // in the error: the field checked, not a connection's failure
	}{
		{"rank out of range", GroupConfig{Host: "127.0.0.1", Port: port, Rank: 2, World: 2, Timeout: time.Second}, "rank 2: want 0 to 1"},
		// C ints: rank 2^32 of 2^32+2 was rank 0 of 2.
		{"world past a C int", GroupConfig{Host: "127.0.0.1", Port: port, ServeStore: true, Rank: 1 << 32, World: 1<<32 + 2, Timeout: time.Second}, "world size 4294967298"},
		{"rank past the world", GroupConfig{Host: "127.0.0.1", Port: port, ServeStore: true, Rank: 1 << 32, World: math.MaxInt32, Timeout: time.Second}, "rank 4294967296: want 0 to 2147483646"},
		{"port past 65535", GroupConfig{Host: "127.0.0.1", Port: 1<<16 + port, ServeStore: true, Rank: 0, World: 1, Timeout: time.Second}, fmt.Sprintf("port %d: want 0 to 65535", 1<<16+port)},
		{"no store at the address", GroupConfig{Host: "127.0.0.1", Port: port, Rank: 1, World: 2, Timeout: time.Second}, "group_new: "},
		// Port 0 serves on a free port; a client cannot find it there.
		{"a client at port 0", GroupConfig{Host: "127.0.0.1", Rank: 1, World: 2, Timeout: time.Second}, "port 0 out of range"},
		{"unknown interface", GroupConfig{Host: "127.0.0.1", Port: port, ServeStore: true, Rank: 0, World: 1, Timeout: time.Second, Interface: "no-such-if0"}, "no-such-if0"},
		// Was 0 ms, which c10d reads as no timeout at all.
		{"timeout under a millisecond", GroupConfig{Host: "127.0.0.1", Port: port, ServeStore: true, Rank: 0, World: 1, Timeout: 500 * time.Microsecond}, "timeout 500µs: want 1ms or more"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := NewGroup(c.cfg)
			if err == nil {
				g.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want one with %q", err, c.want)
			}
		})
	}
}

// A store served apart from the ranks listens until Close, and refuses what the shim
// would wrap around.
func TestServeStore(t *testing.T) {
	st, err := ServeStore("127.0.0.1", 0, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(st.Port())))
	if err != nil {
		t.Fatalf("nothing listens on the store's port %d: %v", st.Port(), err)
	}
	c.Close()
	st.Close()
	st.Close() // a second Close does nothing
	g, err := NewGroup(GroupConfig{Backend: Gloo, Host: "127.0.0.1", Port: st.Port(), Rank: 0, World: 1, Timeout: time.Second, Interface: "lo"})
	if err == nil {
		g.Close()
		t.Error("a rank joined a store that was closed")
	}
	for _, c := range []struct {
		port, world int
		timeout     time.Duration
		want        string
	}{
		{-1, 1, time.Second, "port -1"},
		{1 << 16, 1, time.Second, "port 65536"},
		{0, 0, time.Second, "world size 0"},
		{0, 1, 0, "timeout 0s"},
	} {
		if st, err := ServeStore("127.0.0.1", c.port, c.world, c.timeout); err == nil {
			st.Close()
			t.Errorf("ServeStore(port %d, world %d, timeout %v): no error", c.port, c.world, c.timeout)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("ServeStore(port %d, world %d, timeout %v): %v, want an error with %q", c.port, c.world, c.timeout, err, c.want)
		}
	}
}

// A rank whose parameter got no gradient takes part in ReduceGrads with zeros; it
// used to leave it out, and send a shorter buffer than the others (or none at all).
func TestReduceGradsWithoutGradient(t *testing.T) {
	grads := make([][]float32, 2)
	errs := onRanks(t, 2, func(g *Group) error {
		s := NewScope()
		defer s.Close()
		p := s.Full([]int{3}, 1, Float32, CPU)
		s.Fail(p.SetRequiresGrad(true))
		if g.Rank() == 0 {
			s.Backward(s.Sum(s.MulScalar(p, 4), false)) // gradient 4 everywhere
		}
		if err := s.Err(); err != nil {
			return err
		}
		q := s.Full([]int{2}, 1, Float32, CPU) // no rank's loss reaches it
		s.Fail(q.SetRequiresGrad(true))
		if err := g.ReduceGrads([]*Tensor{p, q}, 0.5); err != nil {
			return err
		}
		if s.Grad(q) != nil {
			return errors.New("a parameter no rank had a gradient of got one")
		}
		grads[g.Rank()] = s.Float32s(s.Grad(p))
		return s.Err()
	})
	noErrors(t, errs)
	for r, gr := range grads {
		if fmt.Sprint(gr) != "[2 2 2]" {
			t.Errorf("rank %d: gradient %v, want [2 2 2], the mean of 4 and none", r, gr)
		}
	}
}

// A ReduceGrads that fails gives no gradient to a parameter that had none: it left
// the zeros it sends in their place, on which Adam would step.
func TestReduceGradsFailedLeavesNoGradient(t *testing.T) {
	port := servedStore(t, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := NewGroup(GroupConfig{Backend: Gloo, Host: "127.0.0.1", Port: port,
				Prefix: t.Name(), Rank: r, World: 2, Timeout: 20 * time.Second, Interface: "lo"})
			if err != nil {
				errs[r] = err
				return
			}
			defer g.Close()
			if r == 1 {
				return // leaves: rank 0's all-reduce has no peer
			}
			s := NewScope()
			defer s.Close()
			p := s.Full([]int{3}, 1, Float32, CPU)
			s.Fail(p.SetRequiresGrad(true))
			if err := g.ReduceGrads([]*Tensor{p}, 1); err == nil {
				errs[r] = errors.New("ReduceGrads without its peer succeeded")
			} else if s.Grad(p) != nil {
				errs[r] = fmt.Errorf("after a failed ReduceGrads (%v) the parameter has a gradient", err)
			}
		}()
	}
	wg.Wait()
	noErrors(t, errs)
}

// A closed group or optimiser gives errors; its handle reached the shim as null and
// faulted there.
func TestClosedHandles(t *testing.T) {
	g, err := NewGroup(GroupConfig{Backend: Gloo, Host: "127.0.0.1", ServeStore: true, Prefix: t.Name(), Rank: 0, World: 1, Timeout: 5 * time.Second, Interface: "lo"})
	if err != nil {
		t.Fatal(err)
	}
	s := NewScope()
	defer s.Close()
	p := s.Full([]int{2}, 1, Float32, CPU)
	s.Fail(p.SetRequiresGrad(true))
	opt, err := NewAdam([]*Tensor{p}, []float64{0.1}, AdamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	g.Close()
	opt.Close()
	_, getErr := g.Get("k")
	for name, err := range map[string]error{
		"AllReduce": g.AllReduce(p), "Broadcast": g.Broadcast(0, p), "Barrier": g.Barrier(), "ReduceGrads": g.ReduceGrads([]*Tensor{p}, 1),
		"Set": g.Set("k", "v"), "Get": getErr, "Step": opt.Step(), "ZeroGrad": opt.ZeroGrad(),
	} {
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("%s after Close: %v, want an error saying it was closed", name, err)
		}
	}
	if m, _, _ := opt.State(s, 0); m != nil || s.Err() == nil {
		t.Errorf("State after Close: %v, %v; want an error", m, s.Err())
	}
}

// BenchmarkAllReduce times one all-reduce of 4 KiB (a BatchNorm's sums, a small MLP's
// gradients) between two ranks in this process.
func BenchmarkAllReduce(b *testing.B) {
	port := servedStore(b, 2)
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := NewGroup(GroupConfig{Backend: Gloo, Host: "127.0.0.1", Port: port,
				Prefix: "bench", Rank: r, World: 2, Timeout: 20 * time.Second, Interface: "lo"})
			if err != nil {
				b.Error(err)
				return
			}
			defer g.Close()
			s := NoGrad()
			defer s.Close()
			x := s.Zeros([]int{1024}, Float32, CPU)
			if r == 0 {
				b.ResetTimer()
			}
			for i := 0; i < b.N; i++ {
				if err := g.AllReduce(x); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// A process in a group ignores SIGPIPE: Gloo's threads write to a lost peer's socket
// without MSG_NOSIGNAL, and the signal ended the rank without a word.
func TestGroupIgnoresSIGPIPE(t *testing.T) {
	g, err := NewGroup(GroupConfig{Host: "127.0.0.1", ServeStore: true, Rank: 0, World: 1, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if !signal.Ignored(syscall.SIGPIPE) {
		t.Error("SIGPIPE is not ignored in a process that joined a group")
	}
}

// A backward through AllReduceSum after its group was closed is an error naming
// the group, not a use of the freed group.
func TestAllReduceSumAfterClose(t *testing.T) {
	g, err := NewGroup(GroupConfig{Host: "127.0.0.1", ServeStore: true, Rank: 0, World: 1, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := NewScope()
	defer s.Close()
	x := s.Full([]int{2}, 1, Float32, CPU)
	s.Fail(x.SetRequiresGrad(true))
	sum := s.AllReduceSum(g, x)
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	g.Close()
	s.Backward(s.Sum(sum, false))
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "process group was closed") {
		t.Errorf("backward after Close: error %v, want one saying the group was closed", err)
	}
}

// A store call after Close fails with an error, and Close under a store call on
// another goroutine leaves the group to it rather than free it under the call (an
// interrupted wait gives up such calls as the process stops).
func TestStoreAfterClose(t *testing.T) {
	g, err := NewGroup(GroupConfig{Host: "127.0.0.1", Port: unusedPort(t), ServeStore: true, Rank: 0, World: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Set("k", "v"); err != nil {
		t.Fatal(err)
	}
	_, release, err := g.storeHandle("store_check") // a call in flight
	if err != nil {
		t.Fatal(err)
	}
	g.Close()
	if ok, err := g.Has("k"); err != nil || !ok {
		t.Errorf("Close freed the group under a store call: Has = %v, %v", ok, err)
	}
	release()
	g.Close()
	if _, err := g.Has("k"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Has after Close: %v, want an error", err)
	}
	if err := g.Set("k", "w"); err == nil {
		t.Error("Set after Close: no error")
	}
	if _, err := g.Get("k"); err == nil {
		t.Error("Get after Close: no error")
	}
}

package loss

import (
	"math"
	"testing"

	"emclust/torch"
)

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func softmaxRow(r []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range r {
		m = math.Max(m, v)
	}
	var z float64
	out := make([]float64, len(r))
	for j, v := range r {
		out[j] = math.Exp(v - m)
		z += out[j]
	}
	for j := range out {
		out[j] /= z
	}
	return out
}

// A 3×2 batch of normalised scores with γ = 2, computed by hand in float64.
var aStar = [][]float64{{1.0, -1.0}, {-0.5, 0.5}, {2.0, 0.0}}

func flat(m [][]float64) []float32 {
	var out []float32
	for _, r := range m {
		for _, v := range r {
			out = append(out, float32(v))
		}
	}
	return out
}

func TestEMLossByHand(t *testing.T) {
	const gamma = 2.0
	var want float64
	for _, r := range aStar {
		p := softmaxRow(r)
		for j := range r {
			want -= p[j] * math.Log(sigmoid(r[j]/gamma))
		}
	}
	want /= 3

	s := torch.NewScope()
	defer s.Close()
	a := s.FromFloat32(flat(aStar), []int{3, 2}, testDevice)
	a.SetRequiresGrad(true)
	p := Posterior(s, a, nil)
	l := EM(s, a, p, gamma)
	got := s.Item(l)
	if math.Abs(got-want) > 1e-6 {
		t.Fatalf("EM loss %v, want %v", got, want)
	}
	if p.RequiresGrad() {
		t.Fatal("posterior carries a gradient: it must be detached")
	}

	// With p constant, dL/da*_ij = −(1/n) p_ij (1 − sigmoid(a*_ij/γ)) / γ. Were p not
	// detached, softmax's Jacobian would add terms and this would fail.
	s.Backward(l)
	g := s.Float32s(s.Grad(a))
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	for i, r := range aStar {
		pr := softmaxRow(r)
		for j := range r {
			want := -pr[j] * (1 - sigmoid(r[j]/gamma)) / gamma / 3
			if math.Abs(float64(g[i*2+j])-want) > 1e-6 {
				t.Fatalf("grad[%d][%d] = %v, want %v", i, j, g[i*2+j], want)
			}
		}
	}
}

func TestEMAugAndKLByHand(t *testing.T) {
	const gamma = 5.0
	tr := [][]float64{{0.5, -0.5}, {0.0, 1.0}, {1.5, -2.0}}
	var wantAug, wantKL float64
	for i := range aStar {
		p := softmaxRow(aStar[i])
		q := softmaxRow(tr[i])
		for j := range p {
			wantAug -= p[j] * (math.Log(sigmoid(aStar[i][j]/gamma)) + math.Log(sigmoid(tr[i][j]/gamma)))
			wantKL += p[j] * math.Log(p[j]/q[j])
		}
	}
	wantAug /= 3
	wantKL /= 3

	s := torch.NewScope()
	defer s.Close()
	a := s.FromFloat32(flat(aStar), []int{3, 2}, testDevice)
	b := s.FromFloat32(flat(tr), []int{3, 2}, testDevice)
	b.SetRequiresGrad(true)
	p := Posterior(s, a, nil)
	if got := s.Item(EMAug(s, a, b, p, gamma)); math.Abs(got-wantAug) > 1e-6 {
		t.Fatalf("EM-aug %v, want %v", got, wantAug)
	}
	kl := KL(s, p, b, nil)
	if got := s.Item(kl); math.Abs(got-wantKL) > 1e-6 {
		t.Fatalf("KL %v, want %v", got, wantKL)
	}
	// dKL/db_ij = (q_ij − p_ij)/n.
	s.Backward(kl)
	g := s.Float32s(s.Grad(b))
	for i := range tr {
		p, q := softmaxRow(aStar[i]), softmaxRow(tr[i])
		for j := range q {
			if want := (q[j] - p[j]) / 3; math.Abs(float64(g[i*2+j])-want) > 1e-6 {
				t.Fatalf("KL grad[%d][%d] = %v, want %v", i, j, g[i*2+j], want)
			}
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

// Under a learned prior, q is the transformed batch's posterior under that prior: a
// transform the network maps to the same scores costs nothing and moves nothing.
// Without the prior on q's side it cost 0.24 here, and its gradient pulled the
// scores toward the prior.
func TestKLWithPrior(t *testing.T) {
	s := torch.NewScope()
	defer s.Close()
	prior := []float32{0.55, 0.25, 0.15, 0.05}
	logPrior := make([]float32, len(prior))
	for j, v := range prior {
		logPrior[j] = float32(math.Log(float64(v)))
	}
	lp := s.FromFloat32(logPrior, []int{1, 4}, testDevice)
	scores := []float32{0.3, -1.2, 0.8, 0.1, -0.4, 1.1, 0.0, -0.7}
	a := s.FromFloat32(scores, []int{2, 4}, testDevice)
	aTr := s.FromFloat32(scores, []int{2, 4}, testDevice)
	aTr.SetRequiresGrad(true)
	p := Posterior(s, a, lp)
	kl := KL(s, p, aTr, lp)
	s.Backward(kl)
	if got := s.Item(kl); math.Abs(got) > 1e-6 {
		t.Errorf("KL of identical scores under the prior = %v, want 0", got)
	}
	for i, g := range s.Float32s(s.Grad(aTr)) {
		if math.Abs(float64(g)) > 1e-6 {
			t.Errorf("gradient[%d] = %v, want 0", i, g)
		}
	}
	// The uniform prior's KL of the same posteriors is not 0: the prior matters.
	if got := s.Item(KL(s, p, s.Detach(aTr), nil)); got < 0.1 {
		t.Errorf("KL against the prior-free q = %v, want well above 0", got)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

// IIC by hand on unlike p and q, whose pᵀq is not symmetric: the symmetrisation
// and the normalisation by n count, where identical inputs hide both.
func TestIICByHand(t *testing.T) {
	a := [][]float64{{2, 0, -1}, {0, 1, 0}, {-1, 0.5, 1.5}, {1, 1, -2}}
	b := [][]float64{{1, 0.5, 0}, {-1, 2, 0}, {0, 0, 1}, {3, -1, 0}}
	const n, k = 4, 3
	var joint [k][k]float64
	for i := range a {
		p, q := softmaxRow(a[i]), softmaxRow(b[i])
		for x := range k {
			for y := range k {
				joint[x][y] += (p[x]*q[y] + q[x]*p[y]) / (2 * n)
			}
		}
	}
	var mi float64
	for x := range k {
		for y := range k {
			var px, py float64
			for z := range k {
				px += joint[x][z]
				py += joint[z][y]
			}
			mi += joint[x][y] * math.Log(joint[x][y]/(px*py))
		}
	}
	s := torch.NoGrad()
	defer s.Close()
	got := s.Item(IIC(s, s.FromFloat32(flat(a), []int{n, k}, testDevice), s.FromFloat32(flat(b), []int{n, k}, testDevice), nil))
	if math.Abs(got+mi) > 1e-6 {
		t.Fatalf("IIC = %v, want %v", got, -mi)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
}

// Identical confident assignments spread evenly over K clusters give MI = log K.
func TestIICMaximum(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	x := s.FromFloat32([]float32{50, 0, 0, 0, 50, 0, 0, 0, 50}, []int{3, 3}, testDevice)
	if got := s.Item(IIC(s, x, x, nil)); math.Abs(got+math.Log(3)) > 1e-4 {
		t.Fatalf("IIC = %v, want -log 3", got)
	}
}

func TestGamma(t *testing.T) {
	if g := AutoGamma(128); math.Abs(g-5) > 0.01 {
		t.Fatalf("AutoGamma(128) = %v, want ≈5", g)
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{{"5", true}, {"auto", true}, {"0", false}, {"-1", false}, {"x", false}, {"NaN", false}} {
		if _, err := ParseGamma(tc.in, 128); (err == nil) != tc.ok {
			t.Errorf("ParseGamma(%q): %v", tc.in, err)
		}
	}
}

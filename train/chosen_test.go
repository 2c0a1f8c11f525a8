package train

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"emclust/torch"
)

// chosenRun trains evaluated epochs of the digits in dir, with better as the ranking
// of epochs (nil: the run's own).
func chosenRun(t *testing.T, dir string, epochs int, better func(a, b Chosen) bool) *Run {
	t.Helper()
	cfg := VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0
	cfg.Epochs, cfg.EvalEvery = epochs, 1
	r, err := New(cfg, digitsSource(t), testDevice, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if better != nil {
		r.better = better
	}
	if err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	return r
}

// modelCriteria are the criteria of the model saved at path over r's data.
func modelCriteria(t *testing.T, path string, r *Run) Criteria {
	t.Helper()
	m, err := LoadModel(path, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pred, err := PredictWithCriteria(m.Net, r.Src, testDevice, m.Prior, r.Cfg.GammaVal)
	if err != nil {
		t.Fatal(err)
	}
	return *pred.Criteria
}

// The run keeps the epoch its ranking puts first: its criteria in the history, its
// model in chosen.safetensors (which predicts what that epoch's evaluation did), and
// the choice in the checkpoint, which a resume takes up.
func TestChosenEpoch(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	// Epoch 1 is chosen first; only epoch 2 ranks above what is chosen.
	r := chosenRun(t, dir, 4, func(a, b Chosen) bool { calls++; return calls == 1 })
	ch := r.Chosen()
	if ch == nil || ch.Epoch != 2 || r.History[1].Criteria == nil || ch.Criteria != *r.History[1].Criteria {
		t.Fatalf("chosen %+v, want epoch 2 with its criteria %+v", ch, r.History[1].Criteria)
	}
	for i, m := range r.History {
		if m.Criteria == nil || !(m.Criteria.MaxPosterior > 0 && m.Criteria.MaxPosterior <= 1) {
			t.Errorf("epoch %d: criteria %+v, want a max posterior in (0, 1]", i+1, m.Criteria)
		}
	}

	path := filepath.Join(dir, ChosenName)
	if got := modelCriteria(t, path, r); got != ch.Criteria {
		t.Errorf("%s predicts with criteria %+v, epoch 2 evaluated %+v", ChosenName, got, ch.Criteria)
	}
	// The chosen epoch is not an unfinished run; the finished run's checkpoint neither.
	for _, tc := range []struct {
		path          string
		epoch         int
		chosen, unfin bool
	}{{path, 2, true, false}, {dir, 4, false, false}} {
		m, err := LoadModel(tc.path, testDevice)
		if err != nil {
			t.Fatal(err)
		}
		if m.Epoch != tc.epoch || m.Chosen != tc.chosen || m.Unfinished() != tc.unfin {
			t.Errorf("%s: epoch %d, chosen %v, unfinished %v; want %d, %v, %v", tc.path, m.Epoch, m.Chosen, m.Unfinished(), tc.epoch, tc.chosen, tc.unfin)
		}
		m.Close()
	}

	// A run killed after its checkpoint and before chosen.safetensors: the
	// checkpoint carries the chosen model, and the resumed run writes the file.
	moved := t.TempDir()
	b, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(moved, checkpointName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, _, _, err := ReadCheckpoint(moved)
	if err != nil {
		t.Fatal(err)
	}
	again, err := New(r.Cfg, r.Src, testDevice, moved)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if err := again.Restore(f); err != nil {
		t.Fatal(err)
	}
	if c := again.Chosen(); !reflect.DeepEqual(c, ch) {
		t.Errorf("resumed run's chosen epoch %+v, want %+v", c, ch)
	}
	if p, err := again.ExportChosen(); err != nil || p != filepath.Join(moved, ChosenName) {
		t.Fatalf("export after the resume: %q, %v", p, err)
	}
	if got := modelCriteria(t, filepath.Join(moved, ChosenName), r); got != ch.Criteria {
		t.Errorf("rewritten %s predicts with criteria %+v, want %+v", ChosenName, got, ch.Criteria)
	}
	cf, _, _, err := ReadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := again.Restore(cf); err == nil {
		t.Errorf("resumed from %s, which has no optimiser states", ChosenName)
	}

	// The chosen epoch's tensors are taken only in the shape of the network's: one
	// flattened (by another tool, checksums redone) is refused, naming it.
	other := t.TempDir()
	ckpt := filepath.Join(other, checkpointName)
	os.WriteFile(ckpt, b, 0o644)
	flat := ""
	resave(t, ckpt, func(s *torch.Scope, name string, x *torch.Tensor) *torch.Tensor {
		if flat == "" && strings.HasPrefix(name, "chosen.model.") && len(x.Shape()) == 2 {
			flat = name
			return s.Reshape(x, x.Numel())
		}
		return x
	})
	if f, _, _, err = ReadCheckpoint(other); err != nil {
		t.Fatal(err)
	}
	third, err := New(r.Cfg, r.Src, testDevice, other)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if err := third.Restore(f); err == nil || !strings.Contains(err.Error(), flat) || !strings.Contains(err.Error(), "shape") {
		t.Errorf("resumed with %s flattened: %v", flat, err)
	}
}

// resave writes the safetensors file at path again with each tensor as edit returns
// it, its checksums made anew: a file another tool changed.
func resave(t *testing.T, path string, edit func(s *torch.Scope, name string, x *torch.Tensor) *torch.Tensor) {
	t.Helper()
	f, err := torch.ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	s := torch.NoGrad()
	defer s.Close()
	var ts []torch.Named
	for _, name := range f.Names() {
		ts = append(ts, torch.Named{Name: name, Tensor: edit(s, name, s.LoadTensor(f, name, torch.CPU))})
	}
	meta := map[string]string{}
	for k, v := range f.Meta {
		if k != torch.ChecksumKey && k != torch.HeaderChecksumKey {
			meta[k] = v
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if err := torch.SaveSafetensors(path, ts, meta); err != nil {
		t.Fatal(err)
	}
}

// When the last epoch ranks first the checkpoint is the chosen model, and no other
// file claims to be.
func TestChosenLastEpoch(t *testing.T) {
	dir := t.TempDir()
	// Each epoch ranks above the one before: the last is chosen.
	r := chosenRun(t, dir, 4, func(a, b Chosen) bool { return true })
	if ch := r.Chosen(); ch == nil || ch.Epoch != 4 {
		t.Fatalf("chosen %+v, want epoch 4", ch)
	}
	if _, err := os.Stat(filepath.Join(dir, ChosenName)); !os.IsNotExist(err) {
		t.Errorf("%s left beside a last epoch that was chosen (stat: %v)", ChosenName, err)
	}
}

// By default the epoch that agrees best with the evaluations before it is kept, of
// those that leave the fewest clusters empty.
func TestChosenByAgreement(t *testing.T) {
	r := chosenRun(t, t.TempDir(), 6, nil)
	best := -1
	for i, m := range r.History {
		if (i == 0) != (m.Agreement == nil) {
			t.Fatalf("epoch %d: agreement %v, want one from the second evaluation on", i+1, m.Agreement)
		}
		if i == 0 {
			continue
		}
		b := r.History[max(best, 0)]
		if best < 0 || m.Empty < b.Empty || (m.Empty == b.Empty && *m.Agreement > *b.Agreement) {
			best = i
		}
	}
	if ch := r.Chosen(); ch == nil || ch.Epoch != best+1 {
		t.Errorf("chosen %+v, want epoch %d", ch, best+1)
	}
	if len(r.recent) != AgreementWindow {
		t.Errorf("%d recent clusterings kept, want %d", len(r.recent), AgreementWindow)
	}
}

// An epoch's agreement is the mean adjusted Rand index with the evaluations before
// it, here counted by pairs of rows as Hubert and Arabie define it.
func TestAgreementByPairs(t *testing.T) {
	r := chosenRun(t, t.TempDir(), AgreementWindow, nil)
	c := r.recent // every evaluation so far: epochs 1..AgreementWindow
	var want float64
	for _, prev := range c[:len(c)-1] {
		want += pairARI(c[len(c)-1], prev)
	}
	want /= float64(len(c) - 1)
	got := r.History[len(r.History)-1].Agreement
	if got == nil || math.Abs(*got-want) > 1e-6 {
		t.Errorf("agreement %v, by pairs %v", got, want)
	}
}

// pairARI counts the pairs of rows that a and b put together.
func pairARI(a, b []int32) float64 {
	var both, inA, inB, pairs float64
	for i := range a {
		for j := i + 1; j < len(a); j++ {
			sa, sb := a[i] == a[j], b[i] == b[j]
			if sa {
				inA++
			}
			if sb {
				inB++
			}
			if sa && sb {
				both++
			}
			pairs++
		}
	}
	expected := inA * inB / pairs
	return (both - expected) / ((inA+inB)/2 - expected)
}

// The chosen epoch ranks fewer empty clusters first: evaluations that put every row
// in one cluster agree perfectly with one another (adjusted Rand index 1).
func TestChosenAgreesMore(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name string
		c, o Chosen
		want bool
	}{
		{"higher agreement", Chosen{Agreement: f(0.8)}, Chosen{Agreement: f(0.7)}, true},
		{"lower agreement", Chosen{Agreement: f(0.7)}, Chosen{Agreement: f(0.8)}, false},
		{"equal agreement: the earlier stays", Chosen{Agreement: f(0.8)}, Chosen{Agreement: f(0.8)}, false},
		{"over the first evaluation", Chosen{Agreement: f(0.1)}, Chosen{}, true},
		{"the first evaluation", Chosen{}, Chosen{Agreement: f(0.1)}, false},
		{"fewer empty, lower agreement", Chosen{Agreement: f(0.4)}, Chosen{Agreement: f(1), Empty: 2}, true},
		{"more empty, perfect agreement", Chosen{Agreement: f(1), Empty: 2}, Chosen{Agreement: f(0.4)}, false},
		{"the first evaluation, none empty", Chosen{}, Chosen{Agreement: f(1), Empty: 1}, false},
		{"over the first evaluation, one empty", Chosen{Agreement: f(1), Empty: 1}, Chosen{}, true},
	} {
		if got := tc.c.AgreesMore(tc.o); got != tc.want {
			t.Errorf("%s: AgreesMore = %v, want %v", tc.name, got, tc.want)
		}
	}
}

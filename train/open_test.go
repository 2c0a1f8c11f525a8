package train

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"emclust/data"
	"emclust/model"
	"emclust/torch"
)

func TestExplainOOM(t *testing.T) {
	oom := &torch.Error{Op: "conv2d", Msg: "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.1 GiB total capacity)"}
	got := ExplainOOM(fmt.Errorf("epoch 3: %w", oom), "lower --batch-size").Error()
	for _, want := range []string{"Tried to allocate 2.00 GiB", "out of memory: lower --batch-size"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q does not contain %q", got, want)
		}
	}
	other := &torch.Error{Op: "matmul", Msg: "shapes cannot be multiplied (2x3 and 4x5)"}
	if err := ExplainOOM(other, "lower --batch-size"); err != error(other) {
		t.Errorf("a shape error was changed to %v", err)
	}
}

// New data of another width than a standardised model's training data are named as
// CheckInput names them, with the hint for a label column read as a feature; the
// statistics' own check ran first and said only "standardisation has 4 columns".
func TestStandardizeOtherWidth(t *testing.T) {
	cfg := Config{Standardize: true, InputMean: []float64{0, 0, 0, 0}, InputStd: []float64{1, 1, 1, 1}}
	for _, tc := range []struct {
		d              int
		file, labelCol string
		hint           bool
	}{{5, "new.csv", "", true}, {5, "new.csv", "class", false}, {3, "new.csv", "", false}, {5, "new.npy", "", false}} {
		v := &data.Vectors{N: 1, D: tc.d, X: make([]float32, tc.d), Source: tc.file}
		c := cfg
		c.DataFile, c.LabelCol = tc.file, tc.labelCol
		err := standardize(&c, v)
		want := fmt.Sprintf("%s has %d feature columns, but the model takes 4-feature input", tc.file, tc.d)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "--label-col") != tc.hint {
			t.Errorf("%s, %d columns, label column %q: %v, want %q, hint %v", tc.file, tc.d, tc.labelCol, err, want, tc.hint)
		}
	}
}

// A model's columns are taken by position: new data whose header names them in
// another order, or names others, are refused; data without names pass, and a
// training run records its data's names.
func TestMatchFeatures(t *testing.T) {
	trained := []string{"Na", "RI", "Mg"}
	for _, tc := range []struct {
		name  string
		saved []string
		got   []string
		want  string // error prefix, "" for none
	}{
		{"same", trained, []string{"Na", "RI", "Mg"}, ""},
		{"no header", trained, nil, ""},
		{"other width", trained, []string{"Na", "RI"}, ""},
		{"swapped", trained, []string{"RI", "Na", "Mg"}, `new.csv has the model's columns in another order: column 0 is "RI", where the model took "Na"`},
		{"renamed", trained, []string{"Na", "RI", "K"}, `new.csv's columns are not those the model was trained on: column 2 is "K", where the model took "Mg"`},
		{"trained without names", nil, []string{"a", "b", "c"}, ""},
	} {
		cfg := Config{Features: tc.saved}
		v := &data.Vectors{Features: tc.got, Source: "new.csv"}
		err := matchFeatures(&cfg, v)
		if (tc.want == "") != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if tc.saved == nil && !slices.Equal(cfg.Features, tc.got) {
			t.Errorf("%s: recorded %v, want %v", tc.name, cfg.Features, tc.got)
		}
	}
}

func TestDataName(t *testing.T) {
	r, w, err := os.Pipe() // as a shell's <(...), whose /dev/fd/63 says less
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "digits"},
		{Config{DataFile: "/x/points.csv.gz"}, "points.csv"},
		{Config{Dataset: "wine"}, "wine"},
		{Config{Dataset: "folder", DataDir: "/data/photos/"}, "photos"},
		{Config{Dataset: "folder", DataDir: "/"}, "folder"},
		{Config{Dataset: "fashion-mnist", DataDir: "/data/fm"}, "fashion-mnist"},
		{Config{DataFile: fmt.Sprintf("/dev/fd/%d", r.Fd())}, "pipe"},
	} {
		if got := DataName(tc.cfg); got != tc.want {
			t.Errorf("DataName(%+v) = %q, want %q", tc.cfg, got, tc.want)
		}
	}
}

// trainedModel trains cfg on the digits for two epochs, and loads the model saved;
// it is closed when the test ends.
func trainedModel(t *testing.T, cfg Config) *Model {
	t.Helper()
	cfg.MinSteps, cfg.MaxSteps, cfg.Epochs = 0, 0, 2
	dir := t.TempDir()
	if err := newRun(t, cfg, digitsSource(t), dir).Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	m, err := LoadModel(dir, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// param is net's parameter of that name.
func param(t *testing.T, net *model.Net, name string) *torch.Tensor {
	t.Helper()
	for _, p := range net.Params() {
		if p.Name == name {
			return p.Tensor
		}
	}
	t.Fatalf("no %s among the parameters", name)
	return nil
}

// NotFinite names the tensor of a loaded model that holds a NaN or an infinity: none
// of a trained one, then a parameter, then the learned prior.
func TestModelNotFinite(t *testing.T) {
	cfg := VectorDefaults()
	cfg.Prior = "learned"
	m := trainedModel(t, cfg)
	if m.Prior == nil {
		t.Fatal("no learned prior loaded")
	}
	if name, err := m.NotFinite(); name != "" || err != nil {
		t.Fatalf("a trained model: %q, %v; want all finite", name, err)
	}
	s := torch.NoGrad()
	defer s.Close()
	params := m.Net.Params()
	last := params[len(params)-1]
	s.CopyInto(s.Narrow(s.Flatten(last.Tensor, 0), 0, 0, 1), s.Full([]int{1}, math.Inf(1), torch.Float32, testDevice))
	if name, err := m.NotFinite(); name != last.Name || err != nil {
		t.Errorf("an infinite weight: %q, %v; want %q", name, err, last.Name)
	}
	s.CopyInto(last.Tensor, s.Zeros(last.Tensor.Shape(), torch.Float32, testDevice))
	s.CopyInto(s.Narrow(m.Prior, 0, 0, 1), s.Full([]int{1}, math.NaN(), torch.Float32, testDevice))
	if name, err := m.NotFinite(); name != "prior" || err != nil {
		t.Errorf("a NaN prior: %q, %v; want \"prior\"", name, err)
	}
}

// With several heads, a value that is not finite in a head not selected is not the
// model's fault (its outputs never reach a prediction); in the selected one it is.
func TestModelNotFiniteHeads(t *testing.T) {
	cfg := VectorDefaults()
	cfg.Heads = 2
	m := trainedModel(t, cfg)
	out := param(t, m.Net, "out.weight")
	k, head := m.Net.Spec.K, m.Net.Head()
	s := torch.NoGrad()
	defer s.Close()
	for _, tc := range []struct {
		head int
		want string
	}{{1 - head, ""}, {head, "out.weight"}} {
		s.CopyInto(s.Narrow(out, 0, tc.head*k, 1), s.Full([]int{1, out.Shape()[1]}, math.NaN(), torch.Float32, testDevice))
		if name, err := m.NotFinite(); name != tc.want || err != nil {
			t.Errorf("NaN in head %d (head %d selected): %q, %v; want %q", tc.head, head, name, err, tc.want)
		}
	}
}

// A --model that holds no model says what it holds (was "read checkpoint: open
// P: no such file or directory" for each).
func TestLoadModelWithoutCheckpoint(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	os.MkdirAll(started, 0o755)
	os.WriteFile(filepath.Join(started, "config.json"), []byte("{}"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.MkdirAll(empty, 0o755)
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "gone"), filepath.Join(dir, "gone") + ": no such run folder or checkpoint file"},
		{started, started + " holds no checkpoint: its run stopped before its first epoch ended"},
		{empty, empty + " holds no run (no checkpoint.safetensors)"},
	} {
		m, err := LoadModel(tc.path, torch.CPU)
		if err == nil {
			m.Close()
			t.Fatalf("%s: loaded", tc.path)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
}

// A table of another width than the model's names the columns that differ, where
// both have names.
func TestColumnsDiffer(t *testing.T) {
	for _, tc := range []struct {
		name         string
		trained, got []string
		want         string
	}{
		{"one lacking", []string{"a", "b", "c"}, []string{"a", "b"}, `they lack "c"`},
		{"one more", []string{"a", "b"}, []string{"a", "x", "b"}, `the model took no "x"`},
		{"both", []string{"a", "b"}, []string{"a", "x", "y"}, `they lack "b"; the model took no "x", "y"`},
		{"many lacking", []string{"a", "b", "c", "d", "e", "f"}, []string{"a"}, `they lack "b", "c", "d", and 2 more`},
		{"no names", []string{"a", "b"}, nil, ""},
		{"no names saved", nil, []string{"a"}, ""},
		{"a name twice", []string{"a", "a", "b"}, []string{"a", "b"}, ""},
	} {
		if got := columnsDiffer(tc.trained, tc.got); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

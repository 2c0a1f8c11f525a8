package train

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"emclust/data"
	"emclust/data/datatest"
	"emclust/torch"
)

// epochOrder draws rand.Perm's permutation in place: a run saved before it did
// so keeps its batches when it resumes.
func TestEpochOrderIsRandPerm(t *testing.T) {
	for _, tc := range []struct {
		n         int
		seed, run uint64
	}{{1, 1, 1}, {2, 5, 3}, {1797, epochSeed(7, 0), 7}, {1797, epochSeed(7, 4), 7}} {
		r := &Run{}
		r.Cfg.Seed = tc.run
		got := make([]int64, tc.n)
		r.epochOrder(got, tc.seed)
		for i, p := range rand.New(rand.NewPCG(tc.seed, tc.run)).Perm(tc.n) {
			if got[i] != int64(p) {
				t.Fatalf("n %d, seed %d: row %d is %d, rand.Perm's %d", tc.n, tc.seed, i, got[i], p)
			}
		}
	}
}

// The source keeps no host copy of the rows, leaves the caller's alone, and still
// z-scores them as data.Vectors.Standardize does, to the bit, over several chunks
// and a constant column.
func TestVectorSourceStandardizedWithoutHostRows(t *testing.T) {
	const n, d = 600, 4096 // 256 rows a chunk
	rng := rand.New(rand.NewPCG(3, 4))
	v := &data.Vectors{N: n, D: d, X: make([]float32, n*d), Source: "t"}
	for i := range v.X {
		switch j := i % d; {
		case j == 5:
			v.X[i] = 2.5 // constant
		default:
			v.X[i] = float32(rng.NormFloat64()*float64(1+j%7*100) + float64(j))
		}
	}
	given := slices.Clone(v.X)
	vs, err := NewVectorSource(v, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer vs.Close()
	if vs.v.X != nil {
		t.Errorf("the source keeps %d host values", len(vs.v.X))
	}
	if !slices.Equal(v.X, given) {
		t.Fatal("the caller's rows changed")
	}
	v.Standardize()
	s := torch.NoGrad()
	defer s.Close()
	got := s.Float32s(vs.Standardized(s))
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != n*d {
		t.Fatalf("%d values, want %d", len(got), n*d)
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(v.X[i]) {
			t.Fatalf("row %d column %d: %v, Standardize gives %v", i/d, i%d, got[i], v.X[i])
		}
	}
}

// Opening a table leaves no copy of its rows on Go's heap: they live on the device.
// On the CPU they never were there: the tensor took the memory they were read into.
func TestOpenSourceLeavesNoHostRows(t *testing.T) {
	const n, d = 1 << 16, 64 // 16 MiB of rows
	path := filepath.Join(t.TempDir(), "rows.npy")
	if err := os.WriteFile(path, datatest.NPY(n, d, func(i, j int) float32 { return float32(i%10 + j) }), 0o644); err != nil {
		t.Fatal(err)
	}

	cfg := VectorDefaults()
	cfg.DataFile = path
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	src, err := OpenSource(&cfg, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	runtime.GC()
	runtime.ReadMemStats(&after)
	rows := int64(n * d * 4)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > rows/8 {
		t.Errorf("Go's heap grew by %d KiB after opening %d KiB of rows, want at most %d", grew>>10, rows>>10, rows>>13)
	}
	if allocated := int64(after.TotalAlloc - before.TotalAlloc); !testDevice.CUDA && allocated > rows/8 {
		t.Errorf("Go allocated %d KiB while opening %d KiB of rows on the CPU, want at most %d: a copy", allocated>>10, rows>>10, rows>>13)
	}
	if src.Len() != n {
		t.Errorf("%d rows, want %d", src.Len(), n)
	}
	s := torch.NoGrad()
	defer s.Close()
	x := s.Float32s(src.Features(s))
	for _, i := range []int{0, 1, n/2 + 3, n - 1} {
		for _, j := range []int{0, d - 1} {
			if got, want := x[i*d+j], float32(i%10+j); got != want {
				t.Errorf("row %d column %d: %v, want %v", i, j, got, want)
			}
		}
	}
}

// Folder images of a size no network takes name the flag that resizes them.
func TestSpecOfOddImages(t *testing.T) {
	im := &data.Images{N: 2, C: 1, H: 40, W: 40, Pix: make([]uint8, 2*40*40)}
	src, err := NewImageSource(im, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for _, tc := range []struct {
		dataset string
		hint    bool
	}{{"folder", true}, {"mnist", false}} {
		_, err := src.Spec(&Config{Dataset: tc.dataset, K: 2, Norm: true})
		if err == nil || !strings.Contains(err.Error(), "40x40") || strings.Contains(err.Error(), "--image-size") != tc.hint {
			t.Errorf("%s: %v, want the size named, and --image-size %v", tc.dataset, err, tc.hint)
		}
	}
}

// An image folder's description names its class folders without an image, which
// make no class: the K its classes suggest is one short of what the user sees.
func TestImageSourceDescribesEmptyFolders(t *testing.T) {
	for _, tc := range []struct {
		empty []string
		want  string
	}{
		{nil, "imgs: 2 images 1x2x2"},
		{[]string{"c"}, "imgs: 2 images 1x2x2 (class folder c holds no image: 2 classes)"},
		{[]string{"c", "d", "e", "f", "g"}, "imgs: 2 images 1x2x2 (class folders c, d, e and 2 more hold no image: 2 classes)"},
	} {
		im := &data.Images{Pix: make([]uint8, 8), N: 2, C: 1, H: 2, W: 2, Labels: []int{0, 1}, Classes: []string{"a", "b"}, Source: "imgs", Empty: tc.empty}
		src, err := NewImageSource(im, torch.CPU)
		if err != nil {
			t.Fatal(err)
		}
		if got := src.Describe(); got != tc.want {
			t.Errorf("Describe() = %q, want %q", got, tc.want)
		}
		src.Close()
	}
}

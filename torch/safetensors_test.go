package torch

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"emclust/sysmem"
)

// rawSafetensors lays out a safetensors file from a JSON header and data bytes.
func rawSafetensors(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// Checkpoints are untrusted input: every malformed one is an error naming the file,
// never a panic in the reader or in LoadTensor.
func TestSafetensorsRejects(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, header string
		data         []byte
		want         string
	}{
		// n·4 wraps around to −8, which matched offsets [8, 0].
		{"shape wraps to negative", `{"w":{"dtype":"F32","shape":[4611686018427387902],"data_offsets":[8,0]}}`, make([]byte, 8), "does not fit"},
		// 2^32 · 2^32 · 4 wraps to 0.
		{"shape wraps to zero", `{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, nil, "does not fit"},
		{"offsets reversed", `{"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}`, make([]byte, 4), "data range"},
		{"negative dim", `{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, nil, "does not fit"},
		{"past the end", `{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 4), "does not fit"},
		{"unknown dtype", `{"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}}`, make([]byte, 1), "unsupported dtype"},
		{"metadata not strings", `{"__metadata__":{"a":1}}`, nil, "bad metadata"},
		{"overlapping tensors", `{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`, make([]byte, 3), "overlap"},
		{"bad checksum", `{"__metadata__":{"emclust.data_sha256":"00"},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{7}, "checksum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".safetensors")
			if err := os.WriteFile(path, rawSafetensors(tc.header, tc.data), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadSafetensors(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("got %v, want an error naming %s and saying %q", err, path, tc.want)
			}
		})
	}
}

// A flipped bit anywhere in the tensor data is caught by the checksum; the same bit in
// a file without one would load silently.
func TestSafetensorsChecksum(t *testing.T) {
	s := NewScope()
	defer s.Close()
	w := s.FromFloat32([]float32{1, 2, 3, 4}, []int{4}, testDevice)
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	if err := SaveSafetensors(path, []Named{{"w", w}}, map[string]string{"format": "x"}); err != nil {
		t.Fatal(err)
	}
	f, err := ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Meta[ChecksumKey]) != 64 || f.Meta["format"] != "x" {
		t.Fatalf("metadata %v, want the caller's entries and a SHA-256", f.Meta)
	}
	raw, _ := os.ReadFile(path)
	for _, bit := range []int{0, 13, 8*16 - 1} {
		flipped := append([]byte(nil), raw...)
		flipped[len(raw)-16+bit/8] ^= 1 << (bit % 8)
		bad := filepath.Join(t.TempDir(), "flipped.safetensors")
		os.WriteFile(bad, flipped, 0o644)
		if _, err := ReadSafetensors(bad); err == nil || !strings.Contains(err.Error(), "damaged") {
			t.Fatalf("bit %d flipped: %v, want a checksum error", bit, err)
		}
	}
	if err := SaveSafetensors(path, []Named{{"w", w}}, map[string]string{ChecksumKey: "x"}); err == nil {
		t.Fatal("a caller could set the checksum entry")
	}
}

// An edit of the header (a tensor's dtype, its offsets, a setting in the metadata)
// is caught by the header's checksum; the same header re-spaced and re-ordered, as
// another JSON writer would leave it, still reads.
func TestSafetensorsHeaderChecksum(t *testing.T) {
	s := NewScope()
	defer s.Close()
	a := s.FromFloat32([]float32{1, 2}, []int{2}, testDevice)
	b := s.FromFloat32([]float32{3, 4}, []int{2}, testDevice)
	dir := t.TempDir()
	path := filepath.Join(dir, "ck.safetensors")
	if err := SaveSafetensors(path, []Named{{"a", a}, {"b", b}}, map[string]string{"config": `{"gamma":5}`}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(raw)
	header, data := string(raw[8:8+n]), raw[8+n:]
	for _, tc := range []struct{ name, from, to string }{
		{"dtype", `"a":{"dtype":"F32"`, `"a":{"dtype":"I32"`},
		{"offsets swapped", `"data_offsets":[0,8]`, `"data_offsets":[8,16]@`},
		{"a setting", `\"gamma\":5`, `\"gamma\":7`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := strings.Replace(header, tc.from, tc.to, 1)
			if tc.name == "offsets swapped" {
				edited = strings.Replace(edited, `"data_offsets":[8,16]}`, `"data_offsets":[0,8]}`, 1)
				edited = strings.Replace(edited, "@", "", 1)
			}
			if edited == header {
				t.Fatalf("%q not in the header %s", tc.from, header)
			}
			bad := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".safetensors")
			os.WriteFile(bad, rawSafetensors(edited, data), 0o644)
			if _, err := ReadSafetensors(bad); err == nil || !strings.Contains(err.Error(), "header") || !strings.Contains(err.Error(), "damaged") {
				t.Fatalf("header %s: %v, want the header's checksum error", edited, err)
			}
		})
	}
	var parsed map[string]any
	if err := json.Unmarshal([]byte(header), &parsed); err != nil {
		t.Fatal(err)
	}
	respaced, err := json.MarshalIndent(parsed, " ", "\t")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "respaced.safetensors")
	os.WriteFile(other, rawSafetensors(string(respaced), data), 0o644)
	if f, err := ReadSafetensors(other); err != nil || f.Meta["config"] != `{"gamma":5}` {
		t.Fatalf("the same header re-spaced: %v", err)
	}
	if err := SaveSafetensors(path, []Named{{"a", a}}, map[string]string{HeaderChecksumKey: "x"}); err == nil {
		t.Fatal("a caller could set the header's checksum entry")
	}
	// Written as U+FFFD, it read back as other text: a file refused as damaged.
	if err := SaveSafetensors(path, []Named{{"a", a}}, map[string]string{"k": "\xff"}); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("metadata of invalid UTF-8: %v", err)
	}
}

// FuzzReadSafetensors feeds arbitrary bytes to the reader and loads every tensor of
// what it accepts: neither may panic. A read keeping some tensors accepts the same
// files, and keeps their bytes as the whole read does; dropping one keeps the rest.
func FuzzReadSafetensors(f *testing.F) {
	f.Add(rawSafetensors(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(rawSafetensors(`{"__metadata__":{"format":"emclust-checkpoint-1"},"b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(rawSafetensors(`{"w":{"dtype":"F32","shape":[4611686018427387902],"data_offsets":[8,0]}}`, make([]byte, 8)))
	f.Add([]byte("not a checkpoint"))
	// Tensors across pages, none starting on one: what Drop hands back.
	pages := make([]byte, 14016)
	for i := range pages {
		pages[i] = byte(i%251 + 1)
	}
	f.Add(rawSafetensors(`{"a":{"dtype":"U8","shape":[5003],"data_offsets":[0,5003]},"b":{"dtype":"U8","shape":[9001],"data_offsets":[5003,14004]},"c":{"dtype":"U8","shape":[12],"data_offsets":[14004,14016]}}`, pages))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, raw []byte) {
		path := filepath.Join(dir, "fuzz.safetensors")
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		sf, err := ReadSafetensors(path)
		odd := func(name string) bool { return len(name)%2 == 1 }
		some, serr := ReadSafetensorsWith(path, ReadOptions{Keep: odd})
		if (err == nil) != (serr == nil) {
			t.Fatalf("read whole: %v; keeping some: %v", err, serr)
		}
		if err != nil {
			return
		}
		s := NoGrad()
		defer s.Close()
		for _, name := range sf.Names() {
			s.LoadTensor(sf, name, CPU)
			if e := sf.entries[name]; odd(name) && e.Offsets[1] > e.Offsets[0] && !bytes.Equal(some.data[name], sf.data[name]) {
				t.Fatalf("tensor %q kept as %x, read whole as %x", name, some.data[name], sf.data[name])
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("accepted file fails to load: %v", err)
		}
		// Each tensor loaded in place and dropped in turn leaves the others' bytes
		// as read, whatever the layout (Drop's page arithmetic).
		want := map[string][]byte{}
		for name, b := range sf.data {
			want[name] = bytes.Clone(b)
		}
		for _, name := range sf.Names() {
			e := sf.entries[name]
			dt, _ := stDType(e.DType)
			s.LoadInto(s.Zeros(e.Shape, dt, CPU), sf, name)
			sf.Drop(name)
			for other, b := range sf.data {
				if !bytes.Equal(b, want[other]) {
					t.Fatalf("tensor %q changed when %q was dropped", other, name)
				}
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("accepted file fails to load in place: %v", err)
		}
	})
}

// A file read keeping some tensors holds only their data, loads them as saved, and
// still checks the others' bytes against the checksum.
func TestSafetensorsKeeping(t *testing.T) {
	s := NewScope()
	defer s.Close()
	const big = 4 << 20 // floats: 16 MiB, which a read keeping only "w" must not hold
	w := s.FromFloat32([]float32{1, 2, 3}, []int{3}, testDevice)
	moments := s.Zeros([]int{big}, Float32, testDevice)
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	if err := SaveSafetensors(path, []Named{{"moments", moments}, {"w", w}, {"empty", s.Zeros([]int{0}, Float32, testDevice)}}, nil); err != nil {
		t.Fatal(err)
	}
	onlyW := func(name string) bool { return name == "w" }
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f, err := ReadSafetensorsWith(path, ReadOptions{Keep: onlyW})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > big || f.Held() > big {
		t.Errorf("reading 12 bytes of weights allocated %d bytes and holds %d, a quarter of the skipped tensor's or more", got, f.Held())
	}
	if got := strings.Join(f.Names(), ","); got != "empty,moments,w" {
		t.Errorf("names %s, want every tensor's", got)
	}
	ns := NoGrad()
	defer ns.Close()
	if got := ns.Float32s(ns.LoadTensor(f, "w", CPU)); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("w loaded as %v", got)
	}
	if e := ns.LoadTensor(f, "empty", CPU); ns.Err() != nil || e.Numel() != 0 {
		t.Errorf("an empty tensor not kept: %v", ns.Err())
	}
	if ns.LoadTensor(f, "moments", CPU); ns.Err() == nil || !strings.Contains(ns.Err().Error(), "not kept") {
		t.Errorf("a tensor left out loaded: %v", ns.Err())
	}
	raw, _ := os.ReadFile(path)
	n := binary.LittleEndian.Uint64(raw)
	raw[8+n+big] ^= 1 // in the moments, which are not kept
	bad := filepath.Join(t.TempDir(), "flipped.safetensors")
	os.WriteFile(bad, raw, 0o644)
	if _, err := ReadSafetensorsWith(bad, ReadOptions{Keep: onlyW}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a bit flipped in a tensor not kept: %v, want a checksum error", err)
	}
	os.WriteFile(bad, raw[:len(raw)-1], 0o644)
	if _, err := ReadSafetensorsWith(bad, ReadOptions{Keep: onlyW}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("a file cut short: %v, want an error naming it", err)
	}
}

// BenchmarkSafetensors saves and reads back 64 MiB of weights, as a checkpoint of a
// 16 M-weight network.
func BenchmarkSafetensors(b *testing.B) {
	s := NewScope()
	defer s.Close()
	w := s.Rand([]int{4096, 4096}, Float32, testDevice)
	path := filepath.Join(b.TempDir(), "ck.safetensors")
	b.Run("save", func(b *testing.B) {
		b.SetBytes(4096 * 4096 * 4)
		for range b.N {
			if err := SaveSafetensors(path, []Named{{"w", w}}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		b.SetBytes(4096 * 4096 * 4)
		for range b.N {
			if _, err := ReadSafetensors(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// ReadOptions.Header judges a file before its data is read: a file it refuses is not
// summed (a damaged data section goes unsaid), and one whose data the reader finds
// longer or shorter than its size when opened says so.
func TestSafetensorsHeaderFirst(t *testing.T) {
	s := NewScope()
	defer s.Close()
	const n = 1 << 20 // floats: 4 MiB, past the reader's buffer
	path := filepath.Join(t.TempDir(), "ck.safetensors")
	if err := SaveSafetensors(path, []Named{{"w", s.Zeros([]int{n}, Float32, testDevice)}}, map[string]string{"format": "other"}); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	raw[len(raw)-1] ^= 1
	os.WriteFile(path, raw, 0o644)
	refuse := func(meta map[string]string) error { return errors.New("format " + meta["format"] + " refused") }
	if _, err := ReadSafetensorsWith(path, ReadOptions{Header: refuse}); err == nil || err.Error() != "format other refused" {
		t.Errorf("a header refused: %v, want the refusal alone", err)
	}
	if _, err := ReadSafetensorsWith(path, ReadOptions{}); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("the same file read whole: %v, want its checksum error", err)
	}
	grow := func(map[string]string) error {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.Write([]byte{0})
			f.Close()
		}
		return err
	}
	os.WriteFile(path, raw, 0o644)
	if _, err := ReadSafetensorsWith(path, ReadOptions{Header: grow}); err == nil || !strings.Contains(err.Error(), "grew while read") {
		t.Errorf("a file that grows as it is read: %v", err)
	}
	cut := func(map[string]string) error { return os.Truncate(path, int64(len(raw)-n)) }
	for _, keep := range []func(string) bool{nil, func(string) bool { return false }} {
		os.WriteFile(path, raw, 0o644)
		_, err := ReadSafetensorsWith(path, ReadOptions{Keep: keep, Header: cut})
		if err == nil || !strings.Contains(err.Error(), "cut short while read") || !strings.Contains(err.Error(), path) {
			t.Errorf("a file cut short as it is read (kept: %v): %v", keep == nil, err)
		}
	}
}

// A file whose kept tensors need more than the memory and swap free is refused
// before any is allocated: Go's allocator would end the process.
func TestSafetensorsLargerThanMemory(t *testing.T) {
	free, ok := sysmem.FreeWithSwap().Bytes()
	if !ok || free+1<<30 > maxSafetensorsBytes {
		t.Skipf("free memory unknown or past the reader's %d-byte bound: nothing larger can be made", int64(maxSafetensorsBytes))
	}
	size := free + 1<<30
	header := fmt.Sprintf(`{"w":{"dtype":"U8","shape":[%d],"data_offsets":[0,%d]}}`, size, size)
	path := filepath.Join(t.TempDir(), "sparse.safetensors")
	if err := os.WriteFile(path, rawSafetensors(header, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, int64(8+len(header))+int64(size)); err != nil { // sparse: no disk taken
		t.Fatal(err)
	}
	_, err := ReadSafetensorsWith(path, ReadOptions{Keep: func(string) bool { return true }})
	if err == nil || !strings.Contains(err.Error(), "more than the") || !strings.Contains(err.Error(), path) {
		t.Errorf("a tensor larger than the free memory: %v", err)
	}
}

// CheckLike refuses what CopyInto would convert or broadcast without a word.
func TestSafetensorsCheckLike(t *testing.T) {
	header := `{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"row":{"dtype":"F32","shape":[1,3],"data_offsets":[24,36]},"d":{"dtype":"F64","shape":[2,3],"data_offsets":[40,88]}}`
	path := filepath.Join(t.TempDir(), "like.safetensors")
	if err := os.WriteFile(path, rawSafetensors(header, make([]byte, 88)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	s := NewScope()
	defer s.Close()
	like := s.Zeros([]int{2, 3}, Float32, CPU)
	for _, tc := range []struct {
		name, want string
	}{
		{"w", ""},
		{"row", `tensor "row" is float32 of shape [1 3], where the run's w is float32 of [2 3]`},
		{"d", `tensor "d" is float64 of shape [2 3], where the run's w is float32 of [2 3]`},
		{"gone", `no tensor "gone"`},
	} {
		err := f.CheckLike(tc.name, like, "the run's w")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), path) {
			t.Errorf("%s: got %v, want an error naming %s and saying %q", tc.name, err, path, tc.want)
		}
	}
}

// savedAndRead saves tensors to a file of the test's and reads it whole, released
// when the test ends.
func savedAndRead(t *testing.T, tensors []Named) *SafeFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "saved.safetensors")
	if err := SaveSafetensors(path, tensors, nil); err != nil {
		t.Fatal(err)
	}
	f, err := ReadSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Release)
	return f
}

// LoadInto fills a tensor of the saved dtype and shape in place, and refuses any
// other: copy_ would convert or broadcast it without a word.
func TestLoadInto(t *testing.T) {
	s := NewScope()
	defer s.Close()
	f := savedAndRead(t, []Named{
		{"w", s.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, []int{2, 3}, CPU)},
		{"none", s.Zeros([]int{0, 3}, Float32, CPU)},
	})
	path := f.Path
	live := LiveTensors()
	ns := NoGrad()
	defer ns.Close()
	dst := ns.Zeros([]int{2, 3}, Float32, CPU)
	ns.LoadInto(dst, f, "w")
	ns.LoadInto(ns.Zeros([]int{0, 3}, Float32, CPU), f, "none")
	if got := ns.Float32s(dst); ns.Err() != nil || !slices.Equal(got, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("loaded %v: %v", got, ns.Err())
	}
	if n := LiveTensors() - live; n != 2 {
		t.Errorf("%d tensors live after loading into the 2 made, want no more", n)
	}
	for _, tc := range []struct {
		name string
		dst  func(*Scope) *Tensor
		want string
	}{
		{"w", func(s *Scope) *Tensor { return s.Zeros([]int{3, 2}, Float32, CPU) }, "of shape [2 3], where the tensor it is loaded into is float32 of [3 2]"},
		{"w", func(s *Scope) *Tensor { return s.Zeros([]int{1, 3}, Float32, CPU) }, "of shape [2 3]"},
		{"w", func(s *Scope) *Tensor { return s.Zeros([]int{2, 3}, Float64, CPU) }, "is float32 of shape [2 3], where the tensor it is loaded into is float64"},
		{"v", func(s *Scope) *Tensor { return s.Zeros([]int{2, 3}, Float32, CPU) }, `no tensor "v"`},
	} {
		es := NoGrad()
		es.LoadInto(tc.dst(es), f, tc.name)
		if err := es.Close(); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s into another: %v, want %q", tc.name, err, tc.want)
		}
	}
	f.Drop("w")
	es := NoGrad()
	defer es.Close()
	if es.LoadInto(es.Zeros([]int{2, 3}, Float32, CPU), f, "w"); es.Err() == nil || !strings.Contains(es.Err().Error(), "released") {
		t.Errorf("loaded after Drop: %v", es.Err())
	}
}

// A tensor dropped once loaded gives its pages back to the system at once, and only
// its own: its neighbours in the file load as they were saved.
func TestSafetensorsDrop(t *testing.T) {
	s := NewScope()
	defer s.Close()
	const n = 1<<20 + 3 // floats: no tensor starts or ends on a page boundary
	f := savedAndRead(t, []Named{
		{"a", s.Full([]int{n}, 1, Float32, CPU)},
		{"b", s.Full([]int{n}, 2, Float32, CPU)},
		{"c", s.Full([]int{3}, 3, Float32, CPU)},
	})
	values := func(name string) []float32 {
		ns := NoGrad()
		defer ns.Close()
		v := ns.Float32s(ns.LoadTensor(f, name, CPU))
		if err := ns.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	// The middle one: a rounding that took a neighbour's page would show in a or c.
	b := f.data["b"]
	held := f.Held()
	values("b")
	f.Drop("b")
	page := os.Getpagesize()
	if freed := held - f.Held(); freed < len(b)-2*page || freed > len(b) {
		t.Errorf("dropping %d bytes freed %d", len(b), freed)
	}
	// The kernel's count: none of b's whole pages is resident.
	m := f.mapped.b // page-aligned, as mmap returns it
	off := int(uintptr(unsafe.Pointer(&b[0])) - uintptr(unsafe.Pointer(&m[0])))
	whole := m[(off+page-1)&^(page-1) : (off+len(b))&^(page-1)]
	resident := make([]byte, (len(whole)+page-1)/page)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, uintptr(unsafe.Pointer(&whole[0])), uintptr(len(whole)), uintptr(unsafe.Pointer(&resident[0]))); errno != 0 {
		t.Fatal(errno)
	}
	if k := bytes.Count(resident, []byte{1}); k != 0 {
		t.Errorf("%d of b's %d whole pages still resident after Drop", k, len(resident))
	}
	for name, want := range map[string]float32{"a": 1, "c": 3} {
		for i, v := range values(name) {
			if v != want {
				t.Fatalf("%s[%d] = %g after b was dropped, want %g", name, i, v, want)
			}
		}
	}
	ns := NoGrad()
	defer ns.Close()
	if ns.LoadTensor(f, "b", CPU); ns.Err() == nil || !strings.Contains(ns.Err().Error(), "released") {
		t.Errorf("b loaded after Drop: %v", ns.Err())
	}
	f.Drop("b") // again: nothing more
	f.Drop("a") // the first, from the mapping's start
	if len(f.data) != 1 {
		t.Errorf("after two drops the file keeps %d tensors, want c alone", len(f.data))
	}
	f.Release()
	if f.Held() != 0 {
		t.Errorf("after Release the file holds %d bytes", f.Held())
	}
}

// A file's tensors lie outside Go's heap, which Release returns at once, and memory
// the system refuses them is an error: Go's allocator would end the process.
func TestSafetensorsMapped(t *testing.T) {
	s := NewScope()
	defer s.Close()
	const n = 16 << 20 // bytes
	path := filepath.Join(t.TempDir(), "big.safetensors")
	if err := SaveSafetensors(path, []Named{{"w", s.Ones([]int{n / 4}, Float32, CPU)}}, nil); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f, err := ReadSafetensors(path)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > n/4 || f.Held() < n {
		t.Errorf("reading %d bytes allocated %d on Go's heap and holds %d outside it", n, got, f.Held())
	}
	ns := NoGrad()
	defer ns.Close()
	if got := ns.Float32s(ns.LoadTensor(f, "w", CPU)); len(got) != n/4 || got[0] != 1 || got[len(got)-1] != 1 {
		t.Errorf("w loaded as %d values", len(got))
	}
	f.Release()
	if f.Held() != 0 {
		t.Errorf("after Release the file holds %d bytes", f.Held())
	}
	// Error paths release what they read, and Restore again: each does nothing more.
	f.Release()
	(*SafeFile)(nil).Release()
	if m, err := mapBytes(1 << 62); err == nil {
		m.unmap()
		t.Errorf("4 EiB mapped")
	}
}

// A file no longer used after LoadTensor must stay mapped until the copy is done: its
// cleanup, run by a collection meanwhile, unmapped the data under the copy (SIGSEGV).
func TestSafetensorsLoadKeepsFileAlive(t *testing.T) {
	s := NewScope()
	defer s.Close()
	path := filepath.Join(t.TempDir(), "w.safetensors")
	if err := SaveSafetensors(path, []Named{{"w", s.Ones([]int{8 << 20}, Float32, CPU)}}, nil); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				runtime.GC()
			}
		}
	}()
	for range 20 {
		ns := NoGrad()
		f, err := ReadSafetensors(path)
		if err != nil {
			t.Fatal(err)
		}
		w := ns.LoadTensor(f, "w", CPU) // f is not used after this
		if err := ns.Err(); err != nil || w.Numel() != 8<<20 {
			t.Fatalf("loaded %v: %v", w.Shape(), err)
		}
		ns.Close()
	}
}

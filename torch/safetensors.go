package torch

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"
	"unsafe"

	"emclust/atomicfile"
	"emclust/sysmem"
)

// Checkpoints use the safetensors layout: an 8-byte little-endian header length, a
// JSON header naming each tensor's dtype, shape and byte range, then the raw data.
// It does not depend on the libtorch version, and Python's safetensors reads it.
//
// The metadata carries a SHA-256 of the data section under ChecksumKey, and one of
// the rest of the header under HeaderChecksumKey, both checked on read: a flipped bit
// in a weight, a tensor's dtype or the saved standardisation would otherwise load
// silently and change the clustering. Files without the keys (written by other
// tools) load unchecked.

// ChecksumKey is the metadata entry holding the hex SHA-256 of the data section.
const ChecksumKey = "emclust.data_sha256"

// HeaderChecksumKey is the metadata entry holding the hex SHA-256 of the header
// without it, in canonicalHeader's form.
const HeaderChecksumKey = "emclust.header_sha256"

// canonicalHeader is the header's JSON, less the header checksum, in one form
// whatever spacing or key order the file has: compact, every object's keys sorted,
// no HTML escapes; Python's json.dumps(h, sort_keys=True, separators=(",", ":"),
// ensure_ascii=False) gives the same bytes.
func canonicalHeader(entries map[string]stEntry, meta map[string]string) []byte {
	h := make(map[string]any, len(entries)+1)
	for name, e := range entries {
		h[name] = map[string]any{"dtype": e.DType, "shape": e.Shape, "data_offsets": e.Offsets}
	}
	m := make(map[string]string, len(meta))
	for k, v := range meta {
		if k != HeaderChecksumKey {
			m[k] = v
		}
	}
	h["__metadata__"] = m
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(h); err != nil { // strings and ints always encode
		panic(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func headerSum(entries map[string]stEntry, meta map[string]string) string {
	sum := sha256.Sum256(canonicalHeader(entries, meta))
	return hex.EncodeToString(sum[:])
}

// maxHeaderBytes bounds the JSON header read into memory.
const maxHeaderBytes = 100 << 20

var stNames = map[DType]string{
	Float32: "F32", Float64: "F64", Int64: "I64", Uint8: "U8",
	BFloat16: "BF16", Bool: "BOOL", Int32: "I32", Float16: "F16",
}

func stDType(name string) (DType, bool) {
	for d, n := range stNames {
		if n == name {
			return d, true
		}
	}
	return 0, false
}

// Named pairs a tensor with its name in a checkpoint.
type Named struct {
	Name   string
	Tensor *Tensor
}

type stEntry struct {
	DType   string `json:"dtype"`
	Shape   []int  `json:"shape"`
	Offsets [2]int `json:"data_offsets"`
}

// SaveSafetensors writes tensors and string metadata to path atomically.
func SaveSafetensors(path string, tensors []Named, meta map[string]string) error {
	s := NoGrad()
	defer s.Close()
	entries := map[string]stEntry{}
	for _, key := range []string{ChecksumKey, HeaderChecksumKey} {
		if _, ok := meta[key]; ok {
			return fmt.Errorf("save %s: metadata key %q is reserved", path, key)
		}
	}
	// encoding/json writes invalid UTF-8 as U+FFFD, which would read back as other
	// text than the header's checksum was taken of.
	for k, v := range meta {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("save %s: metadata %q: not valid UTF-8", path, k)
		}
	}
	// The header, which comes first, holds the data's checksum, known only once the
	// data is written: it goes first with placeholder sums of the same length, and
	// is written again at the end. Each tensor reaches the host once, through one
	// buffer of the largest, rather than all at once (a checkpoint of 36 M weights
	// and their Adam moments held 432 MB more at its save).
	off, largest := 0, 0
	for _, nt := range tensors {
		if !utf8.ValidString(nt.Name) {
			return fmt.Errorf("save %s: tensor name %q: not valid UTF-8", path, nt.Name)
		}
		if nt.Name == "__metadata__" {
			return fmt.Errorf("save %s: reserved tensor name %q", path, nt.Name)
		}
		if _, dup := entries[nt.Name]; dup {
			return fmt.Errorf("save %s: duplicate tensor name %q", path, nt.Name)
		}
		dt := nt.Tensor.DType()
		name, ok := stNames[dt]
		if !ok {
			return fmt.Errorf("save %s: tensor %q: unsupported dtype %v", path, nt.Name, dt)
		}
		size := nt.Tensor.Numel() * dt.Size()
		shape := nt.Tensor.Shape()
		if shape == nil {
			shape = []int{}
		}
		entries[nt.Name] = stEntry{DType: name, Shape: shape, Offsets: [2]int{off, off + size}}
		off += size
		largest = max(largest, size)
	}
	// header is the file's first bytes: the length, then the JSON with dataSum and
	// the header's own sum, padded with spaces so the data starts 8-byte aligned,
	// as the format allows. Every sum is 64 hex digits, so the length is the same
	// for the placeholders as for the real sums.
	header := func(dataSum string) ([]byte, error) {
		withSum := map[string]string{ChecksumKey: dataSum}
		for k, v := range meta {
			withSum[k] = v
		}
		withSum[HeaderChecksumKey] = headerSum(entries, withSum)
		h := map[string]any{"__metadata__": withSum}
		for name, e := range entries {
			h[name] = e
		}
		hj, err := json.Marshal(h)
		if err != nil {
			return nil, err
		}
		hj = append(make([]byte, 8, 8+len(hj)+7), hj...)
		for len(hj)%8 != 0 {
			hj = append(hj, ' ')
		}
		binary.LittleEndian.PutUint64(hj, uint64(len(hj)-8))
		return hj, nil
	}
	placeholder, err := header(strings.Repeat("0", 2*sha256.Size))
	if err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	buf := make([]byte, largest)
	return atomicfile.WritePatched(path, func(w *atomicfile.Writer) error {
		if _, err := w.Write(placeholder); err != nil {
			return err
		}
		sum := sha256.New()
		for _, nt := range tensors {
			dt := nt.Tensor.DType()
			n := nt.Tensor.Numel()
			b := buf[:n*dt.Size()]
			if n > 0 {
				s.toHost(nt.Tensor, dt, unsafe.Pointer(&b[0]), n)
			}
			if err := s.Err(); err != nil {
				return fmt.Errorf("tensor %q: %w", nt.Name, err)
			}
			sum.Write(b)
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		final, err := header(hex.EncodeToString(sum.Sum(nil)))
		if err != nil {
			return err
		}
		if len(final) != len(placeholder) {
			return fmt.Errorf("header of %d bytes, its placeholder %d", len(final), len(placeholder))
		}
		_, err = w.WriteAt(final, 0)
		return err
	})
}

// SafeFile is a safetensors file read into memory: its header, and the data of the
// tensors that were kept.
type SafeFile struct {
	Path    string
	Meta    map[string]string
	entries map[string]stEntry
	data    map[string][]byte // each 8-byte aligned, so C can read it in place
	mapped  *mapping          // where data lies
	dropped int               // bytes of it returned to the system (Drop)
	cleanup runtime.Cleanup   // unmaps it where Release was not called
}

// maxSafetensorsBytes bounds a safetensors file: far past any network emclust
// trains, short of a device read without end.
const maxSafetensorsBytes = 1 << 36

// ReadSafetensors reads and validates a whole safetensors file.
func ReadSafetensors(path string) (*SafeFile, error) {
	return ReadSafetensorsWith(path, ReadOptions{})
}

// ReadOptions narrow what ReadSafetensorsWith takes of a file.
type ReadOptions struct {
	// Keep says which tensors' data to keep in memory (all where nil). The others'
	// is read only to check the file's checksum: a model read for inference leaves
	// out its optimiser's moments, twice its weights.
	Keep func(name string) bool
	// Header, if not nil, judges the metadata before any tensor data is read: a
	// file that is not what the caller reads is refused at once, whatever its size.
	Header func(meta map[string]string) error
}

// ReadSafetensorsWith reads and validates a safetensors file as o narrows it.
func ReadSafetensorsWith(path string, o ReadOptions) (*SafeFile, error) {
	var f *SafeFile
	fail := func(format string, a ...any) (*SafeFile, error) {
		if f != nil {
			f.Release()
		}
		return nil, fmt.Errorf("read checkpoint %s: "+format, append([]any{path}, a...)...)
	}
	file, size, err := atomicfile.Open(path, maxSafetensorsBytes)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer file.Close()
	if size < 8 {
		return fail("%d bytes, too short for a safetensors file", size)
	}
	// short says what a read that ended early means: the file's size was read when
	// it was opened.
	short := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			now := "gone"
			if st, serr := os.Stat(path); serr == nil {
				now = fmt.Sprintf("%d bytes now", st.Size())
			}
			return fmt.Errorf("the file ended before its %d bytes (%s): cut short while read", size, now)
		}
		return err
	}
	r := bufio.NewReaderSize(file, 1<<20)
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return fail("%w", short(err))
	}
	hl := binary.LittleEndian.Uint64(n[:])
	if hl > uint64(size-8) || hl > maxHeaderBytes {
		return fail("header length %d does not fit in a %d-byte file (truncated or not safetensors)", hl, size)
	}
	raw := make([]byte, hl)
	if _, err := io.ReadFull(r, raw); err != nil {
		return fail("header: %w", short(err))
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(raw, &header); err != nil {
		return fail("bad header: %w", err)
	}
	dataLen := int(size - 8 - int64(hl))
	f = &SafeFile{Path: path, entries: map[string]stEntry{}, data: map[string][]byte{}}
	for name, v := range header {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &f.Meta); err != nil {
				return fail("bad metadata: %w", err)
			}
			continue
		}
		var e stEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return fail("tensor %q: %w", name, err)
		}
		dt, ok := stDType(e.DType)
		if !ok {
			return fail("tensor %q: unsupported dtype %s", name, e.DType)
		}
		bytes, ok := shapeBytes(e.Shape, dt.Size(), dataLen)
		if !ok {
			return fail("tensor %q: shape %v of %s does not fit in %d data bytes", name, e.Shape, e.DType, dataLen)
		}
		if e.Offsets[0] < 0 || e.Offsets[0] > e.Offsets[1] || e.Offsets[1] > dataLen || e.Offsets[1]-e.Offsets[0] != bytes {
			return fail("tensor %q: data range %v does not match shape %v of %s in %d data bytes (truncated?)",
				name, e.Offsets, e.Shape, e.DType, dataLen)
		}
		f.entries[name] = e
	}
	// Two tensors sharing bytes would load as one another's values.
	names := make([]string, 0, len(f.entries))
	for name, e := range f.entries {
		if e.Offsets[1] > e.Offsets[0] { // an empty tensor holds no bytes to share
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := f.entries[names[i]].Offsets, f.entries[names[j]].Offsets
		return a[0] < b[0] || a[0] == b[0] && a[1] < b[1]
	})
	for i := 1; i < len(names); i++ {
		if a, b := f.entries[names[i-1]].Offsets, f.entries[names[i]].Offsets; b[0] < a[1] {
			return fail("tensor data ranges %v and %v overlap (damaged, or not written by a safetensors writer)", a, b)
		}
	}
	if want, ok := f.Meta[HeaderChecksumKey]; ok && headerSum(f.entries, f.Meta) != want {
		return fail("the header (tensor types, shapes, offsets, settings) does not match the checksum it was saved with (the file is damaged)")
	}
	if o.Header != nil {
		if err := o.Header(f.Meta); err != nil {
			return nil, err
		}
	}
	keep := func(name string) bool { return o.Keep == nil || o.Keep(name) }
	kept := 0
	for _, name := range names {
		if keep(name) {
			kept += f.entries[name].Offsets[1] - f.entries[name].Offsets[0]
		}
	}
	// Go's allocator ends the process, past recover, where memory runs out. Swap
	// counts: the memory checks of training, which --no-memory-check turns off,
	// are for what fits; this is for what cannot be held at all.
	room := sysmem.FreeWithSwap()
	if free, ok := room.Bytes(); ok && uint64(kept) > free {
		return fail("its tensors need %.3g GB in memory, more than the %.3g GB of %s", float64(kept)/1e9, float64(free)/1e9, room.What())
	}
	// Outside Go's heap: where Go's allocator cannot have memory it ends the
	// process, past recover (under `ulimit -v`, past the free memory measured).
	m, err := mapBytes(kept + 8*len(names))
	if err != nil {
		return fail("its tensors need %.3g GB in memory, which the system refused (%v)", float64(kept)/1e9, err)
	}
	f.mapped, f.cleanup = m, runtime.AddCleanup(f, (*mapping).unmap, m)
	region := m.b
	// The data, in file order: kept tensors into their slices of the region, the
	// rest and any gaps only through the checksum.
	sum := sha256.New()
	pos := 0
	skip := func(to int) error {
		_, err := io.CopyN(sum, r, int64(to-pos))
		pos = to
		return short(err)
	}
	for _, name := range names {
		e := f.entries[name]
		if err := skip(e.Offsets[0]); err != nil {
			return fail("%w", err)
		}
		if !keep(name) {
			if err := skip(e.Offsets[1]); err != nil {
				return fail("%w", err)
			}
			continue
		}
		n := e.Offsets[1] - e.Offsets[0]
		b := region[:n:n]
		region = region[(n+7)/8*8:]
		if _, err := io.ReadFull(r, b); err != nil {
			return fail("tensor %q: %w", name, short(err))
		}
		sum.Write(b)
		f.data[name] = b
		pos = e.Offsets[1]
	}
	if err := skip(dataLen); err != nil {
		return fail("%w", err)
	}
	switch _, err := r.ReadByte(); {
	case err == nil:
		return fail("the file grew while read")
	case err != io.EOF:
		return fail("%w", err)
	}
	if want, ok := f.Meta[ChecksumKey]; ok && hex.EncodeToString(sum.Sum(nil)) != want {
		return fail("the tensor data does not match the checksum it was saved with (the file is damaged)")
	}
	return f, nil
}

// mapping is memory mapped for a file's tensors, outside Go's heap, which
// Release returns to the system at once.
type mapping struct{ b []byte }

// mapBytes maps n bytes of zeros, page-aligned (C reads any element type in place);
// an empty mapping where n is 0.
func mapBytes(n int) (*mapping, error) {
	if n == 0 {
		return &mapping{}, nil
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, err
	}
	return &mapping{b: b}, nil
}

func (m *mapping) unmap() {
	if m.b != nil {
		syscall.Munmap(m.b)
		m.b = nil
	}
}

// shapeBytes is the byte size of a tensor of this shape, and false when a dimension
// is negative or the size exceeds limit (checked before each multiplication, so that
// no product can overflow).
func shapeBytes(shape []int, elem, limit int) (int, bool) {
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d == 0 {
			return 0, true
		}
	}
	n := elem
	for _, d := range shape {
		if n > limit/d {
			return 0, false
		}
		n *= d
	}
	return n, n <= limit
}

// Names lists the tensors in the file, sorted.
func (f *SafeFile) Names() []string {
	names := make([]string, 0, len(f.entries))
	for n := range f.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// DType is the element type of tensor name, and whether it exists.
func (f *SafeFile) DType(name string) (DType, bool) {
	e, ok := f.entries[name]
	if !ok {
		return 0, false
	}
	return stDType(e.DType)
}

// Shape is the shape of tensor name, and whether it exists.
func (f *SafeFile) Shape(name string) ([]int, bool) {
	e, ok := f.entries[name]
	return e.Shape, ok
}

// CheckLike refuses tensor name of f where it is not of like's dtype and shape:
// copied into like, libtorch would convert another type and broadcast another
// shape without a word. what names like in the message ("the run's prior"); the
// caller says what the mismatch means.
func (f *SafeFile) CheckLike(name string, like *Tensor, what string) error {
	e, ok := f.entries[name]
	if !ok {
		return fmt.Errorf("%s: no tensor %q", f.Path, name)
	}
	dt, _ := stDType(e.DType)
	if dt != like.DType() || !slices.Equal(e.Shape, like.Shape()) {
		return fmt.Errorf("%s: tensor %q is %v of shape %v, where %s is %v of %v",
			f.Path, name, dt, e.Shape, what, like.DType(), like.Shape())
	}
	return nil
}

// Held is how many bytes of tensor data f holds in memory, until Release.
func (f *SafeFile) Held() int {
	if f.mapped == nil {
		return 0
	}
	return len(f.mapped.b) - f.dropped
}

// Drop returns tensor name's data to the system, for a caller that has loaded it and
// goes on to the next: a resumed run would otherwise hold the whole file beside its
// own copies until Release (docs/RESULTS.md section 69). LoadTensor of name fails from
// then on. Only the whole pages within the tensor's bytes go; a neighbour's stay.
// They are mapped afresh, inaccessible: that returns their memory and, under strict
// overcommit, their commit charge (MADV_DONTNEED would keep it), and keeps the
// range reserved, so that Release's unmap of the whole takes nothing else.
func (f *SafeFile) Drop(name string) {
	b, ok := f.data[name]
	if !ok {
		return
	}
	delete(f.data, name)
	if f.mapped == nil || len(b) == 0 {
		return
	}
	page := uintptr(os.Getpagesize())
	base := uintptr(unsafe.Pointer(&f.mapped.b[0]))
	start := uintptr(unsafe.Pointer(&b[0])) - base
	lo, hi := (start+page-1)&^(page-1), (start+uintptr(len(b)))&^(page-1)
	if hi <= lo {
		return
	}
	_, _, errno := syscall.Syscall6(syscall.SYS_MMAP, uintptr(unsafe.Pointer(&f.mapped.b[lo])), hi-lo,
		syscall.PROT_NONE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_FIXED, ^uintptr(0), 0)
	if errno == 0 {
		f.dropped += int(hi - lo)
	}
}

// Release returns the tensors' data to the system at once; the header (Meta, Names,
// DType, Shape) stays, and LoadTensor of f fails from then on. A second Release, or
// one of nil, does nothing.
func (f *SafeFile) Release() {
	if f == nil {
		return
	}
	f.data = nil
	if f.mapped != nil {
		f.cleanup.Stop()
		f.mapped.unmap()
		f.dropped = 0
	}
}

// LoadInto copies tensor name of f into dst, which must be of its dtype and shape
// (CheckLike), on dst's device: without the tensor LoadTensor makes, which a caller
// copying into its own would hold beside it.
func (s *Scope) LoadInto(dst *Tensor, f *SafeFile, name string) {
	if !s.ok("load", dst) {
		return
	}
	if err := f.CheckLike(name, dst, "the tensor it is loaded into"); err != nil {
		s.Fail(fmt.Errorf("checkpoint %w", err))
		return
	}
	b, err := f.bytesOf(name)
	if err != nil || b == nil {
		s.Fail(err)
		return
	}
	s.Fail(copyFromHost(dst, unsafe.Pointer(&b[0]), len(b)))
	runtime.KeepAlive(f) // as in LoadTensor
}

// bytesOf is tensor name's data in memory, nil for a tensor of no elements; an error
// where f has no such tensor, or did not keep its data or has released it.
func (f *SafeFile) bytesOf(name string) ([]byte, error) {
	e, ok := f.entries[name]
	if !ok {
		return nil, fmt.Errorf("checkpoint %s: no tensor %q", f.Path, name)
	}
	if e.Offsets[1] == e.Offsets[0] {
		return nil, nil
	}
	b, ok := f.data[name]
	if !ok {
		return nil, fmt.Errorf("checkpoint %s: tensor %q was not kept when the file was read, or was released", f.Path, name)
	}
	return b, nil
}

// LoadTensor loads tensor name onto dev, owned by s.
func (s *Scope) LoadTensor(f *SafeFile, name string, dev Device) *Tensor {
	if s.err != nil {
		return nil
	}
	b, err := f.bytesOf(name)
	if err != nil {
		s.err = err
		return nil
	}
	e := f.entries[name]
	dt, _ := stDType(e.DType)
	if b == nil {
		return s.Zeros(e.Shape, dt, dev)
	}
	t := fromHost(s, unsafe.Pointer(&b[0]), len(b)/dt.Size(), dt, e.Shape, dev)
	// b lies outside Go's heap and does not keep f alive: f's cleanup would unmap it
	// under the copy.
	runtime.KeepAlive(f)
	return t
}

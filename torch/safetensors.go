package torch

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"unicode/utf8"
	"unsafe"

	"emclust/atomicfile"
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
	// The header, which comes first, holds the data's checksum: the tensors are
	// copied to the host twice, once to sum and once to write, through one buffer
	// of the largest, rather than all at once (a checkpoint of 36 M weights and
	// their Adam moments held 432 MB more at its save).
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
	buf := make([]byte, largest)
	// each calls fn with each tensor's bytes, in order, in buf.
	each := func(fn func(b []byte) error) error {
		for _, nt := range tensors {
			dt := nt.Tensor.DType()
			n := nt.Tensor.Numel()
			b := buf[:n*dt.Size()]
			if n > 0 {
				s.toHost(nt.Tensor, dt, unsafe.Pointer(&b[0]), n)
			}
			if err := s.Err(); err != nil {
				return fmt.Errorf("save %s: tensor %q: %w", path, nt.Name, err)
			}
			if err := fn(b); err != nil {
				return err
			}
		}
		return nil
	}
	sum := sha256.New()
	if err := each(func(b []byte) error { sum.Write(b); return nil }); err != nil {
		return err
	}
	withSum := map[string]string{ChecksumKey: hex.EncodeToString(sum.Sum(nil))}
	for k, v := range meta {
		withSum[k] = v
	}
	withSum[HeaderChecksumKey] = headerSum(entries, withSum)
	header := map[string]any{"__metadata__": withSum}
	for name, e := range entries {
		header[name] = e
	}
	hj, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	// Pad the header with spaces so the data starts 8-byte aligned, as the format allows.
	for (8+len(hj))%8 != 0 {
		hj = append(hj, ' ')
	}
	return atomicfile.Write(path, func(w io.Writer) error {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(hj)))
		if _, err := w.Write(n[:]); err != nil {
			return err
		}
		if _, err := w.Write(hj); err != nil {
			return err
		}
		return each(func(b []byte) error {
			_, err := w.Write(b)
			return err
		})
	})
}

// SafeFile is a safetensors file read into memory.
type SafeFile struct {
	Path    string
	Meta    map[string]string
	entries map[string]stEntry
	data    []byte
}

// maxSafetensorsBytes bounds a safetensors file read whole: far past any network
// emclust trains, short of a device read without end.
const maxSafetensorsBytes = 1 << 36

// ReadSafetensors reads and validates a whole safetensors file.
func ReadSafetensors(path string) (*SafeFile, error) {
	raw, err := atomicfile.ReadFile(path, maxSafetensorsBytes)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	if len(raw) < 8 {
		return nil, fmt.Errorf("read checkpoint %s: %d bytes, too short for a safetensors file", path, len(raw))
	}
	hl := binary.LittleEndian.Uint64(raw[:8])
	if hl > uint64(len(raw)-8) || hl > maxHeaderBytes {
		return nil, fmt.Errorf("read checkpoint %s: header length %d does not fit in a %d-byte file (truncated or not safetensors)", path, hl, len(raw))
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(raw[8:8+hl], &header); err != nil {
		return nil, fmt.Errorf("read checkpoint %s: bad header: %w", path, err)
	}
	f := &SafeFile{Path: path, entries: map[string]stEntry{}, data: raw[8+hl:]}
	for name, v := range header {
		if name == "__metadata__" {
			if err := json.Unmarshal(v, &f.Meta); err != nil {
				return nil, fmt.Errorf("read checkpoint %s: bad metadata: %w", path, err)
			}
			continue
		}
		var e stEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("read checkpoint %s: tensor %q: %w", path, name, err)
		}
		dt, ok := stDType(e.DType)
		if !ok {
			return nil, fmt.Errorf("read checkpoint %s: tensor %q: unsupported dtype %s", path, name, e.DType)
		}
		bytes, ok := shapeBytes(e.Shape, dt.Size(), len(f.data))
		if !ok {
			return nil, fmt.Errorf("read checkpoint %s: tensor %q: shape %v of %s does not fit in %d data bytes",
				path, name, e.Shape, e.DType, len(f.data))
		}
		if e.Offsets[0] < 0 || e.Offsets[0] > e.Offsets[1] || e.Offsets[1] > len(f.data) || e.Offsets[1]-e.Offsets[0] != bytes {
			return nil, fmt.Errorf("read checkpoint %s: tensor %q: data range %v does not match shape %v of %s in %d data bytes (truncated?)",
				path, name, e.Offsets, e.Shape, e.DType, len(f.data))
		}
		f.entries[name] = e
	}
	// Two tensors sharing bytes would load as one another's values.
	ranges := make([][2]int, 0, len(f.entries))
	for _, e := range f.entries {
		if e.Offsets[1] > e.Offsets[0] { // an empty tensor holds no bytes to share
			ranges = append(ranges, e.Offsets)
		}
	}
	sort.Slice(ranges, func(i, j int) bool {
		return ranges[i][0] < ranges[j][0] || ranges[i][0] == ranges[j][0] && ranges[i][1] < ranges[j][1]
	})
	for i := 1; i < len(ranges); i++ {
		if ranges[i][0] < ranges[i-1][1] {
			return nil, fmt.Errorf("read checkpoint %s: tensor data ranges %v and %v overlap (damaged, or not written by a safetensors writer)", path, ranges[i-1], ranges[i])
		}
	}
	if want, ok := f.Meta[HeaderChecksumKey]; ok && headerSum(f.entries, f.Meta) != want {
		return nil, fmt.Errorf("read checkpoint %s: the header (tensor types, shapes, offsets, settings) does not match the checksum it was saved with (the file is damaged)", path)
	}
	if want, ok := f.Meta[ChecksumKey]; ok {
		got := sha256.Sum256(f.data)
		if hex.EncodeToString(got[:]) != want {
			return nil, fmt.Errorf("read checkpoint %s: the tensor data does not match the checksum it was saved with (the file is damaged)", path)
		}
	}
	return f, nil
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

// Tensor loads tensor name onto dev, owned by s.
func (s *Scope) LoadTensor(f *SafeFile, name string, dev Device) *Tensor {
	if s.err != nil {
		return nil
	}
	e, ok := f.entries[name]
	if !ok {
		s.err = fmt.Errorf("checkpoint %s: no tensor %q", f.Path, name)
		return nil
	}
	dt, _ := stDType(e.DType)
	b := f.data[e.Offsets[0]:e.Offsets[1]]
	if len(b) == 0 {
		return s.Zeros(e.Shape, dt, dev)
	}
	// Copy so the pointer handed to C is aligned for the element type.
	aligned := make([]uint64, (len(b)+7)/8)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&aligned[0])), len(b)), b)
	return fromHost(s, unsafe.Pointer(&aligned[0]), len(b)/dt.Size(), dt, e.Shape, dev)
}

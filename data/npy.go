package data

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"emclust/sysmem"
)

// ReadNPY reads the NumPy .npy file at path, as described by ParseNPY.
func ReadNPY(path string) (*Vectors, error) { return readNPY(path, nil) }

// readNPY is ReadNPY with the values' array from alloc where it is not nil and the
// file's length vouches for its rows (CSVOptions.Alloc).
func readNPY(path string, alloc func(n int) []float32) (*Vectors, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseNPY(bufio.NewReaderSize(f, 1<<20), path, fileSize(f), alloc)
}

// fileSize is f's size in bytes, or -1 where it has none that says how much can
// be read (a named pipe's is 0).
func fileSize(f *os.File) int64 {
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		return fi.Size()
	}
	return -1
}

// npyMagic starts every .npy file.
const npyMagic = "\x93NUMPY"

// IsNPY says whether head, a file's first bytes, start a NumPy .npy array.
func IsNPY(head []byte) bool { return bytes.HasPrefix(head, []byte(npyMagic)) }

// npyMaxHeader bounds the header length a file may claim; NumPy itself
// refuses headers over 10000 bytes by default.
const npyMaxHeader = 1 << 20

// ParseNPY reads an array in NumPy's .npy format (versions 1.0, 2.0 and 3.0).
// A 2-D array of shape (N, D) gives N rows of D features, a 1-D array of
// length N gives N rows of one feature, and higher-dimensional arrays keep
// their first axis as rows and flatten the rest in C order, so (N, 28, 28)
// images become 784 features. Fortran-order arrays are transposed into the
// row-major layout of Vectors.
//
// The element type may be a float (f4, f8), signed (i1, i2, i4, i8) or
// unsigned (u1, u2, u4, u8) integer of either byte order; all are converted
// to float32. NaN and infinite values are rejected because nothing downstream
// can cluster them. name identifies the input in error messages and becomes
// the Source of the result.
func ParseNPY(r io.Reader, name string) (*Vectors, error) {
	return parseNPY(r, name, -1, nil)
}

// parseNPY is ParseNPY of a stream of size bytes (-1 if not known).
func parseNPY(r io.Reader, name string, size int64, alloc func(n int) []float32) (*Vectors, error) {
	var pre [10]byte
	if n, err := io.ReadFull(r, pre[:8]); err != nil {
		if n == 0 && err == io.EOF {
			return nil, fmt.Errorf("%s: empty file, not a .npy file", name)
		}
		if err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%s: truncated: %d bytes, too short for a .npy file", name, n)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if string(pre[:6]) != npyMagic {
		return nil, fmt.Errorf("%s: not a .npy file: bad magic %q, want \"\\x93NUMPY\"", name, pre[:6])
	}
	major, minor := pre[6], pre[7]
	var hlen int
	lenBytes := 4
	switch major {
	case 1:
		lenBytes = 2
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, npyShort(name, "header length", err)
		}
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, npyShort(name, "header length", err)
		}
		n := binary.LittleEndian.Uint32(b[:])
		if n > npyMaxHeader {
			return nil, fmt.Errorf("%s: header length %d is implausible (limit %d)", name, n, npyMaxHeader)
		}
		hlen = int(n)
	default:
		return nil, fmt.Errorf("%s: unsupported .npy format version %d.%d (want 1.0, 2.0 or 3.0)", name, major, minor)
	}
	hbuf := make([]byte, hlen)
	if _, err := io.ReadFull(r, hbuf); err != nil {
		return nil, npyShort(name, "header", err)
	}
	h, err := parseNPYHeader(string(hbuf))
	if err != nil {
		return nil, fmt.Errorf("%s: header %s: %w", name, quoteClip(strings.TrimSpace(string(hbuf))), err)
	}
	dt, err := lookupNPYType(h.descr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}

	if len(h.shape) == 0 {
		return nil, fmt.Errorf("%s: array is a scalar (shape ()), not rows of features", name)
	}
	count := 1
	for _, d := range h.shape {
		if d < 0 || (d > 0 && count > math.MaxInt/dt.size/d) {
			return nil, fmt.Errorf("%s: implausible shape %s", name, fmtShape(h.shape))
		}
		count *= d
	}
	n, d := h.shape[0], 1
	if n > 0 {
		d = count / n
	}
	if count == 0 {
		return nil, fmt.Errorf("%s: empty array (shape %s)", name, fmtShape(h.shape))
	}

	// The values are held twice while libtorch copies them: more than half the
	// memory would end the process instead of this line.
	if limit := sysmem.Total() / 2; count > limit/4 {
		return nil, fmt.Errorf("%s: shape %s is %d MiB as float32, more than %d MiB (half the machine's memory, as the rows are copied once): the array is too large to cluster here",
			name, fmtShape(h.shape), count>>18, limit>>20)
	}

	// Decode in chunks rather than allocating what the header claims up front,
	// so a truncated or lying file fails on its data, not on memory; a file that
	// holds the data claimed gets its rows in one allocation, not a growing slice
	// that would allocate two to three times their size on its way.
	want := count * dt.size
	capacity := min(count, 1<<24)
	if size >= 0 && size-int64(8+lenBytes+hlen) >= int64(want) {
		capacity = count
	}
	var x []float32
	if alloc != nil && capacity == count {
		x = alloc(count)
	}
	if cap(x) < capacity {
		x = make([]float32, capacity)
	}
	var buf, into []byte
	if dt.native && capacity == count {
		// float32 in this machine's byte order, of a file long enough: read the
		// bytes into place, without a buffer or a decode.
		x = x[:count]
		into = unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), want)
	} else {
		x = x[:0]
		buf = make([]byte, (1<<20)/dt.size*dt.size)
	}
	for done := 0; done < want; {
		chunk := buf[:min(len(buf), want-done)]
		if into != nil {
			chunk = into[done:min(want, done+1<<20)]
		}
		k, err := io.ReadFull(r, chunk)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, fmt.Errorf("%s: truncated: want %d bytes of data, have %d", name, want, done+k)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if into == nil {
			x = dt.decode(x, chunk)
		}
		done += k
	}
	if h.fortran && len(h.shape) > 1 {
		x = fortranToC(x, h.shape)
	}
	if dt.float {
		for i, f := range x {
			// All exponent bits set: NaN or ±Inf, as one test rather than two.
			if math.Float32bits(f)&0x7f800000 == 0x7f800000 {
				what := fmt.Sprint(f)
				if math.IsInf(float64(f), 0) && dt.size > 4 {
					// Decoded already: a float64 past float32's range reads as Inf too.
					what += " (or a value out of float32 range)"
				}
				return nil, fmt.Errorf("%s: %s at row %d, column %d (0-based)", name, what, i/d, i%d)
			}
		}
	}
	return &Vectors{X: x, N: n, D: d, Source: name}, nil
}

func npyShort(name, what string, err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%s: truncated in the %s", name, what)
	}
	return fmt.Errorf("%s: reading the %s: %w", name, what, err)
}

// fortranToC reorders column-major (Fortran) data of the given shape into
// row-major (C) order. The Fortran layout of an array is the C layout of its
// axis-reversed transpose, so output element (i0, ..., ik) is read from
// offset i0*s0 + ... + ik*sk with strides s0 = 1, s(j+1) = sj*shape[j].
func fortranToC(src []float32, shape []int) []float32 {
	k := len(shape)
	stride := make([]int, k)
	s := 1
	for j := range shape {
		stride[j] = s
		s *= shape[j]
	}
	dst := make([]float32, len(src))
	idx := make([]int, k)
	off := 0
	for o := range dst {
		dst[o] = src[off]
		// Advance the C-order multi-index, last axis fastest.
		for j := k - 1; j >= 0; j-- {
			idx[j]++
			off += stride[j]
			if idx[j] < shape[j] {
				break
			}
			off -= idx[j] * stride[j]
			idx[j] = 0
		}
	}
	return dst
}

func fmtShape(shape []int) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.Itoa(d)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// npyType decodes one element type to float32.
type npyType struct {
	size   int
	float  bool
	decode func(dst []float32, src []byte) []float32
	native bool // float32 in the machine's byte order: the bytes are the values
}

const npyTypes = "f4, f8, i1, i2, i4, i8, u1, u2, u4, u8"

func lookupNPYType(descr string) (npyType, error) {
	unsupported := func(why string) (npyType, error) {
		return npyType{}, fmt.Errorf("unsupported dtype %s: %s; want one of %s, little- or big-endian", quoteClip(descr), why, npyTypes)
	}
	if len(descr) < 3 {
		return unsupported("malformed")
	}
	var bo binary.ByteOrder
	switch descr[0] {
	case '<', '|':
		bo = binary.LittleEndian
	case '>':
		bo = binary.BigEndian
	default:
		return unsupported("unknown byte order")
	}
	size, err := strconv.Atoi(descr[2:])
	if err != nil {
		return unsupported("malformed")
	}
	kind := descr[1]
	t := npyType{size: size, float: kind == 'f'}
	switch {
	case kind == 'f' && size == 4:
		one := []byte{1, 0}
		t.native = bo.Uint16(one) == binary.NativeEndian.Uint16(one)
		t.decode = func(dst []float32, src []byte) []float32 {
			for i := 0; i < len(src); i += 4 {
				dst = append(dst, math.Float32frombits(bo.Uint32(src[i:])))
			}
			return dst
		}
	case kind == 'f' && size == 8:
		t.decode = func(dst []float32, src []byte) []float32 {
			for i := 0; i < len(src); i += 8 {
				dst = append(dst, float32(math.Float64frombits(bo.Uint64(src[i:]))))
			}
			return dst
		}
	case (kind == 'i' || kind == 'u') && size == 1:
		signed := kind == 'i'
		t.decode = func(dst []float32, src []byte) []float32 {
			for _, b := range src {
				if signed {
					dst = append(dst, float32(int8(b)))
				} else {
					dst = append(dst, float32(b))
				}
			}
			return dst
		}
	case (kind == 'i' || kind == 'u') && size == 2:
		signed := kind == 'i'
		t.decode = func(dst []float32, src []byte) []float32 {
			for i := 0; i < len(src); i += 2 {
				u := bo.Uint16(src[i:])
				if signed {
					dst = append(dst, float32(int16(u)))
				} else {
					dst = append(dst, float32(u))
				}
			}
			return dst
		}
	case (kind == 'i' || kind == 'u') && size == 4:
		signed := kind == 'i'
		t.decode = func(dst []float32, src []byte) []float32 {
			for i := 0; i < len(src); i += 4 {
				u := bo.Uint32(src[i:])
				if signed {
					dst = append(dst, float32(int32(u)))
				} else {
					dst = append(dst, float32(u))
				}
			}
			return dst
		}
	case (kind == 'i' || kind == 'u') && size == 8:
		signed := kind == 'i'
		t.decode = func(dst []float32, src []byte) []float32 {
			for i := 0; i < len(src); i += 8 {
				u := bo.Uint64(src[i:])
				if signed {
					dst = append(dst, float32(int64(u)))
				} else {
					dst = append(dst, float32(u))
				}
			}
			return dst
		}
	default:
		return unsupported("not a plain number type")
	}
	return t, nil
}

// npyHeader is what ParseNPY needs from the header dictionary.
type npyHeader struct {
	descr   string
	fortran bool
	shape   []int
}

// parseNPYHeader reads the Python dict literal NumPy writes, such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
func parseNPYHeader(s string) (npyHeader, error) {
	p := &pyParser{s: s}
	v, err := p.value()
	if err != nil {
		return npyHeader{}, err
	}
	p.space()
	if p.i < len(p.s) {
		return npyHeader{}, fmt.Errorf("unexpected %s after the dictionary", quoteClip(p.s[p.i:]))
	}
	dict, ok := v.(map[string]any)
	if !ok {
		return npyHeader{}, errors.New("not a dictionary")
	}
	var h npyHeader
	switch d := dict["descr"].(type) {
	case string:
		h.descr = d
	case nil:
		return h, errors.New("no 'descr' key")
	default:
		return h, fmt.Errorf("unsupported dtype %v: structured arrays are not supported", d)
	}
	fo, ok := dict["fortran_order"].(bool)
	if !ok {
		return h, errors.New("missing or non-boolean 'fortran_order'")
	}
	h.fortran = fo
	shape, ok := dict["shape"].([]any)
	if !ok {
		return h, errors.New("missing or non-tuple 'shape'")
	}
	for _, e := range shape {
		d, ok := e.(int)
		if !ok {
			return h, fmt.Errorf("shape entry %v is not an integer", e)
		}
		h.shape = append(h.shape, d)
	}
	return h, nil
}

// pyParser parses the subset of Python literals found in .npy headers:
// dicts, tuples, lists, strings, integers, True, False and None.
type pyParser struct {
	s     string
	i     int
	depth int // of the brackets open at i
}

const maxPyNesting = 16

func (p *pyParser) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *pyParser) value() (any, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, errors.New("unexpected end")
	}
	if c := p.s[p.i]; c == '{' || c == '[' || c == '(' {
		// numpy's headers nest two deep; a megabyte of brackets would recurse as deep.
		if p.depth++; p.depth > maxPyNesting {
			return nil, fmt.Errorf("nested more than %d deep", maxPyNesting)
		}
		defer func() { p.depth-- }()
	}
	switch c := p.s[p.i]; {
	case c == '{':
		p.i++
		m := make(map[string]any)
		for {
			p.space()
			if p.i < len(p.s) && p.s[p.i] == '}' {
				p.i++
				return m, nil
			}
			k, err := p.value()
			if err != nil {
				return nil, err
			}
			key, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("dictionary key %s is not a string", quoteClip(fmt.Sprint(k)))
			}
			p.space()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return nil, errors.New("missing ':' in dictionary")
			}
			p.i++
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			m[key] = v
			if err := p.sep('}'); err != nil {
				return nil, err
			}
		}
	case c == '(' || c == '[':
		end := byte(')')
		if c == '[' {
			end = ']'
		}
		p.i++
		l := []any{}
		for {
			p.space()
			if p.i < len(p.s) && p.s[p.i] == end {
				p.i++
				return l, nil
			}
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			l = append(l, v)
			if err := p.sep(end); err != nil {
				return nil, err
			}
		}
	case c == '\'' || c == '"':
		var b strings.Builder
		for p.i++; p.i < len(p.s); p.i++ {
			switch p.s[p.i] {
			case c:
				p.i++
				return b.String(), nil
			case '\\':
				p.i++
				if p.i >= len(p.s) {
					return nil, errors.New("unterminated string")
				}
			}
			b.WriteByte(p.s[p.i])
		}
		return nil, errors.New("unterminated string")
	case c == '-' || c >= '0' && c <= '9':
		j := p.i + 1
		for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(p.s[p.i:j])
		if err != nil {
			return nil, fmt.Errorf("bad integer %s", quoteClip(p.s[p.i:j]))
		}
		if j < len(p.s) && (p.s[j] == 'L' || p.s[j] == 'l') { // Python 2 long
			j++
		}
		p.i = j
		return n, nil
	default:
		for _, w := range []struct {
			word string
			v    any
		}{{"True", true}, {"False", false}, {"None", nil}} {
			if strings.HasPrefix(p.s[p.i:], w.word) {
				p.i += len(w.word)
				return w.v, nil
			}
		}
		return nil, fmt.Errorf("unexpected %s", quoteClip(p.s[p.i:]))
	}
}

// sep consumes the ',' between items or stops before the closing end.
func (p *pyParser) sep(end byte) error {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ',' {
		p.i++
		return nil
	}
	if p.i < len(p.s) && p.s[p.i] == end {
		return nil
	}
	return fmt.Errorf("expected ',' or %q at %s", end, quoteClip(p.s[p.i:]))
}

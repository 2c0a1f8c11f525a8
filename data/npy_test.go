package data

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// npyFile builds a .npy file the way numpy.save does: magic, version, header
// length, then the header dict padded with spaces and a newline so that the
// data starts at a multiple of 64 bytes.
func npyFile(major byte, descr string, fortran bool, shape string, data []byte) []byte {
	fo := "False"
	if fortran {
		fo = "True"
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fo, shape)
	pre := 10
	if major > 1 {
		pre = 12
	}
	total := (pre + len(dict) + 1 + 63) / 64 * 64
	hdr := dict + strings.Repeat(" ", total-pre-len(dict)-1) + "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY")
	b.WriteByte(major)
	b.WriteByte(0)
	if major == 1 {
		binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	} else {
		binary.Write(&b, binary.LittleEndian, uint32(len(hdr)))
	}
	b.WriteString(hdr)
	b.Write(data)
	return b.Bytes()
}

// npyData encodes values with the given byte order; each value's Go type
// picks the element size.
func npyData(order binary.ByteOrder, values any) []byte {
	var b bytes.Buffer
	if err := binary.Write(&b, order, values); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func TestReadNPY(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	want23 := []float32{1, 2, 3, 4, 5, 6}
	tests := []struct {
		name  string
		major byte
		descr string
		fo    bool
		shape string
		data  []byte
		n, d  int
		x     []float32
	}{
		{"f4", 1, "<f4", false, "(2, 3)", npyData(le, []float32{1, 2, 3, 4, 5, 6}), 2, 3, want23},
		{"f8", 1, "<f8", false, "(2, 3)", npyData(le, []float64{1, 2, 3, 4, 5, 6}), 2, 3, want23},
		{"i4", 1, "<i4", false, "(2, 3)", npyData(le, []int32{1, 2, 3, 4, 5, 6}), 2, 3, want23},
		{"i8", 1, "<i8", false, "(2, 3)", npyData(le, []int64{1, 2, 3, 4, 5, 6}), 2, 3, want23},
		{"u1", 1, "|u1", false, "(2, 3)", []byte{1, 2, 3, 4, 5, 6}, 2, 3, want23},
		{"i1 negative", 1, "|i1", false, "(2,)", []byte{0xff, 0x80}, 2, 1, []float32{-1, -128}},
		{"i2", 1, "<i2", false, "(1, 2)", npyData(le, []int16{-300, 300}), 1, 2, []float32{-300, 300}},
		{"u2", 1, "<u2", false, "(1, 2)", npyData(le, []uint16{65535, 7}), 1, 2, []float32{65535, 7}},
		{"u4", 1, "<u4", false, "(1, 1)", npyData(le, []uint32{1 << 20}), 1, 1, []float32{1 << 20}},
		{"u8", 1, "<u8", false, "(1, 1)", npyData(le, []uint64{1 << 40}), 1, 1, []float32{1 << 40}},
		{"i8 negative", 1, "<i8", false, "(1, 2)", npyData(le, []int64{-5, math.MaxInt32 + 1}), 1, 2, []float32{-5, math.MaxInt32 + 1}},
		{"big-endian f8", 1, ">f8", false, "(2, 3)", npyData(be, []float64{1, 2, 3, 4, 5, 6}), 2, 3, want23},
		{"big-endian i4", 1, ">i4", false, "(2, 3)", npyData(be, []int32{1, 2, 3, 4, 5, 6}), 2, 3, want23},
		{"1-D", 1, "<f4", false, "(4,)", npyData(le, []float32{1, 2, 3, 4}), 4, 1, []float32{1, 2, 3, 4}},
		{"version 2", 2, "<f4", false, "(2, 3)", npyData(le, want23), 2, 3, want23},
		{"version 3", 3, "<f4", false, "(2, 3)", npyData(le, want23), 2, 3, want23},
		// np.asfortranarray([[1,2,3],[4,5,6]]) stores its columns in turn.
		{"fortran 2-D", 1, "<f4", true, "(2, 3)", npyData(le, []float32{1, 4, 2, 5, 3, 6}), 2, 3, want23},
		{"fortran i8", 1, "<i8", true, "(2, 3)", npyData(le, []int64{1, 4, 2, 5, 3, 6}), 2, 3, want23},
		{"fortran 1-D", 1, "<f4", true, "(3,)", npyData(le, []float32{1, 2, 3}), 3, 1, []float32{1, 2, 3}},
		// a[i,j,k] = 100i + 10j + k with shape (2, 2, 3): rows are i, and
		// the Fortran file lists k slowest, i fastest.
		{"3-D flattened", 1, "<f4", false, "(2, 2, 3)",
			npyData(le, []float32{0, 1, 2, 10, 11, 12, 100, 101, 102, 110, 111, 112}), 2, 6,
			[]float32{0, 1, 2, 10, 11, 12, 100, 101, 102, 110, 111, 112}},
		{"fortran 3-D", 1, "<f4", true, "(2, 2, 3)",
			npyData(le, []float32{0, 100, 10, 110, 1, 101, 11, 111, 2, 102, 12, 112}), 2, 6,
			[]float32{0, 1, 2, 10, 11, 12, 100, 101, 102, 110, 111, 112}},
		{"python 2 long shape", 1, "<f4", false, "(2L, 3L)", npyData(le, want23), 2, 3, want23},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeVecFile(t, "x.npy", npyFile(tt.major, tt.descr, tt.fo, tt.shape, tt.data))
			v, err := ReadNPY(path)
			if err != nil {
				t.Fatal(err)
			}
			if v.N != tt.n || v.D != tt.d {
				t.Errorf("shape %d×%d, want %d×%d", v.N, v.D, tt.n, tt.d)
			}
			if !reflect.DeepEqual(v.X, tt.x) {
				t.Errorf("X = %v, want %v", v.X, tt.x)
			}
			if v.Labels != nil || v.Source != path {
				t.Errorf("Labels = %v, Source = %q", v.Labels, v.Source)
			}
			if err := v.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestReadNPYLarge(t *testing.T) {
	// More than one decoding chunk, in both orders.
	n, d := 1000, 300
	c := make([]float32, n*d)
	f := make([]float32, n*d)
	for i := range n {
		for j := range d {
			c[i*d+j] = float32(i*d + j)
			f[j*n+i] = float32(i*d + j)
		}
	}
	shape := fmt.Sprintf("(%d, %d)", n, d)
	for _, fo := range []bool{false, true} {
		data := c
		if fo {
			data = f
		}
		v, err := ParseNPY(bytes.NewReader(npyFile(1, "<f4", fo, shape, npyData(binary.LittleEndian, data))), "big.npy")
		if err != nil {
			t.Fatal(err)
		}
		if v.N != n || v.D != d || !reflect.DeepEqual(v.X, c) {
			t.Errorf("fortran=%v: wrong result", fo)
		}
	}
}

func TestReadNPYErrors(t *testing.T) {
	le := binary.LittleEndian
	good := npyFile(1, "<f4", false, "(2, 3)", npyData(le, []float32{1, 2, 3, 4, 5, 6}))
	tests := []struct {
		name    string
		content []byte
		want    string
	}{
		{"empty", nil, "x.npy: empty file"},
		{"short", []byte("\x93NUM"), "x.npy: truncated"},
		{"bad magic", []byte("PK\x03\x04 this is a zip file......"), `x.npy: not a .npy file: bad magic "PK\x03\x04 t"`},
		{"version 4", append([]byte("\x93NUMPY\x04\x00"), good[8:]...), "x.npy: unsupported .npy format version 4.0"},
		{"truncated header", good[:40], "x.npy: truncated in the header"},
		{"truncated data", good[:len(good)-5], "x.npy: truncated: want 24 bytes of data, have 19"},
		{"no data", good[:len(good)-24], "x.npy: truncated: want 24 bytes of data, have 0"},
		{"unsupported dtype", npyFile(1, "<c8", false, "(1,)", make([]byte, 8)), `x.npy: unsupported dtype "<c8"`},
		{"unicode dtype", npyFile(1, "<U3", false, "(1,)", make([]byte, 12)), `x.npy: unsupported dtype "<U3"`},
		{"object dtype", npyFile(1, "|O", false, "(1,)", make([]byte, 8)), `x.npy: unsupported dtype "|O"`},
		{"scalar", npyFile(1, "<f4", false, "()", make([]byte, 4)), "x.npy: array is a scalar"},
		{"empty array", npyFile(1, "<f4", false, "(0, 3)", nil), "x.npy: empty array (shape (0, 3))"},
		{"huge shape", npyFile(1, "<f8", false, "(4611686018427387904, 4)", nil), "x.npy: implausible shape"},
		{"negative shape", npyFile(1, "<f8", false, "(-1, 4)", nil), "x.npy: implausible shape"},
		// 2⁴⁹ values, more than any machine's memory (sysmem.Total's cap is 2⁵⁰ bytes):
		// refused by the header, not found truncated after reading what the file has.
		{"more than memory", npyFile(1, "<f4", false, "(35184372088832, 16)", make([]byte, 64)), "the array is too large to cluster here"},
		{"NaN", npyFile(1, "<f4", false, "(2, 2)", npyData(le, []float32{1, 2, float32(math.NaN()), 4})), "x.npy: NaN at row 1, column 0"},
		{"Inf", npyFile(1, "<f8", false, "(2, 2)", npyData(le, []float64{1, 2, 3, math.Inf(-1)})), "x.npy: -Inf (or a value out of float32 range) at row 1, column 1"},
		// Was "+Inf at row 0": 1e300 is finite, past float32's range.
		{"past float32", npyFile(1, "<f8", false, "(2, 2)", npyData(le, []float64{1e300, 2, 3, 4})), "x.npy: +Inf (or a value out of float32 range) at row 0, column 0"},
		{"Inf in float32", npyFile(1, "<f4", false, "(2, 2)", npyData(le, []float32{1, 2, 3, float32(math.Inf(1))})), "x.npy: +Inf at row 1, column 1"},
		{"bad header", npyFile(1, "<f4", false, "[2, 3", nil), "x.npy: header"},
		// Was a recursion as deep as the brackets: about 1 GiB of stack for a 1 MiB header.
		{"deep nesting", npyFile(2, "<f4", false, strings.Repeat("[", 1<<19), nil), "nested more than 16 deep"},
		{"structured", []byte(strings.Replace(string(npyFile(1, "XX", false, "(1,)", make([]byte, 8))), "'XX'", "[('a','<f4'),('b','<f4')]", 1)), "structured arrays are not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeVecFile(t, "x.npy", tt.content)
			_, err := ReadNPY(path)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, path) {
				t.Errorf("error %q does not start with the path %q", msg, path)
			}
			msg = strings.ReplaceAll(msg, path, "x.npy")
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %.300q does not contain %q", msg, tt.want)
			}
			if len(msg) > 400 {
				t.Errorf("error of %d bytes; want one short line", len(msg))
			}
		})
	}
}

func TestParseNPYHeader(t *testing.T) {
	h, err := parseNPYHeader(`{"shape": (7, 2), 'fortran_order': True, 'descr': '<f8'}` + "  \n")
	if err != nil {
		t.Fatal(err)
	}
	if h.descr != "<f8" || !h.fortran || !reflect.DeepEqual(h.shape, []int{7, 2}) {
		t.Errorf("got %+v", h)
	}
	for _, bad := range []string{"", "{", "{'descr': '<f4'}", "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "(1, 2)", "{'shape': (1.5,)}"} {
		if _, err := parseNPYHeader(bad); err == nil {
			t.Errorf("parseNPYHeader(%q) succeeded", bad)
		}
	}
}

// A file that holds the rows its header claims is read into one slice of their size,
// not a growing one that would allocate two to three times as much on the way; one
// that holds fewer still fails on its data.
func TestReadNPYAllocatesRowsOnce(t *testing.T) {
	const n, d = 1 << 20, 17 // 17 M values: past the 16 M that a growing slice starts with
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(i % 1000)
	}
	file := npyFile(1, "<f4", false, fmt.Sprintf("(%d, %d)", n, d), npyData(binary.LittleEndian, x))
	x = nil
	dir := t.TempDir()
	path := filepath.Join(dir, "rows.npy")
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.npy")
	if err := os.WriteFile(short, file[:len(file)-4], 0o644); err != nil {
		t.Fatal(err)
	}
	file = nil

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v, err := ReadNPY(path)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	rows := uint64(n * d * 4)
	if got := after.TotalAlloc - before.TotalAlloc; got > rows+rows/8 {
		t.Errorf("reading %d MiB of rows allocated %d MiB, want at most %d", rows>>20, got>>20, (rows+rows/8)>>20)
	}
	if v.N != n || v.D != d || v.X[n*d-1] != float32((n*d-1)%1000) {
		t.Errorf("read %d×%d, last value %v", v.N, v.D, v.X[len(v.X)-1])
	}
	if _, err := ReadNPY(short); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("a file 4 bytes short: %v, want a truncated error", err)
	}
}

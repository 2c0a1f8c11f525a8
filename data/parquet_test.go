package data

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// writeParquet writes rows as a Parquet file of row groups of at most perGroup rows.
// Pages are small, for files of several, unless options say otherwise.
func writeParquet[T any](t testing.TB, path string, rows []T, perGroup int64, options ...parquet.WriterOption) {
	t.Helper()
	var b bytes.Buffer
	options = append([]parquet.WriterOption{parquet.MaxRowsPerRowGroup(perGroup), parquet.PageBufferSize(256)}, options...)
	w := parquet.NewGenericWriter[T](&b, options...)
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

type flatRow struct {
	A     float64 `parquet:"a"`
	B     int32   `parquet:"b"`
	Label string  `parquet:"label,dict"`
	C     float32 `parquet:"c,dict"`
	D     bool    `parquet:"d"`
	E     uint32  `parquet:"e"`
}

// An embedding as pandas and pyarrow write one: a LIST of floats beside the label.
type listRow struct {
	ID  int64     `parquet:"id"`
	Emb []float32 `parquet:"emb,list"`
	Y   int64     `parquet:"y"`
}

// The older form: a repeated field, with no LIST group around it.
type repeatedRow struct {
	Emb []float64 `parquet:"emb"`
}

func TestReadParquet(t *testing.T) {
	dir := t.TempDir()
	var flat []flatRow
	var lists []listRow
	var want, wantLists []float32
	var wantLabels, wantY []int
	for i := range 23 { // five row groups of 5, the last of 3
		f := flatRow{A: float64(i) / 4, B: int32(-i), Label: []string{"cat", "dog", "bird"}[i%3], C: float32(i % 4), D: i%2 == 0, E: math.MaxUint32 - uint32(i)}
		flat = append(flat, f)
		d := float32(0)
		if f.D {
			d = 1
		}
		want = append(want, float32(f.A), float32(f.B), f.C, d, float32(f.E))
		wantLabels = append(wantLabels, []int{1, 2, 0}[i%3]) // bird, cat, dog
		emb := []float32{float32(i), -float32(i) / 8, 0.5}
		lists = append(lists, listRow{ID: int64(100 + i), Emb: emb, Y: int64(i % 2 * 7)})
		wantLists = append(wantLists, float32(100+i))
		wantLists = append(wantLists, emb...)
		wantY = append(wantY, i%2)
	}
	writeParquet(t, filepath.Join(dir, "flat.parquet"), flat, 5)
	writeParquet(t, filepath.Join(dir, "list.parquet"), lists, 5)
	reps := []repeatedRow{{[]float64{1, 2}}, {[]float64{3, 4}}}
	writeParquet(t, filepath.Join(dir, "repeated.parquet"), reps, 1)

	type readCase struct {
		file, labelCol string
		n, d           int
		x              []float32
		labels         []int
		classes        []string
		features       []string
	}
	cases := []readCase{
		{"flat.parquet", "label", 23, 5, want, wantLabels, []string{"bird", "cat", "dog"}, []string{"a", "b", "c", "d", "e"}},
		{"flat.parquet", "2", 23, 5, want, wantLabels, []string{"bird", "cat", "dog"}, nil},
		{"list.parquet", "-1", 23, 4, wantLists, wantY, []string{"0", "7"}, []string{"id", "emb[0]", "emb[1]", "emb[2]"}},
		{"repeated.parquet", "", 2, 2, []float32{1, 2, 3, 4}, nil, nil, []string{"emb[0]", "emb[1]"}},
	}
	// Run-length coded, 300 000 rows take far less room than their values: read
	// into rows grown as they come.
	type constRow struct {
		A float32 `parquet:"a,dict"`
		B int32   `parquet:"b,dict"`
	}
	const many = 300000
	consts := make([]constRow, many)
	wantConsts := make([]float32, 0, 2*many)
	for i := range consts {
		consts[i] = constRow{A: 0.5, B: int32(i / 100000)}
		wantConsts = append(wantConsts, 0.5, float32(i/100000))
	}
	writeParquet(t, filepath.Join(dir, "const.parquet"), consts, 200000, parquet.PageBufferSize(1<<20), parquet.Compression(&parquet.Zstd))
	if st, err := os.Stat(filepath.Join(dir, "const.parquet")); err != nil || st.Size()*16 >= 2*many {
		t.Fatalf("const.parquet: %v, %d bytes: want under %d to read it into grown rows", err, st.Size(), 2*many/16)
	}
	cases = append(cases, readCase{"const.parquet", "", many, 2, wantConsts, nil, nil, []string{"a", "b"}})
	// Integers past float32's 24 bits, and lists of them: each rounded through
	// float64, as floatOf rounds the values of a row's first.
	type intRow struct {
		I int64   `parquet:"i"`
		U uint64  `parquet:"u"`
		L []int64 `parquet:"l,list"`
	}
	odd := []int64{math.MinInt64, -1, 0, 1<<24 + 1, 1<<62 + 1<<38 + 1, math.MaxInt64}
	var ints []intRow
	var wantInts []float32
	for i, x := range odd {
		r := intRow{I: x, U: math.MaxUint64 - uint64(i), L: []int64{x, -x / 3}}
		ints = append(ints, r)
		wantInts = append(wantInts, float32(float64(r.I)), float32(float64(r.U)), float32(float64(r.L[0])), float32(float64(r.L[1])))
	}
	writeParquet(t, filepath.Join(dir, "ints.parquet"), ints, 4)
	cases = append(cases, readCase{"ints.parquet", "", len(odd), 4, wantInts, nil, nil, []string{"i", "u", "l[0]", "l[1]"}})
	// Unsigned labels are named as written, not as the signed numbers stored.
	type uLabelRow struct {
		X float32 `parquet:"x"`
		Y uint32  `parquet:"y"`
		Z uint64  `parquet:"z"`
	}
	writeParquet(t, filepath.Join(dir, "ulabels.parquet"), []uLabelRow{{1, 4000000001, 1 << 63}, {2, 4000000000, 1}}, 10)
	cases = append(cases,
		readCase{"ulabels.parquet", "y", 2, 2, []float32{1, float32(uint64(1) << 63), 2, 1}, []int{1, 0}, []string{"4000000000", "4000000001"}, []string{"x", "z"}},
		readCase{"ulabels.parquet", "z", 2, 2, []float32{1, 4000000001, 2, 4000000000}, []int{1, 0}, []string{"1", "9223372036854775808"}, []string{"x", "y"}})
	for _, c := range cases {
		t.Run(c.file+" "+c.labelCol, func(t *testing.T) {
			widths := 0
			opt := CSVOptions{LabelCol: c.labelCol, Features: func(d int, _ []string) error { widths = d; return nil }}
			v, err := LoadVectors(filepath.Join(dir, c.file), opt)
			if err != nil {
				t.Fatal(err)
			}
			if v.N != c.n || v.D != c.d || widths != c.d {
				t.Fatalf("%d × %d (told %d), want %d × %d", v.N, v.D, widths, c.n, c.d)
			}
			if !reflect.DeepEqual(v.X, c.x) {
				t.Errorf("values\n%v, want\n%v", v.X, c.x)
			}
			if !reflect.DeepEqual(v.Labels, c.labels) || !reflect.DeepEqual(v.Classes, c.classes) {
				t.Errorf("labels %v %v, want %v %v", v.Labels, v.Classes, c.labels, c.classes)
			}
			if c.features != nil && !reflect.DeepEqual(v.Features, c.features) {
				t.Errorf("features %v, want %v", v.Features, c.features)
			}
			// list.parquet's id counts its rows from 100.
			if counting := c.file == "list.parquet"; counting != (len(v.RowCounters) == 1) ||
				counting && v.RowCounters[0] != (Column{`column "id"`, "id"}) {
				t.Errorf("row counters %q", v.RowCounters)
			}
		})
	}
}

func TestReadParquetErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, f func(path string)) string {
		path := filepath.Join(dir, name)
		f(path)
		return path
	}
	type optRow struct {
		X *float64 `parquet:"x,optional"`
	}
	one := 1.0
	nulls := write("nulls.parquet", func(p string) { writeParquet(t, p, []optRow{{&one}, {&one}, {nil}}, 10) })
	type optIntRow struct {
		X *int64 `parquet:"x,optional"`
	}
	seven := int64(7)
	intNulls := write("intnulls.parquet", func(p string) { writeParquet(t, p, []optIntRow{{&seven}, {nil}, {&seven}}, 10) })
	type listRow struct {
		Emb []float32 `parquet:"emb,list"`
	}
	ragged := write("ragged.parquet", func(p string) {
		writeParquet(t, p, []listRow{{[]float32{1, 2}}, {[]float32{1, 2}}, {[]float32{1, 2, 3}}}, 2)
	})
	short := write("short.parquet", func(p string) {
		writeParquet(t, p, []listRow{{[]float32{1, 2}}, {[]float32{1}}}, 10)
	})
	empty := write("emptylist.parquet", func(p string) { writeParquet(t, p, []listRow{{[]float32{1}}, {nil}}, 10) })
	type optListRow struct {
		Emb []*float32 `parquet:"emb,list"`
	}
	two := float32(2)
	nullIn := write("nullin.parquet", func(p string) {
		writeParquet(t, p, []optListRow{{[]*float32{&two, &two}}, {[]*float32{&two, nil}}}, 10)
	})
	type textRow struct {
		X    float32 `parquet:"x"`
		Name string  `parquet:"name"`
	}
	text := write("text.parquet", func(p string) { writeParquet(t, p, []textRow{{1, "a"}, {2, "b"}}, 10) })
	type nanRow struct {
		X float64 `parquet:"x"`
	}
	nan := write("nan.parquet", func(p string) { writeParquet(t, p, []nanRow{{1}, {math.NaN()}}, 10) })
	huge := write("huge.parquet", func(p string) { writeParquet(t, p, []nanRow{{1}, {1e300}}, 10) })
	type nestedRow struct {
		P struct {
			A float32 `parquet:"a"`
			B float32 `parquet:"b"`
		} `parquet:"p"`
	}
	nested := write("nested.parquet", func(p string) { writeParquet(t, p, []nestedRow{{}}, 10) })
	type lolRow struct {
		M [][]float32 `parquet:"m,list"`
	}
	lol := write("lol.parquet", func(p string) { writeParquet(t, p, []lolRow{{[][]float32{{1}}}}, 10) })
	type onlyLabel struct {
		Y string `parquet:"y"`
	}
	labelOnly := write("label.parquet", func(p string) { writeParquet(t, p, []onlyLabel{{"a"}}, 10) })
	noRows := write("norows.parquet", func(p string) { writeParquet(t, p, []nanRow{}, 10) })
	good, err := os.ReadFile(nulls)
	if err != nil {
		t.Fatal(err)
	}
	truncated := write("truncated.parquet", func(p string) { os.WriteFile(p, good[:len(good)-9], 0o644) })
	garbage := write("garbage.parquet", func(p string) { os.WriteFile(p, []byte("x,y\n1,2\n"), 0o644) })
	// A footer whose first list, the schema's, claims 2³¹ − 1 elements: parquet-go
	// made a slice of them all, and the process ended out of memory.
	footer := func(name string, edit func(meta []byte) []byte) string {
		return write(name, func(p string) {
			n := int(binary.LittleEndian.Uint32(good[len(good)-8:]))
			meta := edit(slices.Clone(good[len(good)-8-n : len(good)-8]))
			b := append(slices.Clone(good[:len(good)-8-n]), meta...)
			b = binary.LittleEndian.AppendUint32(b, uint32(len(meta)))
			os.WriteFile(p, append(b, parquetMagic...), 0o644)
		})
	}
	longList := footer("longlist.parquet", func(meta []byte) []byte {
		i := bytes.IndexByte(meta, 0x19) // field 2, a list: the schema
		if i < 0 || meta[i+1]&0xf != thriftStruct {
			t.Fatalf("no schema list in the footer % x", meta)
		}
		return slices.Concat(meta[:i+1], []byte{0xfc, 0xff, 0xff, 0xff, 0xff, 0x07}, meta[i+2:])
	})
	// A struct in a struct, 40 deep, in a field parquet-go does not know.
	deep := footer("deep.parquet", func(meta []byte) []byte {
		nest := slices.Concat(bytes.Repeat([]byte{0x0c, 0xfe, 0x01}, 40), bytes.Repeat([]byte{0}, 40))
		return slices.Concat(meta[:len(meta)-1], nest, meta[len(meta)-1:])
	})

	cases := []struct {
		path, labelCol, header string
		want                   string
	}{
		{nulls, "", "", "nulls.parquet: column \"x\": row 2: a missing value"},
		{intNulls, "", "", "intnulls.parquet: column \"x\": row 1: a missing value"},
		{ragged, "", "", "ragged.parquet: column \"emb\": row 2: more than 2 values, the length of row 0's list"},
		{short, "", "", "short.parquet: column \"emb\": row 1: 1 values, want 2 as in row 0's list"},
		{empty, "", "", "emptylist.parquet: column \"emb\": row 1: a missing list, or one with a missing value"},
		{nullIn, "", "", "nullin.parquet: column \"emb\": row 1: a missing list, or one with a missing value"},
		{text, "", "", "text.parquet: column \"name\" holds text, not numbers to cluster (pass --label-col name if it holds class labels, --id-col name if it names the rows, or --drop-cols name if it is no feature otherwise)"},
		{text, "x", "", "text.parquet: column \"name\" holds text, not numbers to cluster (pass --id-col name if it names the rows, or --drop-cols name if it is no feature otherwise)"},
		{text, "nope", "", "text.parquet: no column \"nope\" for --label-col; its columns are \"x\", \"name\""},
		{text, "2", "", "text.parquet: --label-col 2: out of range, the file has 2 columns"},
		{text, "name", "yes", "text.parquet: --header yes: a Parquet file names its columns itself"},
		{nan, "", "", "nan.parquet: column \"x\": row 1: NaN"},
		{huge, "", "", "huge.parquet: column \"x\": row 1: 1e+300 is out of float32 range"},
		{nested, "", "", "nested.parquet: column \"p\" is a record of 2 fields; emclust reads columns of numbers and of lists of numbers (flatten it, or leave it out with --drop-cols p)"},
		{lol, "", "", "lol.parquet: column \"m\" holds lists of lists; emclust reads columns of numbers and of lists of numbers (leave it out with --drop-cols m)"},
		{labelOnly, "y", "", "label.parquet: no feature columns"},
		{noRows, "", "", "norows.parquet: no rows"},
		{truncated, "", "", "truncated.parquet: damaged Parquet file"},
		{garbage, "", "", "garbage.parquet: not a Parquet file"},
		{longList, "", "", "longlist.parquet: damaged Parquet file: metadata at byte 9 of "},
		{longList, "", "", "a list of 2147483647, with"},
		{deep, "", "", "deep.parquet: damaged Parquet file: metadata at byte"},
		{deep, "", "", "nested too deep"},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.path)+" "+c.labelCol, func(t *testing.T) {
			v, err := LoadVectors(c.path, CSVOptions{LabelCol: c.labelCol, Header: c.header})
			if err == nil {
				t.Fatalf("no error; read %d × %d", v.N, v.D)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want one with %q", err, c.want)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error of more than one line: %q", err)
			}
			// A label column named that the file lacks: a model's, new data may lack it.
			var missing *MissingColumnError
			if want := c.labelCol == "nope"; errors.As(err, &missing) != want || want && missing.Flag != "--label-col" {
				t.Errorf("error %q: a missing column of %v, want one %v", err, missing, want)
			}
		})
	}
}

// A page header is refused where its page would not fit in what is left of its
// column, or would be past maxPageBytes uncompressed and more than maxPageRatio times
// its compressed size: parquet-go allocated what a header said, up to 2 GiB a page,
// before it read the page.
func TestParquetPageHeader(t *testing.T) {
	zigzag := func(v int64) []byte { return binary.AppendUvarint(nil, uint64(v<<1^v>>63)) }
	header := func(uncompressed, compressed int64) []byte {
		b := []byte{0x15, 0x00, 0x15} // type DATA_PAGE; uncompressed_page_size
		b = append(append(b, zigzag(uncompressed)...), 0x15)
		return append(append(b, zigzag(compressed)...), 0x00)
	}
	for _, c := range []struct {
		uncompressed, compressed, body int64
		want                           string
	}{
		{100, 10, 10, ""},
		{300 << 20, 10, 10, "a page of 314572800 bytes uncompressed from 10, more than the 64 MiB or 1100-fold allowed"},
		{300 << 20, 1 << 20, 1 << 20, ""},
		{100, 1 << 30, 10, "a page of 1073741824 bytes, with 10 left in its column"},
		{100, -1, 10, "a page of -1 bytes"},
	} {
		b := append(header(c.uncompressed, c.compressed), make([]byte, c.body)...)
		hdr, body, err := pageHeader(bytes.NewReader(b), 0, int64(len(b)))
		switch {
		case c.want == "" && (err != nil || hdr+body != int64(len(b))):
			t.Errorf("%d, %d: header %d and page %d bytes of %d, %v", c.uncompressed, c.compressed, hdr, body, len(b), err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%d, %d: %v, want an error with %q", c.uncompressed, c.compressed, err, c.want)
		}
	}
}

// A damaged Parquet file is an error, never a panic, and what reads is whole.
func FuzzParquet(f *testing.F) {
	dir := f.TempDir()
	for i, path := range []string{"a.parquet", "b.parquet"} {
		path = filepath.Join(dir, path)
		if i == 0 {
			writeParquet(f, path, []flatRow{{A: 1, Label: "x"}, {A: 2, Label: "y", D: true}, {A: 3, Label: "x"}}, 2)
		} else {
			writeParquet(f, path, []listRow{{ID: 1, Emb: []float32{1, 2}}, {ID: 2, Emb: []float32{3, 4}, Y: 1}}, 1)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "-1")
		f.Add(b, "")
	}
	f.Fuzz(func(t *testing.T, b []byte, labelCol string) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		v, err := parseParquet(bytes.NewReader(b), int64(len(b)), "fuzz.parquet", CSVOptions{LabelCol: labelCol})
		runtime.ReadMemStats(&after)
		// What a file's metadata claims must not make the reader allocate far past
		// what the file holds: past the machine's memory the process ends. A page
		// is allowed maxPageBytes uncompressed, and parquet-go may hold two.
		if grown := after.TotalAlloc - before.TotalAlloc; grown > 2*maxPageBytes+64<<20 {
			t.Fatalf("%d MiB allocated to read %d bytes", grown>>20, len(b))
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.parquet: ") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		if v.N <= 0 || v.D <= 0 || len(v.X) != v.N*v.D || (v.Labels != nil && len(v.Labels) != v.N) {
			t.Errorf("%d × %d with %d values and %d labels", v.N, v.D, len(v.X), len(v.Labels))
		}
		for i, x := range v.X {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("value %d is %v", i, x)
			}
		}
	})
}

// BenchmarkParseParquet reads the table of BenchmarkParseCSV, 50 000 rows of 32
// features and a label, as 32 columns and as one column of lists (an embedding),
// Snappy-compressed as pandas writes them.
func BenchmarkParseParquet(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	type listRow struct {
		Emb   []float32 `parquet:"emb,list"`
		Label int64     `parquet:"label"`
	}
	rows := make([]listRow, 50000)
	for i := range rows {
		rows[i].Emb = make([]float32, 32)
		for j := range rows[i].Emb {
			rows[i].Emb[j] = float32(rng.NormFloat64())
		}
		rows[i].Label = int64(i % 10)
	}
	var lists bytes.Buffer
	if err := parquet.Write(&lists, rows, parquet.Compression(&parquet.Snappy)); err != nil {
		b.Fatal(err)
	}
	// The same values in 32 columns of their own.
	fields := parquet.Group{"label": parquet.Leaf(parquet.Int64Type)}
	for j := range 32 {
		fields[fmt.Sprintf("f%02d", j)] = parquet.Compressed(parquet.Leaf(parquet.FloatType), &parquet.Snappy)
	}
	schema := parquet.NewSchema("table", fields)
	var columns bytes.Buffer
	w := parquet.NewWriter(&columns, schema)
	for _, r := range rows {
		// Columns in name order: f00 to f31, then label.
		row := make(parquet.Row, 0, 33)
		for j, x := range r.Emb {
			row = append(row, parquet.FloatValue(x).Level(0, 0, j))
		}
		row = append(row, parquet.Int64Value(r.Label).Level(0, 0, 32))
		if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	// Counts in 32 int64 columns, as pandas writes integers: each value rounded.
	for j := range 32 {
		fields[fmt.Sprintf("f%02d", j)] = parquet.Compressed(parquet.Leaf(parquet.Int64Type), &parquet.Snappy)
	}
	var ints bytes.Buffer
	w = parquet.NewWriter(&ints, parquet.NewSchema("table", fields))
	for _, r := range rows {
		row := make(parquet.Row, 0, 33)
		for j, x := range r.Emb {
			row = append(row, parquet.Int64Value(int64(math.Round(float64(x)*100))).Level(0, 0, j))
		}
		row = append(row, parquet.Int64Value(r.Label).Level(0, 0, 32))
		if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	for name, in := range map[string][]byte{"lists": lists.Bytes(), "columns": columns.Bytes(), "int-columns": ints.Bytes()} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				v, err := parseParquet(bytes.NewReader(in), int64(len(in)), "bench.parquet", CSVOptions{LabelCol: "label"})
				if err != nil {
					b.Fatal(err)
				}
				first := rows[1].Emb[0]
				if name == "int-columns" {
					first = float32(math.Round(float64(first) * 100))
				}
				if v.N != 50000 || v.D != 32 || v.X[32] != first || v.Labels[3] != 3 {
					b.Fatalf("%d × %d, row 1 starts %v, label 3 is %d", v.N, v.D, v.X[32], v.Labels[3])
				}
			}
		})
	}
}

// --drop-cols leaves out columns of any kind, by name or index, unread; what is
// left, and the label, read as before.
func TestReadParquetDropCols(t *testing.T) {
	type row struct {
		ID   string  `parquet:"id"`
		X    float32 `parquet:"x"`
		Note struct {
			A float32 `parquet:"a"`
			B string  `parquet:"b"`
		} `parquet:"note"`
		M     [][]float32 `parquet:"m,list"`
		Y     float64     `parquet:"y"`
		Label string      `parquet:"label"`
	}
	path := filepath.Join(t.TempDir(), "mixed.parquet")
	writeParquet(t, path, []row{{ID: "a", X: 1, Y: 2, Label: "p"}, {ID: "b", X: 3, Y: 4, Label: "q"}}, 10)

	v, err := LoadVectors(path, CSVOptions{LabelCol: "label", DropCols: []string{"id", "note", "3"}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v.X, []float32{1, 2, 3, 4}) || !reflect.DeepEqual(v.Features, []string{"x", "y"}) ||
		!reflect.DeepEqual(v.Labels, []int{0, 1}) || !reflect.DeepEqual(v.Classes, []string{"p", "q"}) {
		t.Errorf("read %v, features %v, labels %v %v; want [1 2 3 4], [x y], [0 1] [p q]", v.X, v.Features, v.Labels, v.Classes)
	}

	for _, c := range []struct {
		label string
		drop  []string
		want  string
	}{
		{"label", []string{"id", "note"}, `mixed.parquet: column "m" holds lists of lists; emclust reads columns of numbers and of lists of numbers (leave it out with --drop-cols m)`},
		{"label", []string{"id", "note", "m", "label"}, `mixed.parquet: column "label" is both the label column and a dropped column`},
		{"label", []string{"nope"}, `mixed.parquet: no column "nope" for --drop-cols; its columns are "id", "x", "note", "m", "y", "label"`},
		{"label", []string{"6"}, "mixed.parquet: --drop-cols 6: out of range, the file has 6 columns"},
		{"label", []string{"0", "1", "2", "3", "4"}, "mixed.parquet: no feature columns: each is the label or dropped (--drop-cols)"},
	} {
		_, err := LoadVectors(path, CSVOptions{LabelCol: c.label, DropCols: c.drop})
		if err == nil || !strings.HasPrefix(err.Error(), filepath.Dir(path)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--drop-cols %v: %v, want an error with %q", c.drop, err, c.want)
		}
	}
}

// A Parquet ID column of text or integers is kept as the rows' IDs, not features.
func TestReadParquetIDs(t *testing.T) {
	type row struct {
		Key  string  `parquet:"key"`
		Num  uint64  `parquet:"num"`
		X    float32 `parquet:"x"`
		Tags []int32 `parquet:"tags,list"`
	}
	path := filepath.Join(t.TempDir(), "ids.parquet")
	writeParquet(t, path, []row{{"a", 1 << 63, 1, []int32{1}}, {"b", 2, 2, []int32{2}}, {"a", 3, 3, []int32{3}}}, 2)
	for _, tc := range []struct {
		id, drop string
		ids      []string
		x        []float32
		err      string
	}{
		{"key", "", []string{"a", "b", "a"}, []float32{9223372036854775808, 1, 1, 2, 2, 2, 3, 3, 3}, ""},
		{"1", "key", []string{"9223372036854775808", "2", "3"}, []float32{1, 1, 2, 2, 3, 3}, ""},
		{"tags", "key", nil, nil, `ids.parquet: ID column "tags" holds lists; want one ID a row`},
		{"nope", "key", nil, nil, `ids.parquet: no column "nope" for --id-col`},
	} {
		opt := CSVOptions{IDCol: tc.id}
		if tc.drop != "" {
			opt.DropCols = []string{tc.drop}
		}
		v, err := LoadVectors(path, opt)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("--id-col %s: %v, want an error with %q", tc.id, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(v.IDs, tc.ids) || !reflect.DeepEqual(v.X, tc.x) {
			t.Errorf("--id-col %s: IDs %q, values %v; want %q, %v", tc.id, v.IDs, v.X, tc.ids, tc.x)
		}
	}
}

// A missing or empty label is a row without a class, clustered and not scored; a
// label column with no class at all is refused.
func TestReadParquetUnlabelled(t *testing.T) {
	type row struct {
		X float32 `parquet:"x"`
		Y *string `parquet:"y,optional"`
	}
	a, b, blank, na := "a", "b", " ", "NA"
	dir := t.TempDir()
	some := filepath.Join(dir, "some.parquet")
	writeParquet(t, some, []row{{1, &b}, {2, nil}, {3, &a}, {4, &blank}, {5, &b}, {6, &na}}, 2)
	none := filepath.Join(dir, "none.parquet")
	writeParquet(t, none, []row{{1, nil}, {2, &blank}}, 10)

	v, err := LoadVectors(some, CSVOptions{LabelCol: "y"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, Unlabelled, 0, Unlabelled, 1, Unlabelled}; !reflect.DeepEqual(v.Labels, want) || !reflect.DeepEqual(v.Classes, []string{"a", "b"}) {
		t.Errorf("labels %v, classes %q; want %v, [a b]", v.Labels, v.Classes, want)
	}
	if !reflect.DeepEqual(v.X, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("values %v", v.X)
	}
	// A float label column's NaN is a missing class too.
	type floatRow struct {
		X float32 `parquet:"x"`
		Y float64 `parquet:"y"`
	}
	floats := filepath.Join(dir, "floats.parquet")
	writeParquet(t, floats, []floatRow{{1, 2}, {2, math.NaN()}, {3, 1}}, 10)
	v, err = LoadVectors(floats, CSVOptions{LabelCol: "y"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, Unlabelled, 0}; !reflect.DeepEqual(v.Labels, want) {
		t.Errorf("float labels %v (classes %q), want %v", v.Labels, v.Classes, want)
	}
	_, err = LoadVectors(none, CSVOptions{LabelCol: "y"})
	if want := `none.parquet: label column "y": no row has a class (every label cell is empty or NA); to cluster without scoring, give --drop-cols y in place of --label-col`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one with %q", err, want)
	}
	// New rows for a model to assign: no labels, the column still no feature.
	if v, err := LoadVectors(none, CSVOptions{LabelCol: "y", ClasslessLabels: true}); err != nil || v.Labels != nil || v.D != 1 {
		t.Errorf("classless labels of new rows: %v, %+v", err, v)
	}
}

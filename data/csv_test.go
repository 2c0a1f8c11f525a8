package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// writeVecFile writes content to a file called name in a fresh temporary
// directory and returns its path.
func writeVecFile(t *testing.T, name string, content []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func gzipVecBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadCSV(t *testing.T) {
	tests := []struct {
		name     string
		file     string
		content  string
		opt      CSVOptions
		n, d     int
		x        []float32
		labels   []int
		classes  []string
		features []string
	}{
		{
			name:    "no header, no labels",
			content: "1,2,3\n4,5,6\n",
			n:       2, d: 3,
			x: []float32{1, 2, 3, 4, 5, 6},
		},
		{
			name:    "auto header",
			content: "a,b\n1,2\n3,4\n",
			n:       2, d: 2,
			x:        []float32{1, 2, 3, 4},
			features: []string{"a", "b"},
		},
		{
			// Was silently dropped as a "header": the mark made the first cell text.
			name:    "byte-order mark, no header",
			content: "\ufeff1,2\n3,4\n",
			n:       2, d: 2,
			x: []float32{1, 2, 3, 4},
		},
		{
			// Labelled in part: the empty cells' rows are clustered, not scored. The
			// first row's empty label cell does not make it a header.
			name:    "empty label cells",
			content: "1,2, \n3,4,b\n5,6,\n7,8,a\n",
			opt:     CSVOptions{LabelCol: "2"},
			n:       4, d: 2,
			x:       []float32{1, 2, 3, 4, 5, 6, 7, 8},
			labels:  []int{Unlabelled, 1, Unlabelled, 0},
			classes: []string{"a", "b"},
		},
		{
			// New rows for a model to assign, their label cells left empty: no labels
			// (training refuses such a column: TestReadCSVErrors).
			name:    "a classless label column of new rows",
			content: "x,y,label\n1,2,\n3,4,NA\n",
			opt:     CSVOptions{LabelCol: "label", ClasslessLabels: true},
			n:       2, d: 2,
			x:        []float32{1, 2, 3, 4},
			features: []string{"x", "y"},
		},
		{
			// Missing values as pandas reads them, and R writes them; "None" may be a class.
			name:    "NA label cells",
			content: "x,y\n1,NA\n2,b\n3,NaN\n4,None\n5,<NA>\n6,null\n",
			opt:     CSVOptions{LabelCol: "y"},
			n:       6, d: 1,
			x:        []float32{1, 2, 3, 4, 5, 6},
			labels:   []int{Unlabelled, 1, Unlabelled, 0, Unlabelled, Unlabelled},
			classes:  []string{"None", "b"},
			features: []string{"x"},
		},
		{
			// The first row alone without a class says nothing of a header: it
			// was read as the class of the header's name, and indexed as one.
			name:    "first row alone unlabelled",
			content: "1.0,2.0,\n1.1,2.1,0\n5.0,6.0,1\n5.1,6.1,1\n1.2,2.2,0\n",
			opt:     CSVOptions{LabelCol: "-1"},
			n:       5, d: 2,
			x:       []float32{1, 2, 1.1, 2.1, 5, 6, 5.1, 6.1, 1.2, 2.2},
			labels:  []int{Unlabelled, 0, 1, 1, 0},
			classes: []string{"0", "1"},
		},
		{
			name:    "byte-order mark before a header",
			content: "\ufeffa,label\n1,x\n3,y\n",
			opt:     CSVOptions{LabelCol: "label"},
			n:       2, d: 1,
			x:        []float32{1, 3},
			labels:   []int{0, 1},
			classes:  []string{"x", "y"},
			features: []string{"a"},
		},
		{
			name:    "numeric first row is data",
			content: "1,2\n3,4\n",
			opt:     CSVOptions{Header: "auto"},
			n:       2, d: 2,
			x: []float32{1, 2, 3, 4},
		},
		{
			name:    "forced header",
			content: "10,20\n3,4\n",
			opt:     CSVOptions{Header: "yes"},
			n:       1, d: 2,
			x:        []float32{3, 4},
			features: []string{"10", "20"},
		},
		{
			name:    "label by name",
			content: "x,y,class\n1,2,b\n3,4,a\n5,6,b\n",
			opt:     CSVOptions{LabelCol: "class"},
			n:       3, d: 2,
			x:        []float32{1, 2, 3, 4, 5, 6},
			labels:   []int{1, 0, 1},
			classes:  []string{"a", "b"},
			features: []string{"x", "y"},
		},
		{
			name:    "label by name in the middle",
			content: "x,class,y\n1,b,2\n3,a,4\n",
			opt:     CSVOptions{LabelCol: "class"},
			n:       2, d: 2,
			x:        []float32{1, 2, 3, 4},
			labels:   []int{1, 0},
			classes:  []string{"a", "b"},
			features: []string{"x", "y"},
		},
		{
			name:    "label by index",
			content: "7,1,2\n3,3,4\n",
			opt:     CSVOptions{LabelCol: "0"},
			n:       2, d: 2,
			x:       []float32{1, 2, 3, 4},
			labels:  []int{1, 0},
			classes: []string{"3", "7"},
		},
		{
			name:    "label -1, integer labels sort numerically",
			content: "1,2,10\n3,4,2\n5,6,10\n7,8,-1\n",
			opt:     CSVOptions{LabelCol: "-1"},
			n:       4, d: 2,
			x:       []float32{1, 2, 3, 4, 5, 6, 7, 8},
			labels:  []int{2, 1, 2, 0},
			classes: []string{"-1", "2", "10"},
		},
		{
			// Its class on no other line, but its values among theirs: data, not names.
			name:    "a first row of a class of its own",
			content: "1.0,2.0,9\n1.1,2.1,0\n1.2,2.2,0\n1.3,2.3,1\n",
			opt:     CSVOptions{LabelCol: "-1"},
			n:       4, d: 2,
			x:       []float32{1.0, 2.0, 1.1, 2.1, 1.2, 2.2, 1.3, 2.3},
			labels:  []int{2, 0, 0, 1},
			classes: []string{"0", "1", "9"},
		},
		{
			name:    "string labels sort lexically",
			content: "1,cat\n2,dog\n3,ant\n4,cat\n",
			opt:     CSVOptions{LabelCol: "-1"},
			n:       4, d: 1,
			x:       []float32{1, 2, 3, 4},
			labels:  []int{1, 2, 0, 1},
			classes: []string{"ant", "cat", "dog"},
		},
		{
			name:    "header auto ignores a non-numeric label cell",
			content: "1,2,label\n3,4,x\n",
			opt:     CSVOptions{LabelCol: "2"},
			n:       2, d: 2,
			x:        []float32{1, 2, 3, 4},
			labels:   []int{0, 1},
			classes:  []string{"label", "x"},
			features: nil,
		},
		{
			name:    "semicolons, comments, blanks, spaces, quotes",
			content: "# made by hand\n\n a ; \"b\"\n 1 ; 2.5 \n   \n# more\n-3;4e2\n",
			n:       2, d: 2,
			x:        []float32{1, 2.5, -3, 400},
			features: []string{"a", "b"},
		},
		{
			name:    "tabs",
			content: "1\t2\t3\n4\t5\t6\n",
			n:       2, d: 3,
			x: []float32{1, 2, 3, 4, 5, 6},
		},
		{
			name:    "blank-separated like np.savetxt",
			file:    "x.txt",
			content: "# header\n1.000000000000000000e+00 2.000000000000000000e+00\n  3   4\n",
			n:       2, d: 2,
			x: []float32{1, 2, 3, 4},
		},
		{
			name:    "single column",
			content: "1\n2\n",
			n:       2, d: 1,
			x: []float32{1, 2},
		},
		{
			name:    "columns dropped by name and by index",
			content: "id,a,note,b,label\n7,1,hi there,2,x\n8,3,,4,y\n",
			opt:     CSVOptions{LabelCol: "label", DropCols: []string{"id", " 2"}},
			n:       2, d: 2,
			x:        []float32{1, 2, 3, 4},
			labels:   []int{0, 1},
			classes:  []string{"x", "y"},
			features: []string{"a", "b"},
		},
		{
			// The dropped text is not taken for a header's names.
			name:    "a text ID dropped by index, no header",
			content: "A1,1,2\nA2,3,4\n",
			opt:     CSVOptions{DropCols: []string{"0"}},
			n:       2, d: 2,
			x: []float32{1, 2, 3, 4},
		},
		{
			// pandas' to_csv writes its index first, under an empty name.
			name:    "pandas' index dropped",
			content: ",a,b\n0,1,2\n1,3,4\n",
			opt:     CSVOptions{DropCols: []string{"-3"}},
			n:       2, d: 2,
			x:        []float32{1, 2, 3, 4},
			features: []string{"a", "b"},
		},
		{
			name:    "CRLF line endings",
			content: "a,b\r\n1,2\r\n",
			n:       1, d: 2,
			x:        []float32{1, 2},
			features: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := tt.file
			if file == "" {
				file = "x.csv"
			}
			path := writeVecFile(t, file, []byte(tt.content))
			v, err := ReadCSV(path, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if v.N != tt.n || v.D != tt.d {
				t.Errorf("shape %d×%d, want %d×%d", v.N, v.D, tt.n, tt.d)
			}
			if !reflect.DeepEqual(v.X, tt.x) {
				t.Errorf("X = %v, want %v", v.X, tt.x)
			}
			if !reflect.DeepEqual(v.Labels, tt.labels) {
				t.Errorf("Labels = %v, want %v", v.Labels, tt.labels)
			}
			if !reflect.DeepEqual(v.Classes, tt.classes) {
				t.Errorf("Classes = %q, want %q", v.Classes, tt.classes)
			}
			if !reflect.DeepEqual(v.Features, tt.features) {
				t.Errorf("Features = %q, want %q", v.Features, tt.features)
			}
			if v.Source != path {
				t.Errorf("Source = %q, want %q", v.Source, path)
			}
			if err := v.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestReadCSVGzip(t *testing.T) {
	content := []byte("a,b,y\n1,2,u\n3,4,v\n")
	// Detection is by magic bytes, so the name need not end in .gz.
	for _, name := range []string{"x.csv.gz", "x.csv"} {
		path := writeVecFile(t, name, gzipVecBytes(t, content))
		v, err := ReadCSV(path, CSVOptions{LabelCol: "y"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if v.N != 2 || v.D != 2 || !reflect.DeepEqual(v.X, []float32{1, 2, 3, 4}) ||
			!reflect.DeepEqual(v.Labels, []int{0, 1}) || !reflect.DeepEqual(v.Classes, []string{"u", "v"}) {
			t.Errorf("%s: got %+v", name, v)
		}
	}
}

// A gzipped file's trailer sizes its text: exactly for one member, not at all for
// several whose last is shorter than the file, and not for a file that is not gzip.
// Either way the rows read are the text's.
func TestGzipSize(t *testing.T) {
	var text strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&text, "%d,%d.5\n", i, i%7)
	}
	one := gzipVecBytes(t, []byte(text.String()))
	two := append(gzipVecBytes(t, []byte(text.String())), gzipVecBytes(t, []byte("1,2\n"))...)
	want, err := ParseCSV(strings.NewReader(text.String()+"1,2\n"), "t.csv", CSVOptions{Header: "no"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		size int64
	}{
		{"one member", one, int64(text.Len())},
		{"two members", two, -1},
		{"plain text", []byte(text.String()), -1},
	} {
		path := writeVecFile(t, "g.csv", tc.b)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got := gzipSize(f, fileSize(f))
		f.Close()
		if got != tc.size {
			t.Errorf("%s: size %d, want %d", tc.name, got, tc.size)
		}
		if tc.name == "two members" {
			v, err := ReadCSV(path, CSVOptions{Header: "no"})
			if err != nil || !slices.Equal(v.X, want.X) {
				t.Errorf("%s: %v, %d values; want the %d of both members", tc.name, err, len(v.X), len(want.X))
			}
		}
	}
}

// The unzipping goroutine stops with the read: after a bad row early in a large
// gzipped table, and after a whole one, none is left; and a stream cut short still
// says so.
func TestAheadReaderStops(t *testing.T) {
	var text strings.Builder
	text.WriteString("1,2\n1,x\n")
	for i := range 200000 {
		fmt.Fprintf(&text, "%d,%d\n", i, i%7)
	}
	z := gzipVecBytes(t, []byte(text.String()))
	before := runtime.NumGoroutine()
	if _, err := ParseCSV(bytes.NewReader(z), "t.csv.gz", CSVOptions{Header: "no"}); err == nil || !strings.Contains(err.Error(), "t.csv.gz:2") {
		t.Errorf("a bad second row: %v", err)
	}
	if _, err := ParseCSV(bytes.NewReader(gzipVecBytes(t, []byte("1,2\n3,4\n"))), "t.csv.gz", CSVOptions{Header: "no"}); err != nil {
		t.Error(err)
	}
	clean := gzipVecBytes(t, []byte(strings.Replace(text.String(), "1,x\n", "", 1)))
	if _, err := ParseCSV(bytes.NewReader(clean[:len(clean)/2]), "t.csv.gz", CSVOptions{Header: "no"}); err == nil || !strings.Contains(err.Error(), "gzip data: ") {
		t.Errorf("cut short: %v", err)
	}
	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(time.Second); after > before && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond) // the parse's own workers, on their way out
	}
	if after > before {
		t.Errorf("%d goroutines before, %d after", before, after)
	}
}

func TestReadCSVErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		opt     CSVOptions
		want    []string // substrings of the error, besides the file name
		missing string   // the flag of a MissingColumnError, which new data may lack
	}{
		{
			name:    "not a number, with header name",
			content: "a,b,c,pixel_3\n1,2,3,4\n1,2,3,abc\n",
			want:    []string{`x.csv:3: column 3 ("pixel_3"): "abc" is not a number`},
		},
		{
			name:    "UTF-16 with its byte-order mark",
			content: "\xff\xfea\x00,\x00b\x00\n\x001\x00,\x002\x00\n\x00",
			want:    []string{"x.csv: UTF-16 text; save it as UTF-8"},
		},
		{
			name:    "UTF-16 without one",
			content: "a\x00,\x00b\x00\n\x001\x00,\x002\x00\n\x00",
			want:    []string{"x.csv: UTF-16 text"},
		},
		{
			// Was one line of the whole file, quoted in a message as column names.
			name:    "lines ending in CR alone",
			content: "a,b,label\r1,2,x\r3,4,y\r",
			want:    []string{"x.csv: lines end in CR alone", `tr '\r' '\n'`},
		},
		{
			name:    "an underscore is no digit separator here",
			content: "1_0,2\n3,4\n",
			opt:     CSVOptions{Header: "no"},
			want:    []string{`x.csv:1: column 0: "1_0" is not a number`},
		},
		{
			name:    "not a number, no header",
			content: "1,2\n3,x\n",
			opt:     CSVOptions{Header: "no"},
			want:    []string{`x.csv:2: column 1: "x" is not a number`},
		},
		{
			name:    "line numbers count comments and blank lines",
			content: "# c\n1,2\n\n# c\n3,oops\n",
			want:    []string{`x.csv:5: column 1: "oops" is not a number`},
		},
		{
			name:    "NaN",
			content: "1,2,3\n1,2,3\n4,5,NaN\n",
			want:    []string{"x.csv:3: NaN in column 2"},
		},
		{
			name:    "Inf",
			content: "a,b\n1,2\n4,-inf\n",
			want:    []string{`x.csv:3: -Inf in column 1 ("b")`},
		},
		{
			name:    "float32 overflow",
			content: "1,2\n4,1e300\n",
			want:    []string{`x.csv:2: column 1: "1e300" is out of float32 range`},
		},
		{
			name:    "empty cell",
			content: "1,2\n4,\n",
			want:    []string{"x.csv:2: column 1: empty cell (a missing value: fill it, or leave the row out; if column 1 holds class labels, some left empty, pass --label-col 1; if it is no feature, --drop-cols 1)"},
		},
		{
			// Was "empty cell" alone: a table labelled in part, its label column unnamed.
			name:    "empty cell in a named column",
			content: "id,a,label\nx,1,c0\ny,2,\n",
			opt:     CSVOptions{IDCol: "id"},
			want:    []string{`x.csv:2: column 2 ("label"): "c0" is not a number`},
		},
		{
			name:    "empty cell in a named column first",
			content: "id,a,label\nx,1,\ny,2,c0\n",
			opt:     CSVOptions{IDCol: "id"},
			want:    []string{`x.csv:2: column 2 ("label"): empty cell (a missing value: fill it, or leave the row out; if column 2 ("label") holds class labels, some left empty, pass --label-col label; if it is no feature, --drop-cols label)`},
		},
		{
			name:    "empty cell with a label column",
			content: "a,b,label\n1,,c0\n",
			opt:     CSVOptions{LabelCol: "label"},
			want:    []string{`x.csv:2: column 1 ("b"): empty cell (a missing value: fill it, or leave the row out; if it is no feature, --drop-cols b)`},
		},
		{
			name:    "ragged",
			content: "1,2,3\n4,5,6\n7,8\n",
			want:    []string{"x.csv:3: 2 fields, want 3"},
		},
		{
			name:    "empty file",
			content: "",
			want:    []string{"x.csv: no data rows"},
		},
		{
			name:    "comments only",
			content: "# nothing\n\n",
			want:    []string{"x.csv: no data rows"},
		},
		{
			name:    "header only",
			content: "a,b,c\n",
			want:    []string{"x.csv: no data rows"},
		},
		{
			name:    "label column name not found",
			content: "a,b,c\n1,2,3\n",
			opt:     CSVOptions{LabelCol: "foo"},
			want:    []string{`x.csv: no column "foo"; columns are: a, b, c`},
			missing: "--label-col",
		},
		{
			name:    "label column name but no header",
			content: "1,2,3\n1,2,3\n",
			opt:     CSVOptions{LabelCol: "foo"},
			want:    []string{`x.csv: label column "foo" is given by name, but line 1 is data`},
			missing: "--label-col",
		},
		{
			name:    "label column name with header no",
			content: "a,b\n1,2\n",
			opt:     CSVOptions{LabelCol: "a", Header: "no"},
			want:    []string{`x.csv: label column "a" is given by name, but the file has no header`},
			missing: "--label-col",
		},
		{
			name:    "label index out of range",
			content: "1,2,3\n",
			opt:     CSVOptions{LabelCol: "3"},
			want:    []string{"x.csv: label column 3 out of range: line 1 has 3 columns"},
		},
		{
			name:    "negative label index out of range",
			content: "1,2,3\n",
			opt:     CSVOptions{LabelCol: "-4"},
			want:    []string{"x.csv: label column -4 out of range"},
		},
		{
			name:    "only a label column",
			content: "y\na\nb\n",
			opt:     CSVOptions{LabelCol: "y"},
			want:    []string{`x.csv: no feature columns: the only column, column 0 ("y"), is the label`},
		},
		{
			name:    "every label cell empty",
			content: "1,\n2, \n",
			opt:     CSVOptions{LabelCol: "-1"},
			want:    []string{"x.csv: column 1: no row has a class (every label cell is empty or NA); to cluster without scoring, give --drop-cols 1 in place of --label-col"},
		},
		{
			name:    "csv syntax error",
			content: "1,2\n3,4\"x\n",
			want:    []string{"x.csv:2:", `bare " in non-quoted-field`},
		},
		// Was "x.csv:1: column 0: empty cell", though --help calls such a line a header.
		{
			name:    "first line of empty cells",
			content: ",,\n1,2,3\n4,5,6\n",
			want:    []string{"x.csv:1: every cell of line 1 is empty: a header without names? say --header yes to skip it"},
		},
		{
			name:    "first line of empty cells but the label's",
			content: ",,class\n1,2,a\n4,5,b\n",
			opt:     CSVOptions{LabelCol: "2"},
			want:    []string{"x.csv:1: every cell but the label column's of line 1 is empty"},
		},
		{
			name:    "dropped column name not found",
			content: "a,b,c\n1,2,3\n",
			opt:     CSVOptions{DropCols: []string{"a", "foo"}},
			want:    []string{`x.csv: no column "foo" to drop; columns are: a, b, c`},
			missing: "--drop-cols",
		},
		{
			name:    "dropped column name but no header",
			content: "1,2,3\n1,2,3\n",
			opt:     CSVOptions{DropCols: []string{"a"}},
			want:    []string{`x.csv: dropped column "a" is given by name, but line 1 is data`},
			missing: "--drop-cols",
		},
		{
			name:    "dropped index out of range",
			content: "1,2,3\n",
			opt:     CSVOptions{DropCols: []string{"-4"}},
			want:    []string{"x.csv: dropped column -4 out of range: line 1 has 3 columns"},
			missing: "--drop-cols",
		},
		{
			name:    "the label dropped by index",
			content: "a,b,c\n1,2,x\n",
			opt:     CSVOptions{LabelCol: "c", DropCols: []string{"2"}},
			want:    []string{`x.csv: column 2 ("c") is both a dropped column and the label column`},
		},
		{
			name:    "the label dropped by name",
			content: "a,b,c\n1,2,x\n",
			opt:     CSVOptions{LabelCol: "-1", DropCols: []string{"c"}},
			want:    []string{`x.csv: column 2 ("c") is both the label column and a dropped column`},
		},
		{
			name:    "every feature dropped",
			content: "a,b,c\n1,2,x\n",
			opt:     CSVOptions{LabelCol: "c", DropCols: []string{"a", "b"}},
			want:    []string{"x.csv: no feature columns: each of the 3 is the label or dropped (--drop-cols)"},
		},
		{
			name:    "an ID's text beside a label column",
			content: "a,id,label\n1,x7,c\n",
			opt:     CSVOptions{LabelCol: "label"},
			want:    []string{`x.csv:2: column 1 ("id"): "x7" is not a number (pass --id-col id if it names the rows, or --drop-cols id if it is no feature otherwise)`},
		},
		{
			// "none" would say no column, and a name twice would be ambiguous.
			name:    "words under a header named none, and twice",
			content: "a,none,c,c\n1,x,2,y\n",
			want:    []string{`"x" is not a number (pass --label-col 1 if column 1 ("none") holds class labels, --id-col 1 if it names the rows, or --drop-cols 1 if it is no feature otherwise)`},
		},
		{
			name:    "a name of digits",
			content: "a,2020\n1,2\n",
			opt:     CSVOptions{DropCols: []string{"2020"}},
			want:    []string{"x.csv: dropped column 2020 out of range: line 1 has 2 columns (a column named 2020 is given by its index, 1)"},
			missing: "--drop-cols",
		},
		{
			name:    "first line of empty cells but the dropped ones",
			content: ",,id\n1,2,a\n4,5,b\n",
			opt:     CSVOptions{DropCols: []string{"2"}},
			want:    []string{"x.csv:1: every cell of a feature column of line 1 is empty"},
		},
		// Was x.csv:6:8, the end of the file, where the reader gave up.
		{
			name:    "quote never closed",
			content: "1,2\n3,4\n5,\"6\n7,8\n9,10\n",
			want:    []string{`x.csv:3: the quoted field that opens on this line runs to line 5, where it fails: extraneous or missing " in quoted-field`},
		},
		{
			name:    "explicit delimiter beats detection",
			content: "1;2,3\n4;5,6\n",
			opt:     CSVOptions{Comma: ';', Header: "no"},
			want:    []string{`x.csv:1: column 1: "2,3" is not a number`},
		},
		{
			name:    "bad header option",
			content: "1\n",
			opt:     CSVOptions{Header: "maybe"},
			want:    []string{`x.csv: header option "maybe"`},
		},
		{
			name:    "string labels without a label column",
			content: "1,2,cat\n",
			want:    []string{"x.csv:1: column 0 is a number and column 2 is not (\"cat\")", "--header yes or --header no"},
		},
		{
			// Was taken for a header, and the row dropped without a word.
			name:    "a missing value in the first row",
			content: "1.0,,3.0\n4,5,6\n",
			want:    []string{"x.csv:1: column 0 is a number and column 1 is empty: is line 1 a header?"},
		},
		{
			// pandas' header of a frame's default columns.
			name:    "numeric names after an empty one",
			content: ",0,1\n0,5,6\n",
			want:    []string{"x.csv:1: column 1 is a number and column 0 is empty", "--header yes"},
		},
		{
			name:    "NA in the first row",
			content: "1,NA,3\n4,5,6\n",
			want:    []string{"x.csv:1: column 0 is a number and column 1 is not (\"NA\")", "is line 1 a header?"},
		},
		{
			name:    "a huge cell is quoted in part",
			content: "a,b\n1," + strings.Repeat("x", 100000) + "\n",
			want:    []string{`x.csv:2: column 1 ("b"): "xxxxxxxxxx`, "… (100000 bytes) is not a number"},
		},
		{
			name:    "string labels without a label column, after numbers",
			content: "1,2,3\n1,2,cat\n",
			want:    []string{`x.csv:2: column 2: "cat" is not a number (pass --label-col 2 if column 2 holds class labels, --id-col 2 if it names the rows, or --drop-cols 2 if it is no feature otherwise)`},
		},
		{
			// iris with a header and no --label-col: the likeliest cause is named.
			name:    "class names under a header",
			content: "sepal,petal,label\n5.1,1.4,setosa\n",
			want:    []string{`x.csv:2: column 2 ("label"): "setosa" is not a number (pass --label-col label if column 2 ("label") holds class labels, --id-col label if it names the rows, or --drop-cols label if it is no feature otherwise)`},
		},
		{
			name:    "class names in line 1",
			content: "5.1,1.4,setosa\n",
			want:    []string{`is line 1 a header? say --header yes or --header no; or, if column 2 holds class labels, --label-col 2`},
		},
		{
			// Were ":2: 1 fields, want 5", and a hint to pass --label-col with the PNG's bytes.
			name:    "an array named .csv",
			content: "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n",
			want:    []string{"x.csv: a NumPy array, not text; give it as a .npy file"},
		},
		{
			name:    "decimal commas",
			content: "a;b\n1,5;2,25\n",
			want:    []string{`x.csv:2: column 0 ("a"): "1,5" is not a number (a decimal comma? emclust reads decimal points only`},
		},
		{
			name:    "a Parquet file named .csv",
			content: "PAR1\x15\x04\x15",
			want:    []string{"x.csv: a Parquet file, not text; give it as a .parquet file"},
		},
		{
			name:    "one column of commas",
			content: "a,b,c\n1,2,3\n",
			opt:     CSVOptions{Comma: '\t'},
			want:    []string{`x.csv:2: column 0 ("a,b,c"): "1,2,3" is not a number (the file reads as one column`},
		},
		{
			name:    "a PNG named .csv",
			content: "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
			want:    []string{"x.csv: a PNG image, not a table"},
		},
		{
			name:    "binary",
			content: "1,2,3\n4,\x00,6\n",
			want:    []string{"x.csv: binary data (a 0 byte at byte 8), not a text table"},
		},
		{
			// Was read as a row of class "class", 400 spreads from the rest.
			name:    "numeric names beside the label's, label by index",
			content: "400,410,class\n0.03,0.5,a\n0.04,0.6,b\n0.02,0.4,a\n",
			opt:     CSVOptions{LabelCol: "-1"},
			want:    []string{`x.csv:1: the label "class" is on no other line: is line 1 a header of numeric names? say --header yes or --header no`},
		},
		{
			// pandas' header for an array's columns, beside the label's name.
			name:    "a header of pandas' column numbers, label by index",
			content: "0,1,2,label\n0.5,3,2,a\n0.7,2,2,b\n0.1,3,1,a\n",
			opt:     CSVOptions{LabelCol: "-1"},
			want:    []string{`x.csv:1: the label "label" is on no other line: is line 1 a header of numeric names? say --header yes or --header no`},
		},
		{
			// np.column_stack([X, y]) through pandas: the label's name is a class too.
			name:    "a header of pandas' column numbers over the label's",
			content: "0,1,2,3\n0.5,3,2,1\n0.7,2,2,3\n0.1,3,1,1\n",
			opt:     CSVOptions{LabelCol: "-1"},
			want:    []string{"x.csv:1: line 1 numbers the columns, as pandas names an array's: is it a header? say --header yes or --header no"},
		},
		{
			name:    "a header of pandas' column numbers after the label's",
			content: "0,1,2,3\na,3,2,1\nb,2,2,3\na,3,1,1\n",
			opt:     CSVOptions{LabelCol: "0"},
			want:    []string{"x.csv:1: ", "is line 1 a header"},
		},
		{
			// pandas' to_csv(index_label="id") over an array's columns.
			name:    "a header of column numbers beside an ID's name",
			content: "id,0,1,2\n7,0.5,3,2\n8,0.7,2,2\n9,0.1,3,1\n",
			opt:     CSVOptions{IDCol: "0"},
			want:    []string{"x.csv:1: line 1 numbers the columns"},
		},
		{
			name:    "a header of wavelengths beside an ID's name",
			content: "id,400,500\n7,0.5,0.25\n8,0.7,0.5\n9,0.1,0.5\n",
			opt:     CSVOptions{IDCol: "0"},
			want:    []string{`x.csv:1: the ID "id" is the only one that is not a number: is line 1 a header of numeric names? say --header yes or --header no`},
		},
		{
			name:    "a header's label name among numbered classes",
			content: "3,5,target\n0.5,3,0\n0.7,2,1\n0.1,3,0\n",
			opt:     CSVOptions{LabelCol: "2"},
			want:    []string{`x.csv:1: the label "target" is on no other line: is line 1 a header of numeric names?`},
		},
		{
			name:    "a word with a label column given",
			content: "5.1,x,setosa\n4,5,b\n",
			opt:     CSVOptions{Header: "no", LabelCol: "2"},
			want:    []string{`x.csv:1: column 1: "x" is not a number`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeVecFile(t, "x.csv", []byte(tt.content))
			v, err := ReadCSV(path, tt.opt)
			if err == nil {
				t.Fatalf("no error; got %+v", v)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, path) {
				t.Errorf("error %q does not start with the path %q", msg, path)
			}
			// The messages name the path; compare them with the base name.
			msg = strings.ReplaceAll(msg, path, "x.csv")
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			var missing *MissingColumnError
			if errors.As(err, &missing) != (tt.missing != "") || tt.missing != "" && missing.Flag != tt.missing {
				t.Errorf("error %q: a missing column of %v, want one of %q", msg, missing, tt.missing)
			}
		})
	}
}

// CSVOptions.Features hears the feature columns' count, the label's aside, before
// any row but the first is read: its error comes back where a later bad row would
// have ended the read, and a nil error reads on. The first data row's own error
// comes before it.
func TestParseCSVFeatures(t *testing.T) {
	const table = "a,b,label\n1,2,x\n3,4,y\n5,oops,z\n"
	stop := errors.New("the model takes 3")
	for _, tc := range []struct {
		name, labelCol string
		refuse         bool
		want           string // error prefix, "" for none; heard: the count heard
		heard          int
	}{
		{"refused", "label", true, "the model takes 3", 2},
		{"accepted, then the bad row", "label", false, "t.csv:4:", 2},
		{"no label column: the first row's error first", "", true, "t.csv:2:", 0},
	} {
		heard := 0
		_, err := ParseCSV(strings.NewReader(table), "t.csv", CSVOptions{LabelCol: tc.labelCol, Header: "yes", Features: func(d int, names []string) error {
			heard = d
			if want := []string{"a", "b"}; !slices.Equal(names, want) {
				t.Errorf("%s: heard the names %q, want %q", tc.name, names, want)
			}
			if tc.refuse {
				return stop
			}
			return nil
		}})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || heard != tc.heard {
			t.Errorf("%s: heard %d, err %v; want %d and an error beginning %q", tc.name, heard, err, tc.heard, tc.want)
		}
	}
}

func TestReadCSVMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.csv")
	_, err := ReadCSV(path, CSVOptions{})
	if err == nil || !strings.Contains(err.Error(), "open "+path) || !os.IsNotExist(err) {
		t.Fatalf("err = %v, want a not-exist error naming %s", err, path)
	}
}

func TestParseCSVBadGzip(t *testing.T) {
	_, err := ParseCSV(bytes.NewReader([]byte{0x1f, 0x8b, 1, 2, 3}), "bad.csv.gz", CSVOptions{})
	if err == nil || !strings.HasPrefix(err.Error(), "bad.csv.gz: ") {
		t.Fatalf("err = %v, want an error naming bad.csv.gz", err)
	}
	// Cut short, and with bytes after its end: was a bare "unexpected EOF".
	whole := gzipVecBytes(t, []byte("a,b\n1,2\n3,4\n"))
	for name, b := range map[string][]byte{"cut": whole[:len(whole)-6], "garbage after": append(slices.Clone(whole), "garbage"...)} {
		_, err := ParseCSV(bytes.NewReader(b), "t.csv.gz", CSVOptions{})
		if err == nil || !strings.Contains(err.Error(), "t.csv.gz") || !strings.Contains(err.Error(), "gzip data: ") {
			t.Errorf("%s: err = %v, want the gzip data named", name, err)
		}
	}
}

// A line past maxLineBytes is refused with its number, as it streams in, plain or
// gzipped, whatever the delimiter: the gzip of a line of 800 MB without a newline
// is 3 MB, and was held whole (6.6 GB of memory) before an error.
func TestParseCSVLongLine(t *testing.T) {
	long := func() io.Reader {
		return io.MultiReader(strings.NewReader("a,b\n1,2\n# note\n3,"), io.LimitReader(repeatByte('4'), maxLineBytes+1))
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.Copy(zw, long())
	zw.Close()
	spaced := io.MultiReader(strings.NewReader("1 2\n3 "), io.LimitReader(repeatByte('4'), maxLineBytes+1))
	for _, tc := range []struct {
		name string
		r    io.Reader
		line int
	}{{"plain", long(), 4}, {"gzip", &gz, 4}, {"blank-separated", spaced, 2}} {
		_, err := ParseCSV(tc.r, "x.csv", CSVOptions{})
		if want := fmt.Sprintf("x.csv:%d: a line longer than 64 MiB", tc.line); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %v, want one starting %q", tc.name, err, want)
		}
	}
	// One short of the limit is a cell like any other.
	v, err := ParseCSV(io.MultiReader(strings.NewReader("1,"), io.LimitReader(repeatByte('0'), maxLineBytes-3), strings.NewReader("\n")), "x.csv", CSVOptions{})
	if err != nil || v.N != 1 {
		t.Errorf("a line of %d bytes: %v", maxLineBytes-1, err)
	}
}

// Values past the memory bound are refused by the line that passes it, not held until
// the process dies: a gzip of 1 MB can hold 3 GB of "0,0,0\n". The bound here is 64
// KiB, which 4096 rows of four float32 values make, or 2730 with an int label each.
func TestParseCSVBeyondMemory(t *testing.T) {
	rows := func(n int, label bool) []byte {
		var b bytes.Buffer
		for i := range n {
			// Not 0,1,2,3 on line 1, which pandas' names for an array's columns are.
			if label {
				fmt.Fprintf(&b, "%d,5,6,7,%d\n", i, i%3)
			} else {
				fmt.Fprintf(&b, "%d,5,6,7\n", i)
			}
		}
		return b.Bytes()
	}
	gzipped := func(b []byte) []byte {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(b)
		zw.Close()
		return gz.Bytes()
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		body  []byte
		label string
		fits  int // the most rows that fit
	}{
		{"plain", rows(5000, false), "", 4096},
		{"gzip", gzipped(rows(5000, false)), "", 4096},
		{"labels", rows(5000, true), "-1", 2730},
		{"plain, presized", rows(100000, false), "", 4096}, // the file's share would reserve all 100 000
	} {
		path := filepath.Join(dir, "x.csv")
		if err := os.WriteFile(path, tc.body, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadCSV(path, CSVOptions{LabelCol: tc.label, maxBytes: 64 << 10})
		want := fmt.Sprintf("%s:%d: the %d rows so far take 0 MiB, more than 0 MiB", path, tc.fits+1, tc.fits)
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %v, want one starting %q", tc.name, err, want)
		}
		// Rows that fit are read as always.
		if err := os.WriteFile(path, rows(tc.fits, tc.label != ""), 0o644); err != nil {
			t.Fatal(err)
		}
		v, err := ReadCSV(path, CSVOptions{LabelCol: tc.label, maxBytes: 64 << 10})
		if err != nil || v.N != tc.fits {
			t.Errorf("%s: %d rows: %v", tc.name, tc.fits, err)
		}
	}
}

type repeatByte byte

func (b repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestSniffCSVComma(t *testing.T) {
	tests := []struct {
		head string
		want rune
	}{
		{"", ','},
		{"1", ','},
		{"1,2,3", ','},
		{"1;2;3", ';'},
		{"1\t2\t3", '\t'},
		{"# a;b;c\n1,2", ','},
		{"\n\n1\t2", '\t'},
		{`"a,b";c;d`, ';'},
		{"1 2 3", ' '},
		{"a b\t1", '\t'},
	}
	for _, tt := range tests {
		if got := sniffComma([]byte(tt.head)); got != tt.want {
			t.Errorf("sniffComma(%q) = %q, want %q", tt.head, got, tt.want)
		}
	}
}

// CSVOptions.Alloc gives the array a file's values are parsed into, once: the rows
// are there when the file's size foretold them, and in Go's heap when later rows,
// shorter than the first, outgrew the estimate. Either way they are the rows
// ParseCSV reads without it. A .npy file's go there too.
func TestReadCSVAlloc(t *testing.T) {
	dir := t.TempDir()
	var even, outgrown strings.Builder
	even.WriteString("a,b,c\n")
	outgrown.WriteString("a,b,c\n")
	for i := range 20000 {
		fmt.Fprintf(&even, "%d.5,%d.25,%d\n", i, i%7, i%3)
		if i < 2000 {
			fmt.Fprintf(&outgrown, "%d.123456789,%d.123456789,%d.123456789\n", i, i, i)
		} else {
			fmt.Fprintf(&outgrown, "%d,%d,%d\n", i%10, i%10, i%10) // a third as long
		}
	}
	for _, tc := range []struct {
		name, text string
		held       bool
		gzip       bool
	}{{"even", even.String(), true, false}, {"outgrown", outgrown.String(), false, false}, {"gzipped", even.String(), true, true}} {
		path := filepath.Join(dir, tc.name+".csv")
		b := []byte(tc.text)
		if tc.gzip {
			b = gzipVecBytes(t, b)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		want, err := ParseCSV(strings.NewReader(tc.text), path, CSVOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var given []float32
		calls := 0
		got, err := LoadVectors(path, CSVOptions{Alloc: func(n int) []float32 {
			calls++
			given = make([]float32, n)
			return given
		}})
		if err != nil {
			t.Fatal(err)
		}
		held := calls == 1 && unsafe.SliceData(got.X) == unsafe.SliceData(given)
		if calls != 1 || held != tc.held || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Alloc called %d times, rows held there %v (want %v), rows as without it %v",
				tc.name, calls, held, tc.held, reflect.DeepEqual(got, want))
		}
	}

	want := &Vectors{X: []float32{1, 2, 3, 4, 5, 6}, N: 3, D: 2}
	path := filepath.Join(dir, "x.npy")
	if err := os.WriteFile(path, npyFile(1, "<f4", false, "(3, 2)", npyData(binary.LittleEndian, want.X)), 0o644); err != nil {
		t.Fatal(err)
	}
	var given []float32
	got, err := LoadVectors(path, CSVOptions{Alloc: func(n int) []float32 { given = make([]float32, n); return given }})
	if err != nil || !slices.Equal(got.X, want.X) || unsafe.SliceData(got.X) != unsafe.SliceData(given) {
		t.Errorf(".npy: %v, rows %v, held in Alloc's array %v", err, got, given != nil && unsafe.SliceData(got.X) == unsafe.SliceData(given))
	}
}

// An uncompressed file read from disk gets its values' slice sized from the share of
// it parsed after the first 4 MiB or sixteenth: the bytes allocated stay near the
// values' own size plus the text's records, where a slice grown by appending
// allocated several times the values. The rows are those ParseCSV reads from the same
// bytes, and those of the file gzipped, which is read as before.
func TestReadCSVPresizes(t *testing.T) {
	const n, d = 200000, 20
	var b strings.Builder
	b.WriteString("f0")
	for j := 1; j < d; j++ {
		fmt.Fprintf(&b, ",f%d", j)
	}
	b.WriteString(",label\n")
	for i := range n {
		for j := range d {
			fmt.Fprintf(&b, "%.4f,", float64((i*7+j*13)%1000)/7)
		}
		fmt.Fprintf(&b, "%d\n", i%10)
	}
	text := []byte(b.String())
	b = strings.Builder{}
	want, err := ParseCSV(bytes.NewReader(text), "rows.csv", CSVOptions{LabelCol: "label"})
	if err != nil {
		t.Fatal(err)
	}
	values := uint64(n * d * 4)
	for _, tc := range []struct {
		name    string
		content []byte
	}{{"rows.csv", text}, {"rows.csv.gz", gzipVecBytes(t, text)}} {
		path := writeVecFile(t, tc.name, tc.content)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		v, err := ReadCSV(path, CSVOptions{LabelCol: "label"})
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		// The records' text, the labels' ints, the values and 3% more, and the
		// values grown by appending up to the first 4 MiB or sixteenth.
		limit := uint64(len(text)) + uint64(n*8) + values*2
		if got := after.TotalAlloc - before.TotalAlloc; got > limit && tc.name == "rows.csv" {
			t.Errorf("%s: reading %d KiB of text and %d KiB of values allocated %d KiB, want at most %d", tc.name, len(text)>>10, values>>10, got>>10, limit>>10)
		}
		if v.N != n || !slices.Equal(v.X, want.X) || !slices.Equal(v.Labels, want.Labels) {
			t.Errorf("%s: %d rows, values equal %v, labels equal %v", tc.name, v.N, slices.Equal(v.X, want.X), slices.Equal(v.Labels, want.Labels))
		}
	}
}

// A header's names survive a run's config.json as they are read: a Latin-1 header
// ("Größe" from a German spreadsheet) was kept as its bytes, which JSON writes as
// U+FFFD each, so that the run's own file no longer matched its model.
func TestHeaderNamesSurviveJSON(t *testing.T) {
	for _, head := range []string{"Gr\xf6\xdfe,Temp \xb0C,ok", "a\xffb,\xe2\x82,c\xc3", "plain,names,here"} {
		v, err := ParseCSV(strings.NewReader(head+"\n1,2,3\n4,5,6\n"), "latin1.csv", CSVOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(v.Features)
		if err != nil {
			t.Fatal(err)
		}
		var back []string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, v.Features) {
			t.Errorf("header %q: names %q come back from JSON as %q", head, v.Features, back)
		}
	}
}

// A feature column that goes up by one a row is named as a row counter, by the
// column --drop-cols would take; one that does not, or in fewer than
// MinCountedRows rows, is not.
func TestRowCounters(t *testing.T) {
	table := func(header string, n int, row func(i int) string) string {
		var b strings.Builder
		b.WriteString(header)
		for i := range n {
			b.WriteString(row(i) + "\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, content string
		opt           CSVOptions
		want          []Column
	}{
		{"pandas' index", table(",a,b\n", 10, func(i int) string { return fmt.Sprintf("%d,%d.5,%d", i, i%3, -i*i) }), CSVOptions{},
			[]Column{{`column 0 ("")`, "0"}}},
		{"an ID after the label, no header", table("", 12, func(i int) string { return fmt.Sprintf("c%d,0.5,%d", i%2, 1001+i) }), CSVOptions{LabelCol: "0"},
			[]Column{{"column 2", "2"}}},
		{"two, one named by index", table("n,4,x\n", 9, func(i int) string { return fmt.Sprintf("%d,%d,%d", i+1, i-3, i%2) }), CSVOptions{Header: "yes"},
			[]Column{{`column 0 ("n")`, "n"}, {`column 1 ("4")`, "1"}}},
		{"too few rows", table("", MinCountedRows-1, func(i int) string { return fmt.Sprintf("%d,1", i) }), CSVOptions{}, nil},
		{"a gap", table("", 10, func(i int) string { return fmt.Sprintf("%d,1", i+i/9) }), CSVOptions{}, nil},
		{"counting down", table("", 10, func(i int) string { return fmt.Sprintf("%d,1", 10-i) }), CSVOptions{}, nil},
		{"halves", table("", 10, func(i int) string { return fmt.Sprintf("%g,1", float64(i)+0.5) }), CSVOptions{}, nil},
		{"dropped", table("id,a\n", 10, func(i int) string { return fmt.Sprintf("%d,%d", i, i%4) }), CSVOptions{DropCols: []string{"id"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseCSV(strings.NewReader(tc.content), "x.csv", tc.opt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v.RowCounters, tc.want) {
				t.Errorf("RowCounters %q, want %q", v.RowCounters, tc.want)
			}
		})
	}
}

// --id-col's cells are kept as the rows' IDs, as written (trimmed), and are not
// features; a column has one role.
func TestReadCSVIDs(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		opt           CSVOptions
		ids           []string
		idName        string
		x             []float32
		err           string
	}{
		{name: "by name", content: "a,key,label\n1, k1 ,x\n2,,y\n3,k1,x\n", opt: CSVOptions{LabelCol: "label", IDCol: "key"},
			ids: []string{"k1", "", "k1"}, idName: "key", x: []float32{1, 2, 3}},
		{name: "by index, no header", content: "7,0.5\n8,1.5\n", opt: CSVOptions{IDCol: "0"},
			ids: []string{"7", "8"}, idName: "", x: []float32{0.5, 1.5}},
		{name: "beside a dropped column", content: "id,when,a\nx,monday,1\ny,tuesday,2\n", opt: CSVOptions{IDCol: "-3", DropCols: []string{"when"}},
			ids: []string{"x", "y"}, idName: "id", x: []float32{1, 2}},
		{name: "the label", content: "a,b\n1,x\n", opt: CSVOptions{LabelCol: "b", IDCol: "b"}, err: `x.csv: column 1 ("b") is both the label column and the ID column`},
		{name: "dropped", content: "a,b,c\n1,x,2\n", opt: CSVOptions{IDCol: "1", DropCols: []string{"b"}}, err: `x.csv: column 1 ("b") is both the ID column and a dropped column`},
		{name: "missing", content: "a,b\n1,2\n", opt: CSVOptions{IDCol: "key"}, err: `x.csv: no column "key" for the IDs; columns are: a, b`},
		{name: "out of range", content: "1,2\n", opt: CSVOptions{IDCol: "2"}, err: "x.csv: ID column 2 out of range: line 1 has 2 columns"},
		{name: "the only column", content: "k\nx\n", opt: CSVOptions{IDCol: "k"}, err: "x.csv: no feature columns: each of the 1 is the label, the IDs or dropped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseCSV(strings.NewReader(tc.content), "x.csv", tc.opt)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err && !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				var missing *MissingColumnError
				if errors.As(err, &missing) != (tc.name == "missing" || tc.name == "out of range") {
					t.Errorf("%v: a MissingColumnError is a column the table lacks", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v.IDs, tc.ids) || v.IDName != tc.idName || !reflect.DeepEqual(v.X, tc.x) {
				t.Errorf("IDs %q named %q, values %v; want %q named %q, %v", v.IDs, v.IDName, v.X, tc.ids, tc.idName, tc.x)
			}
		})
	}
}

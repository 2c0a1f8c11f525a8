package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"image/jpeg"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The readers of outside bytes take anything without a panic, and what they accept
// is self-consistent. `go test` runs the seeds (f.Add and testdata/fuzz); `go test
// -fuzz FuzzX ./data` searches further.

func checkVectors(t *testing.T, v *Vectors) {
	t.Helper()
	if v.N < 1 || v.D < 1 || len(v.X) != v.N*v.D {
		t.Fatalf("accepted %d×%d with %d values", v.N, v.D, len(v.X))
	}
	if v.Features != nil && len(v.Features) != v.D {
		t.Fatalf("%d feature names for %d columns", len(v.Features), v.D)
	}
	if v.Labels != nil {
		if len(v.Labels) != v.N {
			t.Fatalf("%d labels for %d rows", len(v.Labels), v.N)
		}
		for _, l := range v.Labels {
			if l != Unlabelled && (l < 0 || l >= len(v.Classes)) {
				t.Fatalf("label %d outside the %d classes", l, len(v.Classes))
			}
		}
		if CountLabelled(v.Labels) == 0 {
			t.Fatalf("a label column of %d rows with no class accepted", v.N)
		}
	}
}

func checkImages(t *testing.T, im *Images) {
	t.Helper()
	if len(im.Pix) != im.N*im.C*im.H*im.W {
		t.Fatalf("accepted %d images of %dx%dx%d with %d bytes", im.N, im.C, im.H, im.W, len(im.Pix))
	}
	if im.Labels != nil && len(im.Labels) != im.N {
		t.Fatalf("%d labels for %d images", len(im.Labels), im.N)
	}
}

func FuzzParseCSV(f *testing.F) {
	for _, seed := range []string{
		"a,b,label\n1,2,x\n3,4,y\n",
		"\ufeff1;2\n3;4\n",
		"1 2 3\n4 5 6\n",
		"\"a\",\"b\"\n\"1\",2\n",
		"# comment\n1\t2\n",
		"x,y\n1e38,-1e38\nNaN,1\n",
		"1.0,2.0,\n1.1,2.1,0\n5.0,6.0,1\n5.1,6.1,1\n", // the first row alone without a class
	} {
		f.Add([]byte(seed), "", "auto", "")
		f.Add([]byte(seed), "-1", "yes", "")
		f.Add([]byte(seed), "", "auto", "0,b")
	}
	f.Fuzz(func(t *testing.T, b []byte, labelCol, header, drop string) {
		opt := CSVOptions{LabelCol: labelCol, Header: header}
		if drop != "" {
			opt.DropCols = strings.Split(drop, ",")
		}
		v, err := ParseCSV(bytes.NewReader(b), "fuzz.csv", opt)
		if err == nil {
			checkVectors(t, v)
		}
	})
}

func FuzzParseNPY(f *testing.F) {
	f.Add([]byte("\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }" +
		"          \n\x00\x00\x80?\x00\x00\x00@\x00\x00@@\x00\x00\x80@"))
	f.Add([]byte("\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': True, 'shape': (2, 1), }" +
		"          \n\x00\x00\x00\x00\x00\x00\xf0?\x00\x00\x00\x00\x00\x00\x00@"))
	f.Add([]byte("\x93NUMPY\x02\x00\x10\x00\x00\x00{'shape': (9999999999999, 99999999)}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseNPY(bytes.NewReader(b), "fuzz.npy")
		if err == nil {
			checkVectors(t, v)
		}
	})
}

func FuzzReadIDX(f *testing.F) {
	f.Add(idxImagesBytes(2, 3, 3, 0))
	f.Add([]byte{0, 0, 8, 1, 0, 0, 0, 2, 7, 9})
	f.Add([]byte{0, 0, 8, 3, 0, 0, 0, 16, 0x40, 0, 0, 0, 0x40, 0, 0, 0})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(dir, "fuzz-idx")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if im, err := ReadIDXImages(path); err == nil {
			checkImages(t, im)
		}
		if l, err := ReadIDXLabels(path); err == nil && len(l) != len(b)-8 {
			t.Fatalf("%d labels from %d bytes", len(l), len(b))
		}
	})
}

// FuzzCIFARAndSTL10 writes the fuzzed bytes as every file of a CIFAR-10, CIFAR-100
// and STL-10 folder.
func FuzzCIFARAndSTL10(f *testing.F) {
	rec := make([]byte, 1+cifarImageBytes)
	rec[0] = 3
	f.Add(rec)
	f.Add(append([]byte{0, 19}, make([]byte, cifarImageBytes)...))
	f.Add(make([]byte, stlImageBytes))
	f.Add([]byte{1})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, name := range []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
			"data_batch_5.bin", "test_batch.bin", "train.bin", "test.bin",
			"train_X.bin", "train_y.bin", "test_X.bin", "test_y.bin"} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, load := range []func(string) (*Images, error){LoadCIFAR10, LoadCIFAR100, LoadSTL10} {
			if im, err := load(dir); err == nil {
				checkImages(t, im)
			}
		}
	})
}

// FuzzImageFolder decodes the fuzzed bytes as a PNG and as a JPEG in a folder of one
// class, kept as it is and resized.
func FuzzImageFolder(f *testing.F) {
	f.Add(pngBytes(f, patternImage(0, 3, 2)))
	f.Add(pngWithSize(f, 100000, 100000))
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, patternImage(1, 4, 4), nil); err != nil {
		f.Fatal(err)
	}
	f.Add(jb.Bytes())
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, name := range []string{"a.png", "b.jpg"} {
			d := filepath.Join(dir, name[:1])
			os.MkdirAll(filepath.Join(d, "cats"), 0o755)
			if err := os.WriteFile(filepath.Join(d, "cats", name), b, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, size := range []int{0, 5} {
				if im, err := LoadImageFolder(d, size, size == 5); err == nil {
					checkImages(t, im)
				}
			}
		}
	})
}

// plainRecords, the splitter of lines without quotes, gives encoding/csv's cells,
// line numbers and errors on any input, through small buffers so that lines span
// reads; from a quote on it hands over to encoding/csv.
func FuzzPlainRecords(f *testing.F) {
	for _, s := range []string{"a,b\n1,2\n", "1,2\r\n\r\n#c\n3,4", "1, 2\n\"x\",3\n4,5\n", " \n1\r", "1,\"a\nb\",3\n4,5,6\n", "a;b\n", "\n\n1\t2\n", "1,2\na\"b,3\n"} {
		f.Add([]byte(s), byte(','))
		f.Add([]byte(s), byte('\t'))
	}
	f.Fuzz(func(t *testing.T, in []byte, comma byte) {
		if comma != ',' && comma != '\t' && comma != ';' {
			return
		}
		a := &csvRecords{r: newCSVReader(bufio.NewReaderSize(bytes.NewReader(in), 16), rune(comma))}
		b := &plainRecords{r: bufio.NewReaderSize(bytes.NewReader(in), 16), comma: comma}
		for i := 0; ; i++ {
			ra, la, ea := a.next()
			ra = slices.Clone(ra)
			rb, lb, eb := b.next()
			if (ea == nil) != (eb == nil) || (ea != nil && ea.Error() != eb.Error()) {
				t.Fatalf("rec %d: errors %v vs %v", i, ea, eb)
			}
			if ea != nil {
				return
			}
			tr := func(r []string) []string {
				out := make([]string, len(r))
				for i, c := range r {
					out[i] = strings.TrimSpace(c)
				}
				return out
			}
			if !slices.Equal(tr(ra), tr(rb)) || la != lb {
				t.Fatalf("rec %d: %q line %d vs %q line %d", i, ra, la, rb, lb)
			}
		}
	})
}

// Workers parse rows as the reader alone does, in batches of any size.
func FuzzCSVWorkers(f *testing.F) {
	for _, s := range []string{"a,b,label\n1,2,x\n3,,y\n", "1,2\n3,4,5\n", "1,x\n2,3\n", "1,2,\n3,4,a\n", "1;2\n\"3\";4\n5;NaN\n"} {
		f.Add([]byte(s), "-1", uint8(0))
		f.Add([]byte(s), "", uint8(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, labelCol string, batch uint8) {
		opt := CSVOptions{LabelCol: labelCol, workers: 1}
		want, wantErr := parseCSV(bytes.NewReader(in), "f.csv", opt, int64(len(in)), -1)
		opt.workers, opt.batchRows = 3, 1+int(batch%4)
		got, err := parseCSV(bytes.NewReader(in), "f.csv", opt, int64(len(in)), -1)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("serial: %v, %v\nworkers: %v, %v", want, wantErr, got, err)
		}
	})
}

// A gzipped table reads as its text does, unzipped ahead of the parse and presized
// from a trailer's size, right or wrong.
func FuzzGzipCSV(f *testing.F) {
	for _, s := range []string{"a,b,label\n1,2,x\n3,,y\n", "1,2\n3,4,5\n", "1;2\n\"3\";4\n5;6\n", "x\n1\n2\n3\n4\n5\n6\n7\n8\n9\n"} {
		f.Add([]byte(s), "-1", int64(len(s)))
		f.Add([]byte(s), "", int64(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, labelCol string, unzipped int64) {
		opt := CSVOptions{LabelCol: labelCol}
		want, wantErr := parseCSV(bytes.NewReader(in), "f.csv", opt, int64(len(in)), -1)
		var z bytes.Buffer
		zw := gzip.NewWriter(&z)
		zw.Write(in)
		zw.Close()
		got, err := parseCSV(bytes.NewReader(z.Bytes()), "f.csv", opt, int64(z.Len()), unzipped)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("text: %v, %v\ngzipped: %v, %v", want, wantErr, got, err)
		}
	})
}

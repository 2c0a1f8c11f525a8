package data

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

func TestLoadVectorsCSVNPY(t *testing.T) {
	csv := []byte("1,2\n3,4\n")
	tsv := []byte("a\tb,c\n1\t2\n3\t4\n") // a comma in the header would fool detection
	npy := npyFile(1, "<f4", false, "(2, 2)", npyData(binary.LittleEndian, []float32{1, 2, 3, 4}))
	want := []float32{1, 2, 3, 4}
	for _, tc := range []struct {
		name    string
		content []byte
	}{
		{"x.csv", csv},
		{"X.CSV", csv},
		{"x.txt", csv},
		{"x.csv.gz", gzipVecBytes(t, csv)},
		{"x.txt.gz", gzipVecBytes(t, csv)},
		{"x.tsv", tsv},
		{"x.tsv.gz", gzipVecBytes(t, tsv)},
		{"x.npy", npy},
	} {
		path := writeVecFile(t, tc.name, tc.content)
		v, err := LoadVectors(path, CSVOptions{})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if v.N != 2 || v.D != 2 || !reflect.DeepEqual(v.X, want) {
			t.Errorf("%s: got %d×%d %v", tc.name, v.N, v.D, v.X)
		}
	}
}

func TestLoadVectorsCSVErrors(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"x.h5", "x", "x.npy.gz", "x.parquet.gz", "x.gz"} {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte("1\n"), 0o644)
		_, err := LoadVectors(path, CSVOptions{})
		if err == nil || !strings.Contains(err.Error(), path+": unknown vector file type; want .csv") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	for _, name := range []string{"missing.csv", "missing.npy"} {
		path := filepath.Join(dir, name)
		_, err := LoadVectors(path, CSVOptions{})
		if err == nil || !os.IsNotExist(err) || err.Error() != "open "+path+": no such file or directory" {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// A pipe has no name to go by (a shell's <(zcat t.csv.gz) is /dev/fd/63): what it
// starts with says how to read it. A named pipe of a known type is read by its name.
func TestLoadVectorsFromPipe(t *testing.T) {
	csv := []byte("x,y\n1,2\n3,4\n")
	npy := npyFile(1, "<f4", false, "(2, 2)", npyData(binary.LittleEndian, []float32{1, 2, 3, 4}))
	for _, tc := range []struct {
		name    string
		content []byte
		fifo    string // a named pipe of this name, else an anonymous one as /dev/fd/N
	}{
		{"csv", csv, ""},
		{"gzip", gzipVecBytes(t, csv), ""},
		{"npy", npy, ""},
		{"named csv", csv, "t.csv"},
		{"named npy", npy, "t.npy"},
		{"named without a type", csv, "t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var path string
			var w *os.File
			if tc.fifo != "" {
				path = filepath.Join(t.TempDir(), tc.fifo)
				if err := syscall.Mkfifo(path, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				r, pw, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				path, w = fmt.Sprintf("/dev/fd/%d", r.Fd()), pw
			}
			done := make(chan error, 1)
			go func() {
				if w == nil {
					var err error
					if w, err = os.OpenFile(path, os.O_WRONLY, 0); err != nil {
						done <- err
						return
					}
				}
				_, err := w.Write(tc.content)
				w.Close()
				done <- err
			}()
			v, err := LoadVectors(path, CSVOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if v.N != 2 || v.D != 2 || !reflect.DeepEqual(v.X, []float32{1, 2, 3, 4}) {
				t.Errorf("got %d×%d %v", v.N, v.D, v.X)
			}
		})
	}
	// A label column of an array through a pipe is refused as of a .npy file.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.Write(npy) // fits in the pipe's buffer
	w.Close()
	if _, err := LoadVectors(fmt.Sprintf("/dev/fd/%d", r.Fd()), CSVOptions{LabelCol: "0"}); err == nil || !strings.Contains(err.Error(), "NumPy array, which has no label column") {
		t.Errorf("--label-col of a piped array: err = %v", err)
	}
	// A device is no data (a terminal's /dev/stdin: a resume would wait on it).
	if _, err := LoadVectors("/dev/null", CSVOptions{}); err == nil || !strings.Contains(err.Error(), "/dev/null is a terminal or device") {
		t.Errorf("a device: err = %v", err)
	}
	// A pipe gone (a run trained on one, resumed later) is named as such.
	_, err = LoadVectors("/dev/fd/987654", CSVOptions{})
	if err == nil || !strings.Contains(err.Error(), "/dev/fd/987654: no such pipe or device") {
		t.Errorf("a closed pipe: err = %v", err)
	}
}

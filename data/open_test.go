package data

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
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
	for _, name := range []string{"x.parquet", "x", "x.npy.gz", "x.gz"} {
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

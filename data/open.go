package data

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LoadVectors reads a vector file, choosing the reader by extension: .csv,
// .tsv and .txt (optionally gzip-compressed, as .csv.gz and so on) are
// delimited text read with opt, and .npy is a NumPy array, for which opt is
// ignored. A .tsv file is tab-separated unless opt.Comma says otherwise.
func LoadVectors(path string, opt CSVOptions) (*Vectors, error) {
	if err := CheckVectorPath(path); err != nil {
		return nil, err
	}
	base := strings.ToLower(filepath.Base(path))
	base = strings.TrimSuffix(base, ".gz")
	switch filepath.Ext(base) {
	case ".csv", ".txt":
		return ReadCSV(path, opt)
	case ".tsv":
		if opt.Comma == 0 {
			opt.Comma = '\t'
		}
		return ReadCSV(path, opt)
	case ".npy":
		if strings.HasSuffix(strings.ToLower(path), ".gz") {
			break
		}
		return ReadNPY(path)
	}
	return nil, CheckVectorPath(path)
}

// CheckVectorPath says what is wrong with path as a vector file LoadVectors can
// read, before it is read: a folder, or a name of no known type. nil otherwise.
func CheckVectorPath(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a folder; want a vector file (.csv, .tsv or .txt, each optionally .gz, or .npy), or images with --dataset folder --data-dir %s", path, path)
	}
	base := strings.TrimSuffix(strings.ToLower(filepath.Base(path)), ".gz")
	switch ext := filepath.Ext(base); {
	case ext == ".csv" || ext == ".tsv" || ext == ".txt":
		return nil
	case ext == ".npy" && !strings.HasSuffix(strings.ToLower(path), ".gz"):
		return nil
	}
	return fmt.Errorf("%s: unknown vector file type; want .csv, .tsv or .txt (each optionally .gz) or .npy", path)
}

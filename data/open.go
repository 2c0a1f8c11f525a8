package data

import (
	"fmt"
	"path/filepath"
	"strings"
)

// LoadVectors reads a vector file, choosing the reader by extension: .csv,
// .tsv and .txt (optionally gzip-compressed, as .csv.gz and so on) are
// delimited text read with opt, and .npy is a NumPy array, for which opt is
// ignored. A .tsv file is tab-separated unless opt.Comma says otherwise.
func LoadVectors(path string, opt CSVOptions) (*Vectors, error) {
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
	return nil, fmt.Errorf("%s: unknown vector file type; want .csv, .tsv or .txt (each optionally .gz) or .npy", path)
}

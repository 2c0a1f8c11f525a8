package data

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// LoadVectors reads a vector file, choosing the reader by extension: .csv,
// .tsv and .txt (optionally gzip-compressed, as .csv.gz and so on) are
// delimited text read with opt, .npy is a NumPy array, for which opt is
// ignored, and .parquet a Parquet file (ReadParquet). A .tsv file is tab-separated unless opt.Comma says otherwise. A pipe
// or device of no such name (a shell's <(zcat t.csv.gz), /dev/stdin) is read by
// its first bytes: a .npy array, or delimited text, gzip-compressed or not.
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
		if err := arrayColumns(path, opt); err != nil {
			return nil, err
		}
		return readNPY(path, opt.Alloc)
	case ".parquet":
		if strings.HasSuffix(strings.ToLower(path), ".gz") {
			break
		}
		return ReadParquet(path, opt)
	}
	if IsStream(path) {
		return readStream(path, opt)
	}
	return nil, CheckVectorPath(path)
}

// IsStream says whether path is a pipe or socket, or a name in /dev or /proc for
// a file open there (/dev/stdin, /dev/fd/N): what it holds may be there to read
// once. Not a terminal or other device: a run resumed from one would wait on it.
func IsStream(path string) bool {
	st, err := os.Stat(path)
	if err != nil || st.IsDir() || st.Mode()&os.ModeDevice != 0 {
		return false
	}
	return !st.Mode().IsRegular() || InDevOrProc(path)
}

// InDevOrProc says whether path names a file in /dev or /proc: a pipe's name
// (/dev/fd/63 of a shell's <(...)) that is gone once its reader has read it.
func InDevOrProc(path string) bool {
	return strings.HasPrefix(path, "/dev/") || strings.HasPrefix(path, "/proc/")
}

// readStream reads vectors from a pipe or device by what it starts with.
func readStream(path string, opt CSVOptions) (*Vectors, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	if head, _ := br.Peek(len(parquetMagic)); string(head) == parquetMagic {
		return nil, fmt.Errorf("%s: a Parquet file, which is read from its end; save it to a file and give that", path)
	}
	if head, _ := br.Peek(len(npyMagic)); IsNPY(head) {
		if opt.LabelCol != "" {
			return nil, fmt.Errorf("%s: a NumPy array, which has no label column for --label-col %s; give the labels as a CSV column, or leave --label-col out", path, opt.LabelCol)
		}
		if err := arrayColumns(path, opt); err != nil {
			return nil, err
		}
		return parseNPY(br, path, -1, nil)
	}
	return parseCSV(br, path, opt, -1, -1)
}

// CheckVectorPath says what is wrong with path as a vector file LoadVectors can
// read, before it is read: a folder, or a name of no known type that is not a
// pipe or device. nil otherwise.
func CheckVectorPath(path string) error {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a folder; want a vector file (.csv, .tsv or .txt, each optionally .gz, .npy or .parquet), or images with --dataset folder --data-dir %s", path, path)
	}
	base := strings.TrimSuffix(strings.ToLower(filepath.Base(path)), ".gz")
	switch ext := filepath.Ext(base); {
	case ext == ".csv" || ext == ".tsv" || ext == ".txt":
		return nil
	case (ext == ".npy" || ext == ".parquet") && !strings.HasSuffix(strings.ToLower(path), ".gz"):
		return nil
	case IsStream(path):
		return nil
	case filepath.Base(path) == "-":
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("%s: no such file; to read standard input, give /dev/stdin", path)
		}
	case InDevOrProc(path):
		st, err := os.Stat(path)
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: no such pipe or device (a pipe is read once: a run trained on one needs its data again, with --data)", path)
		}
		if err == nil && st.Mode()&os.ModeDevice != 0 {
			return fmt.Errorf("%s is a terminal or device, not data; give a file or a pipe (a run trained on a pipe needs its data again, with --data)", path)
		}
	}
	return fmt.Errorf("%s: unknown vector file type; want .csv, .tsv or .txt (each optionally .gz), .npy or .parquet", path)
}

// arrayColumns refuses --drop-cols and --id-col for a NumPy array, which has no
// columns but features.
func arrayColumns(path string, opt CSVOptions) error {
	switch {
	case opt.ColumnsFromModel:
	case len(opt.DropCols) > 0:
		return fmt.Errorf("%s: a NumPy array, whose columns --drop-cols does not select; save only the features", path)
	case opt.IDCol != "":
		return fmt.Errorf("%s: a NumPy array, which has no ID column for --id-col; save the IDs apart, in the rows' order", path)
	}
	return nil
}

package data

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// cifarImageBytes is the size of one CIFAR image: 32×32 pixels in three planes (R, G, B),
// each row-major, which is already our (C, H, W) layout.
const cifarImageBytes = 3 * 32 * 32

var cifar10Classes = []string{
	"airplane", "automobile", "bird", "cat", "deer",
	"dog", "frog", "horse", "ship", "truck",
}

// cifar100Coarse names CIFAR-100's 20 superclasses in label order, as in the archive's
// coarse_label_names.txt.
var cifar100Coarse = []string{
	"aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables",
	"household_electrical_devices", "household_furniture", "insects", "large_carnivores",
	"large_man-made_outdoor_things", "large_natural_outdoor_scenes",
	"large_omnivores_and_herbivores", "medium_mammals", "non-insect_invertebrates",
	"people", "reptiles", "small_mammals", "trees", "vehicles_1", "vehicles_2",
}

// LoadCIFAR10 loads the binary version of CIFAR-10: data_batch_1.bin … data_batch_5.bin
// and test_batch.bin, in dir or in dir/cifar-10-batches-bin (where the official
// archive puts them). The 50,000 training images come first, then the 10,000 test
// images; each is 3×32×32.
func LoadCIFAR10(dir string) (*Images, error) {
	names := []string{
		"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
		"data_batch_4.bin", "data_batch_5.bin", "test_batch.bin",
	}
	d, err := findDataDir(dir, "cifar-10-batches-bin", names)
	if err != nil {
		return nil, fmt.Errorf("cifar10: %w", err)
	}
	im, err := readCIFAR(d, names, []int{len(cifar10Classes)})
	if err != nil {
		return nil, err
	}
	im.Classes = cifar10Classes
	return im, nil
}

// LoadCIFAR100 loads the binary version of CIFAR-100: train.bin and test.bin, in dir or
// in dir/cifar-100-binary. Labels are the 20 coarse classes (superclasses), which is
// how the deep-clustering literature evaluates CIFAR-100; the 100 fine labels are kept
// in Fine.
func LoadCIFAR100(dir string) (*Images, error) {
	names := []string{"train.bin", "test.bin"}
	d, err := findDataDir(dir, "cifar-100-binary", names)
	if err != nil {
		return nil, fmt.Errorf("cifar100: %w", err)
	}
	im, err := readCIFAR(d, names, []int{len(cifar100Coarse), 100})
	if err != nil {
		return nil, err
	}
	im.Classes = cifar100Coarse
	return im, nil
}

// readCIFAR reads CIFAR binary files, whose records are one byte per label kind
// followed by the 3072 bytes of a 3×32×32 image. nclass holds the number of classes of
// each label byte; the first label becomes Labels and a second one Fine.
func readCIFAR(dir string, names []string, nclass []int) (*Images, error) {
	recSize := len(nclass) + cifarImageBytes
	// Size the output from the file sizes so each file is copied once.
	total := 0
	for _, name := range names {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if fi.Size() == 0 {
			return nil, fmt.Errorf("%s: empty file", path)
		}
		if fi.Size()%int64(recSize) != 0 {
			return nil, fmt.Errorf("%s: %d bytes is not a whole number of %d-byte records",
				path, fi.Size(), recSize)
		}
		total += int(fi.Size() / int64(recSize))
	}
	im := &Images{
		Pix: make([]uint8, 0, total*cifarImageBytes),
		C:   3, H: 32, W: 32,
		Labels: make([]int, 0, total),
		Source: dir,
	}
	if len(nclass) > 1 {
		im.Fine = make([]int, 0, total)
	}
	// Records are read in chunks into one reused buffer rather than a whole file at a
	// time: it halves the peak memory and the page faults of fresh 30 MB buffers.
	buf := make([]byte, 1024*recSize)
	for _, name := range names {
		path := filepath.Join(dir, name)
		if err := readCIFARFile(path, nclass, buf, im, total); err != nil {
			return nil, err
		}
	}
	if im.N != total {
		return nil, fmt.Errorf("%s: files changed while loading", dir)
	}
	return im, nil
}

// readCIFARFile appends the records of one file to im, using buf (a whole number of
// records) for reading. total is the capacity sized from the files' lengths.
func readCIFARFile(path string, nclass []int, buf []byte, im *Images, total int) error {
	recSize := len(nclass) + cifarImageBytes
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	rec0 := 0 // index of the first record in buf, for messages
	for {
		n, err := io.ReadFull(f, buf)
		if err == io.EOF {
			return nil
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			return fmt.Errorf("read %s: %w", path, err)
		}
		// The size was checked before, but the file may have changed since.
		if n%recSize != 0 || im.N+n/recSize > total {
			return fmt.Errorf("%s: file changed while loading", path)
		}
		b := buf[:n]
		for off := 0; off < n; off += recSize {
			rec := b[off : off+recSize]
			for k, nc := range nclass {
				if int(rec[k]) >= nc {
					return fmt.Errorf("%s: record %d: label %d is out of range 0..%d",
						path, rec0+off/recSize, rec[k], nc-1)
				}
			}
			im.Labels = append(im.Labels, int(rec[0]))
			if im.Fine != nil {
				im.Fine = append(im.Fine, int(rec[1]))
			}
			im.Pix = append(im.Pix, rec[len(nclass):]...)
			im.N++
		}
		rec0 += n / recSize
		if err == io.ErrUnexpectedEOF {
			return nil
		}
	}
}

// findDataDir returns dir when it holds the first of names, else dir/sub when that
// does: users point at either the folder they extracted the archive into or the folder
// the archive creates. It fails naming the first missing file.
func findDataDir(dir, sub string, names []string) (string, error) {
	for _, d := range []string{dir, filepath.Join(dir, sub)} {
		_, err := os.Stat(filepath.Join(d, names[0]))
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return "", missingFilesError{fmt.Sprintf("no %s in %s or %s (want %s)",
		names[0], dir, filepath.Join(dir, sub), strings.Join(names, ", "))}
}

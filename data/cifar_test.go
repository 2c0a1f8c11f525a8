package data

import (
	"os"
	"path/filepath"
	"testing"

	"emclust/data/datatest"
)

// cifarPixel is the test pattern of CIFAR files: distinct per image, plane, row and
// column, so a swapped plane or a transposed image shows up.
func cifarPixel(img, ch, r, c int) uint8 { return uint8(img*41 + ch*67 + r*7 + c) }

// cifarRecords builds n CIFAR records for images first.., each with the given label
// bytes in front of the planes.
func cifarRecords(first, n int, labels func(i int) []uint8) []byte {
	return datatest.CIFARRecords(pattern(first+n, 3, 32, 32, cifarPixel), first, first+n, labels)
}

func cifar10Label(i int) []uint8 { return []uint8{uint8(i % 10)} }

// writeCIFAR10 writes two records to each training batch and one to the test batch.
func writeCIFAR10(t *testing.T, dir string) {
	t.Helper()
	for k := range 5 {
		imgWriteFile(t, filepath.Join(dir, "data_batch_"+string(rune('1'+k))+".bin"),
			cifarRecords(2*k, 2, cifar10Label))
	}
	imgWriteFile(t, filepath.Join(dir, "test_batch.bin"), cifarRecords(10, 1, cifar10Label))
}

func TestLoadCIFAR10(t *testing.T) {
	root := t.TempDir()
	// The files sit where the official archive puts them; root must be accepted too.
	writeCIFAR10(t, filepath.Join(root, "cifar-10-batches-bin"))
	for _, dir := range []string{root, filepath.Join(root, "cifar-10-batches-bin")} {
		im, err := LoadCIFAR10(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := im.Validate(); err != nil {
			t.Fatal(err)
		}
		if im.N != 11 || im.C != 3 || im.H != 32 || im.W != 32 {
			t.Fatalf("shape N=%d C=%d H=%d W=%d, want 11 3 32 32", im.N, im.C, im.H, im.W)
		}
		for i := range 11 {
			if im.Labels[i] != i%10 {
				t.Fatalf("labels %v", im.Labels)
			}
		}
		if im.Fine != nil {
			t.Error("CIFAR-10 has fine labels")
		}
		for _, at := range [][4]int{{0, 0, 0, 0}, {3, 1, 2, 5}, {7, 2, 31, 0}, {10, 2, 0, 31}} {
			i, ch, r, c := at[0], at[1], at[2], at[3]
			if got, want := im.Pix[i*3072+ch*1024+r*32+c], cifarPixel(i, ch, r, c); got != want {
				t.Errorf("image %d channel %d pixel (%d,%d) = %d, want %d", i, ch, r, c, got, want)
			}
		}
		if im.Classes[0] != "airplane" || im.Classes[9] != "truck" {
			t.Errorf("classes %q", im.Classes)
		}
	}
}

func TestLoadCIFAR10Errors(t *testing.T) {
	dir := t.TempDir()
	writeCIFAR10(t, dir)
	imgWriteFile(t, filepath.Join(dir, "data_batch_3.bin"), make([]byte, 30000))
	_, err := LoadCIFAR10(dir)
	imgWantErr(t, err, "data_batch_3.bin: 30000 bytes is not a whole number of 3073-byte records")

	dir = t.TempDir()
	writeCIFAR10(t, dir)
	imgWriteFile(t, filepath.Join(dir, "test_batch.bin"), cifarRecords(0, 2, func(i int) []uint8 { return []uint8{uint8(9 + i)} }))
	_, err = LoadCIFAR10(dir)
	imgWantErr(t, err, "test_batch.bin: record 1: label 10 is out of range 0..9")

	dir = t.TempDir()
	writeCIFAR10(t, dir)
	imgWriteFile(t, filepath.Join(dir, "data_batch_2.bin"), nil)
	_, err = LoadCIFAR10(dir)
	imgWantErr(t, err, "data_batch_2.bin: empty file")

	dir = t.TempDir()
	writeCIFAR10(t, dir)
	os.Remove(filepath.Join(dir, "data_batch_5.bin"))
	_, err = LoadCIFAR10(dir)
	imgWantErr(t, err, "data_batch_5.bin")

	_, err = LoadCIFAR10(t.TempDir())
	imgWantErr(t, err, "cifar10: no data_batch_1.bin in")
}

func TestLoadCIFAR100(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "cifar-100-binary")
	labels := func(i int) []uint8 { return []uint8{uint8(i * 4 % 20), uint8(i * 19 % 100)} }
	imgWriteFile(t, filepath.Join(dir, "train.bin"), cifarRecords(0, 3, labels))
	imgWriteFile(t, filepath.Join(dir, "test.bin"), cifarRecords(3, 3, labels))
	im, err := LoadCIFAR100(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Validate(); err != nil {
		t.Fatal(err)
	}
	if im.N != 6 || im.C != 3 || im.H != 32 || im.W != 32 {
		t.Fatalf("shape N=%d C=%d H=%d W=%d, want 6 3 32 32", im.N, im.C, im.H, im.W)
	}
	for i := range 6 {
		if im.Labels[i] != i*4%20 || im.Fine[i] != i*19%100 {
			t.Fatalf("labels %v fine %v", im.Labels, im.Fine)
		}
	}
	for _, at := range [][4]int{{0, 0, 0, 1}, {4, 1, 9, 30}, {5, 2, 31, 31}} {
		i, ch, r, c := at[0], at[1], at[2], at[3]
		if got, want := im.Pix[i*3072+ch*1024+r*32+c], cifarPixel(i, ch, r, c); got != want {
			t.Errorf("image %d channel %d pixel (%d,%d) = %d, want %d", i, ch, r, c, got, want)
		}
	}
	if len(im.Classes) != 20 || im.Classes[0] != "aquatic_mammals" || im.Classes[19] != "vehicles_2" {
		t.Errorf("classes %q", im.Classes)
	}
}

func TestLoadCIFAR100Errors(t *testing.T) {
	ok := func(i int) []uint8 { return []uint8{1, 2} }
	cases := []struct {
		train []byte
		want  string
	}{
		{cifarRecords(0, 2, cifar10Label), "train.bin: 6146 bytes is not a whole number of 3074-byte records"},
		{cifarRecords(0, 2, func(i int) []uint8 { return []uint8{uint8(19 + i), 0} }), "train.bin: record 1: label 20 is out of range 0..19"},
		{cifarRecords(0, 2, func(i int) []uint8 { return []uint8{0, uint8(99 + i)} }), "train.bin: record 1: label 100 is out of range 0..99"},
	}
	for _, tc := range cases {
		dir := t.TempDir()
		imgWriteFile(t, filepath.Join(dir, "train.bin"), tc.train)
		imgWriteFile(t, filepath.Join(dir, "test.bin"), cifarRecords(0, 1, ok))
		_, err := LoadCIFAR100(dir)
		imgWantErr(t, err, tc.want)
	}
}

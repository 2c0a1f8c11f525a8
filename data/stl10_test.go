package data

import (
	"path/filepath"
	"testing"

	"emclust/data/datatest"
)

// stlPixel is the test pattern of STL-10 files; it differs between (r, c) and (c, r),
// so a missing or doubled transpose shows up.
func stlPixel(img, ch, r, c int) uint8 { return uint8(img*31 + ch*17 + r*5 + c*3) }

// stlImages builds the bytes of n STL-10 images in the file layout: planes stored
// column-major, pixel (r, c) of channel ch at ch*9216 + c*96 + r.
func stlImages(first, n int) []byte {
	return datatest.STL10Images(pattern(first+n, 3, 96, 96, stlPixel), first, first+n)
}

func writeSTL10(t *testing.T, dir string) {
	t.Helper()
	imgWriteFile(t, filepath.Join(dir, "train_X.bin"), stlImages(0, 2))
	imgWriteFile(t, filepath.Join(dir, "train_y.bin"), []byte{1, 10})
	imgWriteFile(t, filepath.Join(dir, "test_X.bin"), stlImages(2, 3))
	imgWriteFile(t, filepath.Join(dir, "test_y.bin"), []byte{5, 2, 8})
}

func TestLoadSTL10(t *testing.T) {
	root := t.TempDir()
	writeSTL10(t, filepath.Join(root, "stl10_binary"))
	im, err := LoadSTL10(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Validate(); err != nil {
		t.Fatal(err)
	}
	if im.N != 5 || im.C != 3 || im.H != 96 || im.W != 96 {
		t.Fatalf("shape N=%d C=%d H=%d W=%d, want 5 3 96 96", im.N, im.C, im.H, im.W)
	}
	want := []int{0, 9, 4, 1, 7}
	for i, l := range want {
		if im.Labels[i] != l {
			t.Fatalf("labels %v, want %v", im.Labels, want)
		}
	}
	// Every pixel, since the transpose is the point of this loader.
	for i := range 5 {
		for ch := range 3 {
			for r := range 96 {
				for c := range 96 {
					if got, want := im.Pix[i*stlImageBytes+ch*9216+r*96+c], stlPixel(i, ch, r, c); got != want {
						t.Fatalf("image %d channel %d pixel (%d,%d) = %d, want %d", i, ch, r, c, got, want)
					}
				}
			}
		}
	}
	if im.Classes[0] != "airplane" || im.Classes[7] != "monkey" {
		t.Errorf("classes %q", im.Classes)
	}
}

func TestLoadSTL10Errors(t *testing.T) {
	cases := []struct {
		file string
		data []byte
		want string
	}{
		{"test_X.bin", stlImages(0, 3)[:50000], "test_X.bin: 50000 bytes is not a whole number of 27648-byte images"},
		{"train_y.bin", []byte{1, 2, 3}, "train_y.bin: 3 labels for the 2 images in train_X.bin"},
		{"test_y.bin", []byte{1, 0, 3}, "test_y.bin: label 0 of image 1 is out of range 1..10"},
		{"train_y.bin", []byte{11, 1}, "train_y.bin: label 11 of image 0 is out of range 1..10"},
		{"train_X.bin", nil, "train_X.bin: 0 bytes"},
	}
	for _, tc := range cases {
		dir := t.TempDir()
		writeSTL10(t, dir)
		imgWriteFile(t, filepath.Join(dir, tc.file), tc.data)
		_, err := LoadSTL10(dir)
		imgWantErr(t, err, tc.want)
	}
	_, err := LoadSTL10(t.TempDir())
	imgWantErr(t, err, "stl10: no train_X.bin in")
}

func BenchmarkTransposeSTL(b *testing.B) {
	src := stlImages(0, 256)
	dst := make([]byte, len(src))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		transposeSTL(dst, src)
	}
}

package data

import (
	"path/filepath"
	"strings"
	"testing"

	"emclust/data/datatest"
)

// idxPixel is the test pattern of IDX image files: distinct per image, row and column.
func idxPixel(img, r, c int) uint8 { return uint8(img*37 + r*11 + c*3) }

// idxImagesBytes builds an IDX image file of n h×w images holding idxPixel values,
// offset by first so that train and test files differ.
func idxImagesBytes(n, h, w, first int) []byte {
	im := pattern(first+n, 1, h, w, func(img, _, r, c int) uint8 { return idxPixel(img, r, c) })
	return datatest.IDXImages(im, first, first+n)
}

// pattern is n c×h×w images whose pixels px gives, labelled 0.
func pattern(n, c, h, w int, px func(img, ch, r, c int) uint8) datatest.Images {
	im := datatest.Images{N: n, C: c, H: h, W: w, Pix: make([]byte, 0, n*c*h*w), Labels: make([]int, n)}
	for i := range n {
		for ch := range c {
			for r := range h {
				for col := range w {
					im.Pix = append(im.Pix, px(i, ch, r, col))
				}
			}
		}
	}
	return im
}

func idxLabelsBytes(labels ...uint8) []byte {
	l := make([]int, len(labels))
	for i, v := range labels {
		l[i] = int(v)
	}
	return datatest.IDXLabels(l)
}

func imgWriteFile(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := datatest.WriteFile(path, b); err != nil {
		t.Fatal(err)
	}
	return path
}

// imgWantErr fails unless err is non-nil and its message contains every part.
func imgWantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

func TestReadIDXImages(t *testing.T) {
	dir := t.TempDir()
	raw := idxImagesBytes(3, 4, 5, 0)
	// Compression is detected from content: a gzipped file without the suffix and a
	// plain one with it must both load.
	paths := []string{
		imgWriteFile(t, filepath.Join(dir, "plain-idx3-ubyte"), raw),
		imgWriteFile(t, filepath.Join(dir, "zipped-idx3-ubyte"), datatest.Gzip(raw)),
		imgWriteFile(t, filepath.Join(dir, "misnamed-idx3-ubyte.gz"), raw),
	}
	for _, p := range paths {
		im, err := ReadIDXImages(p)
		if err != nil {
			t.Fatal(err)
		}
		if im.N != 3 || im.C != 1 || im.H != 4 || im.W != 5 || len(im.Pix) != 60 {
			t.Fatalf("%s: shape N=%d C=%d H=%d W=%d len=%d, want 3 1 4 5 60",
				p, im.N, im.C, im.H, im.W, len(im.Pix))
		}
		for _, at := range [][3]int{{0, 0, 0}, {1, 2, 3}, {2, 3, 4}} {
			i, r, c := at[0], at[1], at[2]
			if got, want := im.Pix[i*20+r*5+c], idxPixel(i, r, c); got != want {
				t.Errorf("%s: pixel %v = %d, want %d", p, at, got, want)
			}
		}
	}
}

func TestReadIDXLabels(t *testing.T) {
	dir := t.TempDir()
	p := imgWriteFile(t, filepath.Join(dir, "l.gz"), datatest.Gzip(idxLabelsBytes(3, 0, 9, 200)))
	got, err := ReadIDXLabels(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{3, 0, 9, 200}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestIDXErrors(t *testing.T) {
	dir := t.TempDir()
	labels := imgWriteFile(t, filepath.Join(dir, "train-images-idx3-ubyte.gz"), datatest.Gzip(idxLabelsBytes(1, 2)))
	_, err := ReadIDXImages(labels)
	imgWantErr(t, err, "train-images-idx3-ubyte.gz: magic 0x00000801, want 0x00000803 (IDX images)")

	images := imgWriteFile(t, filepath.Join(dir, "imgs"), idxImagesBytes(2, 3, 3, 0))
	_, err = ReadIDXLabels(images)
	imgWantErr(t, err, "imgs: magic 0x00000803, want 0x00000801 (IDX labels)")

	full := idxImagesBytes(3, 28, 28, 0)
	short := imgWriteFile(t, filepath.Join(dir, "short-idx3-ubyte"), full[:16+1234])
	_, err = ReadIDXImages(short)
	imgWantErr(t, err, "short-idx3-ubyte: truncated: header says 3 images of 28x28, file has 1234 bytes of pixels")

	long := imgWriteFile(t, filepath.Join(dir, "long-idx3-ubyte"), append(full, 1, 2))
	_, err = ReadIDXImages(long)
	imgWantErr(t, err, "long-idx3-ubyte", "trailing data")

	lbl := idxLabelsBytes(1, 2, 3)
	shortL := imgWriteFile(t, filepath.Join(dir, "short-labels"), lbl[:len(lbl)-1])
	_, err = ReadIDXLabels(shortL)
	imgWantErr(t, err, "short-labels: truncated: header says 3 labels, file has 2 bytes")

	tiny := imgWriteFile(t, filepath.Join(dir, "tiny"), []byte{0, 0, 8})
	_, err = ReadIDXImages(tiny)
	imgWantErr(t, err, "tiny: truncated")

	badgz := imgWriteFile(t, filepath.Join(dir, "bad.gz"), datatest.Gzip(full)[:100])
	_, err = ReadIDXImages(badgz)
	imgWantErr(t, err, "bad.gz: decompress")

	_, err = ReadIDXImages(filepath.Join(dir, "missing"))
	imgWantErr(t, err, "missing", "no such file")

	// 16 × 2³⁰ × 2³⁰ bytes wraps to 0 in 64 bits: it must not read as 16 empty images.
	wrap := make([]byte, 16)
	copy(wrap, []byte{0, 0, 8, 3, 0, 0, 0, 16, 0x40, 0, 0, 0, 0x40, 0, 0, 0})
	_, err = ReadIDXImages(imgWriteFile(t, filepath.Join(dir, "wrap-idx3-ubyte"), wrap))
	imgWantErr(t, err, "wrap-idx3-ubyte: truncated: header says 16 images of 1073741824x1073741824")
}

// writeMNISTLike writes a 3-image training split (gzipped) and a 2-image test split
// (plain) to dir.
func writeMNISTLike(t *testing.T, dir string, trainLabels, testLabels []uint8) {
	t.Helper()
	imgWriteFile(t, filepath.Join(dir, "train-images-idx3-ubyte.gz"), datatest.Gzip(idxImagesBytes(3, 4, 5, 0)))
	imgWriteFile(t, filepath.Join(dir, "train-labels-idx1-ubyte.gz"), datatest.Gzip(idxLabelsBytes(trainLabels...)))
	imgWriteFile(t, filepath.Join(dir, "t10k-images-idx3-ubyte"), idxImagesBytes(2, 4, 5, 3))
	imgWriteFile(t, filepath.Join(dir, "t10k-labels-idx1-ubyte"), idxLabelsBytes(testLabels...))
}

func TestLoadMNISTLike(t *testing.T) {
	dir := t.TempDir()
	writeMNISTLike(t, dir, []uint8{9, 0, 4}, []uint8{7, 1})
	im, err := LoadMNISTLike(dir, "fashion-mnist")
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Validate(); err != nil {
		t.Fatal(err)
	}
	if im.N != 5 || im.C != 1 || im.H != 4 || im.W != 5 {
		t.Fatalf("shape N=%d C=%d H=%d W=%d, want 5 1 4 5", im.N, im.C, im.H, im.W)
	}
	wantLabels := []int{9, 0, 4, 7, 1}
	for i, l := range wantLabels {
		if im.Labels[i] != l {
			t.Fatalf("labels %v, want %v", im.Labels, wantLabels)
		}
	}
	// Test images follow the training ones.
	for i := range 5 {
		if got, want := im.Pix[i*20+2*5+1], idxPixel(i, 2, 1); got != want {
			t.Errorf("image %d pixel (2,1) = %d, want %d", i, got, want)
		}
	}
	if len(im.Classes) != 10 || im.Classes[0] != "T-shirt/top" || im.Classes[9] != "Ankle boot" {
		t.Errorf("classes %q", im.Classes)
	}
	mn, err := LoadMNISTLike(dir, "mnist")
	if err != nil {
		t.Fatal(err)
	}
	if mn.Classes[7] != "7" {
		t.Errorf("mnist classes %q", mn.Classes)
	}
	_, err = LoadMNISTLike(dir, "kmnist")
	imgWantErr(t, err, `"kmnist"`)
}

func TestLoadMNISTLikeErrors(t *testing.T) {
	dir := t.TempDir()
	writeMNISTLike(t, dir, []uint8{1, 2}, []uint8{7, 1})
	_, err := LoadMNISTLike(dir, "mnist")
	imgWantErr(t, err, "train-labels-idx1-ubyte.gz: 2 labels for the 3 images in train-images-idx3-ubyte.gz")

	dir = t.TempDir()
	writeMNISTLike(t, dir, []uint8{1, 2, 3}, []uint8{7, 10})
	_, err = LoadMNISTLike(dir, "mnist")
	imgWantErr(t, err, "t10k-labels-idx1-ubyte: label 10 of image 1 is out of range 0..9")

	dir = t.TempDir()
	writeMNISTLike(t, dir, []uint8{1, 2, 3}, []uint8{7, 1})
	imgWriteFile(t, filepath.Join(dir, "t10k-images-idx3-ubyte"), idxImagesBytes(2, 5, 4, 3))
	_, err = LoadMNISTLike(dir, "mnist")
	imgWantErr(t, err, "t10k-images-idx3-ubyte: images are 5x4, but the training images are 4x5")

	dir = t.TempDir()
	_, err = LoadMNISTLike(dir, "mnist")
	imgWantErr(t, err, "no train-images-idx3-ubyte or train-images-idx3-ubyte.gz in "+dir)
}

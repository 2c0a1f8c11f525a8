package data

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestFashionMNISTInstalled loads the real Fashion-MNIST that Debian's
// dataset-fashion-mnist package installs (make deps), through the default directory,
// or from the folder EMCLUST_TEST_FMNIST names, as command's tests do. A machine
// without it fails, as they do: it skipped.
func TestFashionMNISTInstalled(t *testing.T) {
	dir := os.Getenv("EMCLUST_TEST_FMNIST")
	start := time.Now()
	im, err := LoadImages("fashion-mnist", dir)
	if err != nil {
		t.Fatalf("%v (make deps installs dataset-fashion-mnist; EMCLUST_TEST_FMNIST names another folder)", err)
	}
	t.Logf("loaded %d images in %v", im.N, time.Since(start))
	if err := im.Validate(); err != nil {
		t.Fatal(err)
	}
	if im.N != 70000 || im.C != 1 || im.H != 28 || im.W != 28 {
		t.Fatalf("shape N=%d C=%d H=%d W=%d, want 70000 1 28 28", im.N, im.C, im.H, im.W)
	}
	counts := make([]int, len(im.Classes))
	for _, l := range im.Labels {
		counts[l]++
	}
	for c, n := range counts {
		if n != 7000 {
			t.Errorf("class %d (%s): %d images, want 7000", c, im.Classes[c], n)
		}
	}
	if im.Labels[0] != 9 || im.Classes[9] != "Ankle boot" {
		t.Errorf("first training label %d (%s), want 9 (Ankle boot)", im.Labels[0], im.Classes[im.Labels[0]])
	}
}

func TestLoadImages(t *testing.T) {
	dir := t.TempDir()
	writeMNISTLike(t, dir, []uint8{9, 0, 4}, []uint8{7, 1})
	im, err := LoadImages("mnist", dir)
	if err != nil {
		t.Fatal(err)
	}
	if im.N != 5 || im.Classes[3] != "3" {
		t.Errorf("N=%d classes %q", im.N, im.Classes)
	}

	dir = t.TempDir()
	writeCIFAR10(t, dir)
	if im, err = LoadImages("cifar10", dir); err != nil || im.N != 11 {
		t.Errorf("cifar10: %v", err)
	}

	_, err = LoadImages("imagenet", dir)
	imgWantErr(t, err, `unknown image data set "imagenet" (want one of mnist, fashion-mnist, cifar10, cifar100, stl10)`)
	_, err = LoadImages("cifar100", "")
	imgWantErr(t, err, "cifar100: no data directory given")
	// A folder without the files says how to fetch them, as the missing --data-dir did.
	for _, name := range []string{"stl10", "mnist"} {
		empty := t.TempDir()
		_, err = LoadImages(name, empty)
		imgWantErr(t, err, "`emclust data fetch "+name+" --dir "+empty+"`")
	}
	spaced := filepath.Join(t.TempDir(), "my data")
	os.Mkdir(spaced, 0o755)
	_, err = LoadImages("cifar10", spaced)
	imgWantErr(t, err, "`emclust data fetch cifar10 --dir '"+spaced+"'`")
	_, err = LoadImages("stl10", t.TempDir())
	imgWantErr(t, err, "stl10: no train_X.bin")
}

func TestImagesSubset(t *testing.T) {
	im := &Images{
		Pix: []uint8{0, 1, 10, 11, 20, 21},
		N:   3, C: 1, H: 1, W: 2,
		Labels:  []int{0, 1, 0},
		Fine:    []int{5, 6, 7},
		Classes: []string{"a", "b"},
	}
	s := im.Subset([]int{2, 0, 2})
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	if s.N != 3 || !slices.Equal(s.Pix, []uint8{20, 21, 0, 1, 20, 21}) ||
		!slices.Equal(s.Labels, []int{0, 0, 0}) || !slices.Equal(s.Fine, []int{7, 5, 7}) {
		t.Errorf("subset %+v", s)
	}
	s.Pix[0] = 99
	if im.Pix[4] != 20 {
		t.Error("subset shares pixels with its source")
	}
	unlabelled := (&Images{Pix: []uint8{1, 2}, N: 2, C: 1, H: 1, W: 1}).Subset([]int{1})
	if unlabelled.Labels != nil || unlabelled.Fine != nil || unlabelled.Pix[0] != 2 {
		t.Errorf("unlabelled subset %+v", unlabelled)
	}
	defer func() {
		if recover() == nil {
			t.Error("out-of-range index did not panic")
		}
	}()
	im.Subset([]int{3})
}

func TestImagesValidate(t *testing.T) {
	good := func() *Images {
		return &Images{Pix: make([]uint8, 8), N: 2, C: 1, H: 2, W: 2, Labels: []int{0, 1}, Classes: []string{"a", "b"}}
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		edit func(*Images)
		want string
	}{
		{func(im *Images) { im.Pix = im.Pix[:7] }, "7 pixel bytes, want 8"},
		{func(im *Images) { im.C = 0 }, "bad shape"},
		{func(im *Images) { im.Labels = []int{0} }, "1 labels for 2 images"},
		{func(im *Images) { im.Labels[1] = 2 }, "label 2 of image 1 is out of range for 2 classes"},
		{func(im *Images) { im.Labels[0] = -1 }, "label -1 of image 0"},
		{func(im *Images) { im.Fine = []int{1} }, "1 fine labels for 2 images"},
	}
	for _, tc := range cases {
		im := good()
		tc.edit(im)
		imgWantErr(t, im.Validate(), tc.want)
	}
}

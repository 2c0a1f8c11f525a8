package data

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// folderColor is the test pattern of image-folder tests.
func folderColor(img, x, y int) color.NRGBA {
	return color.NRGBA{uint8(img*50 + x*10), uint8(y * 20), uint8(200 - img*30), 255}
}

func pngBytes(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func patternImage(img, w, h int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetNRGBA(x, y, folderColor(img, x, y))
		}
	}
	return m
}

func TestListImageFiles(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b/2.png", "b/1.JPG", "a/x/3.jpeg", "a/0.png", "notes.txt", "a/._0.png", ".hidden/9.png"} {
		imgWriteFile(t, filepath.Join(dir, filepath.FromSlash(f)), []byte("x"))
	}
	got, err := ListImageFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/0.png", "a/x/3.jpeg", "b/1.JPG", "b/2.png"}
	for i := range want {
		want[i] = filepath.FromSlash(want[i])
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}

	// A pipe named as an image, or a link to one, is refused by name: opening it
	// blocked the load until something wrote to it.
	for _, link := range []bool{false, true} {
		pipes := t.TempDir()
		imgWriteFile(t, filepath.Join(pipes, "a", "0.png"), []byte("x"))
		fifo, name := filepath.Join(pipes, "b", "3.png"), filepath.Join(pipes, "b", "3.png")
		if link {
			fifo = filepath.Join(t.TempDir(), "pipe")
		}
		if err := os.MkdirAll(filepath.Join(pipes, "b"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		if link {
			if err := os.Symlink(fifo, name); err != nil {
				t.Fatal(err)
			}
		}
		_, err := LoadImageFolder(pipes, 0, false)
		imgWantErr(t, err, name+" is not a file but a pipe, socket or device")
	}
}

// Classes come in their names' sorted order, as torchvision's ImageFolder numbers
// them, though ' ' and '-' sort before '/' in whole paths; a linked root is read,
// and a linked class folder is refused by name rather than skipped.
func TestListImageFilesOrderAndLinks(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"cat/1.png", "cat-2/1.png", "cat 3/1.png", "Dog/1.png"} {
		imgWriteFile(t, filepath.Join(dir, filepath.FromSlash(f)), []byte("x"))
	}
	got, err := ListImageFiles(dir)
	want := []string{"Dog/1.png", "cat/1.png", "cat 3/1.png", "cat-2/1.png"}
	for i := range want {
		want[i] = filepath.FromSlash(want[i])
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %q (%v), want %q", got, err, want)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if got, err := ListImageFiles(link); err != nil || !slices.Equal(got, want) {
		t.Errorf("through a linked root: got %q (%v), want %q", got, err, want)
	}
	if err := os.Symlink(filepath.Join(dir, "cat"), filepath.Join(dir, "kitten")); err != nil {
		t.Fatal(err)
	}
	_, err = ListImageFiles(dir)
	imgWantErr(t, err, filepath.Join(dir, "kitten")+" is a link to a folder")
}

func TestLoadImageFolderClasses(t *testing.T) {
	dir := t.TempDir()
	files := []string{"cats/001.png", "cats/002.png", "dogs/001.png"}
	for i, f := range files {
		imgWriteFile(t, filepath.Join(dir, filepath.FromSlash(f)), pngBytes(t, patternImage(i, 4, 3)))
	}
	im, err := LoadImageFolder(dir, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Validate(); err != nil {
		t.Fatal(err)
	}
	if im.N != 3 || im.C != 3 || im.H != 3 || im.W != 4 {
		t.Fatalf("shape N=%d C=%d H=%d W=%d, want 3 3 3 4", im.N, im.C, im.H, im.W)
	}
	if !slices.Equal(im.Labels, []int{0, 0, 1}) || !slices.Equal(im.Classes, []string{"cats", "dogs"}) {
		t.Errorf("labels %v classes %q", im.Labels, im.Classes)
	}
	for i := range 3 {
		for y := range 3 {
			for x := range 4 {
				want := folderColor(i, x, y)
				base := i*36 + y*4 + x
				got := [3]uint8{im.Pix[base], im.Pix[base+12], im.Pix[base+24]}
				if got != [3]uint8{want.R, want.G, want.B} {
					t.Fatalf("image %d pixel (%d,%d) = %v, want %v", i, x, y, got, want)
				}
			}
		}
	}

	// A different size is an error naming both files when no size is given.
	imgWriteFile(t, filepath.Join(dir, "dogs", "002.png"), pngBytes(t, patternImage(0, 5, 3)))
	_, err = LoadImageFolder(dir, 0, false)
	imgWantErr(t, err, filepath.Join(dir, "dogs", "002.png")+": image is 5x3, but "+filepath.Join(dir, "cats", "001.png")+" is 4x3 (give --image-size")

	// With a size they are all resized.
	im, err = LoadImageFolder(dir, 8, true)
	if err != nil {
		t.Fatal(err)
	}
	if im.N != 4 || im.C != 1 || im.H != 8 || im.W != 8 || len(im.Pix) != 4*64 {
		t.Fatalf("shape N=%d C=%d H=%d W=%d, want 4 1 8 8", im.N, im.C, im.H, im.W)
	}
}

func TestLoadImageFolderFlat(t *testing.T) {
	dir := t.TempDir()
	// Pure red, one pixel: luma 0.299*255.
	red := image.NewRGBA(image.Rect(0, 0, 1, 1))
	red.Set(0, 0, color.RGBA{255, 0, 0, 255})
	imgWriteFile(t, filepath.Join(dir, "a.png"), pngBytes(t, red))
	gray := image.NewGray(image.Rect(0, 0, 2, 2))
	copy(gray.Pix, []uint8{10, 20, 30, 40})
	imgWriteFile(t, filepath.Join(dir, "b.png"), pngBytes(t, gray))

	im, err := LoadImageFolder(dir, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if im.Labels != nil || im.Classes != nil {
		t.Errorf("flat folder has labels %v classes %v", im.Labels, im.Classes)
	}
	// Shrinking 2×2 to 1×1 samples the centre, which bilinear makes the mean.
	if want := []uint8{76, 25}; !slices.Equal(im.Pix, want) {
		t.Errorf("pixels %v, want %v", im.Pix, want)
	}

	im, err = LoadImageFolder(dir, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint8{255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0}; !slices.Equal(im.Pix[:12], want) {
		t.Errorf("red upscaled to %v, want %v", im.Pix[:12], want)
	}
	if want := []uint8{10, 20, 30, 40}; !slices.Equal(im.Pix[12:16], want) {
		t.Errorf("same-size gray image became %v, want %v", im.Pix[12:16], want)
	}
}

func TestLoadImageFolderJPEG(t *testing.T) {
	dir := t.TempDir()
	m := image.NewRGBA(image.Rect(0, 0, 16, 16))
	for i := range m.Pix {
		m.Pix[i] = []uint8{200, 100, 50, 255}[i%4]
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	imgWriteFile(t, filepath.Join(dir, "x.jpg"), b.Bytes())
	im, err := LoadImageFolder(dir, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	for ch, want := range []int{200, 100, 50} {
		for _, v := range im.Pix[ch*16 : (ch+1)*16] {
			if d := int(v) - want; d < -4 || d > 4 {
				t.Fatalf("channel %d value %d, want about %d", ch, v, want)
			}
		}
	}
}

func TestResizeBilinear(t *testing.T) {
	// A horizontal ramp stays a ramp; the edges clamp.
	src := []uint8{0, 100, 0, 100}
	dst := make([]uint8, 4*2)
	resizeBilinear(dst, src, 1, 2, 2, 2, 4)
	if want := []uint8{0, 25, 75, 100, 0, 25, 75, 100}; !slices.Equal(dst, want) {
		t.Errorf("got %v, want %v", dst, want)
	}
}

func TestLoadImageFolderErrors(t *testing.T) {
	dir := t.TempDir()
	imgWriteFile(t, filepath.Join(dir, "cats", "001.png"), pngBytes(t, patternImage(0, 2, 2)))
	imgWriteFile(t, filepath.Join(dir, "cats", "003.png"), []byte("not a png"))
	_, err := LoadImageFolder(dir, 0, false)
	imgWantErr(t, err, filepath.Join(dir, "cats", "003.png")+": decode: ")
	if strings.Contains(err.Error(), "fail in all") {
		t.Errorf("one bad image said as several: %v", err)
	}
	// Every bad image is named in the one line, the first whole.
	for _, name := range []string{"004.png", "005.png", "006.png", "007.png"} {
		imgWriteFile(t, filepath.Join(dir, "cats", name), []byte("not a png either"))
	}
	_, err = LoadImageFolder(dir, 0, false)
	imgWantErr(t, err, filepath.Join(dir, "cats", "003.png")+": decode: ")
	imgWantErr(t, err, "; 5 images fail in all, and the next: "+filepath.Join(dir, "cats", "004.png")+": decode: ")
	imgWantErr(t, err, filepath.Join(dir, "cats", "005.png")+": decode: ")
	imgWantErr(t, err, "; and 2 more")
	if strings.Contains(err.Error(), "006.png") || strings.Contains(err.Error(), "\n") {
		t.Errorf("more than the first three named, or more than a line: %v", err)
	}

	dir = t.TempDir()
	imgWriteFile(t, filepath.Join(dir, "cats", "001.png"), pngBytes(t, patternImage(0, 2, 2)))
	imgWriteFile(t, filepath.Join(dir, "stray.png"), pngBytes(t, patternImage(0, 2, 2)))
	_, err = LoadImageFolder(dir, 0, false)
	imgWantErr(t, err, "stray.png sits at the top level")

	dir = t.TempDir()
	imgWriteFile(t, filepath.Join(dir, "readme.txt"), []byte("hi"))
	_, err = LoadImageFolder(dir, 0, false)
	imgWantErr(t, err, "no PNG or JPEG files")

	_, err = LoadImageFolder(filepath.Join(dir, "nope"), 0, false)
	imgWantErr(t, err, "nope")

	// A size that would need N·3·size² bytes of memory is refused before allocating.
	dir = t.TempDir()
	imgWriteFile(t, filepath.Join(dir, "cats", "001.png"), pngBytes(t, patternImage(0, 2, 2)))
	_, err = LoadImageFolder(dir, 100000, false)
	imgWantErr(t, err, "image size 100000, want 0 (keep) to 16384")

	// A PNG whose header claims 100000×100000 is refused from the header alone.
	imgWriteFile(t, filepath.Join(dir, "cats", "002.png"), pngWithSize(t, 100000, 100000))
	_, err = LoadImageFolder(dir, 8, false)
	imgWantErr(t, err, "002.png: image is 100000x100000, larger than")
}

// pngWithSize is a 1×1 PNG whose header says w×h, with a valid header checksum.
func pngWithSize(t testing.TB, w, h uint32) []byte {
	b := pngBytes(t, patternImage(0, 1, 1))
	// Signature (8 bytes), IHDR length and type (8), then width and height.
	binary.BigEndian.PutUint32(b[16:], w)
	binary.BigEndian.PutUint32(b[20:], h)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

// Files that are not PNG or JPEG are left out, and said to be: a class of .webp
// images trained as the one .PNG among them, without a word.
func TestLoadImageFolderLeftOut(t *testing.T) {
	dir := t.TempDir()
	imgWriteFile(t, filepath.Join(dir, "a", "1.png"), pngBytes(t, patternImage(0, 4, 3)))
	imgWriteFile(t, filepath.Join(dir, "b", "2.PNG"), pngBytes(t, patternImage(1, 4, 3)))
	for _, name := range []string{"b/3.webp", "b/4.webp", "b/5.WEBP", "a/notes.txt", "a/LICENSE", ".hidden.gif"} {
		imgWriteFile(t, filepath.Join(dir, filepath.FromSlash(name)), []byte("x"))
	}
	im, err := LoadImageFolder(dir, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := "3 .webp, 1 without an extension, 1 .txt"; im.N != 2 || im.LeftOut != want {
		t.Errorf("%d images, left out %q; want 2, %q", im.N, im.LeftOut, want)
	}
	if im.Empty != nil {
		t.Errorf("empty class folders %q, want none", im.Empty)
	}
	// Class folders without an image (c holds a note alone) make no class, and are
	// named; hidden ones are not.
	for _, name := range []string{"c/notes.txt", "d/e/x.webp", ".git/HEAD"} {
		imgWriteFile(t, filepath.Join(dir, filepath.FromSlash(name)), []byte("x"))
	}
	if im, err = LoadImageFolder(dir, 0, false); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(im.Classes, []string{"a", "b"}) || !slices.Equal(im.Empty, []string{"c", "d"}) {
		t.Errorf("classes %q, empty class folders %q; want [a b], [c d]", im.Classes, im.Empty)
	}
	only := t.TempDir()
	imgWriteFile(t, filepath.Join(only, "x.gif"), []byte("x"))
	_, err = LoadImageFolder(only, 0, false)
	imgWantErr(t, err, "no PNG or JPEG files, only other files (1 .gif)")
}

// A folder that is not there, and a link to an image that is not, are named so
// (were "lstat D: no such file or directory" and "open L: …").
func TestLoadImageFolderMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := LoadImageFolder(filepath.Join(dir, "gone"), 0, false)
	imgWantErr(t, err, "image folder "+filepath.Join(dir, "gone")+": no such folder")
	imgWriteFile(t, filepath.Join(dir, "a", "1.png"), pngBytes(t, patternImage(0, 4, 3)))
	if err := os.Symlink(filepath.Join(dir, "nowhere.png"), filepath.Join(dir, "a", "2.png")); err != nil {
		t.Fatal(err)
	}
	_, err = LoadImageFolder(dir, 0, false)
	imgWantErr(t, err, filepath.Join(dir, "a", "2.png")+" is a link to "+filepath.Join(dir, "nowhere.png")+", which is not there")
}

// The decode budget holds the bytes taken at once to its size, but lets an image
// larger than it go alone; nil bounds nothing.
func TestDecodeBudget(t *testing.T) {
	b := &decodeBudget{size: 100}
	var mu sync.Mutex
	var held, most uint64
	var wg sync.WaitGroup
	for _, n := range []uint64{60, 30, 50, 250, 10, 40, 70, 20} {
		wg.Go(func() {
			release := b.take(n)
			mu.Lock()
			held += n
			if held > b.size && held != n {
				t.Errorf("%d bytes held at once with others, over the budget of %d", held, b.size)
			}
			most = max(most, held)
			mu.Unlock()
			runtime.Gosched()
			mu.Lock()
			held -= n
			mu.Unlock()
			release()
		})
	}
	wg.Wait()
	if b.used != 0 || most < 250 {
		t.Errorf("used %d after all gave back, most held %d (the 250 went alone)", b.used, most)
	}
	var none *decodeBudget
	none.take(1 << 62)() // does not wait
}

// SkipBad leaves out the images that cannot be read, the first among them, and
// names them; the rest load as a folder without them does, and a class left with
// none is named as an empty folder. Another size is still refused.
func TestLoadImageFolderSkipBad(t *testing.T) {
	dir, clean := t.TempDir(), t.TempDir()
	for i, f := range []string{"a/1.png", "b/2.png", "b/4.png"} {
		b := pngBytes(t, patternImage(i, 4, 3))
		imgWriteFile(t, filepath.Join(dir, filepath.FromSlash(f)), b)
		imgWriteFile(t, filepath.Join(clean, filepath.FromSlash(f)), b)
	}
	good := pngBytes(t, patternImage(9, 4, 3))
	for _, f := range []string{"a/0.png", "b/3.png", "c/5.png"} {
		imgWriteFile(t, filepath.Join(dir, filepath.FromSlash(f)), good[:len(good)/2]) // truncated
	}
	_, err := LoadImageFolder(dir, 0, false)
	imgWantErr(t, err, filepath.Join(dir, "a", "0.png")+": decode:", "(--skip-bad-images leaves out the images that cannot be read)")

	im, err := LoadImageFolderWith(dir, FolderOptions{SkipBad: true})
	if err != nil {
		t.Fatal(err)
	}
	want, err := LoadImageFolder(clean, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Validate(); err != nil {
		t.Fatal(err)
	}
	if im.N != 3 || !slices.Equal(im.Pix, want.Pix) || !slices.Equal(im.Files, want.Files) || !slices.Equal(im.Labels, want.Labels) ||
		!slices.Equal(im.Classes, []string{"a", "b"}) || !slices.Equal(im.Empty, []string{"c"}) {
		t.Errorf("%d images %q, labels %v of %q, empty %q; want those of the folder without the bad ones, and [c] empty",
			im.N, im.Files, im.Labels, im.Classes, im.Empty)
	}
	if len(im.Skipped) != 3 || !strings.Contains(im.Skipped[0], filepath.Join("a", "0.png")+": decode:") || !strings.Contains(im.Skipped[2], filepath.Join("c", "5.png")) {
		t.Errorf("skipped %q, want a/0.png, b/3.png and c/5.png with why", im.Skipped)
	}

	// Another size is a setting's: refused, skipping or not.
	imgWriteFile(t, filepath.Join(dir, "b", "6.png"), pngBytes(t, patternImage(0, 5, 3)))
	_, err = LoadImageFolderWith(dir, FolderOptions{SkipBad: true})
	imgWantErr(t, err, "image is 5x3, but")
	// None that can be read.
	none := t.TempDir()
	imgWriteFile(t, filepath.Join(none, "x.png"), []byte("x"))
	_, err = LoadImageFolderWith(none, FolderOptions{SkipBad: true})
	imgWantErr(t, err, "not one of its 1 images can be read")
}

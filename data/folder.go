package data

import (
	"cmp"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // register the JPEG decoder with image.Decode
	_ "image/png"  // register the PNG decoder with image.Decode
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"emclust/sysmem"
)

// IsImageName says whether ListImageFiles takes a file of this name for an image.
func IsImageName(path string) bool {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".jpg", ".jpeg":
		return true
	}
	return false
}

// ListImageFiles returns the PNG and JPEG files under dir, recursively, as sorted paths
// relative to dir. Files are recognised by extension (.png, .jpg, .jpeg, in any case);
// names starting with a dot are skipped, so editor and macOS metadata files (._x.jpg)
// and hidden folders do not break a load. Paths sort folder by folder, so that the
// classes come in their names' order ("cat" before "cat 3" before "cat-2"). A dir
// that is a link is followed; a link to a folder inside it is refused by name, as
// the walk would skip it without a word.
func ListImageFiles(dir string) ([]string, error) {
	files, _, err := listImageFiles(dir)
	return files, err
}

// listImageFiles is ListImageFiles, also counting the files it leaves out by their
// extension (lower case; "" for none), hidden ones aside.
func listImageFiles(dir string) ([]string, map[string]int, error) {
	root, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("image folder %s: no such folder", dir)
	}
	if err != nil {
		return nil, nil, err
	}
	var files []string
	others := map[string]int{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if fi, err := os.Stat(path); err == nil && fi.IsDir() {
				rel, _ := filepath.Rel(root, path)
				return fmt.Errorf("%s is a link to a folder, which emclust does not follow: copy the folder there, or point --data-dir at it", filepath.Join(dir, rel))
			}
		}
		if d.IsDir() {
			return nil
		}
		if !IsImageName(path) {
			others[strings.ToLower(filepath.Ext(path))]++
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		// A pipe would block the load until written to, and a device has no end.
		mode := d.Type()
		if mode&fs.ModeSymlink != 0 {
			if fi, err := os.Stat(path); err == nil {
				mode = fi.Mode().Type()
			}
		}
		if mode&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice|fs.ModeIrregular) != 0 {
			return fmt.Errorf("%s is not a file but a pipe, socket or device; emclust reads images from files", filepath.Join(dir, rel))
		}
		files = append(files, rel)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(files, comparePaths)
	return files, others, nil
}

// otherFiles describes the files listImageFiles left out, the commonest extensions
// first: "12 .webp, 1 .txt"; "" for none.
func otherFiles(others map[string]int) string {
	exts := slices.Collect(maps.Keys(others))
	slices.SortFunc(exts, func(a, b string) int {
		return cmp.Or(cmp.Compare(others[b], others[a]), cmp.Compare(a, b))
	})
	var parts []string
	for i, ext := range exts {
		if i == 3 {
			parts = append(parts, "…")
			break
		}
		if ext == "" {
			ext = "without an extension"
		}
		parts = append(parts, fmt.Sprintf("%d %s", others[exts[i]], ext))
	}
	return strings.Join(parts, ", ")
}

// comparePaths orders paths folder by folder: the separator sorts before any other
// byte, so "cat/x" comes before "cat 3/x" (in whole strings ' ' < '/').
func comparePaths(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		switch ca, cb := a[i], b[i]; {
		case ca == cb:
		case ca == filepath.Separator:
			return -1
		case cb == filepath.Separator:
			return 1
		default:
			return cmp.Compare(ca, cb)
		}
	}
	return cmp.Compare(len(a), len(b))
}

// LoadImageFolder loads the PNG and JPEG images under dir (see ListImageFiles) in sorted
// path order. When the images sit in sub-folders, each top-level sub-folder is a class,
// numbered in sorted name order; when they sit directly in dir they are unlabelled. A
// mix of the two is an error, since it is more likely a mistake than a meaningful
// layout.
//
// Images are resized to size×size by bilinear interpolation, without keeping the aspect
// ratio. With size 0 they are kept as they are and must all have the first image's
// size. They have three channels (RGB; transparency is composited over black) or, when
// gray is set, one (ITU-R BT.601 luma).
func LoadImageFolder(dir string, size int, gray bool) (*Images, error) {
	return LoadImageFolderWith(dir, FolderOptions{Size: size, Gray: gray})
}

// FolderOptions say how LoadImageFolderWith reads an image folder.
type FolderOptions struct {
	Size int  // resize to Size×Size; 0 keeps the first image's size
	Gray bool // one channel
	// SkipBad leaves out the images that cannot be read (a damaged or truncated file,
	// one that is not the image its name says, an empty one) and names them in
	// Images.Skipped: a folder of thousands gathered from the web holds a few. An
	// image of another size (with Size 0) is still refused: that is a setting's.
	SkipBad bool
}

// badImage is an image that cannot be read, which FolderOptions.SkipBad leaves out.
type badImage struct{ error }

func (e badImage) Unwrap() error { return e.error }

// LoadImageFolderWith is LoadImageFolder with opt.
func LoadImageFolderWith(dir string, opt FolderOptions) (*Images, error) {
	size, gray := opt.Size, opt.Gray
	if size < 0 || size > MaxImageSide {
		return nil, fmt.Errorf("image folder %s: image size %d, want 0 (keep) to %d", dir, size, MaxImageSide)
	}
	files, others, err := listImageFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		if len(others) > 0 {
			return nil, fmt.Errorf("image folder %s: no PNG or JPEG files, only other files (%s)", dir, otherFiles(others))
		}
		return nil, fmt.Errorf("image folder %s: no PNG or JPEG files", dir)
	}
	labels, classes, err := folderLabels(dir, files)
	if err != nil {
		return nil, err
	}
	var empty []string // class folders without an image: a copy that failed, say
	if classes != nil {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !slices.Contains(classes, e.Name()) {
				empty = append(empty, e.Name())
			}
		}
	}
	c := 3
	if gray {
		c = 1
	}
	// The first image fixes the size when size is 0, so it is decoded before the rest:
	// the first that can be read, skipping bad ones.
	errs := make([]error, len(files))
	var first image.Image
	at := 0
	for ; at < len(files); at++ {
		first, _, err = decodeImageFile(dir, files[at], nil)
		if err == nil && (first.Bounds().Dx() == 0 || first.Bounds().Dy() == 0) {
			err = fmt.Errorf("%s: empty image", filepath.Join(dir, files[at]))
		}
		if err == nil {
			break
		}
		if !opt.SkipBad {
			return nil, withSkipHint(badImage{err})
		}
		errs[at] = badImage{err}
	}
	if at == len(files) {
		return nil, fmt.Errorf("image folder %s: not one of its %d images can be read, the first: %w", dir, len(files), errs[0])
	}
	h, w := size, size
	if size == 0 {
		b := first.Bounds()
		h, w = b.Dy(), b.Dx()
	}
	total, ok := mulWithin(1<<62, len(files), c, h, w)
	if err := checkMemory(fmt.Sprintf("image folder %s: %d images of %dx%dx%d", dir, len(files), c, h, w), total, ok); err != nil {
		return nil, err
	}
	im := &Images{
		Pix: make([]uint8, total),
		N:   len(files),
		C:   c, H: h, W: w,
		Labels:  labels,
		Classes: classes,
		Source:  dir,
		Files:   files,
		LeftOut: otherFiles(others),
		Empty:   empty,
	}
	imgBytes := c * h * w
	put := func(i int, img image.Image) error {
		b := img.Bounds()
		if b.Dx() == 0 || b.Dy() == 0 {
			return badImage{fmt.Errorf("%s: empty image", filepath.Join(dir, files[i]))}
		}
		if size == 0 && (b.Dx() != w || b.Dy() != h) {
			return fmt.Errorf("%s: image is %dx%d, but %s is %dx%d (give --image-size N to resize them all to N×N)",
				filepath.Join(dir, files[i]), b.Dx(), b.Dy(), filepath.Join(dir, files[at]), w, h)
		}
		planes := toPlanes(img, gray)
		dst := im.Pix[i*imgBytes : (i+1)*imgBytes]
		if b.Dx() == w && b.Dy() == h {
			copy(dst, planes)
		} else {
			resizeBilinear(dst, planes, c, b.Dy(), b.Dx(), h, w)
		}
		return nil
	}
	if err := put(at, first); err != nil {
		return nil, err
	}
	// Decoding dominates (JPEG especially), so the rest is spread over all CPUs, as
	// many images at once as half the memory free holds. Each worker writes only its
	// own images' bytes; the first error by file order wins, which keeps messages
	// deterministic.
	var budget *decodeBudget
	if free, ok := sysmem.Free().Bytes(); ok {
		budget = &decodeBudget{size: free / 2}
	}
	next := atomic.Int64{}
	next.Store(int64(at))
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(files)-1-at) {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i >= len(files) {
					return
				}
				img, release, err := decodeImageFile(dir, files[i], budget)
				if err != nil {
					err = badImage{err}
				} else {
					err = put(i, img)
					release()
				}
				errs[i] = err
			}
		})
	}
	wg.Wait()
	// Every image that fails is named at once, the first by file order whole: one
	// a run, a folder of several took as many runs to clean. Bad images alone are
	// left out where asked.
	var bad []error
	skip := opt.SkipBad
	for _, err := range errs {
		if err != nil {
			bad = append(bad, err)
			skip = skip && errors.As(err, new(badImage))
		}
	}
	if skip && len(bad) > 0 {
		return im.dropBad(errs, empty)
	}
	switch n := len(bad); {
	case n == 1:
		return nil, withSkipHint(bad[0])
	case n > 1:
		var next []string
		for _, err := range bad[1:min(n, 3)] {
			next = append(next, err.Error())
		}
		more := ""
		if n > 3 {
			more = fmt.Sprintf("; and %d more", n-3)
		}
		return nil, withSkipHint(fmt.Errorf("%w; %d images fail in all, and the next: %s%s", bad[0], n, strings.Join(next, "; "), more))
	}
	return im, nil
}

// withSkipHint adds to err, an image's that cannot be read, the flag that leaves such
// images out.
func withSkipHint(err error) error {
	if !errors.As(err, new(badImage)) {
		return err
	}
	return fmt.Errorf("%w (--skip-bad-images leaves out the images that cannot be read)", err)
}

// dropBad leaves out of im the images whose errs are set, all bad images, naming
// them in Skipped; a class folder left without an image joins empty.
func (im *Images) dropBad(errs []error, empty []string) (*Images, error) {
	n := im.C * im.H * im.W
	var kept []string
	for i, err := range errs {
		if err != nil {
			im.Skipped = append(im.Skipped, err.Error())
			continue
		}
		copy(im.Pix[len(kept)*n:], im.Pix[i*n:(i+1)*n]) // down: never over an image not yet moved
		kept = append(kept, im.Files[i])
	}
	im.Pix, im.N, im.Files = im.Pix[:len(kept)*n], len(kept), kept
	was := im.Classes
	labels, classes, err := folderLabels(im.Source, kept)
	if err != nil {
		return nil, err
	}
	im.Labels, im.Classes = labels, classes
	for _, c := range was {
		if !slices.Contains(classes, c) {
			empty = append(empty, c)
		}
	}
	slices.Sort(empty)
	im.Empty = empty
	return im, nil
}

// folderLabels derives labels from the top-level sub-folder of each file. It returns nil
// labels when all files sit directly in dir.
func folderLabels(dir string, files []string) ([]int, []string, error) {
	top := make([]string, len(files))
	var flat, nested string
	for i, f := range files {
		if j := strings.IndexRune(f, filepath.Separator); j >= 0 {
			top[i] = f[:j]
			if nested == "" {
				nested = f
			}
		} else if flat == "" {
			flat = f
		}
	}
	if nested == "" {
		return nil, nil, nil
	}
	if flat != "" {
		return nil, nil, fmt.Errorf("image folder %s: %s sits at the top level but %s is in a class folder; put every image in a class folder, or none",
			dir, flat, nested)
	}
	var classes []string
	ids := map[string]int{}
	for _, t := range top { // files are sorted, so classes come out sorted
		if _, ok := ids[t]; !ok {
			ids[t] = len(classes)
			classes = append(classes, t)
		}
	}
	labels := make([]int, len(files))
	for i, t := range top {
		labels[i] = ids[t]
	}
	return labels, classes, nil
}

// decodeImageFile decodes dir/rel, naming that path in errors.
func decodeImageFile(dir, rel string, budget *decodeBudget) (_ image.Image, release func(), _ error) {
	path := filepath.Join(dir, rel)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if target, lerr := os.Readlink(path); lerr == nil {
			return nil, nil, fmt.Errorf("%s is a link to %s, which is not there", path, target)
		}
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	// The header's size is checked before the decoder allocates the pixels.
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: decode: %w", path, err)
	}
	if _, ok := mulWithin(maxDecodedPixels, cfg.Width, cfg.Height); !ok || cfg.Width > MaxImageSide || cfg.Height > MaxImageSide {
		return nil, nil, fmt.Errorf("%s: image is %dx%d, larger than the %dx%d emclust decodes", path, cfg.Width, cfg.Height, MaxImageSide, MaxImageSide)
	}
	// Held until the caller has copied the pixels out: the decoded image (up to 8
	// bytes a pixel, as 16-bit RGBA) and its planes.
	release = budget.take(12 * uint64(cfg.Width) * uint64(cfg.Height))
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		release()
		return nil, nil, err
	}
	img, _, err := image.Decode(f)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("%s: decode: %w", path, err)
	}
	return img, release, nil
}

// decodeBudget bounds the bytes the images being decoded at once take: an image
// waits while others hold the budget, but one alone always goes, whatever its size.
// A nil budget bounds nothing.
type decodeBudget struct {
	size uint64
	mu   sync.Mutex
	cond *sync.Cond
	used uint64
}

// take waits for n bytes of the budget and returns what gives them back.
func (b *decodeBudget) take(n uint64) (release func()) {
	if b == nil {
		return func() {}
	}
	b.mu.Lock()
	if b.cond == nil {
		b.cond = sync.NewCond(&b.mu)
	}
	for b.used > 0 && b.used+n > b.size {
		b.cond.Wait()
	}
	b.used += n
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.used -= n
		b.cond.Broadcast()
		b.mu.Unlock()
	}
}

// toPlanes converts an image to channel-planar bytes: R, G, B planes, or one luma plane
// when gray is set. The common decoder outputs get fast paths; anything else goes
// through color.Color, which composites transparency over black.
func toPlanes(img image.Image, gray bool) []uint8 {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	n := w * h
	c := 3
	if gray {
		c = 1
	}
	out := make([]uint8, c*n)
	set := func(i int, r, g, bl uint8) {
		if gray {
			out[i] = luma(r, g, bl)
			return
		}
		out[i], out[n+i], out[2*n+i] = r, g, bl
	}
	switch src := img.(type) {
	case *image.Gray:
		for y := range h {
			row := src.Pix[y*src.Stride : y*src.Stride+w]
			for x, v := range row {
				set(y*w+x, v, v, v)
			}
		}
	case *image.RGBA:
		for y := range h {
			row := src.Pix[y*src.Stride : y*src.Stride+4*w]
			for x := range w {
				set(y*w+x, row[4*x], row[4*x+1], row[4*x+2])
			}
		}
	case *image.YCbCr:
		for y := range h {
			for x := range w {
				yi := src.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := src.COffset(b.Min.X+x, b.Min.Y+y)
				if gray {
					// The Y' channel is BT.601 luma already.
					out[y*w+x] = src.Y[yi]
					continue
				}
				r, g, bl := color.YCbCrToRGB(src.Y[yi], src.Cb[ci], src.Cr[ci])
				set(y*w+x, r, g, bl)
			}
		}
	default:
		for y := range h {
			for x := range w {
				r, g, bl, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
				set(y*w+x, uint8(r>>8), uint8(g>>8), uint8(bl>>8))
			}
		}
	}
	return out
}

// luma is BT.601 luma with the weights of color.GrayModel.
func luma(r, g, b uint8) uint8 {
	y := (19595*uint32(r) + 38470*uint32(g) + 7471*uint32(b) + 1<<15) >> 16
	return uint8(y)
}

// resizeBilinear resamples c planes of sh×sw bytes in src to c planes of dh×dw bytes in
// dst, sampling at pixel centres. It is plain bilinear interpolation: strong
// downscaling aliases, which is acceptable for the small thumbnails clustering uses.
func resizeBilinear(dst, src []uint8, c, sh, sw, dh, dw int) {
	type tap struct {
		i0, i1 int
		f      float32 // weight of i1
	}
	taps := func(sn, dn int) []tap {
		t := make([]tap, dn)
		scale := float32(sn) / float32(dn)
		for i := range t {
			s := (float32(i)+0.5)*scale - 0.5
			if s < 0 {
				s = 0
			}
			i0 := int(s)
			if i0 > sn-1 {
				i0 = sn - 1
			}
			i1 := min(i0+1, sn-1)
			t[i] = tap{i0, i1, s - float32(i0)}
		}
		return t
	}
	ty, tx := taps(sh, dh), taps(sw, dw)
	for ch := range c {
		s := src[ch*sh*sw : (ch+1)*sh*sw]
		d := dst[ch*dh*dw : (ch+1)*dh*dw]
		for y, ry := range ty {
			r0, r1 := s[ry.i0*sw:(ry.i0+1)*sw], s[ry.i1*sw:(ry.i1+1)*sw]
			for x, rx := range tx {
				top := float32(r0[rx.i0]) + rx.f*(float32(r0[rx.i1])-float32(r0[rx.i0]))
				bot := float32(r1[rx.i0]) + rx.f*(float32(r1[rx.i1])-float32(r1[rx.i0]))
				v := top + ry.f*(bot-top)
				d[y*dw+x] = uint8(v + 0.5)
			}
		}
	}
}

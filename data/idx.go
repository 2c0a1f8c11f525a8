package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"emclust/sysmem"
)

// IDX magic numbers: two zero bytes, the element type (0x08, unsigned byte) and the
// number of dimensions.
const (
	idxImagesMagic = 0x00000803
	idxLabelsMagic = 0x00000801
)

// mnistClasses and fashionMNISTClasses name the ten labels of the two IDX data sets.
var (
	mnistClasses        = []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
	fashionMNISTClasses = []string{
		"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
		"Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
	}
)

// ReadIDXImages reads an IDX file of unsigned-byte images (magic 0x00000803), as
// distributed for MNIST and Fashion-MNIST. The file may be gzip-compressed; that is
// detected from its first bytes rather than its name, because mirrors and distribution
// packages are not consistent about keeping the .gz suffix. The images have one channel.
func ReadIDXImages(path string) (*Images, error) {
	b, err := readMaybeGzip(path)
	if err != nil {
		return nil, err
	}
	dims, body, err := idxHeader(path, b, idxImagesMagic, "IDX images", 3)
	if err != nil {
		return nil, err
	}
	n, h, w := dims[0], dims[1], dims[2]
	want, ok := mulWithin(len(body), n, h, w)
	if !ok || len(body) != want {
		what := "truncated"
		if ok && len(body) > want {
			what = "trailing data"
		}
		return nil, fmt.Errorf("%s: %s: header says %d images of %dx%d, file has %d bytes of pixels",
			path, what, n, h, w, len(body))
	}
	return &Images{Pix: body, N: n, C: 1, H: h, W: w, Source: path}, nil
}

// ReadIDXLabels reads an IDX file of unsigned-byte labels (magic 0x00000801), gzipped
// or not. It does not check the labels' range; the caller knows how many classes there
// are.
func ReadIDXLabels(path string) ([]int, error) {
	b, err := readMaybeGzip(path)
	if err != nil {
		return nil, err
	}
	dims, body, err := idxHeader(path, b, idxLabelsMagic, "IDX labels", 1)
	if err != nil {
		return nil, err
	}
	n := dims[0]
	if len(body) != n {
		what := "truncated"
		if len(body) > n {
			what = "trailing data"
		}
		return nil, fmt.Errorf("%s: %s: header says %d labels, file has %d bytes of labels",
			path, what, n, len(body))
	}
	labels := make([]int, n)
	for i, v := range body {
		labels[i] = int(v)
	}
	return labels, nil
}

// idxHeader checks the magic number of an IDX file and returns its ndim dimensions and
// the bytes after the header.
func idxHeader(path string, b []byte, magic uint32, what string, ndim int) ([]int, []byte, error) {
	hdr := 4 + 4*ndim
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("%s: truncated: %d bytes, too short for an IDX header", path, len(b))
	}
	if got := binary.BigEndian.Uint32(b); got != magic {
		return nil, nil, fmt.Errorf("%s: magic 0x%08x, want 0x%08x (%s)", path, got, magic, what)
	}
	if len(b) < hdr {
		return nil, nil, fmt.Errorf("%s: truncated: %d bytes, too short for an IDX header", path, len(b))
	}
	dims := make([]int, ndim)
	for i := range dims {
		d := binary.BigEndian.Uint32(b[4+4*i:])
		if d > 1<<30 {
			return nil, nil, fmt.Errorf("%s: implausible dimension %d in IDX header", path, d)
		}
		dims[i] = int(d)
	}
	return dims, b[hdr:], nil
}

// readMaybeGzip reads a whole file, decompressing it when it starts with the gzip magic
// bytes.
func readMaybeGzip(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: decompress: %w", path, err)
	}
	var out bytes.Buffer
	// The gzip trailer holds the uncompressed size modulo 2³²; using it as a hint
	// spares the buffer its doublings on the 47 MB MNIST training images. A damaged
	// file's trailer is noise, so the hint is capped at a generous compression ratio.
	if len(b) >= 18 {
		hint := int(binary.LittleEndian.Uint32(b[len(b)-4:]))
		out.Grow(min(hint, 32*len(b)) + bytes.MinRead)
	}
	// A small file can inflate without bound; stop at what memory can hold.
	limit := int64(sysmem.Total() / 2)
	got, err := io.Copy(&out, io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: decompress: %w", path, err)
	}
	if got > limit {
		return nil, fmt.Errorf("%s: decompresses to more than %d MiB, half the machine's memory", path, limit>>20)
	}
	return out.Bytes(), nil
}

// LoadMNISTLike loads an IDX data set laid out as MNIST is distributed: the files
// train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
// t10k-labels-idx1-ubyte in dir, each optionally with a .gz suffix. Training and test
// images are concatenated (70,000 for MNIST and Fashion-MNIST), training first, because
// clustering uses them all. name is "mnist" or "fashion-mnist" and selects the class
// names.
func LoadMNISTLike(dir, name string) (*Images, error) {
	var classes []string
	switch name {
	case "mnist":
		classes = mnistClasses
	case "fashion-mnist":
		classes = fashionMNISTClasses
	default:
		return nil, fmt.Errorf("LoadMNISTLike: unknown data set %q (want mnist or fashion-mnist)", name)
	}
	var parts []*Images
	for _, split := range []string{"train", "t10k"} {
		imgPath, err := findIDX(dir, name, split+"-images-idx3-ubyte")
		if err != nil {
			return nil, err
		}
		lblPath, err := findIDX(dir, name, split+"-labels-idx1-ubyte")
		if err != nil {
			return nil, err
		}
		im, err := ReadIDXImages(imgPath)
		if err != nil {
			return nil, err
		}
		labels, err := ReadIDXLabels(lblPath)
		if err != nil {
			return nil, err
		}
		if len(labels) != im.N {
			return nil, fmt.Errorf("%s: %d labels for the %d images in %s",
				lblPath, len(labels), im.N, filepath.Base(imgPath))
		}
		for i, l := range labels {
			if l >= len(classes) {
				return nil, fmt.Errorf("%s: label %d of image %d is out of range 0..%d",
					lblPath, l, i, len(classes)-1)
			}
		}
		if len(parts) > 0 && (im.H != parts[0].H || im.W != parts[0].W) {
			return nil, fmt.Errorf("%s: images are %dx%d, but the training images are %dx%d",
				imgPath, im.H, im.W, parts[0].H, parts[0].W)
		}
		im.Labels = labels
		parts = append(parts, im)
	}
	out := concatImages(parts)
	out.Classes = classes
	out.Source = dir
	return out, nil
}

// findIDX returns the path of base or base.gz in dir, preferring the uncompressed file.
func findIDX(dir, name, base string) (string, error) {
	for _, p := range []string{filepath.Join(dir, base), filepath.Join(dir, base+".gz")} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
	}
	return "", missingFilesError{fmt.Sprintf("%s: no %s or %s.gz in %s", name, base, base, dir)}
}

// missingFilesError says a folder lacks a data set's files, which LoadImages follows
// with how to fetch them.
type missingFilesError struct{ msg string }

func (e missingFilesError) Error() string { return e.msg }

// concatImages joins image sets of the same shape into one, in order. Labels and Fine
// are kept only when every part has them.
func concatImages(parts []*Images) *Images {
	first := parts[0]
	out := &Images{C: first.C, H: first.H, W: first.W}
	haveLabels, haveFine := true, true
	for _, p := range parts {
		out.N += p.N
		haveLabels = haveLabels && p.Labels != nil
		haveFine = haveFine && p.Fine != nil
	}
	if len(parts) == 1 {
		out.Pix = first.Pix
	} else {
		out.Pix = make([]uint8, 0, out.N*out.C*out.H*out.W)
		for _, p := range parts {
			out.Pix = append(out.Pix, p.Pix...)
		}
	}
	if haveLabels {
		out.Labels = make([]int, 0, out.N)
		for _, p := range parts {
			out.Labels = append(out.Labels, p.Labels...)
		}
	}
	if haveFine {
		out.Fine = make([]int, 0, out.N)
		for _, p := range parts {
			out.Fine = append(out.Fine, p.Fine...)
		}
	}
	return out
}

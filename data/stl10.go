package data

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// STL-10 images are 96×96 with three channels. The binary files store each channel
// plane column-major (MATLAB order): pixel (r, c) of channel ch of an image is at byte
// ch*stlPlane + c*stlSide + r.
const (
	stlSide       = 96
	stlPlane      = stlSide * stlSide
	stlImageBytes = 3 * stlPlane
)

var stl10Classes = []string{
	"airplane", "bird", "car", "cat", "deer",
	"dog", "horse", "monkey", "ship", "truck",
}

// LoadSTL10 loads the labelled part of the binary STL-10 release: train_X.bin,
// train_y.bin, test_X.bin and test_y.bin, in dir or in dir/stl10_binary. The 5,000
// training images come first, then the 8,000 test images; the 100,000 unlabelled images
// are not read. The files' 1-based labels become 0..9, and their column-major planes are
// transposed to our row-major ones.
func LoadSTL10(dir string) (*Images, error) {
	names := []string{"train_X.bin", "train_y.bin", "test_X.bin", "test_y.bin"}
	d, err := findDataDir(dir, "stl10_binary", names)
	if err != nil {
		return nil, fmt.Errorf("stl10: %w", err)
	}
	type split struct {
		xPath string
		n     int
	}
	var splits []split
	var labels []int
	for i := 0; i < len(names); i += 2 {
		xPath, yPath := filepath.Join(d, names[i]), filepath.Join(d, names[i+1])
		fi, err := os.Stat(xPath)
		if err != nil {
			return nil, err
		}
		if fi.Size() == 0 || fi.Size()%stlImageBytes != 0 {
			return nil, fmt.Errorf("%s: %d bytes is not a whole number of %d-byte images",
				xPath, fi.Size(), stlImageBytes)
		}
		n := int(fi.Size() / stlImageBytes)
		y, err := os.ReadFile(yPath)
		if err != nil {
			return nil, err
		}
		if len(y) != n {
			return nil, fmt.Errorf("%s: %d labels for the %d images in %s",
				yPath, len(y), n, names[i])
		}
		for j, v := range y {
			if v < 1 || int(v) > len(stl10Classes) {
				return nil, fmt.Errorf("%s: label %d of image %d is out of range 1..%d",
					yPath, v, j, len(stl10Classes))
			}
			labels = append(labels, int(v)-1)
		}
		splits = append(splits, split{xPath, n})
	}
	im := &Images{
		Pix: make([]uint8, len(labels)*stlImageBytes),
		N:   len(labels),
		C:   3, H: stlSide, W: stlSide,
		Labels:  labels,
		Classes: stl10Classes,
		Source:  d,
	}
	off := 0
	for _, s := range splits {
		dst := im.Pix[off*stlImageBytes : (off+s.n)*stlImageBytes]
		if err := readSTLImages(s.xPath, dst); err != nil {
			return nil, err
		}
		off += s.n
	}
	return im, nil
}

// readSTLImages fills dst, a whole number of images, from the file at path, transposing
// each plane. It reads in chunks so the 360 MB of labelled images are not held twice,
// and transposes each chunk on all CPUs.
func readSTLImages(path string, dst []uint8) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	const chunkImages = 256
	buf := make([]uint8, min(len(dst), chunkImages*stlImageBytes))
	for len(dst) > 0 {
		b := buf[:min(len(buf), len(dst))]
		if _, err := io.ReadFull(f, b); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return fmt.Errorf("%s: truncated while reading", path)
			}
			return fmt.Errorf("read %s: %w", path, err)
		}
		transposeSTL(dst[:len(b)], b)
		dst = dst[len(b):]
	}
	return nil
}

// transposeSTL converts whole images from STL-10's column-major planes in src to
// row-major planes in dst, splitting the images among GOMAXPROCS goroutines.
func transposeSTL(dst, src []uint8) {
	planes := len(src) / stlPlane
	workers := min(runtime.GOMAXPROCS(0), planes)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := planes*w/workers, planes*(w+1)/workers
		wg.Go(func() {
			for p := lo; p < hi; p++ {
				s := src[p*stlPlane : (p+1)*stlPlane]
				d := dst[p*stlPlane : (p+1)*stlPlane]
				for c := range stlSide {
					col := s[c*stlSide : (c+1)*stlSide]
					for r, v := range col {
						d[r*stlSide+c] = v
					}
				}
			}
		})
	}
	wg.Wait()
}

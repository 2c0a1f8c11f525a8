// Package datatest writes image sets in their official file formats, and NumPy arrays,
// for the tests of the packages that read them. It does not import package data, whose own tests use it.
package datatest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
)

// Images are N images of C×H×W bytes, each plane row-major, and their labels.
type Images struct {
	N, C, H, W int
	Pix        []byte
	Labels     []int
}

// Image is the C·H·W bytes of image i.
func (im Images) Image(i int) []byte {
	n := im.C * im.H * im.W
	return im.Pix[i*n : (i+1)*n]
}

// IDXImages is an IDX image file of images lo..hi-1: big-endian magic 0x00000803 and
// the dimensions N, H, W before the pixels (one channel).
func IDXImages(im Images, lo, hi int) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0x00000803)
	for _, d := range []int{hi - lo, im.H, im.W} {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	for i := lo; i < hi; i++ {
		b = append(b, im.Image(i)...)
	}
	return b
}

// IDXLabels is an IDX label file: magic 0x00000801 and N before one byte per label.
func IDXLabels(labels []int) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0x00000801)
	b = binary.BigEndian.AppendUint32(b, uint32(len(labels)))
	for _, l := range labels {
		b = append(b, byte(l))
	}
	return b
}

// Gzip compresses b.
func Gzip(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b) // a bytes.Buffer does not fail
	zw.Close()
	return buf.Bytes()
}

// NPY is an n×d float32 array in NumPy's .npy format, of the values at(i, j).
func NPY(n, d int, at func(i, j int) float32) []byte {
	var b bytes.Buffer
	hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", n, d)
	hdr += string(bytes.Repeat([]byte(" "), 63-(10+len(hdr))%64)) + "\n" // to 64 bytes
	b.WriteString("\x93NUMPY\x01\x00")
	binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	b.WriteString(hdr)
	row := make([]byte, 4*d)
	for i := range n {
		for j := range d {
			binary.LittleEndian.PutUint32(row[4*j:], math.Float32bits(at(i, j)))
		}
		b.Write(row)
	}
	return b.Bytes()
}

// WriteFile writes b to path, making its folder.
func WriteFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// WriteMNISTLike writes one-channel images as gzipped IDX files, the first nTrain as
// train-*, the rest as t10k-*.
func WriteMNISTLike(dir string, im Images, nTrain int) error {
	for _, sp := range []struct {
		name   string
		lo, hi int
	}{{"train", 0, nTrain}, {"t10k", nTrain, im.N}} {
		if err := WriteFile(filepath.Join(dir, sp.name+"-images-idx3-ubyte.gz"), Gzip(IDXImages(im, sp.lo, sp.hi))); err != nil {
			return err
		}
		if err := WriteFile(filepath.Join(dir, sp.name+"-labels-idx1-ubyte.gz"), Gzip(IDXLabels(im.Labels[sp.lo:sp.hi]))); err != nil {
			return err
		}
	}
	return nil
}

// CIFARRecords are CIFAR binary records of images lo..hi-1: the bytes labels(i) gives
// (one for CIFAR-10, coarse and fine for CIFAR-100), then the 3072 bytes of the R, G
// and B planes.
func CIFARRecords(im Images, lo, hi int, labels func(i int) []byte) []byte {
	var b []byte
	for i := lo; i < hi; i++ {
		b = append(b, labels(i)...)
		b = append(b, im.Image(i)...)
	}
	return b
}

// WriteCIFAR writes 3×32×32 images as CIFAR records split evenly over files.
func WriteCIFAR(dir string, im Images, files []string, labels func(i int) []byte) error {
	for f, name := range files {
		lo, hi := im.N*f/len(files), im.N*(f+1)/len(files)
		if err := WriteFile(filepath.Join(dir, name), CIFARRecords(im, lo, hi, labels)); err != nil {
			return err
		}
	}
	return nil
}

// CIFAR10Batches are the file names of CIFAR-10's binary version.
func CIFAR10Batches() []string {
	var files []string
	for k := 1; k <= 5; k++ {
		files = append(files, "data_batch_"+strconv.Itoa(k)+".bin")
	}
	return append(files, "test_batch.bin")
}

// STL10Images are images lo..hi-1 as STL-10 stores them: each 96×96 plane
// column-major, pixel (r, c) of channel ch at ch·9216 + c·96 + r.
func STL10Images(im Images, lo, hi int) []byte {
	const side, plane = 96, 96 * 96
	var b []byte
	for i := lo; i < hi; i++ {
		src := im.Image(i)
		rec := make([]byte, 3*plane)
		for ch := range 3 {
			for r := range side {
				for c := range side {
					rec[ch*plane+c*side+r] = src[ch*plane+r*side+c]
				}
			}
		}
		b = append(b, rec...)
	}
	return b
}

// STL10Labels are labels as STL-10 stores them: 1..10, one byte each.
func STL10Labels(labels []int) []byte {
	b := make([]byte, len(labels))
	for i, l := range labels {
		b[i] = byte(l + 1)
	}
	return b
}

// WriteSTL10 writes 3×96×96 images as the STL-10 binary files, the first nTrain as
// train_*, the rest as test_*.
func WriteSTL10(dir string, im Images, nTrain int) error {
	for _, sp := range []struct {
		name   string
		lo, hi int
	}{{"train", 0, nTrain}, {"test", nTrain, im.N}} {
		if err := WriteFile(filepath.Join(dir, sp.name+"_X.bin"), STL10Images(im, sp.lo, sp.hi)); err != nil {
			return err
		}
		if err := WriteFile(filepath.Join(dir, sp.name+"_y.bin"), STL10Labels(im.Labels[sp.lo:sp.hi])); err != nil {
			return err
		}
	}
	return nil
}

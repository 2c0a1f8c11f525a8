package data

import (
	"errors"
	"fmt"
	"strings"
)

// imageSets lists the names LoadImages knows, in the order messages and help show them.
var imageSets = []string{"mnist", "fashion-mnist", "cifar10", "cifar100", "stl10"}

// ImageSetNames returns the data set names LoadImages accepts.
func ImageSetNames() []string {
	return append([]string(nil), imageSets...)
}

// DefaultImageDir returns where a data set is found when no directory is given, or ""
// when it has no standard place. Only Fashion-MNIST has one: Debian's
// dataset-fashion-mnist package installs it in /usr/share/datasets/fashion-mnist.
func DefaultImageDir(name string) string {
	if name == "fashion-mnist" {
		return "/usr/share/datasets/fashion-mnist"
	}
	return ""
}

// LoadImages loads one of the paper's image data sets by name from the official files
// in dir (see LoadMNISTLike, LoadCIFAR10, LoadCIFAR100, LoadSTL10). An empty dir means
// DefaultImageDir(name).
func LoadImages(name, dir string) (*Images, error) {
	known := false
	for _, s := range imageSets {
		known = known || s == name
	}
	if !known {
		return nil, fmt.Errorf("unknown image data set %q (want one of %s)", name, strings.Join(imageSets, ", "))
	}
	if dir == "" {
		dir = DefaultImageDir(name)
		if dir == "" {
			return nil, fmt.Errorf("%s: no data directory given, and %s has no default one: give --data-dir D, after `emclust data fetch %s --dir D` where the machine can download", name, name, name)
		}
	}
	var im *Images
	var err error
	switch name {
	case "mnist", "fashion-mnist":
		im, err = LoadMNISTLike(dir, name)
	case "cifar10":
		im, err = LoadCIFAR10(dir)
	case "cifar100":
		im, err = LoadCIFAR100(dir)
	case "stl10":
		im, err = LoadSTL10(dir)
	}
	if missing := (missingFilesError{}); errors.As(err, &missing) {
		if dir == DefaultImageDir(name) {
			// A system folder: Debian's package fills it, not a user's fetch.
			return nil, fmt.Errorf("%w; install Debian's dataset-%s (make deps does), or give --data-dir D after `emclust data fetch %s --dir D`", err, name, name)
		}
		return nil, fmt.Errorf("%w; `emclust data fetch %s --dir %s` downloads them where the machine can", err, name, ShellQuote(dir))
	}
	if err != nil {
		return nil, err
	}
	return im, nil
}

// ShellQuote quotes path for a command line to copy, where it needs it.
func ShellQuote(path string) string {
	if path != "" && strings.Trim(path, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@") == "" {
		return path
	}
	return "'" + strings.ReplaceAll(path, "'", `'\''`) + "'"
}

// Subset returns the images at the given indices, in that order, with their labels.
// The pixels are copied, so the subset does not keep the whole set alive. An index out
// of range panics, like a slice index.
func (im *Images) Subset(idx []int) *Images {
	size := im.C * im.H * im.W
	out := &Images{
		Pix: make([]uint8, len(idx)*size),
		N:   len(idx),
		C:   im.C, H: im.H, W: im.W,
		Classes: im.Classes,
		Source:  im.Source,
	}
	if im.Labels != nil {
		out.Labels = make([]int, len(idx))
	}
	if im.Fine != nil {
		out.Fine = make([]int, len(idx))
	}
	for j, i := range idx {
		if i < 0 || i >= im.N {
			panic(fmt.Sprintf("data: Subset index %d out of range [0, %d)", i, im.N))
		}
		copy(out.Pix[j*size:(j+1)*size], im.Pix[i*size:(i+1)*size])
		if out.Labels != nil {
			out.Labels[j] = im.Labels[i]
		}
		if out.Fine != nil {
			out.Fine[j] = im.Fine[i]
		}
	}
	return out
}

// Validate checks that the fields agree with each other: the pixel count matches the
// shape and labels are in range. Loaders guarantee this; Validate is for images built
// or modified elsewhere, before they reach code that would index out of bounds.
func (im *Images) Validate() error {
	if im.N < 0 || im.C <= 0 || im.H <= 0 || im.W <= 0 {
		return fmt.Errorf("images %s: bad shape N=%d C=%d H=%d W=%d", im.Source, im.N, im.C, im.H, im.W)
	}
	if want := im.N * im.C * im.H * im.W; len(im.Pix) != want {
		return fmt.Errorf("images %s: %d pixel bytes, want %d for %dx%dx%dx%d",
			im.Source, len(im.Pix), want, im.N, im.C, im.H, im.W)
	}
	if im.Labels != nil {
		if len(im.Labels) != im.N {
			return fmt.Errorf("images %s: %d labels for %d images", im.Source, len(im.Labels), im.N)
		}
		for i, l := range im.Labels {
			if l < 0 || (im.Classes != nil && l >= len(im.Classes)) {
				return fmt.Errorf("images %s: label %d of image %d is out of range for %d classes",
					im.Source, l, i, len(im.Classes))
			}
		}
	}
	if im.Fine != nil {
		if len(im.Fine) != im.N {
			return fmt.Errorf("images %s: %d fine labels for %d images", im.Source, len(im.Fine), im.N)
		}
		for i, l := range im.Fine {
			if l < 0 {
				return fmt.Errorf("images %s: fine label %d of image %d is negative", im.Source, l, i)
			}
		}
	}
	return nil
}

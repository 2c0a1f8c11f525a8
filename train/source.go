package train

import (
	"fmt"
	"strings"

	"emclust/data"
	"emclust/model"
	"emclust/torch"
	"emclust/transform"
)

// Source feeds the network. Its data live on the training device, so a batch is an
// index_select there: no host copy in the step.
type Source interface {
	Len() int
	// Labels are the ground-truth classes, nil when unknown.
	Labels() []int
	// Batch returns the network input for rows idx (int64 on the device) and, when
	// aug is set, the transformed batch T(x).
	Batch(s *torch.Scope, idx *torch.Tensor, aug *transform.AugmentConfig) (x, xt *torch.Tensor)
	// Features is what the k-means baseline clusters: the vectors, or raw pixels.
	Features(s *torch.Scope) *torch.Tensor
	// IndexDevice is where the row indices given to Batch should live.
	IndexDevice() torch.Device
	// Spec fills in the model's input shape.
	Spec(cfg *Config) (model.Spec, error)
	Describe() string
	Close()
}

// VectorSource holds an N×D float32 table on the device.
type VectorSource struct {
	v *data.Vectors // all but the rows, which live in x alone
	z data.ZScore   // of the rows as given
	x *torch.Tensor
}

// NewVectorSource copies v's rows to dev. The source keeps no host copy of them: on
// a table of millions of rows it would hold the table twice (three times, with the
// room Go's collector leaves to a heap that size).
func NewVectorSource(v *data.Vectors, dev torch.Device) (*VectorSource, error) {
	return newVectorSource(v, dev, nil)
}

// newVectorSource is NewVectorSource of rows that host, when it holds them
// (HostFloats.Holds) and dev is the CPU, gives to the source's tensor without a copy;
// v.X is then the tensor's, and must not be used after.
func newVectorSource(v *data.Vectors, dev torch.Device, host *torch.HostFloats) (*VectorSource, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	z := v.ZScore()
	s := torch.NoGrad()
	defer s.Close()
	var x *torch.Tensor
	if !dev.CUDA && host.Holds(v.X) {
		x = s.Keep(s.AdoptFloat32(host, []int{v.N, v.D}))
	} else {
		x = s.Keep(s.FromFloat32(v.X, []int{v.N, v.D}, dev))
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("copy %s to %v: %w", v.Source, dev, err)
	}
	meta := *v
	meta.X = nil
	return &VectorSource{v: &meta, z: z, x: x}, nil
}

func (vs *VectorSource) Len() int      { return vs.v.N }
func (vs *VectorSource) Labels() []int { return vs.v.Labels }

// Classes names the labels' ids as the data wrote them; nil when unknown.
func (vs *VectorSource) Classes() []string { return vs.v.Classes }
func (vs *VectorSource) Describe() string {
	rows, features := "rows", "features"
	if vs.v.N == 1 {
		rows = "row"
	}
	if vs.v.D == 1 {
		features = "feature"
	}
	d := fmt.Sprintf("%s: %d %s × %d %s", vs.v.Source, vs.v.N, rows, vs.v.D, features)
	if len(vs.v.Dropped) > 0 {
		d += fmt.Sprintf(" (left out: %s)", strings.Join(vs.v.Dropped, ", "))
	}
	return d
}
func (vs *VectorSource) Close() { vs.x.Free() }

// IDs are the rows' IDs and the name of their column (data.Vectors.IDs), or nil.
func (vs *VectorSource) IDs() (ids []string, name string) { return vs.v.IDs, vs.v.IDName }

// RowCounters are the feature columns that count the rows (data.Vectors.RowCounters).
func (vs *VectorSource) RowCounters() []data.Column { return vs.v.RowCounters }

func (vs *VectorSource) Batch(s *torch.Scope, idx *torch.Tensor, aug *transform.AugmentConfig) (x, xt *torch.Tensor) {
	x = s.IndexSelect(vs.x, 0, idx)
	if aug != nil {
		s.Fail(fmt.Errorf("objectives with augmentation need images; %s is vectors (use --objective em)", vs.v.Source))
	}
	return x, nil
}

func (vs *VectorSource) Features(s *torch.Scope) *torch.Tensor { return vs.x }

// Standardized is a z-scored copy of the rows on their device, as
// data.Vectors.Standardize would have made it of the rows as given: chunks of rows
// come to the host and go back, so that the copy is the host's arithmetic to the bit.
func (vs *VectorSource) Standardized(s *torch.Scope) *torch.Tensor {
	n, d := vs.v.N, vs.v.D
	out := s.Empty([]int{n, d}, torch.Float32, vs.x.Device())
	rows := max(1, (1<<20)/d)
	for lo := 0; lo < n && s.Err() == nil; lo += rows {
		m := min(rows, n-lo)
		c := torch.NoGrad()
		chunk := c.Float32s(c.Narrow(vs.x, 0, lo, m))
		vs.z.Apply(chunk)
		c.CopyInto(c.Narrow(out, 0, lo, m), c.FromFloat32(chunk, []int{m, d}, vs.x.Device()))
		s.Fail(c.Close())
	}
	return out
}

func (vs *VectorSource) IndexDevice() torch.Device { return vs.x.Device() }

func (vs *VectorSource) Spec(cfg *Config) (model.Spec, error) {
	if cfg.Arch != "" && cfg.Arch != "mlp" {
		return model.Spec{}, fmt.Errorf("arch %s takes images; vectors use mlp", cfg.Arch)
	}
	return model.Spec{Arch: "mlp", In: vs.v.D, Hidden: cfg.Hidden, K: cfg.K, Heads: cfg.Heads, Norm: cfg.Norm}, nil
}

// ImageSource holds N×C×H×W uint8 images on the device; batches are made float,
// augmented and Sobel-filtered there. A set too large for the device stays in host
// memory instead, and each batch is copied over without blocking.
type ImageSource struct {
	im   *data.Images
	pix  *torch.Tensor
	dev  torch.Device // where batches are computed
	host bool         // pix lives on the host
	rows transform.Rows
}

// ShareDraws makes every batch rows offset.. of a batch of total rows for the random
// transformation (transform.Rows): how a data-parallel rank draws as one process.
func (is *ImageSource) ShareDraws(offset, total int) {
	is.rows = transform.Rows{Offset: offset, Total: total}
}

// NewHostImageSource keeps the images in host memory and sends each batch to dev
// with a non-blocking copy. The set is not pinned: a batch gathered from it is a
// tensor of its own, which Batch pins.
func NewHostImageSource(im *data.Images, dev torch.Device) (*ImageSource, error) {
	if err := im.Validate(); err != nil {
		return nil, err
	}
	s := torch.NoGrad()
	defer s.Close()
	pix := s.Keep(s.FromUint8(im.Pix, []int{im.N, im.C, im.H, im.W}, torch.CPU))
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("load %s into host memory: %w", im.Source, err)
	}
	return &ImageSource{im: im, pix: pix, dev: dev, host: true}, nil
}

// NewImageSource copies the images to dev (70k MNIST images are 55 MB).
func NewImageSource(im *data.Images, dev torch.Device) (*ImageSource, error) {
	if err := im.Validate(); err != nil {
		return nil, err
	}
	s := torch.NoGrad()
	defer s.Close()
	pix := s.Keep(s.FromUint8(im.Pix, []int{im.N, im.C, im.H, im.W}, dev))
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("copy %s to %v: %w", im.Source, dev, err)
	}
	return &ImageSource{im: im, pix: pix, dev: dev}, nil
}

func (is *ImageSource) Len() int      { return is.im.N }
func (is *ImageSource) Labels() []int { return is.im.Labels }

// Classes names the labels' ids (Fashion-MNIST's "Sneaker", a folder's name); nil
// when unknown.
func (is *ImageSource) Classes() []string { return is.im.Classes }
func (is *ImageSource) Describe() string {
	d := fmt.Sprintf("%s: %d images %dx%dx%d", is.im.Source, is.im.N, is.im.C, is.im.H, is.im.W)
	if is.im.LeftOut != "" {
		d += fmt.Sprintf(" (left out, not PNG or JPEG: %s)", is.im.LeftOut)
	}
	if n := len(is.im.Skipped); n > 0 {
		d += fmt.Sprintf(" (%d that cannot be read left out)", n)
	}
	switch n := len(is.im.Empty); {
	case n == 1:
		d += fmt.Sprintf(" (class folder %s holds no image: %d classes)", is.im.Empty[0], len(is.im.Classes))
	case n > 1:
		names := strings.Join(is.im.Empty[:min(n, 3)], ", ")
		if n > 3 {
			names += fmt.Sprintf(" and %d more", n-3)
		}
		d += fmt.Sprintf(" (class folders %s hold no image: %d classes)", names, len(is.im.Classes))
	}
	return d
}
func (is *ImageSource) Close() { is.pix.Free() }

// IDs are a folder's images' paths under it, and "path"; nil for the other sets.
func (is *ImageSource) IDs() (ids []string, name string) { return is.im.Files, "path" }

func (is *ImageSource) Batch(s *torch.Scope, idx *torch.Tensor, aug *transform.AugmentConfig) (x, xt *torch.Tensor) {
	raw := s.IndexSelect(is.pix, 0, idx)
	if is.host && is.dev.CUDA {
		// A copy from pageable memory waits for the stream, every step; from pinned
		// memory (libtorch's caching host allocator) it is queued.
		raw = s.ToDevice(s.PinMemory(raw), is.dev, true)
	}
	// Convert to float once; the original and the transformed batch both start there.
	f := transform.ToFloat(s, raw)
	x = transform.Pipeline(s, f, nil)
	if aug != nil {
		xt = transform.PipelineRows(s, f, aug, is.rows)
	}
	return x, xt
}

func (is *ImageSource) Features(s *torch.Scope) *torch.Tensor {
	return s.DivScalar(s.Reshape(s.To(is.pix, is.dev, torch.Float32), is.im.N, -1), 255)
}

// IndexDevice is the host for a host-resident set: the batch is gathered there.
func (is *ImageSource) IndexDevice() torch.Device { return is.pix.Device() }

// Images returns the loaded images (for reports).
func (is *ImageSource) Images() *data.Images { return is.im }

func (is *ImageSource) Spec(cfg *Config) (model.Spec, error) {
	arch := cfg.Arch
	if arch == "" {
		a, err := model.ArchFor(is.im.H, is.im.W)
		switch {
		case err != nil && cfg.ImageSize > 0:
			also := ""
			if archs := model.ArchsTaking(cfg.ImageSize, cfg.ImageSize); archs != nil {
				also = fmt.Sprintf(", or name a network that takes them at %d with --arch (%s)", cfg.ImageSize, strings.Join(archs, ", "))
			}
			return model.Spec{}, SettingsError{fmt.Errorf("--image-size %d: %w: give --image-size 28, 32 or 96%s", cfg.ImageSize, err, also)}
		case err != nil && cfg.Dataset == "folder":
			return model.Spec{}, SettingsError{fmt.Errorf("%w: --image-size 28, 32 or 96 resizes them as they load", err)}
		case err != nil:
			return model.Spec{}, err
		}
		arch = a
	}
	if arch == "mlp" {
		return model.Spec{}, SettingsError{fmt.Errorf("--arch mlp takes vectors; images use mnist, cifar or stl10")}
	}
	return model.Spec{Arch: arch, InC: 2, H: is.im.H, W: is.im.W, K: cfg.K, Heads: cfg.Heads, Norm: cfg.Norm}, nil
}

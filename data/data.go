// Package data loads the data sets emclust clusters: user vectors (CSV, .npy, Parquet), the
// embedded UCI digits, and the image sets of the paper (MNIST-like IDX, CIFAR-10/100,
// STL10, folders of images). Loaders return plain Go slices; moving them to a device is
// the trainer's job.
package data

// Vectors is a table of N rows of D float32 features, row-major.
type Vectors struct {
	X        []float32 // N*D values, row i is X[i*D:(i+1)*D]
	N, D     int
	Labels   []int    // ground-truth class per row, 0..NumClasses-1; nil when unknown
	Classes  []string // class names by label id (the label column's original values)
	Features []string // feature names from the header, or nil
	Source   string   // where the rows came from, for messages and run configs
}

// Images is a set of N images of C planes of H×W bytes, channel-planar (N, C, H, W).
type Images struct {
	Pix     []uint8 // N*C*H*W bytes
	N       int
	C, H, W int
	Labels  []int    // class per image, 0..len(Classes)-1; nil when unknown
	Classes []string // class names by label id
	// Fine holds CIFAR-100's 100 fine labels when Labels are its 20 coarse ones.
	Fine   []int
	Source string
	// LeftOut describes the files of an image folder that were not PNG or JPEG and
	// so were left out ("12 .webp"), for the user to see; "" for none.
	LeftOut string
}

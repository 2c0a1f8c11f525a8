// Package data loads the data sets emclust clusters: user vectors (CSV, .npy, Parquet), the
// embedded UCI digits, and the image sets of the paper (MNIST-like IDX, CIFAR-10/100,
// STL10, folders of images). Loaders return plain Go slices; moving them to a device is
// the trainer's job.
package data

import "math"

// Vectors is a table of N rows of D float32 features, row-major.
type Vectors struct {
	X        []float32 // N*D values, row i is X[i*D:(i+1)*D]
	N, D     int
	Labels   []int    // ground-truth class per row, 0..NumClasses-1 or Unlabelled; nil when unknown
	Classes  []string // class names by label id (the label column's original values)
	Features []string // feature names from the header, or nil
	Source   string   // where the rows came from, for messages and run configs
	Dropped  []string // the columns --drop-cols left out, by name where they have one
	// IDs name the rows, from the column IDName (--id-col; "" in a file without a
	// header); nil when there is none.
	IDs    []string
	IDName string
	// RowCounters are the feature columns whose values count the rows, one up a row
	// (0, 1, 2, … or 1001, 1002, …): the index pandas' to_csv writes, or an ID,
	// which would be clustered as a feature.
	RowCounters []Column
}

// Unlabelled is the label of a row whose label cell is empty or NA (eval.MissingLabel):
// a table labelled in part is clustered whole and scored on the rows that have a
// class (eval.ScoreLabelled).
const Unlabelled = -1

// CountLabelled is how many of labels name a class, not Unlabelled.
func CountLabelled(labels []int) int {
	n := 0
	for _, l := range labels {
		if l != Unlabelled {
			n++
		}
	}
	return n
}

// MissingColumnError is a --drop-cols, --id-col or --label-col column (Flag says
// which), by name or index, that a table does not have, or a name given for a file
// without a header. A model's own columns may be missing from new data.
type MissingColumnError struct{ msg, Flag string }

func (e *MissingColumnError) Error() string { return e.msg }

// RolesError is a column given two roles (the label, the IDs, dropped); Label says
// whether one is the label's, which a model's label column taken for new rows yields.
type RolesError struct {
	msg   string
	Label bool
}

func (e *RolesError) Error() string { return e.msg }

// Column names a column of a table: What for a message, Flag as --drop-cols takes it.
type Column struct{ What, Flag string }

// MinCountedRows is the fewest rows in which a column counting them is taken for a
// row counter rather than a feature.
const MinCountedRows = 8

// countsRows says whether feature j of the n×d values x goes up by exactly one a row.
func countsRows(x []float32, n, d, j int) bool {
	if n < MinCountedRows {
		return false
	}
	first := float64(x[j])
	if first != math.Trunc(first) || math.Abs(first)+float64(n) > 1<<24 {
		return false // not integers float32 holds exactly
	}
	for i := 1; i < n; i++ {
		if float64(x[i*d+j]) != first+float64(i) {
			return false
		}
	}
	return true
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
	// Files are a folder's images, by their paths under Source, in the order of Pix;
	// nil for the other image sets.
	Files []string
	// LeftOut describes the files of an image folder that were not PNG or JPEG and
	// so were left out ("12 .webp"), for the user to see; "" for none.
	LeftOut string
	// Empty are its class folders without an image, which make no class.
	Empty []string
	// Skipped are the images FolderOptions.SkipBad left out, each with why.
	Skipped []string
}

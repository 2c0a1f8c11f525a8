package data

import (
	"bytes"
	_ "embed"
	"fmt"
)

// digitsCSV is scikit-learn's copy of the UCI optical digits test set: 1797
// rows of 8×8 pixel counts (0..16) followed by the digit, with no header.
//
//go:embed embedded/digits.csv.gz
var digitsCSV []byte

// Digits returns the embedded UCI hand-written digits: 1797 images of 8×8
// pixels as N=1797 rows of D=64 features (row-major, pixel_<row>_<col>),
// labelled 0..9. It needs no download, which makes it the data set for
// examples, smoke tests and quick checks. Each call parses a fresh copy, so
// callers may modify the result.
func Digits() (*Vectors, error) {
	const name = "embedded/digits.csv.gz"
	v, err := ParseCSV(bytes.NewReader(digitsCSV), name, CSVOptions{Header: "no", LabelCol: "-1", Comma: ','})
	if err != nil {
		return nil, err
	}
	if v.N != 1797 || v.D != 64 || len(v.Classes) != 10 {
		return nil, fmt.Errorf("%s: %d rows of %d features in %d classes, want 1797 of 64 in 10", name, v.N, v.D, len(v.Classes))
	}
	v.Features = make([]string, 0, 64)
	for r := range 8 {
		for c := range 8 {
			v.Features = append(v.Features, fmt.Sprintf("pixel_%d_%d", r, c))
		}
	}
	v.Source = "embedded:digits (UCI ML hand-written digits, CC BY 4.0)"
	return v, nil
}

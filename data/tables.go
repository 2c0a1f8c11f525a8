package data

import (
	"bytes"
	"embed"
	"fmt"
)

// tablesFS holds the small UCI tables embedded beside the digits (embedded/README.md
// credits them): data a user has on every machine, to check the defaults on.
//
//go:embed embedded/wine.csv.gz embedded/iris.csv.gz embedded/breast-cancer.csv.gz
var tablesFS embed.FS

// tables are the embedded tables after the digits, with their shapes.
var tables = []struct {
	name, title string
	n, d, k     int
}{
	{"wine", "UCI Wine", 178, 13, 3},
	{"iris", "UCI Iris", 150, 4, 3},
	{"breast-cancer", "UCI Breast Cancer Wisconsin (Diagnostic)", 569, 30, 2},
}

// TableNames are the embedded vector data sets, the digits first.
func TableNames() []string {
	names := []string{"digits"}
	for _, t := range tables {
		names = append(names, t.name)
	}
	return names
}

// Table returns the embedded vector data set name (see TableNames), labelled. Each
// call parses a fresh copy.
func Table(name string) (*Vectors, error) {
	if name == "digits" {
		return Digits()
	}
	for _, t := range tables {
		if t.name != name {
			continue
		}
		path := "embedded/" + name + ".csv.gz"
		b, err := tablesFS.ReadFile(path)
		if err != nil {
			return nil, err
		}
		v, err := ParseCSV(bytes.NewReader(b), path, CSVOptions{Header: "yes", LabelCol: "label", Comma: ','})
		if err != nil {
			return nil, err
		}
		if v.N != t.n || v.D != t.d || len(v.Classes) != t.k {
			return nil, fmt.Errorf("%s: %d rows of %d features in %d classes, want %d of %d in %d", path, v.N, v.D, len(v.Classes), t.n, t.d, t.k)
		}
		v.Source = fmt.Sprintf("embedded:%s (%s, CC BY 4.0)", name, t.title)
		return v, nil
	}
	return nil, fmt.Errorf("no embedded table %q: want one of %v", name, TableNames())
}

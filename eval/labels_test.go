package eval

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeLabels writes content to labels.txt in a fresh directory and returns
// its path.
func writeLabels(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "labels.txt")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadLabels(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []int
	}{
		{"integers", "3\n0\n3\n12\n", []int{3, 0, 3, 12}},
		{"no final newline", "1\n2", []int{1, 2}},
		{"trailing blank lines", "1\n2\n\n  \n\n", []int{1, 2}},
		{"CRLF and spaces", " 4\r\n5 \r\n\t4\r\n", []int{4, 5, 4}},
		{"byte order mark", "\ufeff2\n1\n", []int{2, 1}},
		{"strings by first appearance", "cat\ndog\ncat\nbird\n", []int{0, 1, 0, 2}},
		// Labels with spaces are one label, not two fields.
		{"spaces inside", "New York\nParis\nNew York\n", []int{0, 1, 0}},
		// One non-integer makes the whole file strings, so "7" and "x"
		// cannot collide with an id given to another string.
		{"mixed", "7\nx\n7\n0\n", []int{0, 1, 0, 2}},
		// Negative ids (noise in DBSCAN-style output) become ordinary labels.
		{"negative", "-1\n0\n-1\n", []int{0, 1, 0}},
		// Were three labels: "1.0" is the 1 beside it.
		{"integers written as floats", "1.0\n1\n2.0\n1e1\n", []int{1, 1, 2, 10}},
		{"a float among names", "0.5\ncat\n0.5\n", []int{0, 1, 0}},
		// Missing values are points without a class, whatever the others are;
		// "None" may name one.
		{"missing among integers", "3\nNA\n0\nnan\n", []int{3, -1, 0, -1}},
		{"missing among names", "cat\n<NA>\nNone\nnull\ncat\n", []int{0, -1, 1, -1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadLabels(writeLabels(t, tt.content))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReadLabelsErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // expected error, after the path
	}{
		{"blank line in the middle", "1\n2\n\n3\n", ":3: empty label"},
		{"first of several blank lines", "a\n\n\n\nb\n", ":2: empty label"},
		{"blank first line", "\n1\n", ":1: empty label"},
		{"empty file", "", ": no labels"},
		{"predict's CSV", "index,cluster,posterior\n0,3,0.9\n", `:1: "index,cluster,posterior" is a row of columns, not a label: give one label a line (predict's assignments: the cluster column alone)`},
		{"tab-separated", "1\n2\t0\n", `:2: "2\t0" is a row of columns, not a label: give one label a line (predict's assignments: the cluster column alone)`},
		// Was scored with every line a class of its own: ACC 0.01.
		{"space-separated", "0 1\n1 0\n", `:1: "0 1" is a row of columns, not a label: give one label a line (predict's assignments: the cluster column alone)`},
		// Cut at 40 bytes, before the "é" that would straddle the cut, not through it.
		{"long row cut", strings.Repeat("a", 39) + "é,1\n", `:1: "` + strings.Repeat("a", 39) + `…" is a row of columns, not a label: give one label a line (predict's assignments: the cluster column alone)`},
		{"only blank lines", "\n \n\n", ": no labels"},
		// Were labels of their own: "0" on line 1 carried the byte-order mark, the others a 0 byte.
		{"UTF-16 with its mark", "\xff\xfe0\x00\r\x00\n\x001\x00\r\x00\n\x000\x00", ":1: UTF-16 text or a binary file; save the labels as UTF-8 text (iconv -f UTF-16 -t UTF-8)"},
		{"UTF-16 without a mark", "0\x00\n\x001\x00\n\x00", ":1: UTF-16 text or a binary file; save the labels as UTF-8 text (iconv -f UTF-16 -t UTF-8)"},
		{"line too long", "1\n" + strings.Repeat("x", maxLabelLine+1) + "\n", ":2: bufio.Scanner: token too long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeLabels(t, tt.content)
			_, err := ReadLabels(path)
			if err == nil || err.Error() != path+tt.want {
				t.Fatalf("err = %v, want %q", err, path+tt.want)
			}
		})
	}

	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope.txt")
		_, err := ReadLabels(path)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v, want a not-exist error naming %s", err, path)
		}
	})
}

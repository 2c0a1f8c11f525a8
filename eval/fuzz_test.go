package eval

import (
	"bytes"
	"testing"
)

// FuzzReadLabels: any bytes give labels or an error, never a panic, and the labels
// given are one per non-blank line.
func FuzzReadLabels(f *testing.F) {
	for _, seed := range []string{"0\n1\n1\n", "\ufeffcat\ndog\ncat\n\n", "1\n\n2\n", "-3\n7\n", " a \n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		labels, err := readLabels(bytes.NewReader(b), "fuzz.txt")
		if err != nil {
			return
		}
		lines := 0
		for i, l := range bytes.Split(b, []byte("\n")) {
			if i == 0 {
				l = bytes.TrimPrefix(l, []byte("\ufeff"))
			}
			if len(bytes.TrimSpace(l)) > 0 {
				lines++
			}
		}
		if len(labels) != lines {
			t.Fatalf("%d labels from %d non-blank lines", len(labels), lines)
		}
	})
}

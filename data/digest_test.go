package data

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"testing"
)

// The digest is SHA-256 of a header and the values' little-endian bytes, checked
// against crypto/sha256 over bytes written out by hand; any change of a value or of
// the shape changes it.
func TestDigest(t *testing.T) {
	v := &Vectors{X: []float32{1, -2, 0.5, 0}, N: 2, D: 2}
	raw := append([]byte("vectors 2×2\n"),
		0x00, 0x00, 0x80, 0x3f, // 1
		0x00, 0x00, 0x00, 0xc0, // -2
		0x00, 0x00, 0x00, 0x3f, // 0.5
		0x00, 0x00, 0x00, 0x00) // 0
	sum := sha256.Sum256(raw)
	if got, want := v.Digest(), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("digest %s, want %s", got, want)
	}
	for name, w := range map[string]*Vectors{
		"a value":   {X: []float32{1, -2, 0.5, 1e-30}, N: 2, D: 2},
		"the shape": {X: []float32{1, -2, 0.5, 0}, N: 1, D: 4},
	} {
		if w.Digest() == v.Digest() {
			t.Errorf("another %s, the same digest", name)
		}
	}
	// Longer than one chunk: the same as hashing all the bytes at once.
	long := &Vectors{X: make([]float32, 3<<14+5), N: 3<<14 + 5, D: 1}
	for i := range long.X {
		long.X[i] = float32(i)
	}
	b := []byte("vectors 49157×1\n")
	for _, f := range long.X {
		u := math.Float32bits(f)
		b = append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24))
	}
	if sum := sha256.Sum256(b); long.Digest() != hex.EncodeToString(sum[:]) {
		t.Error("a digest over several chunks differs from one over all the bytes")
	}
	im := &Images{Pix: []uint8{1, 2, 3, 4}, N: 1, C: 1, H: 2, W: 2}
	if sum := sha256.Sum256(append([]byte("images 1×1×2×2\n"), 1, 2, 3, 4)); im.Digest() != hex.EncodeToString(sum[:]) {
		t.Error("image digest differs from SHA-256 of its header and pixels")
	}
}

// LabelsDigest tells labels apart by any row's class and by the classes' names, and
// is empty without labels.
func TestLabelsDigest(t *testing.T) {
	base := LabelsDigest([]int{0, 1, 1, 0}, []string{"a", "b"})
	if len(base) != 64 || LabelsDigest(nil, nil) != "" || LabelsDigest([]int{0, 1, 1, 0}, []string{"a", "b"}) != base {
		t.Fatalf("digest %q of labels, %q of none; want 64 hex digits, \"\", the same again", base, LabelsDigest(nil, nil))
	}
	for _, tc := range []struct {
		name    string
		labels  []int
		classes []string
	}{
		{"one row's class", []int{0, 1, 0, 0}, []string{"a", "b"}},
		{"a row fewer", []int{0, 1, 1}, []string{"a", "b"}},
		{"other names", []int{0, 1, 1, 0}, []string{"a", "c"}},
		{"names run together", []int{0, 1, 1, 0}, []string{"ab", ""}},
		{"no rows", []int{}, nil},
	} {
		if LabelsDigest(tc.labels, tc.classes) == base {
			t.Errorf("%s: the same digest", tc.name)
		}
	}
}

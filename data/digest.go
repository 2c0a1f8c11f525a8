package data

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
)

// Digest is a SHA-256 of the rows' shape and values, little-endian, as a run records
// it: a resumed run checks that it trains on the data it started on, wherever they
// lie now. Labels, names and the file's text (its number format, say) do not count.
func (v *Vectors) Digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "vectors %d×%d\n", v.N, v.D)
	buf := make([]byte, 0, 4<<14)
	for x := v.X; len(x) > 0; {
		chunk := x[:min(len(x), 1<<14)]
		x = x[len(chunk):]
		buf = buf[:0]
		for _, f := range chunk {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
		}
		h.Write(buf)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Digest is a SHA-256 of the images' shape and pixels (see Vectors.Digest).
func (im *Images) Digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "images %d×%d×%d×%d\n", im.N, im.C, im.H, im.W)
	h.Write(im.Pix)
	return hex.EncodeToString(h.Sum(nil))
}

// LabelsDigest is a SHA-256 of labels and their class names, or "" without labels:
// a resumed run also checks that its epochs are scored against the labels they were
// scored against before.
func LabelsDigest(labels []int, classes []string) string {
	if labels == nil {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "labels %d, classes %d\n", len(labels), len(classes))
	for _, c := range classes {
		fmt.Fprintf(h, "%d:%s\n", len(c), c)
	}
	buf := make([]byte, 0, 4*len(labels))
	for _, l := range labels {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(l))
	}
	h.Write(buf)
	return hex.EncodeToString(h.Sum(nil))
}

package data

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"emclust/sysmem"
)

// Limits on what a reader allocates on the word of a file's header or a flag. Files are
// untrusted: a header may declare any size, and a product of declared sizes may
// overflow. Every allocation is checked against the bytes the file actually has, or,
// where the data is computed (decompressed, decoded, resized), against these limits.
const (
	// MaxImageSide is the largest image width or height decoded or resized to.
	MaxImageSide = 16384
	// maxDecodedPixels bounds one decoded image (a 16384² PNG is 1 GiB as RGBA).
	maxDecodedPixels = 1 << 28
)

// mulWithin returns the product of dims and true, or false when a dimension is negative
// or the product exceeds limit. It checks before each multiplication, so no product can
// overflow.
func mulWithin(limit int, dims ...int) (int, bool) {
	n := 1
	for _, d := range dims {
		if d < 0 {
			return 0, false
		}
		if d == 0 {
			return 0, true
		}
	}
	for _, d := range dims {
		if n > limit/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// checkMemory refuses a buffer of n bytes that the machine cannot hold.
func checkMemory(what string, n int, ok bool) error {
	if limit := sysmem.Total(); !ok || n > limit {
		return fmt.Errorf("%s would need more than the machine's %d MiB of memory", what, limit>>20)
	}
	return nil
}

// quoteClip quotes s for an error message, cut to its first 60 bytes: a cell or
// header of megabytes would make the one error line megabytes long.
func quoteClip(s string) string {
	const most = 60
	if len(s) <= most {
		return strconv.Quote(s)
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

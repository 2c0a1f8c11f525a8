package data

// Checks of a Parquet file's Thrift metadata and page headers, made before
// parquet-go decodes them: it allocates what they claim.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// checkFooter walks the file's metadata, in Thrift's compact protocol, before
// parquet-go decodes it: that decoder makes each list as long as it says, so that a
// damaged count of a few bytes asked for more memory than the machine has, which ends
// the process. Here a list, map or string may not claim more elements or bytes than
// the footer has left, nor structs nest past what Parquet's own do.
func checkFooter(r io.ReaderAt, size int64) error {
	if size < 12 {
		return fmt.Errorf("%d bytes, too short for a Parquet file", size)
	}
	var tail [8]byte
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return err
	}
	if string(tail[4:]) != parquetMagic {
		return fmt.Errorf("it does not end with %q (truncated?)", parquetMagic)
	}
	n := int64(binary.LittleEndian.Uint32(tail[:4]))
	if n > size-12 {
		return fmt.Errorf("its metadata claims %d bytes of a file of %d", n, size)
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, size-8-n); err != nil {
		return err
	}
	c := compactChecker{b: b}
	if err := c.value(thriftStruct, 0); err != nil {
		return fmt.Errorf("metadata at byte %d of %d: %w", c.i, n, err)
	}
	return nil
}

// Thrift's compact protocol types.
const (
	thriftTrue   = 1
	thriftFalse  = 2
	thriftByte   = 3
	thriftI16    = 4
	thriftI32    = 5
	thriftI64    = 6
	thriftDouble = 7
	thriftBinary = 8
	thriftList   = 9
	thriftSet    = 10
	thriftMap    = 11
	thriftStruct = 12
	thriftUUID   = 13
)

// compactChecker walks a Thrift value in the compact protocol, checking its
// lengths against the bytes left.
type compactChecker struct {
	b []byte
	i int
}

var errThriftShort = errors.New("ends early")

func (c *compactChecker) byte() (byte, error) {
	if c.i >= len(c.b) {
		return 0, errThriftShort
	}
	c.i++
	return c.b[c.i-1], nil
}

func (c *compactChecker) uvarint() (uint64, error) {
	v, k := binary.Uvarint(c.b[c.i:])
	if k <= 0 {
		return 0, errThriftShort
	}
	c.i += k
	return v, nil
}

// count reads a length of n elements of at least one byte each.
func (c *compactChecker) count(n uint64, what string) (int, error) {
	if left := uint64(len(c.b) - c.i); n > left {
		return 0, fmt.Errorf("a %s of %d, with %d bytes left", what, n, left)
	}
	return int(n), nil
}

func (c *compactChecker) skip(n int) error {
	if n > len(c.b)-c.i {
		return errThriftShort
	}
	c.i += n
	return nil
}

// elem checks an element of a list or map, of type t: a boolean takes a byte there.
func (c *compactChecker) elem(t byte, depth int) error {
	if t == thriftTrue || t == thriftFalse {
		return c.skip(1)
	}
	return c.value(t, depth)
}

// value checks a value of type t, at nesting depth.
func (c *compactChecker) value(t byte, depth int) error {
	if depth > 32 {
		return errors.New("nested too deep")
	}
	switch t {
	case thriftTrue, thriftFalse:
		return nil // in the field's type (a list's or map's: elem)
	case thriftByte:
		return c.skip(1)
	case thriftI16, thriftI32, thriftI64:
		_, err := c.uvarint()
		return err
	case thriftDouble:
		return c.skip(8)
	case thriftUUID:
		return c.skip(16)
	case thriftBinary:
		v, err := c.uvarint()
		if err != nil {
			return err
		}
		n, err := c.count(v, "string")
		if err != nil {
			return err
		}
		return c.skip(n)
	case thriftList, thriftSet:
		h, err := c.byte()
		if err != nil {
			return err
		}
		size := uint64(h >> 4)
		if size == 15 {
			if size, err = c.uvarint(); err != nil {
				return err
			}
		}
		n, err := c.count(size, "list")
		if err != nil {
			return err
		}
		for range n {
			if err := c.elem(h&0xf, depth+1); err != nil {
				return err
			}
		}
		return nil
	case thriftMap:
		v, err := c.uvarint()
		if err != nil {
			return err
		}
		n, err := c.count(v, "map")
		if err != nil || n == 0 {
			return err
		}
		kv, err := c.byte()
		if err != nil {
			return err
		}
		for range n {
			if err := c.elem(kv>>4, depth+1); err != nil {
				return err
			}
			if err := c.elem(kv&0xf, depth+1); err != nil {
				return err
			}
		}
		return nil
	case thriftStruct:
		return c.structFields(depth, nil)
	}
	return fmt.Errorf("unknown type %d", t)
}

// fields walks a struct at the top level, offering each field to take, which reads
// its value itself and says so, or leaves it to be checked.
func (c *compactChecker) fields(take func(id int64, t byte) (bool, error)) error {
	return c.structFields(0, take)
}

func (c *compactChecker) structFields(depth int, take func(id int64, t byte) (bool, error)) error {
	var id int64
	for {
		h, err := c.byte()
		if err != nil {
			return err
		}
		if h == 0 {
			return nil
		}
		if h>>4 == 0 { // the field's id follows, in full
			v, err := c.uvarint()
			if err != nil {
				return err
			}
			id = int64(v>>1) ^ -int64(v&1)
		} else {
			id += int64(h >> 4)
		}
		if take != nil {
			if took, err := take(id, h&0xf); took || err != nil {
				if err != nil {
					return err
				}
				continue
			}
		}
		if err := c.value(h&0xf, depth+1); err != nil {
			return err
		}
	}
}

// A page's size uncompressed, as its header gives it, may be maxPageBytes, or more
// where its compressed bytes could hold it at maxPageRatio: parquet-go allocates what
// the header says before it reads the page. Writers make pages of about a megabyte
// (pyarrow, Spark) or less (parquet-go); deflate expands at most 1032-fold.
const (
	maxPageBytes = 64 << 20
	maxPageRatio = 1100
)

// checkPages reads the header of every page in the file, as checkFooter reads the
// footer, and refuses a page that would not fit in its column chunk, or whose size
// uncompressed is past what maxPageBytes and maxPageRatio allow, before parquet-go
// allocates it.
func checkPages(r io.ReaderAt, size int64, f *parquet.File) error {
	for g, rg := range f.Metadata().RowGroups {
		for j, cc := range rg.Columns {
			md := &cc.MetaData
			start := md.DataPageOffset
			if md.DictionaryPageOffset > 0 && md.DictionaryPageOffset < start {
				start = md.DictionaryPageOffset
			}
			end := start + md.TotalCompressedSize
			if start < 4 || md.TotalCompressedSize < 0 || end > size-8 || end < start {
				return fmt.Errorf("row group %d, column %d: pages at bytes %d to %d of a file of %d", g, j, start, end, size)
			}
			for at := start; at < end; {
				hdr, body, err := pageHeader(r, at, end)
				if err != nil {
					return fmt.Errorf("row group %d, column %d: the page header at byte %d: %w", g, j, at, err)
				}
				at += hdr + body
			}
		}
	}
	return nil
}

// pageHeader checks the page header at byte at, in a column chunk that ends at end,
// and returns its length and that of the page after it.
func pageHeader(r io.ReaderAt, at, end int64) (hdr, body int64, err error) {
	for window := int64(4 << 10); ; window *= 4 {
		b := make([]byte, min(window, end-at))
		if _, err := r.ReadAt(b, at); err != nil {
			return 0, 0, err
		}
		c := compactChecker{b: b}
		var sizes [2]int64 // uncompressed, compressed
		err := c.fields(func(id int64, t byte) (bool, error) {
			if (id == 2 || id == 3) && t == thriftI32 {
				v, err := c.uvarint()
				sizes[id-2] = int64(v>>1) ^ -int64(v&1) // zigzag
				return true, err
			}
			return false, nil
		})
		switch {
		case errors.Is(err, errThriftShort) && int64(len(b)) < end-at && window < maxPageBytes:
			continue // a longer header: statistics of long values
		case err != nil:
			return 0, 0, err
		case sizes[1] < 0 || sizes[1] > end-at-int64(c.i):
			return 0, 0, fmt.Errorf("a page of %d bytes, with %d left in its column", sizes[1], end-at-int64(c.i))
		case sizes[0] < 0 || sizes[0] > max(maxPageBytes, maxPageRatio*sizes[1]):
			return 0, 0, fmt.Errorf("a page of %d bytes uncompressed from %d, more than the %d MiB or %d-fold allowed", sizes[0], sizes[1], maxPageBytes>>20, maxPageRatio)
		}
		return int64(c.i), sizes[1], nil
	}
}

package data

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/binary"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"emclust/eval"
	"emclust/sysmem"
)

// CSVOptions says how to read a delimited text file of vectors.
//
// Column numbers, both in LabelCol and in error messages, are 0-based, so the
// column an error names is the one LabelCol would select with the same number.
type CSVOptions struct {
	// Header is "auto" (or ""), "yes" or "no". With "auto" the first row is data
	// when its cells, the label cell aside, are all numbers, a header when none
	// is a number (names, empty cells) or when LabelCol names a column (a name
	// can only be found in a header), and an error asking when it mixes numbers
	// with names or empty cells.
	Header string

	// LabelCol selects the column holding ground-truth classes: "" for none, a
	// column name from the header, or a 0-based index as a decimal string;
	// negative indices count from the end, so "-1" is the last column.
	LabelCol string

	// DropCols are columns that are neither features nor labels (an ID, a date, a
	// note), each a name from the header or an index, as LabelCol. Their cells are
	// not read.
	DropCols []string

	// IDCol selects a column of row names (an ID), by name or index as LabelCol: not a
	// feature, but read as text and kept in Vectors.IDs.
	IDCol string

	// ColumnsFromModel says that DropCols and IDCol are a model's, for new data of
	// the layout it trained on: a NumPy array, which has no columns but features,
	// is read without them rather than refused.
	ColumnsFromModel bool

	// ClasslessLabels reads a label column in which no row has a class as no labels,
	// for new rows a model assigns (their label cells left empty), where training
	// refuses it.
	ClasslessLabels bool

	// Comma is the field delimiter. Zero detects it from the first data line:
	// the most frequent of ',', '\t' and ';' outside quotes, or runs of blanks
	// when the line has none of them but does have spaces (np.savetxt's
	// default). ' ' asks for blank-separated fields explicitly.
	Comma rune

	// Features, when set, hears how many feature columns the table has, and their
	// names where it has them (else nil), as soon as its first line shows them, before
	// the other lines are read; an error it returns ends the read. A caller that needs
	// one width (a model's) refuses a table of another at once rather than after
	// parsing all of it, and can name the columns that differ.
	Features func(d int, names []string) error

	// Alloc, when set, allocates the array a large table's values are parsed into,
	// of room for n values (nil: Go's make), so that the caller can hand them on
	// without a copy: the Vectors' X starts there unless the table outgrew the
	// estimate of its size, and then the caller frees what it allocated. It is
	// called at most once.
	Alloc func(n int) []float32

	// maxBytes bounds the values and labels read (0: a third of the machine's
	// memory, since a slice that grows holds its old and new arrays at once, and
	// rows not in Alloc's array are copied into a tensor), so that a gzip bomb or a
	// table larger than memory is an error naming its line rather than the end of
	// the process.
	maxBytes int

	// workers parse the numbers (0: one per core, up to 6; 1: the reader parses them),
	// in batches of at most batchRows rows (0: 1<<14).
	workers, batchRows int
}

// ReadCSV reads the delimited text file at path, which may be gzip-compressed,
// as described by ParseCSV.
func ReadCSV(path string, opt CSVOptions) (*Vectors, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := fileSize(f)
	return parseCSV(f, path, opt, size, gzipSize(f, size))
}

// gzipSize is the size gzip's trailer gives a regular file's decompressed text, or
// -1: the length modulo 2^32 of its last member, which for a file of one member
// under 4 GiB is the text's. A file whose trailer says less than the file (text
// compresses) has several members, or wrapped: -1. A size too small only presizes
// too little, and the rows past it grow the slice.
func gzipSize(f *os.File, size int64) int64 {
	var b [4]byte
	if size < 18 {
		return -1
	}
	if _, err := f.ReadAt(b[:2], 0); err != nil || b[0] != 0x1f || b[1] != 0x8b {
		return -1
	}
	if _, err := f.ReadAt(b[:], size-4); err != nil {
		return -1
	}
	if n := int64(binary.LittleEndian.Uint32(b[:])); n >= size {
		return n
	}
	return -1
}

// ParseCSV reads vectors from delimited text, one row per record. Every cell
// except the label cell must be a finite number; the label column may hold
// any strings. name identifies the input in error messages and becomes the
// Source of the result. Input starting with the gzip magic bytes is
// decompressed. Lines beginning with '#' and blank lines are skipped, and
// cells are trimmed of surrounding white space.
//
// Labels are numbered so that ids follow the sorted order of the class names:
// numerically when every class name is an integer (so "2" < "10"), otherwise
// lexically. Classes holds the names as written in the file.
func ParseCSV(r io.Reader, name string, opt CSVOptions) (*Vectors, error) {
	return parseCSV(r, name, opt, -1, -1)
}

// presizeAfter is how many bytes of a file of known size are parsed, at most, before
// the values' slice is sized for the whole file from the rows so far; a sixteenth of
// the file where that is less.
const presizeAfter = 4 << 20

// parseCSV is ParseCSV of a stream of size bytes (-1 if not known), or, gzipped, of
// unzipped bytes of text (gzipSize). The share of the text parsed estimates how many
// rows are left, so that the values take one allocation of about their size rather
// than a slice grown by appending, which allocates two to three times their size on
// its way. (How well gzip compresses varies along a file: a share of the compressed
// bytes says less.)
func parseCSV(r io.Reader, name string, opt CSVOptions, size, unzipped int64) (*Vectors, error) {
	cr := &countingReader{r: r}
	r = cr
	var hdr string
	switch h := strings.ToLower(opt.Header); h {
	case "", "auto":
		hdr = "auto"
	case "yes", "no":
		hdr = h
	default:
		return nil, fmt.Errorf("%s: header option %q: want auto, yes or no", name, opt.Header)
	}
	if c := opt.Comma; c != 0 && (c == '"' || c == '\r' || c == '\n' || c == '#' || c == utf8.RuneError || !utf8.ValidRune(c)) {
		return nil, fmt.Errorf("%s: invalid field delimiter %q", name, c)
	}

	text := &lineLimit{r: r, max: maxLineBytes}
	br := bufio.NewReaderSize(text, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		text.max = 0 // the lines are the decompressed stream's
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		defer zr.Close()
		// Unzipped on a goroutine of its own, beside the lines' splitting: on one,
		// a gzipped table took twice as long as the same text.
		ahead := newAheadReader(gzipErrors{zr}, 1<<20, 4)
		defer ahead.Close() // before zr's: it stops reading zr
		cr = &countingReader{r: ahead}
		br = bufio.NewReaderSize(&lineLimit{r: cr, max: maxLineBytes}, 64<<10)
		size = unzipped
	}
	// Spreadsheets start UTF-8 CSVs with a byte-order mark. Left in, it hides in the
	// first column's name, or makes a header-less file's first row look like a header.
	if bom, _ := br.Peek(3); len(bom) == 3 && bom[0] == 0xef && bom[1] == 0xbb && bom[2] == 0xbf {
		br.Discard(3)
	}
	// Excel's "Unicode text" and PowerShell write UTF-16: every other byte is 0, which
	// the messages below would quote as names.
	head, _ := br.Peek(min(br.Size(), 4096))
	switch {
	case isUTF16(head):
		return nil, fmt.Errorf("%s: UTF-16 text; save it as UTF-8 (CSV UTF-8 in a spreadsheet, or iconv -f UTF-16 -t UTF-8)", name)
	case IsNPY(head):
		// Was ":2: 1 fields, want 5" for a renamed (or gzip'd) array.
		return nil, fmt.Errorf("%s: a NumPy array, not text; give it as a .npy file (gunzipped, if it was gzipped: .npy.gz is not read)", name)
	case bytes.HasPrefix(head, []byte(parquetMagic)):
		return nil, fmt.Errorf("%s: a Parquet file, not text; give it as a .parquet file", name)
	case bytes.HasPrefix(head, []byte("\x89PNG")):
		return nil, fmt.Errorf("%s: a PNG image, not a table; images are read with --dataset folder --data-dir FOLDER", name)
	case bytes.IndexByte(head, 0) >= 0:
		return nil, fmt.Errorf("%s: binary data (a 0 byte at byte %d), not a text table", name, bytes.IndexByte(head, 0))
	}
	// Classic Mac OS ended lines with CR alone: the whole file is one line, which
	// the messages below would quote whole.
	if head, _ := br.Peek(br.Size()); bytes.IndexByte(head, '\n') < 0 && bytes.Count(head, []byte{'\r'}) > 1 {
		return nil, fmt.Errorf("%s: lines end in CR alone (old Mac text); convert them to LF, e.g. tr '\\r' '\\n' < in.csv > out.csv", name)
	}
	comma := opt.Comma
	if comma == 0 {
		// A short or failed peek still holds what could be read; read errors
		// resurface, with a line number, when the records are read.
		head, _ := br.Peek(br.Size())
		comma = sniffComma(head)
	}
	var rd recordReader
	if comma == ' ' {
		rd = &blankRecords{r: br}
	} else if comma < utf8.RuneSelf {
		rd = &plainRecords{r: br, comma: byte(comma)}
	} else {
		rd = &csvRecords{r: newCSVReader(br, comma)}
	}

	p := csvParser{name: name, labelCol: -1, idCol: -1, maxBytes: opt.maxBytes, alloc: opt.Alloc}
	if p.maxBytes <= 0 {
		p.maxBytes = sysmem.Total() / 3
	}
	if opt.workers == 0 {
		// The reader splits lines about four times as fast as a worker parses them
		// (the half-million-row table's profile), so more workers would wait on it.
		opt.workers = min(runtime.GOMAXPROCS(0), 6)
	}
	if opt.batchRows <= 0 {
		opt.batchRows = 1 << 14
	}
	rec, line, err := rd.next()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: no data rows", name)
	}
	if err != nil {
		return nil, p.wrap(err)
	}
	p.ncol = len(rec)
	p.skip = make([]bool, p.ncol)
	p.role = make([]string, p.ncol)

	// The columns that are not features: by number now, so that the header's guess
	// passes them over; by name once the header is read.
	var byName []colSpec
	for _, c := range append([]colSpec{{opt.LabelCol, roleLabel}, {opt.IDCol, roleID}}, dropSpecs(opt.DropCols)...) {
		c.spec = strings.TrimSpace(c.spec)
		if c.spec == "" {
			continue
		}
		i, err := strconv.Atoi(c.spec)
		if err != nil {
			byName = append(byName, c)
			continue
		}
		j := i
		if j < 0 {
			j += p.ncol
		}
		if j < 0 || j >= p.ncol {
			msg := fmt.Sprintf("%s: %s %d out of range: line %d has %d columns", name, c.what(), i, line, p.ncol)
			if at := slices.IndexFunc(rec, func(cell string) bool { return strings.TrimSpace(cell) == c.spec }); at >= 0 {
				// A header's name of digits (a year) is read as an index.
				msg += fmt.Sprintf(" (a column named %s is given by its index, %d)", c.spec, at)
			}
			if c.role == roleLabel {
				return nil, errors.New(msg)
			}
			return nil, &MissingColumnError{msg, c.flag()}
		}
		if err := p.assign(j, c.role); err != nil {
			return nil, err
		}
	}

	header := hdr == "yes"
	guessedData, first := false, line // line 1 taken for data, for want of names
	if hdr == "auto" {
		if len(byName) > 0 {
			if !p.looksLikeHeader(rec) {
				return nil, &MissingColumnError{fmt.Sprintf("%s: %s %q is given by name, but line %d is data, not a header", name, byName[0].what(), byName[0].spec, line), byName[0].flag()}
			}
			header = true
		} else {
			var err error
			if header, err = p.headerOrData(rec, line); err != nil {
				return nil, err
			}
			// The columns passed over may have hidden a header's names.
			guessedData = !header && slices.Contains(p.skip, true)
		}
	}
	if len(byName) > 0 && !header {
		return nil, &MissingColumnError{fmt.Sprintf("%s: %s %q is given by name, but the file has no header (header option %q)", name, byName[0].what(), byName[0].spec, hdr), byName[0].flag()}
	}

	if header {
		p.names = make([]string, len(rec))
		for j, s := range rec {
			// As a run's config.json records the names (a Latin-1 "Größe" as
			// "Gr\ufffd\ufffde"), so that its own file matches them again.
			p.names[j] = strings.Clone(validUTF8(strings.TrimSpace(s)))
		}
		for _, c := range byName {
			j, err := p.named(c.spec, c.role)
			if err != nil {
				return nil, err
			}
			if err := p.assign(j, c.role); err != nil {
				return nil, err
			}
		}
	}
	for _, skip := range p.skip {
		if !skip {
			p.d++
		}
	}
	if p.d == 0 {
		if p.ncol == 1 && p.labelCol == 0 {
			return nil, fmt.Errorf("%s: no feature columns: the only column, %s, is the label", name, p.col(p.labelCol))
		}
		ids := ""
		if p.idCol >= 0 {
			ids = ", the IDs"
		}
		return nil, fmt.Errorf("%s: no feature columns: each of the %d is the label%s or dropped (--drop-cols)", name, p.ncol, ids)
	}
	if !header {
		if err := p.row(rec, line); err != nil {
			return nil, err
		}
	} else if opt.Features != nil {
		// The first data row before the width: what is wrong with it (a trailing
		// comma's empty cell) says more than a width that is then one too many.
		switch rec, line, err := rd.next(); {
		case err == nil:
			if err := p.row(rec, line); err != nil {
				return nil, err
			}
		case err != io.EOF:
			return nil, p.wrap(err)
		}
	}
	if opt.Features != nil {
		if err := opt.Features(p.d, p.featureNames()); err != nil {
			return nil, err
		}
	}
	rows := newRowPipeline(&p, opt.workers, opt.batchRows)
	defer rows.close()
	for {
		rec, line, err := rd.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if err := rows.flush(); err != nil {
				return nil, err // an earlier line's
			}
			return nil, p.wrap(err)
		}
		if err := rows.add(rec, line); err != nil {
			return nil, err
		}
		// encoding/csv reads from br itself: what br holds is read, not parsed.
		if parsed := cr.n - int64(br.Buffered()); size > 0 && parsed >= min(presizeAfter, size/16) && !p.presized {
			p.presize(rows.read(), float64(parsed)/float64(size))
		}
	}
	if err := rows.flush(); err != nil {
		return nil, err
	}
	if p.n == 0 {
		return nil, fmt.Errorf("%s: no data rows", name)
	}
	if guessedData && p.n >= 3 {
		switch {
		case p.labelCol >= 0 && p.labels[0] != Unlabelled && len(p.classes) < p.n && slices.Index(p.labels[1:], p.labels[0]) < 0 &&
			(p.firstRowApart() || p.firstRowNumbersColumns(2) || p.firstLabelAloneText()):
			// A header of numbers (wavelengths, years, or pandas' 0, 1, 2 for an
			// array's columns) beside the label's name: its row was a class of its
			// own, and values hundreds of spreads out, or the columns' numbers, or a
			// word among classes that are numbers.
			return nil, fmt.Errorf("%s:%d: the label %s is on no other line: is line %d a header of numeric names? say --header yes or --header no",
				name, first, quoteClip(p.classes[p.labels[0]]), first)
		case p.firstRowNumbersColumns(3):
			return nil, fmt.Errorf("%s:%d: line %d numbers the columns, as pandas names an array's: is it a header? say --header yes or --header no", name, first, first)
		case p.idCol >= 0 && p.firstIDAloneText():
			return nil, fmt.Errorf("%s:%d: the ID %s is the only one that is not a number: is line %d a header of numeric names? say --header yes or --header no",
				name, first, quoteClip(p.ids[0]), first)
		}
	}

	v := &Vectors{X: p.x, N: p.n, D: p.d, Source: name, Features: p.featureNames()}
	feature := 0
	for j, skip := range p.skip {
		switch {
		case p.role[j] == roleDropped:
			v.Dropped = append(v.Dropped, p.colName(j))
		case j == p.idCol:
			if p.names != nil {
				v.IDName = p.names[j]
			}
			v.IDs = p.ids
		case !skip:
			if countsRows(v.X, v.N, v.D, feature) {
				v.RowCounters = append(v.RowCounters, Column{p.col(j), p.flagArg(j)})
			}
			feature++
		}
	}
	if p.labelCol >= 0 {
		if err := p.allEmpty(v.N, p.name+": "+p.col(p.labelCol), p.flagArg(p.labelCol)); err == nil {
			v.Labels, v.Classes = p.sorted()
		} else if !opt.ClasslessLabels {
			return nil, err
		}
	}
	return v, nil
}

// featureNames are the header's names of the feature columns; nil without a header.
func (p *csvParser) featureNames() []string {
	if p.names == nil {
		return nil
	}
	names := make([]string, 0, p.d)
	for j, s := range p.names {
		if !p.skip[j] {
			names = append(names, s)
		}
	}
	return names
}

// firstRowApart says whether every value of the first row lies further from the
// other rows' range, in its column, than the range is wide: what a row of column
// names does (400 nm beside reflectances of 0.03), and a row of data seldom.
func (p *csvParser) firstRowApart() bool {
	for j := range p.d {
		lo, hi := p.x[p.d+j], p.x[p.d+j]
		for i := 2; i < p.n; i++ {
			lo, hi = min(lo, p.x[i*p.d+j]), max(hi, p.x[i*p.d+j])
		}
		if v, span := p.x[j], hi-lo; v >= lo-span && v <= hi+span {
			return false
		}
	}
	return true
}

// firstRowNumbersColumns says whether the first row, of at least minD features,
// numbers them from 0, by their order among the features or their columns in the
// file: the names pandas gives the columns of an array.
func (p *csvParser) firstRowNumbersColumns(minD int) bool {
	if p.d < minD || p.n < 1 {
		return false
	}
	byFeature, byColumn := true, true
	k := 0
	for j, skip := range p.skip {
		if skip {
			continue
		}
		byFeature = byFeature && p.x[k] == float32(k)
		byColumn = byColumn && p.x[k] == float32(j)
		k++
	}
	return byFeature || byColumn
}

// firstIDAloneText says whether the first row's ID is the only one that is not a
// number.
func (p *csvParser) firstIDAloneText() bool {
	for i, id := range p.ids {
		if _, err := parseNumber(id); (err == nil) == (i == 0) {
			return false
		}
	}
	return true
}

// firstLabelAloneText says whether the first row's class is the only one that is not
// a number.
func (p *csvParser) firstLabelAloneText() bool {
	for id, c := range p.classes {
		if _, err := parseNumber(c); (err == nil) == (id == p.labels[0]) {
			return false
		}
	}
	return true
}

// csvParser accumulates rows and knows enough about the columns to describe
// a bad cell.
type csvParser struct {
	name     string
	ncol     int      // fields per record
	d        int      // feature columns
	labelCol int      // -1 when there are no labels
	skip     []bool   // a column that is no feature: the label's, the IDs', or dropped
	role     []string // what a column that is no feature is (roleLabel, …)
	idCol    int      // -1 when there are no IDs
	ids      []string // the ID of each row
	idBytes  int      // their text's
	names    []string // header cells, or nil
	n        int
	x        []float32
	labelSet
	presized bool
	maxBytes int                   // the most bytes x and labels may take
	alloc    func(n int) []float32 // CSVOptions.Alloc
}

// presize makes room for the rows of the whole input, of which the n rows read so far
// are the share read (0 to 1), and 3% more for rows longer than these; rows past that
// grow the slices as before. (Rows still being parsed are read, not yet in p.x.)
func (p *csvParser) presize(n int, read float64) {
	p.presized = true
	if !(read > 0 && read < 1) || n == 0 {
		return
	}
	rows := int(float64(n)/read*1.03) + 1
	if p.bytes(rows) > p.maxBytes {
		return // row() refuses the row that passes the limit, by its line
	}
	// make and copy rather than slices.Grow, which clears the new room: fresh
	// memory from the OS is zero already, and clearing it faults every page in at once.
	var x []float32
	if p.alloc != nil {
		x = p.alloc(rows * p.d)
	}
	if cap(x) < rows*p.d {
		x = make([]float32, rows*p.d)
	}
	x = x[:len(p.x)]
	copy(x, p.x)
	p.x = x
	if p.labelCol >= 0 {
		l := make([]int, len(p.labels), rows)
		copy(l, p.labels)
		p.labels = l
	}
}

// gzipErrors says where a read error comes from: a bare "unexpected EOF" did not.
type gzipErrors struct{ r io.Reader }

func (g gzipErrors) Read(b []byte) (int, error) {
	n, err := g.r.Read(b)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("gzip data: %w (a file cut short, or bytes after its end? gunzip -t says)", err)
	}
	return n, err
}

// aheadReader reads r on a goroutine of its own, up to depth chunks of size bytes
// ahead of its reader, so that producing the bytes (unzipping) and using them
// (splitting lines) run on two cores. Close stops the goroutine and waits for it.
type aheadReader struct {
	chunks chan aheadChunk
	free   chan []byte
	stop   chan struct{}
	done   chan struct{}
	cur    []byte // what the last chunk has left to read
	last   []byte // the last chunk's buffer, for reuse
	err    error
}

type aheadChunk struct {
	b   []byte
	err error
}

func newAheadReader(r io.Reader, size, depth int) *aheadReader {
	a := &aheadReader{chunks: make(chan aheadChunk, depth), free: make(chan []byte, depth+2),
		stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		defer close(a.chunks)
		for {
			var b []byte
			select {
			case b = <-a.free:
			case <-a.stop:
				return
			default:
				b = make([]byte, size)
			}
			n, err := 0, error(nil)
			for n < len(b) && err == nil {
				var k int
				k, err = r.Read(b[n:])
				n += k
			}
			select {
			case a.chunks <- aheadChunk{b[:n], err}:
			case <-a.stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return a
}

func (a *aheadReader) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.err != nil {
			return 0, a.err
		}
		if a.last != nil {
			select {
			case a.free <- a.last[:cap(a.last)]:
			default:
			}
			a.last = nil
		}
		c, ok := <-a.chunks
		if !ok {
			return 0, io.ErrClosedPipe // read after Close
		}
		a.cur, a.last, a.err = c.b, c.b, c.err
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// Close stops the reading goroutine and waits until it has left r.
func (a *aheadReader) Close() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// labelHint names the flags that take a column of words out of the features: class
// names, where no label column was given, are the likeliest cause, then IDs.
func (p *csvParser) labelHint(j int) string {
	if p.ncol == 1 {
		// A comma file named .tsv read as one column: "--label-col a,b,c" misled.
		return " (the file reads as one column: is it separated by another character than its name says? .tsv is read by tabs)"
	}
	return notFeatureHint(p.flagArg(j), p.col(j), p.labelCol < 0, p.idCol < 0)
}

// flagArg is column j as a hint's flag names it: by name where the header has one
// that a shell and --drop-cols' commas leave whole and that selects it alone (colArg),
// else by index.
func (p *csvParser) flagArg(j int) string {
	if p.names == nil {
		return strconv.Itoa(j)
	}
	return colArg(j, p.names[j], p.names)
}

// emptyHint says what an empty cell in feature column j may be: a missing value, or
// a row without a class in a column of labels (the cells a user left empty where
// they labelled only some rows), which --label-col reads as such.
func (p *csvParser) emptyHint(j int) string {
	if p.ncol == 1 {
		return ""
	}
	arg := p.flagArg(j)
	hint := " (a missing value: fill it, or leave the row out"
	if p.labelCol < 0 {
		hint += fmt.Sprintf("; if %s holds class labels, some left empty, pass --label-col %s", p.col(j), arg)
	}
	return hint + fmt.Sprintf("; if it is no feature, --drop-cols %s)", arg)
}

// notFeatureHint names the flags that would take column arg, called what, out of the
// features: --label-col and --id-col where they are free, and --drop-cols.
func notFeatureHint(arg, what string, label, id bool) string {
	var flags []string
	if label {
		flags = append(flags, fmt.Sprintf("--label-col %s if %s holds class labels", arg, what))
	}
	if id {
		flags = append(flags, fmt.Sprintf("--id-col %s if it names the rows", arg))
	}
	drop := fmt.Sprintf("--drop-cols %s if it is no feature otherwise", arg)
	if len(flags) == 0 {
		return " (pass " + drop + ")"
	}
	return " (pass " + strings.Join(flags, ", ") + ", or " + drop + ")"
}

// The roles of the columns that are not features, as messages name them.
const (
	roleLabel   = "the label column"
	roleID      = "the ID column"
	roleDropped = "a dropped column"
)

// colSpec is a column given by name or index for a role.
type colSpec struct{ spec, role string }

// dropSpecs are the --drop-cols columns as colSpecs.
func dropSpecs(cols []string) []colSpec {
	specs := make([]colSpec, len(cols))
	for i, c := range cols {
		specs[i] = colSpec{c, roleDropped}
	}
	return specs
}

// flag is the flag that gives a column its role.
func (c colSpec) flag() string {
	switch c.role {
	case roleLabel:
		return "--label-col"
	case roleID:
		return "--id-col"
	}
	return "--drop-cols"
}

// what is the role without its article, as in "label column "x" is given by name".
func (c colSpec) what() string {
	return strings.TrimPrefix(strings.TrimPrefix(c.role, "the "), "a ")
}

// named is the column that a name given for role selects in the header.
func (p *csvParser) named(s, role string) (int, error) {
	j := slices.Index(p.names, s)
	if j < 0 {
		switch role {
		case roleDropped:
			return -1, &MissingColumnError{fmt.Sprintf("%s: no column %q to drop; columns are: %s", p.name, s, strings.Join(p.names, ", ")), "--drop-cols"}
		case roleID:
			return -1, &MissingColumnError{fmt.Sprintf("%s: no column %q for the IDs; columns are: %s", p.name, s, strings.Join(p.names, ", ")), "--id-col"}
		}
		return -1, &MissingColumnError{fmt.Sprintf("%s: no column %q; columns are: %s", p.name, s, strings.Join(p.names, ", ")), "--label-col"}
	}
	if slices.Index(p.names[j+1:], s) >= 0 {
		return -1, fmt.Errorf("%s: %s %q is ambiguous: the header has it more than once", p.name, colSpec{s, role}.what(), s)
	}
	return j, nil
}

// assign gives column j a role other than a feature's; one column has one role, but
// may be dropped twice.
func (p *csvParser) assign(j int, role string) error {
	if was := p.role[j]; was != "" {
		if was == role && role == roleDropped {
			return nil
		}
		return &RolesError{fmt.Sprintf("%s: %s is both %s and %s", p.name, p.col(j), was, role), was == roleLabel || role == roleLabel}
	}
	p.role[j], p.skip[j] = role, true
	switch role {
	case roleLabel:
		p.labelCol = j
	case roleID:
		p.idCol = j
	}
	return nil
}

// colName is column j's name in the header, or else "column j".
func (p *csvParser) colName(j int) string {
	if p.names != nil && p.names[j] != "" {
		return p.names[j]
	}
	return fmt.Sprintf("column %d", j)
}

// col describes column j for error messages.
func (p *csvParser) col(j int) string {
	if p.names != nil {
		return fmt.Sprintf("column %d (%s)", j, quoteClip(p.names[j]))
	}
	return fmt.Sprintf("column %d", j)
}

// wrap adds the input name to a read error, keeping csv's line and column.
func (p *csvParser) wrap(err error) error {
	if le := (*longLineError)(nil); errors.As(err, &le) {
		return fmt.Errorf("%s:%d: %w", p.name, le.line, err)
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrQuote) && pe.StartLine < pe.Line {
		// A quote never closed takes the lines after it into its field: the mistake
		// is where the field opened, not where the file ran out.
		return fmt.Errorf("%s:%d: the quoted field that opens on this line runs to line %d, where it fails: %w", p.name, pe.StartLine, pe.Line, pe.Err)
	}
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d:%d: %w", p.name, pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("%s: %w", p.name, err)
}

// headerOrData decides whether line 1 is a header when the user did not say: cells
// (other than the label's and dropped ones) that are all numbers are data, and names or empty cells
// without a number a header. Numbers beside names or empty cells may be a data row
// with a missing value or a header with numeric names (pandas writes ",0,1,2" for
// a frame's default columns); guessing either way would silently drop a row or read
// names as numbers.
func (p *csvParser) headerOrData(rec []string, line int) (bool, error) {
	number, other, named := -1, -1, false
	for j, s := range rec {
		if p.skip[j] {
			continue
		}
		s = strings.TrimSpace(s)
		named = named || s != ""
		if _, err := parseNumber(s); err == nil || errors.Is(err, strconv.ErrRange) {
			if number < 0 {
				number = j
			}
		} else if other < 0 {
			other = j
		}
	}
	if number >= 0 && other >= 0 {
		what := "empty"
		if s := strings.TrimSpace(rec[other]); s != "" {
			what = "not (" + quoteClip(s) + ")"
		}
		hint := ""
		if what != "empty" && p.labelCol < 0 {
			hint = fmt.Sprintf("; or, if column %d holds class labels, --label-col %d", other, other)
		}
		return false, fmt.Errorf("%s:%d: %s is a number and %s is %s: is line %d a header? say --header yes or --header no%s",
			p.name, line, p.col(number), p.col(other), what, line, hint)
	}
	if number < 0 && !named && len(rec) > 1 {
		// Neither names nor numbers: it would fail as data on its first empty cell.
		cells := "every cell"
		skipped := 0
		for _, skip := range p.skip {
			if skip {
				skipped++
			}
		}
		switch {
		case p.labelCol >= 0 && skipped == 1:
			cells = "every cell but the label column's"
		case skipped > 0:
			cells = "every cell of a feature column"
		}
		return false, fmt.Errorf("%s:%d: %s of line %d is empty: a header without names? say --header yes to skip it", p.name, line, cells, line)
	}
	return number < 0 && named, nil
}

func (p *csvParser) looksLikeHeader(rec []string) bool {
	for j, s := range rec {
		if p.skip[j] {
			continue
		}
		if _, err := parseNumber(strings.TrimSpace(s)); err != nil && !errors.Is(err, strconv.ErrRange) {
			return true
		}
	}
	return false
}

// bytes is what n rows take as values, labels and IDs (those of the rows read so far
// with their text).
func (p *csvParser) bytes(n int) int {
	b := n * p.d * 4
	if p.labelCol >= 0 {
		b += n * 8
	}
	if p.idCol >= 0 {
		b += n*16 + p.idBytes
	}
	return b
}

// id appends a row's ID, a trimmed cell: a copy, as the cell may point into a whole
// line, which must not stay alive.
func (p *csvParser) id(s string) {
	p.ids = append(p.ids, strings.Clone(s))
	p.idBytes += len(s)
}

func (p *csvParser) row(rec []string, line int) error {
	if len(rec) != p.ncol {
		return fmt.Errorf("%s:%d: %d fields, want %d", p.name, line, len(rec), p.ncol)
	}
	if p.bytes(p.n+1) > p.maxBytes {
		return fmt.Errorf("%s:%d: the %d rows so far take %d MiB, more than %d MiB (a third of the machine's memory, as the rows are copied once): the table is too large to cluster here",
			p.name, line, p.n, p.bytes(p.n)>>20, p.maxBytes>>20)
	}
	for j, s := range rec {
		s = strings.TrimSpace(s)
		if j == p.labelCol {
			p.label(s)
			continue
		}
		if j == p.idCol {
			p.id(s)
			continue
		}
		if p.skip[j] {
			continue
		}
		v, ok := valueOf(s)
		if !ok {
			return p.cellError(s, j, line)
		}
		p.x = append(p.x, v)
	}
	p.n++
	return nil
}

// label appends the id of class s, a trimmed cell; Unlabelled where it is empty or NA.
func (p *csvParser) label(s string) { p.add(s) }

// valueOf is the value of a feature cell, trimmed, and whether it is one: a finite
// decimal number within float32's range.
func valueOf(s string) (float32, bool) {
	f, err := parseNumber(s)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	v := float32(f)
	return v, !math.IsInf(float64(v), 0)
}

// cellError says why valueOf refused cell s of column j.
func (p *csvParser) cellError(s string, j, line int) error {
	f, err := parseNumber(s)
	switch {
	case s == "":
		return fmt.Errorf("%s:%d: %s: empty cell%s", p.name, line, p.col(j), p.emptyHint(j))
	case err != nil && !errors.Is(err, strconv.ErrRange):
		hint := p.labelHint(j)
		if _, err := parseNumber(strings.Replace(s, ",", ".", 1)); err == nil && strings.Count(s, ",") == 1 {
			// A German or French spreadsheet's "1,5", in a file of semicolons.
			hint = " (a decimal comma? emclust reads decimal points only: save the table with them)"
		}
		return fmt.Errorf("%s:%d: %s: %s is not a number%s", p.name, line, p.col(j), quoteClip(s), hint)
	case math.IsNaN(f):
		return fmt.Errorf("%s:%d: NaN in %s", p.name, line, p.col(j))
	case math.IsInf(f, 0) && err == nil:
		return fmt.Errorf("%s:%d: %s in %s", p.name, line, fmtInf(f), p.col(j))
	}
	return fmt.Errorf("%s:%d: %s: %s is out of float32 range", p.name, line, p.col(j), quoteClip(s))
}

// parseNumber reads a cell as a decimal number, as NumPy and pandas do: Go's own
// syntax, which ParseFloat also takes, would read 1_0 as 10 and 0x10 as 16.
func parseNumber(s string) (float64, error) {
	i := 0
	for i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	if strings.IndexByte(s, '_') >= 0 || i+1 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseFloat(s, 64)
}

func fmtInf(f float64) string {
	if f > 0 {
		return "+Inf"
	}
	return "-Inf"
}

// labelSet numbers a label column's classes as they come.
type labelSet struct {
	ids        map[string]int // class name to id in order of first appearance
	classes    []string       // class names in order of first appearance
	labels     []int          // first-appearance ids, Unlabelled for empty cells
	unlabelled int            // cells without a class (eval.MissingLabel)
}

// add appends the id of class s, or Unlabelled where s marks a missing value
// (eval.MissingLabel: empty, NA, NaN, null, …).
func (p *labelSet) add(s string) {
	if eval.MissingLabel(strings.TrimSpace(s)) {
		p.labels = append(p.labels, Unlabelled)
		p.unlabelled++
		return
	}
	id, ok := p.ids[s]
	if !ok {
		if p.ids == nil {
			p.ids = make(map[string]int)
		}
		// Clone: s may point into a whole line, which must not stay alive.
		s = strings.Clone(s)
		id = len(p.classes)
		p.ids[s] = id
		p.classes = append(p.classes, s)
	}
	p.labels = append(p.labels, id)
}

// sorted renumbers the first-appearance ids so that ids follow the
// sorted class names, which makes label ids independent of row order.
func (p *labelSet) sorted() (labels []int, classes []string) {
	k := len(p.classes)
	vals := make([]int64, k)
	numeric := true
	for i, c := range p.classes {
		v, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			numeric = false
			break
		}
		vals[i] = v
	}
	order := make([]int, k) // order[newID] = old id
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if numeric {
			if c := cmp.Compare(vals[a], vals[b]); c != 0 {
				return c
			}
		}
		return strings.Compare(p.classes[a], p.classes[b])
	})
	newID := make([]int, k)
	classes = make([]string, k)
	for n, old := range order {
		newID[old] = n
		classes[n] = p.classes[old]
	}
	labels = make([]int, len(p.labels))
	for i, old := range p.labels {
		labels[i] = Unlabelled
		if old != Unlabelled {
			labels[i] = newID[old]
		}
	}
	return labels, classes
}

// allEmpty says why col, a label column of n rows none of which has a class, cannot
// be one; nil where some do. arg names it for --drop-cols: left out of --label-col
// alone, its empty cells would be read as a feature's.
func (p *labelSet) allEmpty(n int, col, arg string) error {
	if n == 0 || p.unlabelled < n {
		return nil
	}
	return fmt.Errorf("%s: no row has a class (every label cell is empty or NA); to cluster without scoring, give --drop-cols %s in place of --label-col", col, arg)
}

// sniffComma guesses the delimiter from the first line of head that is neither
// blank nor a comment.
func sniffComma(head []byte) rune {
	for len(head) > 0 {
		line := head
		if i := bytes.IndexByte(head, '\n'); i >= 0 {
			line, head = head[:i], head[i+1:]
		} else {
			head = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var commas, tabs, semis int
		quoted := false
		for _, c := range line {
			switch c {
			case '"':
				quoted = !quoted
			case ',':
				if !quoted {
					commas++
				}
			case '\t':
				if !quoted {
					tabs++
				}
			case ';':
				if !quoted {
					semis++
				}
			}
		}
		switch {
		case commas > 0 && commas >= tabs && commas >= semis:
			return ','
		case tabs > 0 && tabs >= semis:
			return '\t'
		case semis > 0:
			return ';'
		case bytes.IndexByte(line, ' ') >= 0:
			return ' '
		}
		return ','
	}
	return ','
}

// recordReader yields the records of a delimited file with the line each
// starts on, and io.EOF at the end.
type recordReader interface {
	next() (rec []string, line int, err error)
}

// maxLineBytes bounds one line of a CSV: encoding/csv holds a line whole, and a file
// (or a small gzip of one) without newlines would be held whole. A row of 100 000
// features takes about 1 MiB.
const maxLineBytes = 64 << 20

// lineLimit fails a read once a line runs past max bytes (0: no limit), naming the line.
type lineLimit struct {
	r        io.Reader
	max, run int
	line     int // newlines read so far
}

func (l *lineLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if l.max == 0 {
		return n, err
	}
	for rest := p[:n]; ; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			l.run += len(rest)
			break
		}
		if l.run+i > l.max {
			l.run += i
			break
		}
		l.line++
		l.run, rest = 0, rest[i+1:]
	}
	if l.run > l.max {
		return 0, &longLineError{line: l.line + 1, max: l.max}
	}
	return n, err
}

type longLineError struct{ line, max int }

func (e *longLineError) Error() string {
	return fmt.Sprintf("a line longer than %d MiB; is this a CSV?", e.max>>20)
}

func newCSVReader(r io.Reader, comma rune) *csv.Reader {
	cr := csv.NewReader(r)
	cr.Comma = comma
	cr.Comment = '#'
	cr.FieldsPerRecord = -1 // checked here, for a clearer message
	cr.ReuseRecord = true
	// Trimming leading white space would swallow empty tab-separated
	// fields, shifting the rest; cells are trimmed after splitting anyway.
	cr.TrimLeadingSpace = comma != '\t'
	return cr
}

// plainRecords splits lines without quotes itself, as encoding/csv would, into
// cells that point into the line rather than into a string allocated per line:
// a table of millions of rows would otherwise make as much garbage as its text,
// which Go's heap holds as well as the values. From the first line with a quote
// on, it hands the rest of the input to encoding/csv. The cells are valid until
// the next call.
type plainRecords struct {
	r     *bufio.Reader
	comma byte
	line  int    // lines read so far
	long  []byte // a line longer than r's buffer
	rec   []string
	slow  *csvRecords // from the first quote on
}

func (p *plainRecords) next() ([]string, int, error) {
	if p.slow != nil {
		rec, line, err := p.slow.next()
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			pe.StartLine += p.line
			pe.Line += p.line
		}
		return rec, line + p.line, err
	}
	for {
		line, err := p.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			p.long = append(p.long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = p.r.ReadSlice('\n')
				p.long = append(p.long, line...)
			}
			line = p.long
		}
		if len(line) == 0 && err != nil {
			return nil, 0, err
		}
		if err != nil && err != io.EOF {
			return nil, 0, err
		}
		if bytes.IndexByte(line, '"') >= 0 {
			raw := bytes.Clone(line)
			p.slow = &csvRecords{r: newCSVReader(io.MultiReader(bytes.NewReader(raw), p.r), rune(p.comma))}
			return p.next()
		}
		p.line++
		// As encoding/csv: a final \r before EOF and \r\n ending a line go, and
		// lines that are empty or start with '#' are skipped.
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
		} else if n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		p.rec = p.rec[:0]
		for {
			i := bytes.IndexByte(line, p.comma)
			if i < 0 {
				p.rec = append(p.rec, unsafe.String(unsafe.SliceData(line), len(line)))
				break
			}
			p.rec = append(p.rec, unsafe.String(unsafe.SliceData(line), i))
			line = line[i+1:]
		}
		if blankLine(p.rec) {
			continue
		}
		return p.rec, p.line, nil
	}
}

// blankLine says whether a record is a line of blanks alone, which both readers
// skip: encoding/csv skips empty lines but not those.
func blankLine(rec []string) bool { return len(rec) == 1 && strings.TrimSpace(rec[0]) == "" }

type csvRecords struct{ r *csv.Reader }

func (c *csvRecords) next() ([]string, int, error) {
	for {
		rec, err := c.r.Read()
		if err != nil {
			return nil, 0, err
		}
		if blankLine(rec) {
			continue
		}
		line, _ := c.r.FieldPos(0)
		return rec, line, nil
	}
}

// blankRecords splits lines at runs of white space, as np.savetxt writes them.
type blankRecords struct {
	r    *bufio.Reader
	line int
	rec  []string
}

func (b *blankRecords) next() ([]string, int, error) {
	for {
		s, err := b.r.ReadString('\n')
		if s == "" && err != nil {
			return nil, 0, err
		}
		if err != nil && err != io.EOF {
			return nil, 0, err
		}
		b.line++
		s = strings.TrimSpace(s)
		if s == "" || s[0] == '#' {
			continue
		}
		b.rec = append(b.rec[:0], strings.Fields(s)...)
		return b.rec, b.line, nil
	}
}

// isUTF16 says whether head starts a UTF-16 text: its byte-order mark, or a zero in
// every other byte of its first characters.
func isUTF16(head []byte) bool {
	if len(head) >= 2 && (head[0] == 0xff && head[1] == 0xfe || head[0] == 0xfe && head[1] == 0xff) {
		return true
	}
	if len(head) < 4 {
		return false
	}
	zeros := 0
	n := min(len(head), 64) &^ 1
	for i := 0; i < n; i += 2 {
		if head[i] == 0 || head[i+1] == 0 {
			zeros++
		}
	}
	return zeros == n/2
}

// validUTF8 is s with each byte that is not UTF-8 replaced by U+FFFD, as
// encoding/json writes it (strings.ToValidUTF8 replaces each run by one).
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s { // a byte that is not UTF-8 ranges as one RuneError
		b.WriteRune(r)
	}
	return b.String()
}

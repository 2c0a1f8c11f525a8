package data

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"emclust/sysmem"
)

// parquetMagic starts and ends every Parquet file.
const parquetMagic = "PAR1"

// ReadParquet reads a Parquet file, as pandas' to_parquet and Hugging Face datasets
// write them. Each numeric column is a feature, and a column of lists of numbers (an
// embedding) gives as many features as its lists have values, which must be the same
// in every row. --label-col names the column of classes (of numbers or text) by name
// or 0-based index; other columns of text, dates or nested records are refused by
// name, as are missing values. opt.Header and opt.Comma do not apply.
func ReadParquet(path string, opt CSVOptions) (*Vectors, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: a Parquet file is read from its end; give a file, not a pipe", path)
	}
	return parseParquet(f, st.Size(), path, opt)
}

// parquetColumn is a top-level column of the file and what it gives.
type parquetColumn struct {
	name     string
	leaf     *parquet.Column
	list     bool // a list of numbers a row: width features
	label    bool
	id       bool   // the rows' IDs (--id-col)
	unsigned bool   // integers stored signed, to be read unsigned
	width    int    // features, 0 for the label
	at       int    // its first feature's index in a row
	index    int    // its place among the file's columns
	arg      string // how a hint names it as a flag's value (colArg)
}

// feature says whether the column's values are features, not labels or IDs.
func (c *parquetColumn) feature() bool { return !c.label && !c.id }

// parseParquet reads the Parquet file of size bytes in r.
func parseParquet(r io.ReaderAt, size int64, name string, opt CSVOptions) (v *Vectors, err error) {
	// parquet-go trusts the file's metadata in places: a damaged file may panic
	// inside it, which is this file's error, not the end of the process.
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, fmt.Errorf("%s: damaged Parquet file (%v)", name, p)
		}
	}()
	if h := opt.Header; h != "" && h != "auto" {
		return nil, fmt.Errorf("%s: --header %s: a Parquet file names its columns itself", name, h)
	}
	var magic [4]byte
	if n, _ := r.ReadAt(magic[:], 0); n < 4 || string(magic[:]) != parquetMagic {
		return nil, fmt.Errorf("%s: not a Parquet file (it does not start with %q)", name, parquetMagic)
	}
	if err := checkFooter(r, size); err != nil {
		return nil, fmt.Errorf("%s: damaged Parquet file: %w", name, err)
	}
	f, err := parquet.OpenFile(r, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err == nil {
		err = checkPages(r, size, f)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: damaged Parquet file: %w", name, err)
	}
	cols, dropped, err := parquetColumns(f, name, opt)
	if err != nil {
		return nil, err
	}
	n := f.NumRows()
	if n <= 0 {
		return nil, fmt.Errorf("%s: no rows", name)
	}
	var rows int64
	for _, rg := range f.RowGroups() {
		rows += rg.NumRows()
	}
	if rows != n {
		return nil, fmt.Errorf("%s: damaged Parquet file: its row groups hold %d rows, its footer says %d", name, rows, n)
	}
	// The lists' lengths, from the first row.
	d := 0
	for i := range cols {
		c := &cols[i]
		if c.list {
			if c.width, err = firstListLength(f, c); err != nil {
				return nil, fmt.Errorf("%s: column %q: %w", name, c.name, err)
			}
		}
		c.at = d
		d += c.width
	}
	if d == 0 {
		if strings.TrimSpace(opt.IDCol) != "" {
			return nil, fmt.Errorf("%s: no feature columns: each is the label, the IDs or dropped (--drop-cols)", name)
		}
		if len(opt.DropCols) > 0 {
			return nil, fmt.Errorf("%s: no feature columns: each is the label or dropped (--drop-cols)", name)
		}
		return nil, fmt.Errorf("%s: no feature columns (only the label column %q)", name, opt.LabelCol)
	}
	var features []string
	for _, c := range cols {
		if c.feature() {
			for j := range c.width {
				if c.list {
					features = append(features, fmt.Sprintf("%s[%d]", c.name, j))
				} else {
					features = append(features, c.name)
				}
			}
		}
	}
	if opt.Features != nil {
		if err := opt.Features(d, features); err != nil {
			return nil, err
		}
	}
	// As for a .npy file: the values are held twice while libtorch copies them.
	if limit := int64(sysmem.Total() / 2); n > limit/4/int64(d) {
		return nil, fmt.Errorf("%s: %d rows of %d features are %d MiB as float32, more than %d MiB (half the machine's memory, as the rows are copied once): too large to cluster here",
			name, n, d, n*int64(d)>>18, limit>>20)
	}
	// The rows in one allocation where the file could hold them, their float32s
	// at most 64 times its bytes; else grown as they come, so that a damaged
	// footer's count of rows is not memory taken. (Run-length coded and compressed
	// values can take far less room than 4 bytes, so a small file may still hold
	// them.)
	count := int(n) * d
	var x []float32
	if 4*int64(count) <= 64*size {
		if opt.Alloc != nil {
			x = opt.Alloc(count)
		}
		if len(x) < count {
			x = make([]float32, count)
		}
		x = x[:count]
	}
	v = &Vectors{N: int(n), D: d, Source: name, Dropped: dropped, Features: features}
	var labels labelSet
	for _, c := range cols {
		rd := parquetColumnReader{col: c, d: d, n: count, x: &x, labels: &labels, ids: &v.IDs}
		if c.id {
			v.IDName = c.name
		}
		if err := rd.read(f); err != nil {
			return nil, fmt.Errorf("%s: column %q: %w", name, c.name, err)
		}
	}
	v.X = x
	for _, c := range cols {
		if c.feature() && !c.list && countsRows(x, v.N, d, c.at) {
			v.RowCounters = append(v.RowCounters, Column{fmt.Sprintf("column %q", c.name), c.arg})
		}
	}
	if labels.labels != nil {
		for _, c := range cols {
			if c.label {
				if err := labels.allEmpty(v.N, fmt.Sprintf("%s: label column %q", name, c.name), c.arg); err != nil {
					if !opt.ClasslessLabels {
						return nil, err
					}
					return v, nil
				}
			}
		}
		v.Labels, v.Classes = labels.sorted()
	}
	return v, nil
}

// parquetColumns plans the file's top-level columns, refusing those that are not
// numbers or lists of numbers, but for the label column; dropped columns are left out,
// and named in the order of the file.
func parquetColumns(f *parquet.File, name string, opt CSVOptions) (cols []parquetColumn, dropped []string, err error) {
	top := f.Root().Columns()
	names := make([]string, len(top))
	for j, c := range top {
		names[j] = c.Name()
	}
	// at is the column that --label-col or --drop-cols s selects, by index or name.
	at := func(s, flag string) (int, error) {
		if i, err := strconv.Atoi(s); err == nil {
			j := i
			if j < 0 {
				j += len(top)
			}
			if j < 0 || j >= len(top) {
				msg := fmt.Sprintf("%s: %s %d: out of range, the file has %d columns", name, flag, i, len(top))
				if flag != "--label-col" {
					return -1, &MissingColumnError{msg, flag}
				}
				return -1, errors.New(msg)
			}
			return j, nil
		}
		// As the names are said and saved: with bytes that are not UTF-8 replaced.
		found := -1
		for j, c := range top {
			if validUTF8(c.Name()) != s {
				continue
			}
			if found >= 0 {
				return -1, fmt.Errorf("%s: %s %q is ambiguous: the file has two columns of that name (give its index, %d or %d)", name, flag, s, found, j)
			}
			found = j
		}
		if found >= 0 {
			return found, nil
		}
		return -1, &MissingColumnError{fmt.Sprintf("%s: no column %q for %s; its columns are %s", name, s, flag, columnNames(top)), flag}
	}
	// The role of each column that is not a feature, as --label-col, --id-col and
	// --drop-cols give them.
	role := make([]string, len(top))
	labelAt, idAt := -1, -1
	for _, c := range append([]colSpec{{opt.LabelCol, roleLabel}, {opt.IDCol, roleID}}, dropSpecs(opt.DropCols)...) {
		if c.spec = strings.TrimSpace(c.spec); c.spec == "" {
			continue
		}
		j, err := at(c.spec, c.flag())
		if err != nil {
			return nil, nil, err
		}
		if was := role[j]; was != "" && !(was == roleDropped && c.role == roleDropped) {
			return nil, nil, &RolesError{fmt.Sprintf("%s: column %q is both %s and %s", name, top[j].Name(), was, c.role), was == roleLabel || c.role == roleLabel}
		}
		role[j] = c.role
		switch c.role {
		case roleLabel:
			labelAt = j
		case roleID:
			idAt = j
		}
	}
	for j, c := range top {
		if role[j] == roleDropped {
			dropped = append(dropped, validUTF8(c.Name()))
			continue
		}
		pc := parquetColumn{name: validUTF8(c.Name()), label: j == labelAt, id: j == idAt, width: 1, index: j, arg: colArg(j, c.Name(), names)}
		leaves := leafColumns(c)
		if len(leaves) != 1 {
			return nil, nil, fmt.Errorf("%s: column %q is a record of %d fields; emclust reads columns of numbers and of lists of numbers (flatten it, or leave it out with --drop-cols %s)", name, c.Name(), len(leaves), pc.arg)
		}
		pc.leaf = leaves[0]
		pc.unsigned = unsignedInt(pc.leaf.Type())
		switch reps := pc.leaf.MaxRepetitionLevel(); {
		case reps > 1:
			return nil, nil, fmt.Errorf("%s: column %q holds lists of lists; emclust reads columns of numbers and of lists of numbers (leave it out with --drop-cols %s)", name, c.Name(), pc.arg)
		case reps == 1 && pc.label:
			return nil, nil, fmt.Errorf("%s: label column %q holds lists; want one class a row", name, c.Name())
		case reps == 1 && pc.id:
			return nil, nil, fmt.Errorf("%s: ID column %q holds lists; want one ID a row", name, c.Name())
		case reps == 1:
			pc.list = true
		}
		if pc.label || pc.id {
			pc.width = 0
		} else if what := notNumeric(pc.leaf.Type()); what != "" {
			return nil, nil, fmt.Errorf("%s: column %q holds %s, not numbers to cluster%s", name, c.Name(), what,
				notFeatureHint(pc.arg, "it", !pc.list && labelAt < 0, !pc.list && idAt < 0))
		}
		cols = append(cols, pc)
	}
	return cols, dropped, nil
}

// colArg is how a hint names column j, called name among the table's names, as a
// flag's value: by name where a shell and --drop-cols' commas leave it whole and it
// selects that column alone, else by index.
func colArg(j int, name string, names []string) string {
	_, number := strconv.Atoi(name)
	switch {
	case number == nil, name == "", name == "none", strings.HasPrefix(name, "-"), strings.HasPrefix(name, "#"),
		strings.ContainsAny(name, " \t\"',;$`\\*?&|<>()"), countOf(names, name) > 1:
		return strconv.Itoa(j)
	}
	return name
}

// leafColumns are the columns holding values at or below c.
func leafColumns(c *parquet.Column) []*parquet.Column {
	if c.Leaf() {
		return []*parquet.Column{c}
	}
	var out []*parquet.Column
	for _, s := range c.Columns() {
		out = append(out, leafColumns(s)...)
	}
	return out
}

// columnNames lists the names of cols, quoted, for a message.
func columnNames(cols []*parquet.Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = strconv.Quote(c.Name())
	}
	return someOf(names)
}

// someOf lists the first eight of names, and how many more there are.
func someOf(names []string) string {
	if len(names) <= 8 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:8], ", "), len(names)-8)
}

// notNumeric says what a column of type t holds when that is not plain numbers
// (booleans count as 0 and 1), or "".
func notNumeric(t parquet.Type) string {
	if lt := t.LogicalType(); lt != nil {
		switch lt.Value.(type) {
		case nil, *format.IntType:
		case *format.StringType, *format.EnumType, *format.JsonType, *format.UUIDType:
			return "text"
		case *format.DecimalType:
			return "decimals (cast them to float)"
		case *format.DateType, *format.TimeType, *format.TimestampType:
			return "dates or times"
		case *format.Float16Type:
			return "float16 values (cast them to float32)"
		default:
			return lt.String() + " values"
		}
	}
	switch t.Kind() {
	case parquet.Boolean, parquet.Int32, parquet.Int64, parquet.Float, parquet.Double:
		return ""
	case parquet.ByteArray:
		return "text or bytes"
	case parquet.Int96:
		return "timestamps"
	}
	return "fixed-length bytes"
}

// unsignedInt says whether t is an integer type of unsigned values.
func unsignedInt(t parquet.Type) bool {
	if lt := t.LogicalType(); lt != nil {
		it, ok := lt.Value.(*format.IntType)
		return ok && !it.IsSigned
	}
	return false
}

// firstListLength is the number of values in the first row of list column c.
func firstListLength(f *parquet.File, c *parquetColumn) (int, error) {
	for _, rg := range f.RowGroups() {
		if rg.NumRows() == 0 {
			continue
		}
		count := 0
		err := eachPage(rg.ColumnChunks()[c.leaf.Index()], func(vs []parquet.Value) (bool, error) {
			for _, v := range vs {
				if v.RepetitionLevel() == 0 && count > 0 {
					return true, nil // row 1
				}
				if v.IsNull() {
					return false, errors.New("row 0: a missing list, or one with a missing value; fill or drop the rows with missing values first")
				}
				count++
			}
			return false, nil
		})
		return count, err
	}
	return 0, errors.New("no rows")
}

// eachPage calls fn with the values of column chunk cc in turn, a batch at a time,
// until fn says to stop or fails.
func eachPage(cc parquet.ColumnChunk, fn func([]parquet.Value) (stop bool, err error)) error {
	pages := cc.Pages()
	defer pages.Close()
	buf := make([]parquet.Value, 4096)
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		stop, err := eachValue(p, buf, fn)
		parquet.Release(p)
		if stop || err != nil {
			return err
		}
	}
}

// eachValue calls fn with the values of page p, read through buf.
func eachValue(p parquet.Page, buf []parquet.Value, fn func([]parquet.Value) (stop bool, err error)) (bool, error) {
	vr := p.Values()
	for idle := 0; ; {
		k, err := vr.ReadValues(buf)
		if k > 0 {
			if stop, err := fn(buf[:k]); stop || err != nil {
				return stop, err
			}
		}
		switch {
		case err == io.EOF:
			return false, nil
		case err != nil:
			return false, err
		case k > 0:
			idle = 0
		case idle > 100: // a damaged page whose reader neither reads nor ends
			return false, errors.New("damaged Parquet file: a page's values stop short of its end")
		default:
			idle++
		}
	}
}

// parquetColumnReader moves one column's values into the rows.
type parquetColumnReader struct {
	col    parquetColumn
	d, n   int        // features a row, and values in all
	x      *[]float32 // the rows' values: n, or fewer, grown as rows come
	labels *labelSet  // a label column's values
	ids    *[]string  // an ID column's
	row    int        // the row being read, -1 before the first
	j      int        // values read of the row's list
}

// read reads the column through every row group.
func (rd *parquetColumnReader) read(f *parquet.File) error {
	rd.row = -1
	for _, rg := range f.RowGroups() {
		start := rd.row + 1
		err := eachPage(rg.ColumnChunks()[rd.col.leaf.Index()], func(vs []parquet.Value) (bool, error) {
			return false, rd.values(vs)
		})
		if err != nil {
			return err
		}
		if got := rd.row + 1 - start; int64(got) != rg.NumRows() {
			return fmt.Errorf("damaged Parquet file: a row group of %d rows has %d values", rg.NumRows(), got)
		}
	}
	return rd.endRow()
}

// values moves a page's values into the rows: finite numbers of a list past a row's
// first, or of a column of one a row, at once; the rest through value.
func (rd *parquetColumnReader) values(vs []parquet.Value) error {
	c := &rd.col
	list, scalar := c.list && c.feature(), !c.list && c.feature()
	for i := range vs {
		v := &vs[i]
		n, ok := number(v, c.unsigned)
		f := float32(n)
		if !ok {
			f = float32(math.NaN())
		}
		if math.Float32bits(f)&0x7f800000 != 0x7f800000 { // finite (null is NaN here)
			switch {
			case list && v.RepetitionLevel() != 0 && rd.row >= 0 && rd.j < c.width:
				(*rd.x)[rd.row*rd.d+c.at+rd.j] = f
				rd.j++
				continue
			case scalar && v.RepetitionLevel() == 0 && (rd.row < 0 || rd.j == 1) && (rd.row+2)*rd.d <= len(*rd.x):
				rd.row++
				(*rd.x)[rd.row*rd.d+c.at] = f
				rd.j = 1
				continue
			}
		}
		if err := rd.value(*v); err != nil {
			return err
		}
	}
	return nil
}

// value moves one value into the rows, beginning a row at repetition level 0, or
// says what is wrong with it.
func (rd *parquetColumnReader) value(v parquet.Value) error {
	c := &rd.col
	if v.RepetitionLevel() == 0 {
		if err := rd.endRow(); err != nil {
			return err
		}
		rd.row++
		rd.j = 0
		if end := (rd.row + 1) * rd.d; end > len(*rd.x) {
			if end > rd.n {
				return errors.New("damaged Parquet file: more rows than its footer says")
			}
			*rd.x = slices.Grow(*rd.x, min(rd.n, max(2*len(*rd.x), 1<<16))-len(*rd.x))[:end]
		}
	}
	if rd.row < 0 {
		return errors.New("damaged Parquet file: a list continues before its first row")
	}
	if v.IsNull() && c.label {
		rd.labels.add("") // a row without a class: clustered, not scored
		return nil
	}
	if v.IsNull() {
		what := "a missing value"
		if c.list {
			what = "a missing list, or one with a missing value"
		}
		return fmt.Errorf("row %d: %s; fill or drop the rows with missing values first", rd.row, what)
	}
	if c.id {
		*rd.ids = append(*rd.ids, labelString(v, c.unsigned))
		return nil
	}
	if c.label {
		rd.labels.add(labelString(v, c.unsigned))
		return nil
	}
	if rd.j >= c.width {
		return fmt.Errorf("row %d: more than %d values, the length of row 0's list", rd.row, c.width)
	}
	f, err := floatOf(v, c.unsigned)
	if err != nil {
		return fmt.Errorf("row %d: %w", rd.row, err)
	}
	(*rd.x)[rd.row*rd.d+c.at+rd.j] = f
	rd.j++
	return nil
}

// endRow checks that the row read, if any, had all its values.
func (rd *parquetColumnReader) endRow() error {
	if rd.row >= 0 && rd.col.feature() && rd.j != rd.col.width {
		return fmt.Errorf("row %d: %d values, want %d as in row 0's list", rd.row, rd.j, rd.col.width)
	}
	return nil
}

// floatOf is v as a finite float32.
func floatOf(v parquet.Value, unsigned bool) (float32, error) {
	f, ok := number(&v, unsigned)
	if !ok {
		return 0, fmt.Errorf("a value of type %v, not a number", v.Kind())
	}
	switch x := float32(f); {
	case math.Float32bits(x)&0x7f800000 != 0x7f800000: // finite
		return x, nil
	case math.IsNaN(f):
		return 0, errors.New("NaN")
	case math.IsInf(f, 0):
		return 0, errors.New(fmtInf(f))
	default:
		return 0, fmt.Errorf("%g is out of float32 range", f)
	}
}

// number is v's value as a float64, and false where v is not a number (a null, a
// string). An integer's float64 holds an int32 exactly, and its float32 rounds an
// int64 as the float64 did.
func number(v *parquet.Value, unsigned bool) (float64, bool) {
	switch v.Kind() {
	case parquet.Float:
		return float64(v.Float()), true
	case parquet.Double:
		return v.Double(), true
	case parquet.Int32:
		if unsigned {
			return float64(v.Uint32()), true
		}
		return float64(v.Int32()), true
	case parquet.Int64:
		if unsigned {
			return float64(v.Uint64()), true
		}
		return float64(v.Int64()), true
	case parquet.Boolean:
		if v.Boolean() {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// labelString is a label value as the class name a CSV cell would give; unsigned
// for a column of unsigned integers.
func labelString(v parquet.Value, unsigned bool) string {
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return validUTF8(string(v.ByteArray()))
	case parquet.Float:
		return strconv.FormatFloat(float64(v.Float()), 'g', -1, 32)
	case parquet.Double:
		return strconv.FormatFloat(v.Double(), 'g', -1, 64)
	case parquet.Int32:
		if unsigned {
			return strconv.FormatUint(uint64(v.Uint32()), 10)
		}
		return strconv.Itoa(int(v.Int32()))
	case parquet.Int64:
		if unsigned {
			return strconv.FormatUint(v.Uint64(), 10)
		}
		return strconv.FormatInt(v.Int64(), 10)
	case parquet.Boolean:
		return strconv.FormatBool(v.Boolean())
	}
	return v.String()
}

// countOf is how many of names are name.
func countOf(names []string, name string) int {
	n := 0
	for _, s := range names {
		if s == name {
			n++
		}
	}
	return n
}

package data

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// Parsing the numbers is most of a large CSV's load (ParseFloat alone is half of it),
// and the lines must be split in order, so the reader splits them and hands runs of
// rows to a worker per core, which parse while it reads on.

// batchBytes is about how much text a batch of rows holds: large enough that handing
// it over costs little beside parsing it, small enough that the batches in flight
// take little memory.
const batchBytes = 256 << 10

// rowBatch is a run of consecutive rows. Their cells are copied, back to back, since
// a record reader's cells last only until its next record.
type rowBatch struct {
	lines []int     // line of each row
	text  []byte    // the rows' cells
	ends  []int     // end in text of each cell, ncol per row
	x     []float32 // room for the rows' values, when not in place
	dst   []float32 // where the worker writes the values, d per row: x, or p.x's spare room
	bad   int       // the first row with a cell valueOf refuses, or -1
	done  chan struct{}
}

// cells is row r's record, pointing into b.text.
func (b *rowBatch) cells(r, ncol int) []string {
	rec := make([]string, ncol)
	start := 0
	if i := r*ncol - 1; i >= 0 {
		start = b.ends[i]
	}
	for j := range rec {
		end := b.ends[r*ncol+j]
		rec[j] = unsafe.String(unsafe.SliceData(b.text[start:end]), end-start)
		start = end
	}
	return rec
}

// rowPipeline takes the rows of a csvParser after its first, in order, and gets them
// into p.x as p.row would: the same values, and the same error for the first bad row.
// Labels are read at once, in order, as they are cheap and give ids in order of first
// appearance; a row that any check refuses is handed to p.row, to name its problem,
// once every row before it is in. With workers ≤ 1 it calls p.row for each row.
type rowPipeline struct {
	p         *csvParser
	ncol, d   int // p's, copied for the workers
	labelCol  int
	idCol     int
	skip      []bool // read only
	batchRows int

	work    chan *rowBatch // nil when rows are parsed here, one by one
	wg      sync.WaitGroup
	queue   []*rowBatch // handed to workers, in file order
	free    []*rowBatch
	cur     *rowBatch // being filled
	pending int       // rows read but not yet in p.x
}

// newRowPipeline starts workers for p, whose columns must be known. batchRows bounds
// the rows of a batch (tests make it small, so that few rows span batches).
func newRowPipeline(p *csvParser, workers, batchRows int) *rowPipeline {
	r := &rowPipeline{p: p, ncol: p.ncol, d: p.d, labelCol: p.labelCol, idCol: p.idCol, skip: p.skip, batchRows: batchRows}
	if workers <= 1 {
		return r
	}
	r.work = make(chan *rowBatch, 2*workers)
	r.wg.Add(workers)
	for range workers {
		go func() {
			defer r.wg.Done()
			for b := range r.work {
				r.parse(b)
				b.done <- struct{}{}
			}
		}()
	}
	return r
}

// close stops the workers; rows not yet flushed are dropped.
func (r *rowPipeline) close() {
	if r.work != nil {
		close(r.work)
		r.wg.Wait()
		r.work = nil
	}
}

// read is how many rows have been read, parsed or not.
func (r *rowPipeline) read() int { return r.p.n + r.pending }

func (r *rowPipeline) add(rec []string, line int) error {
	p := r.p
	if r.work == nil {
		return p.row(rec, line)
	}
	label := ""
	if r.labelCol >= 0 && len(rec) == r.ncol {
		label = strings.TrimSpace(rec[r.labelCol])
	}
	if len(rec) != r.ncol || p.bytes(r.read()+1) > p.maxBytes {
		if err := r.flush(); err != nil {
			return err
		}
		return p.row(rec, line)
	}
	if r.labelCol >= 0 {
		p.label(label)
	}
	if r.idCol >= 0 {
		p.id(strings.TrimSpace(rec[r.idCol]))
	}
	b := r.cur
	if b == nil {
		if n := len(r.free); n > 0 {
			b, r.free = r.free[n-1], r.free[:n-1]
		} else {
			b = &rowBatch{text: make([]byte, 0, batchBytes+batchBytes/8), done: make(chan struct{}, 1)}
		}
		r.cur = b
	}
	size := 0
	for _, c := range rec {
		size += len(c)
	}
	b.text = slices.Grow(b.text, size)
	for _, c := range rec {
		b.text = append(b.text, c...)
		b.ends = append(b.ends, len(b.text))
	}
	b.lines = append(b.lines, line)
	r.pending++
	if len(b.text) >= batchBytes || len(b.lines) >= r.batchRows {
		return r.submit()
	}
	return nil
}

// submit hands the batch being filled to a worker, and takes in the oldest batch
// when enough are in flight to keep every worker busy.
func (r *rowPipeline) submit() error {
	b := r.cur
	r.cur = nil
	// Values go straight into p.x where it has the room, so that its pages are first
	// touched by the workers, not by a copy here: on a table of half a million rows
	// that copy took a third of the reader's time. The batches before this one take
	// rows below its window, so they never need p.x to grow; if presize moves p.x
	// meanwhile, collect sees that the window is not p.x's and copies it.
	p := r.p
	start, end := r.read()-len(b.lines), r.read()
	if end*r.d <= cap(p.x) {
		b.dst = p.x[start*r.d : end*r.d]
	} else {
		if n := len(b.lines) * r.d; cap(b.x) < n {
			b.x = make([]float32, n)
		}
		b.dst = b.x[:len(b.lines)*r.d]
	}
	r.queue = append(r.queue, b)
	r.work <- b
	if len(r.queue) >= cap(r.work) {
		return r.collect()
	}
	return nil
}

// flush takes in every row read so far.
func (r *rowPipeline) flush() error {
	if r.work == nil {
		return nil
	}
	if r.cur != nil {
		if err := r.submit(); err != nil {
			return err
		}
	}
	for len(r.queue) > 0 {
		if err := r.collect(); err != nil {
			return err
		}
	}
	return nil
}

// collect waits for the oldest batch and appends its rows to p.x, up to its first
// bad row, whose error p.row then names.
func (r *rowPipeline) collect() error {
	p := r.p
	b := r.queue[0]
	r.queue = r.queue[1:]
	<-b.done
	good := len(b.lines)
	if b.bad >= 0 {
		good = b.bad
	}
	if n := len(p.x) + good*r.d; n <= cap(p.x) && unsafe.SliceData(p.x[len(p.x):n]) == unsafe.SliceData(b.dst) {
		p.x = p.x[:n]
	} else {
		p.x = append(p.x, b.dst[:good*r.d]...)
	}
	p.n += good
	r.pending -= len(b.lines)
	if b.bad >= 0 {
		line := b.lines[b.bad]
		if err := p.row(b.cells(b.bad, r.ncol), line); err != nil {
			return err
		}
		return fmt.Errorf("%s:%d: a cell refused in parallel was accepted alone (a bug in emclust)", p.name, line)
	}
	b.lines, b.ends, b.bad, b.dst = b.lines[:0], b.ends[:0], -1, nil
	b.text = b.text[:0]
	if cap(b.text) > 4*batchBytes {
		b.text = nil // after a long line; the next batch's rows are likelier short
	}
	r.free = append(r.free, b)
	return nil
}

// parse is a worker's: it fills b.x from the cells, up to the first bad row.
func (r *rowPipeline) parse(b *rowBatch) {
	b.bad = -1
	rows := len(b.lines)
	k, start := 0, 0
	for i := range rows {
		for j := range r.ncol {
			end := b.ends[i*r.ncol+j]
			if !r.skip[j] {
				s := strings.TrimSpace(unsafe.String(unsafe.SliceData(b.text[start:end]), end-start))
				v, ok := valueOf(s)
				if !ok {
					b.bad = i
					return
				}
				b.dst[k] = v
				k++
			}
			start = end
		}
	}
}

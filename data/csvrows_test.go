package data

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// randomCSV is a small table of three columns with, now and then, each thing the
// reader refuses or skips: bad cells, a row of another width, an empty label,
// comments, blank lines, quotes (encoding/csv from there on).
func randomCSV(rng *rand.Rand, header bool) []byte {
	var b bytes.Buffer
	if header {
		b.WriteString("a,b,label\n")
	}
	odd := func() bool { return rng.IntN(60) == 0 }
	bad := []string{"", "x", "NaN", "1e39", "-inf", "0x10", "1_0"}
	for range rng.IntN(50) {
		switch {
		case odd():
			b.WriteString("# note\n")
		case odd():
			b.WriteString("  \n")
		}
		cells := []string{fmt.Sprint(rng.NormFloat64()), fmt.Sprintf(" %.3g ", rng.Float64()*100), fmt.Sprint("c", rng.IntN(3))}
		for j := range cells {
			if odd() {
				cells[j] = bad[rng.IntN(len(bad))]
			}
		}
		if odd() {
			cells = append(cells, "7")
		}
		if odd() {
			cells[0] = `"` + cells[0] + `"`
		}
		b.WriteString(strings.Join(cells, ","))
		b.WriteString("\n")
	}
	return b.Bytes()
}

// The rows parsed by workers are those parsed one by one: the same values and labels,
// or the same error, whatever the batches' sizes and with or without a presized p.x.
func TestRowPipelineMatchesSerial(t *testing.T) {
	before := runtime.NumGoroutine()
	rng := rand.New(rand.NewPCG(1, 2))
	failed := 0
	for i := range 300 {
		header := i%2 == 0
		in := randomCSV(rng, header)
		opt := CSVOptions{LabelCol: "2"}
		if header {
			opt.LabelCol = "label"
		}
		switch i % 4 {
		case 1:
			// Its cells, bad or not, are not read.
			opt.LabelCol, opt.DropCols = "", []string{"2"}
		case 2:
			opt.DropCols = []string{"0"}
		case 3:
			opt.IDCol = "0" // read as text, in order
		}
		if i%5 == 0 {
			opt.maxBytes = 200 + rng.IntN(400)
		}
		for _, size := range []int64{-1, int64(len(in))} {
			serial := opt
			serial.workers = 1
			want, wantErr := parseCSV(bytes.NewReader(in), "r.csv", serial, size, -1)
			if wantErr != nil {
				failed++
			}
			for _, w := range []struct{ workers, batchRows int }{{2, 1}, {3, 2}, {4, 7}, {2, 0}} {
				par := opt
				par.workers, par.batchRows = w.workers, w.batchRows
				got, err := parseCSV(bytes.NewReader(in), "r.csv", par, size, -1)
				if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
					t.Fatalf("input %d (size %d, %d workers, batches of %d rows):\n%s\nserial: %v, %v\nworkers: %v, %v",
						i, size, w.workers, w.batchRows, in, want, wantErr, got, err)
				}
			}
		}
	}
	// Both outcomes were compared often enough to mean something.
	if failed < 100 || failed > 500 {
		t.Errorf("%d of 600 parses failed; the inputs should give both outcomes often", failed)
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Errorf("%d goroutines before, %d after: workers left running", before, after)
	}
}

// Batches written straight into p.x's spare room while presize moves p.x still arrive.
func TestRowPipelinePresizeInFlight(t *testing.T) {
	var b bytes.Buffer
	for i := range 40000 {
		fmt.Fprintf(&b, "%d,%d\n", i, -i)
	}
	in := b.Bytes()
	for _, batchRows := range []int{1, 3, 16, 100} {
		v, err := parseCSV(bytes.NewReader(in), "p.csv", CSVOptions{workers: 3, batchRows: batchRows}, int64(len(in)), -1)
		if err != nil {
			t.Fatal(err)
		}
		for i := range v.N {
			if v.X[2*i] != float32(i) || v.X[2*i+1] != -float32(i) {
				t.Fatalf("batches of %d rows: row %d is %v, want [%d %d]", batchRows, i, v.X[2*i:2*i+2], i, -i)
			}
		}
		if v.N != 40000 {
			t.Fatalf("batches of %d rows: %d rows", batchRows, v.N)
		}
	}
}

// BenchmarkParseCSV reads a table of 50 000 rows of 32 features and a label, as
// np.savetxt's %.18e would not but pandas' to_csv would write it, by one goroutine
// and by a worker per core.
func BenchmarkParseCSV(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	var buf bytes.Buffer
	for i := range 50000 {
		for range 32 {
			fmt.Fprintf(&buf, "%v,", float32(rng.NormFloat64()))
		}
		fmt.Fprintf(&buf, "%d\n", i%10)
	}
	in := buf.Bytes()
	for _, workers := range []int{1, 0} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, err := parseCSV(bytes.NewReader(in), "bench.csv", CSVOptions{LabelCol: "-1", workers: workers}, int64(len(in)), -1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

package command

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"emclust/data"
)

// A Parquet table trains, scores and predicts as the same table in a CSV does: an
// embedding column of lists and a label column of text give the rows and classes the
// CSV's cells give.
func TestParquetAsCSV(t *testing.T) {
	dir := t.TempDir()
	v, err := data.Table("wine")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Emb   []float32 `parquet:"emb,list"`
		Class string    `parquet:"class,dict"`
	}
	rows := make([]row, v.N)
	var csv strings.Builder
	for j := range v.D {
		csv.WriteString("f" + strconv.Itoa(j) + ",")
	}
	csv.WriteString("class\n")
	for i := range rows {
		x := v.X[i*v.D : (i+1)*v.D]
		class := "cultivar " + v.Classes[v.Labels[i]]
		rows[i] = row{Emb: x, Class: class}
		for _, f := range x {
			csv.WriteString(strconv.FormatFloat(float64(f), 'g', -1, 32) + ",")
		}
		csv.WriteString(class + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "wine.csv"), []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "wine.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[row](f, parquet.MaxRowsPerRowGroup(50), parquet.Compression(&parquet.Snappy))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	train := []string{"train", "--quiet", "--kmeans=false", "--k", "3", "--epochs", "3", "--restarts", "2", "--label-col", "class"}
	fromCSV := wantScoreLine(t, runProc(t, dir, append(train, "--data", "wine.csv", "--out", "c")...))
	fromParquet := wantScoreLine(t, runProc(t, dir, append(train, "--data", "wine.parquet", "--out", "p")...))
	if fromCSV != fromParquet {
		t.Errorf("trained on the CSV: %s\non the Parquet file: %s", fromCSV, fromParquet)
	}
	for run, table := range map[string]string{"c": "wine.csv", "p": "wine.parquet"} {
		r := runProc(t, dir, "predict", "--model", run, "--data", table, "--label-col", "class", "--out", run+".csv")
		noCrash(t, r)
		if r.code != 0 {
			t.Fatalf("predict --model %s: exit %d: %s", run, r.code, r.stderr)
		}
	}
	// The column names are checked: emb[0] is not f0.
	r := runProc(t, dir, "predict", "--model", "c", "--data", "wine.parquet", "--label-col", "class", "--out", "x.csv")
	noCrash(t, r)
	if want := `column 0 is "emb[0]", where the model took "f0" (the same columns under other names? name them as the training data did)`; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("predict of the Parquet rows with the CSV's model: exit %d, %q; want exit 1 and %q", r.code, r.stderr, want)
	}
	c, errC := os.ReadFile(filepath.Join(dir, "c.csv"))
	p, errP := os.ReadFile(filepath.Join(dir, "p.csv"))
	if errC != nil || errP != nil || string(c) != string(p) || len(c) == 0 {
		t.Errorf("the two runs' assignments differ (%v, %v)", errC, errP)
	}

	// A column the clustering cannot use is named, in one line, with exit code 1.
	type textRow struct {
		X    float32 `parquet:"x"`
		Name string  `parquet:"name"`
	}
	f, err = os.Create(filepath.Join(dir, "text.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if err := parquet.Write(f, []textRow{{1, "a"}, {2, "b"}, {3, "c"}}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r = runProc(t, dir, "train", "--quiet", "--data", "text.parquet", "--k", "2", "--out", "t")
	noCrash(t, r)
	want := `text.parquet: column "name" holds text, not numbers to cluster (pass --label-col name if it holds class labels, --id-col name if it names the rows, or --drop-cols name if it is no feature otherwise)`
	if r.code != 1 || !strings.Contains(r.stderr, want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("exit %d, stderr %q; want exit 1 and one line with %q", r.code, r.stderr, want)
	}
}

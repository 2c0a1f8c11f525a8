package command

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"emclust/data/datatest"
)

// --drop-cols leaves an ID and a note out of a table's features; the run saves it,
// and predict reads new rows of the same layout alike unless told otherwise.
func TestDropCols(t *testing.T) {
	dir := t.TempDir()
	var full, features strings.Builder
	full.WriteString("id,a,note,b,label\n")
	features.WriteString("a,b\n")
	for i := range 60 {
		c := i % 2
		a, b := float64(c*6)+float64(i%5)/10, float64(-c*4)+float64(i%7)/10
		fmt.Fprintf(&full, "%d,%g,said %d,%g,%d\n", 5000+i, a, i, b, c)
		fmt.Fprintf(&features, "%g,%g\n", a, b)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("full.csv", []byte(full.String()))
	write("ab.csv", []byte(features.String()))
	write("ab.npy", datatest.NPY(60, 2, func(i, j int) float32 { return float32(i%2*6 + j) }))

	train := []string{"train", "--data", "full.csv", "--label-col", "label", "--k", "2", "--restarts", "1", "--epochs", "2", "--kmeans=false"}
	// Without it the note is refused, and its hint names the flag.
	r := run(t, dir, append(train, "--out", "r0")...)
	wantError(t, r, 1, `full.csv:2: column 2 ("note"): "said 0" is not a number`, "--drop-cols note")

	r = run(t, dir, append(train, "--drop-cols", "note", "--out", "r1")...)
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("train --drop-cols note: exit %d: %s", r.code, r.stderr)
	}
	// The ID, left in, counts the rows: the run says so, naming the flag.
	if !strings.Contains(r.stderr, "60 rows × 3 features (left out: note)") ||
		!strings.Contains(r.stderr, `warning: column 0 ("id") counts the rows`) || !strings.Contains(r.stderr, "--drop-cols id leaves it out") {
		t.Errorf("train --drop-cols note: stderr does not describe the columns:\n%s", r.stderr)
	}

	r = run(t, dir, append(train, "--drop-cols", "id,2", "--out", "r2")...)
	noCrash(t, r)
	if r.code != 0 || !strings.Contains(r.stderr, "60 rows × 2 features (left out: id, note)") || strings.Contains(r.stderr, "warning") {
		t.Fatalf("train --drop-cols id,2: exit %d: %s", r.code, r.stderr)
	}
	var cfg struct {
		DropCols []string `json:"drop_cols"`
		Features []string `json:"features"`
	}
	readJSON(t, filepath.Join(dir, "r2", "config.json"), &cfg)
	if strings.Join(cfg.DropCols, ",") != "id,2" || strings.Join(cfg.Features, ",") != "a,b" {
		t.Errorf("config.json: drop_cols %q, features %q; want [id 2], [a b]", cfg.DropCols, cfg.Features)
	}

	// New rows of the training layout are read as the run's were; of another, said.
	predict := []string{"predict", "--model", "r2", "--out", "-"}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"the training layout", []string{"--data", "full.csv", "--label-col", "label"}, 0, "60 rows → stdout"},
		{"its own data", nil, 0, "60 rows → stdout"},
		{"features only", []string{"--data", "ab.csv"}, 1, `ab.csv: dropped column 2 out of range: line 1 has 2 columns (new data are read as the model's were, which left out --drop-cols id,2; for data without those columns pass --drop-cols '')`},
		{"features only, none dropped", []string{"--data", "ab.csv", "--drop-cols", ""}, 0, "60 rows → stdout"},
		{"an array", []string{"--data", "ab.npy"}, 0, "60 rows → stdout"},
		{"an array, told to drop", []string{"--data", "ab.npy", "--drop-cols", "0"}, 2, "--drop-cols 0: ab.npy is a NumPy array, whose columns --drop-cols does not select"},
		{"told to drop without data", []string{"--drop-cols", "id"}, 2, "--drop-cols without --data or --dataset"},
		{"given twice", []string{"--data", "full.csv", "--drop-cols", "id,id"}, 2, "--drop-cols: id given twice"},
		{"too few features left", []string{"--data", "ab.csv", "--drop-cols", "0"}, 1, "ab.csv has 1 feature column"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, dir, append(predict, tc.args...)...)
			if tc.code != 0 {
				wantError(t, r, tc.code, tc.want)
				return
			}
			noCrash(t, r)
			if r.code != 0 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stdout, "\n") != 61 {
				t.Errorf("exit %d, %d lines out; stderr %s", r.code, strings.Count(r.stdout, "\n"), r.stderr)
			}
		})
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an embedded table", []string{"train", "--dataset", "wine", "--drop-cols", "0"}, "--drop-cols with --dataset wine"},
		{"the label", append(train, "--drop-cols", "label", "--out", "r3"), `column 4 ("label") is the label column, and dropped too`},
		{"a resumed run", []string{"train", "--resume", "r2", "--drop-cols", "id", "--epochs", "3"}, "--drop-cols with --resume"},
		{"the suite's tables", []string{"compare", "--suite", "--drop-cols", "id"}, "--drop-cols with --suite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, dir, tc.args...)
			code := 2
			if tc.name == "the label" {
				code = 1
			}
			wantError(t, r, code, tc.want)
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "r3")); !os.IsNotExist(err) {
		t.Errorf("a refused run left its folder: %v", err)
	}
	var sum map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "r2", "summary.json"))
	if json.Unmarshal(b, &sum) != nil {
		t.Errorf("r2/summary.json unreadable after the refusals")
	}
}

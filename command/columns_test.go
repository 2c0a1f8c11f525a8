package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"emclust/data/datatest"
	"emclust/eval"
)

// writeBlobTables writes dir/full.csv, the header and n rows of two blobs in features
// a and b laid out by row, and dir/ab.csv, a and b alone under their names.
func writeBlobTables(t *testing.T, dir, header string, n int, row func(i int, a, b float64) string) {
	t.Helper()
	var full, features strings.Builder
	full.WriteString(header + "\n")
	features.WriteString("a,b\n")
	for i := range n {
		c := i % 2
		a, b := float64(c*6)+float64(i%5)/10, float64(-c*4)+float64(i%7)/10
		full.WriteString(row(i, a, b) + "\n")
		fmt.Fprintf(&features, "%g,%g\n", a, b)
	}
	for name, b := range map[string]string{"full.csv": full.String(), "ab.csv": features.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// --drop-cols leaves an ID and a note out of a table's features; the run saves it,
// and predict reads new rows of the same layout alike unless told otherwise.
func TestDropCols(t *testing.T) {
	dir := t.TempDir()
	writeBlobTables(t, dir, "id,a,note,b,label", 60, func(i int, a, b float64) string {
		return fmt.Sprintf("%d,%g,said %d,%g,%d", 5000+i, a, i, b, i%2)
	})
	if err := os.WriteFile(filepath.Join(dir, "ab.npy"), datatest.NPY(60, 2, func(i, j int) float32 { return float32(i%2*6 + j) }), 0o644); err != nil {
		t.Fatal(err)
	}

	train := []string{"train", "--data", "full.csv", "--label-col", "label", "--k", "2", "--restarts", "1", "--epochs", "2", "--kmeans=false"}
	// Without it the note is refused, and its hint names the flag.
	r := run(t, dir, append(train, "--out", "r0")...)
	wantError(t, r, 1, `full.csv:2: column 2 ("note"): "said 0" is not a number (pass --id-col note if it names the rows, or --drop-cols note if it is no feature otherwise)`)

	r = run(t, dir, append(train, "--drop-cols", "note", "--out", "r1")...)
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("train --drop-cols note: exit %d: %s", r.code, r.stderr)
	}
	// The ID, left in, counts the rows: the run says so, naming the flag.
	if !strings.Contains(r.stderr, "60 rows × 3 features (left out: note)") ||
		!strings.Contains(r.stderr, `warning: column 0 ("id") counts the rows`) || !strings.Contains(r.stderr, "unless --id-col id (to name the rows by it) or --drop-cols id leaves it out") {
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
		{"features only", []string{"--data", "ab.csv"}, 1, `ab.csv: dropped column 2 out of range: line 1 has 2 columns (new data are read as the model's were, with --drop-cols id,2; for data without those columns pass --drop-cols none)`},
		{"features only, none dropped", []string{"--data", "ab.csv", "--drop-cols", "none"}, 0, "60 rows → stdout"},
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

	// A column the user names that the data lack is the user's to fix: no word of
	// the model's columns.
	r = run(t, dir, "predict", "--model", "r2", "--data", "ab.csv", "--drop-cols", "id", "--out", "-")
	wantError(t, r, 1, `ab.csv: no column "id" to drop; columns are: a, b`)
	if strings.Contains(r.stderr, "model's") {
		t.Errorf("the user's own --drop-cols explained as the model's: %s", r.stderr)
	}
	// An array through a pipe has no columns to leave out: the model's are not asked of it.
	r = runProgram("bash", dir, nil, slowWait, "-c", fmt.Sprintf("%q predict --model r2 --data <(cat ab.npy) --out -", bin))
	if noCrash(t, r); r.code != 0 || strings.Count(r.stdout, "\n") != 61 {
		t.Errorf("predict of a piped array: exit %d, %d lines; stderr %s", r.code, strings.Count(r.stdout, "\n"), r.stderr)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an embedded table", []string{"train", "--dataset", "wine", "--drop-cols", "0"}, "--drop-cols with --dataset wine"},
		{"the label", append(train, "--drop-cols", "label", "--out", "r3"), `column 4 ("label") is both the label column and a dropped column`},
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

// --id-col names each row of the assignments by its ID, in train's and in predict's,
// whose new rows are read as the run's were unless told otherwise.
func TestIDCol(t *testing.T) {
	dir := t.TempDir()
	writeBlobTables(t, dir, "a,customer,b", 40, func(i int, a, b float64) string {
		id := fmt.Sprintf("c-%03d", 40-i)
		if i == 3 {
			id = `"x, ""y"""` // quoted, as written back
		}
		return fmt.Sprintf("%g,%s,%g", a, id, b)
	})
	r := run(t, dir, "train", "--quiet", "--data", "full.csv", "--id-col", "customer", "--k", "2", "--restarts", "1", "--epochs", "2", "--out", "r")
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("train --id-col: exit %d: %s", r.code, r.stderr)
	}
	checkIDs := func(t *testing.T, rows []string, head string) {
		t.Helper()
		if len(rows) != 41 || rows[0] != head {
			t.Fatalf("%d lines, header %q; want 41, %q", len(rows), rows[0], head)
		}
		for i, row := range rows[1:] {
			want := fmt.Sprintf("c-%03d,", 40-i)
			if i == 3 {
				want = `"x, ""y""",`
			}
			if !strings.HasPrefix(row, want) {
				t.Fatalf("row %d %q does not start with its ID %q", i, row, want)
			}
		}
	}
	checkIDs(t, readLines(t, filepath.Join(dir, "r", "assignments.csv")), "customer,cluster,posterior")

	for _, tc := range []struct {
		name string
		args []string
		head string // of the rows; "" for an error
		want string // in the error
	}{
		{"the training layout", []string{"--data", "full.csv"}, "customer,cluster,posterior", ""},
		{"its own data, every posterior", []string{"--all-posteriors"}, "customer,cluster,p0,p1", ""},
		{"features only", []string{"--data", "ab.csv"}, "", `ab.csv: no column "customer" for the IDs; columns are: a, b (new data are read as the model's were, with --id-col customer; for data without those columns pass --id-col none)`},
		{"features only, no IDs", []string{"--data", "ab.csv", "--id-col", "none"}, "index,cluster,posterior", ""},
		{"the IDs left out", []string{"--data", "full.csv", "--id-col", "none", "--drop-cols", "customer"}, "index,cluster,posterior", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, dir, append([]string{"predict", "--model", "r", "--out", "-"}, tc.args...)...)
			if tc.head == "" {
				wantError(t, r, 1, tc.want)
				return
			}
			noCrash(t, r)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			rows := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			if tc.head == "index,cluster,posterior" {
				if len(rows) != 41 || rows[0] != tc.head || !strings.HasPrefix(rows[40], "39,") {
					t.Errorf("rows %q … %q, want the index", rows[0], rows[len(rows)-1])
				}
				return
			}
			checkIDs(t, rows, tc.head)
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"the label", []string{"train", "--data", "full.csv", "--label-col", "a", "--id-col", "0", "--out", "x"}, 1, `column 0 ("a") is both the ID column and the label column`},
		{"an array", []string{"predict", "--model", "r", "--data", "x.npy", "--id-col", "0"}, 2, "--id-col 0: "},
		{"an embedded table", []string{"train", "--dataset", "iris", "--id-col", "0"}, 2, "--id-col with --dataset iris"},
		{"a resumed run", []string{"train", "--resume", "r", "--id-col", "a", "--epochs", "3"}, 2, "--id-col with --resume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, run(t, dir, tc.args...), tc.code, tc.want)
		})
	}
}

// New rows of the training file's layout are read as it was: a label column given by
// name is the model's too, where the new rows have it (it was read as a feature, and
// refused as "empty cell" or by its width). Rows without it are read without it.
func TestPredictInheritsLabelCol(t *testing.T) {
	dir := t.TempDir()
	writeBlobTables(t, dir, "id,a,b,label", 40, func(i int, a, b float64) string {
		label := fmt.Sprintf("c%d", i%2)
		if i%5 == 1 {
			label = "" // labelled in part
		}
		return fmt.Sprintf("r%d,%g,%g,%s", i, a, b, label)
	})
	for name, body := range map[string]string{
		"noheader.csv": "0,0\n6,-4\n",
		"ids.csv":      "id,a,b\nx,0,0\ny,6,-4\n",
		"blank.csv":    "id,a,b,label\nx,0,0,\ny,6,-4,\n",
		"less.csv":     "id,a,label\nx,0,c0\ny,6,c1\n",
		"renamed.csv":  "id,a,b,class\nx,0,0,0\ny,6,-4,1\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, dir, "train", "--quiet", "--data", "full.csv", "--label-col", "label", "--id-col", "id", "--k", "2", "--restarts", "1", "--epochs", "2", "--out", "r")
	if noCrash(t, r); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	trained := readLines(t, filepath.Join(dir, "r", "assignments.csv"))
	r = run(t, dir, "predict", "--model", "r", "--data", "full.csv", "--out", "-")
	if noCrash(t, r); r.code != 0 {
		t.Fatalf("predict of the training layout: exit %d: %s", r.code, r.stderr)
	}
	if got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); !slices.Equal(got, trained) {
		t.Errorf("predict of the training file: %q …, want the run's assignments %q …", got[:3], trained[:3])
	}
	if r := run(t, dir, "eval", "--model", "r", "--data", "full.csv"); r.code != 0 || !strings.Contains(r.stdout, "on 32 labelled rows") {
		t.Errorf("eval of the training layout: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	wantError(t, run(t, dir, "eval", "--model", "r", "--data", "ids.csv"), 2, `ids.csv: 2 rows × 2 features has no labels to score against (the model's label column "label" was not found there: give --label-col`)
	r = run(t, dir, "predict", "--model", "r", "--data", "ids.csv", "--out", "-")
	if noCrash(t, r); r.code != 0 || !strings.HasPrefix(r.stdout, "id,cluster,posterior\nx,") {
		t.Errorf("predict of rows without the label column: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	// New rows of the layout, their label cells left empty: assigned, with no label
	// column (was "no row has a class"); eval has nothing to score.
	for _, args := range [][]string{{"--data", "blank.csv"}, {"--data", "blank.csv", "--label-col", "label"}} {
		r = run(t, dir, append([]string{"predict", "--model", "r", "--out", "-"}, args...)...)
		if noCrash(t, r); r.code != 0 || !strings.HasPrefix(r.stdout, "id,cluster,posterior\nx,") {
			t.Errorf("predict %v: exit %d, %q %s", args, r.code, r.stdout, r.stderr)
		}
	}
	wantError(t, run(t, dir, "eval", "--model", "r", "--data", "blank.csv"), 2, "blank.csv: 2 rows × 2 features has no labels to score against (no row of its label column \"label\" has a class)")
	wantError(t, run(t, dir, "train", "--data", "blank.csv", "--label-col", "label", "--id-col", "id", "--k", "2", "--out", "rb"), 1, "no row has a class")
	// A column the model took is missing: named (was the count alone).
	wantError(t, run(t, dir, "predict", "--model", "r", "--data", "less.csv", "--out", "-"), 1, `less.csv has 1 feature columns, but the model in r takes 2-feature input (they lack "b")`)
	// The model's label column under another name: said so (was "give it again",
	// which named a column the rows lack).
	wantError(t, run(t, dir, "predict", "--model", "r", "--data", "renamed.csv", "--out", "-"), 1,
		`renamed.csv has 3 feature columns, but the model in r takes 2-feature input (it trained with --label-col label, a column these data lack: if one of theirs holds labels, name it with --label-col) (the model took no "class")`)
	// The user's --drop-cols or --id-col of the model's label column: theirs, read
	// without labels (was "column 3 ("label") is both the label column and a dropped column").
	for _, args := range [][]string{{"--drop-cols", "label"}, {"--drop-cols", "3"}, {"--id-col", "label", "--drop-cols", "id"}} {
		r = run(t, dir, append([]string{"predict", "--model", "r", "--data", "full.csv", "--out", "-"}, args...)...)
		if noCrash(t, r); r.code != 0 || strings.Contains(strings.SplitN(r.stdout, "\n", 2)[0], ",label") {
			t.Errorf("predict %v: exit %d, %.40q %s", args, r.code, r.stdout, r.stderr)
		}
	}
	// Given, it is the user's: a column the rows lack is refused.
	wantError(t, run(t, dir, "predict", "--model", "r", "--data", "ids.csv", "--label-col", "label", "--out", "-"), 1, `ids.csv: no column "label"; columns are: id, a, b`)
	// Rows without a header: the model's ID column, not given here, is said to be.
	wantError(t, run(t, dir, "predict", "--model", "r", "--data", "noheader.csv", "--out", "-"), 1,
		`noheader.csv: ID column "id" is given by name, but line 1 is data, not a header (new data are read as the model's were, with --id-col id; for data without those columns pass --id-col none)`)
	r = run(t, dir, "predict", "--model", "r", "--data", "noheader.csv", "--id-col", "none", "--out", "-")
	if noCrash(t, r); r.code != 0 || r.stdout == "" {
		t.Errorf("predict of rows without a header, --id-col none: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
}

// IDs that name two rows alike are warned of, by train and predict, on --quiet too:
// score pairs assignments by them, and refuses a name given twice.
func TestDuplicateIDsWarned(t *testing.T) {
	dir := t.TempDir()
	writeBlobTables(t, dir, "customer,a,b", 20, func(i int, a, b float64) string {
		id := fmt.Sprintf("c%d", i)
		if i == 7 || i == 12 {
			id = "c3"
		}
		if i == 15 {
			id = "c1"
		}
		return fmt.Sprintf("%s,%g,%g", id, a, b)
	})
	want := `emclust: warning: 3 of the IDs in column "customer" name a row named before ("c1" names rows 2 and 16)`
	r := run(t, dir, "train", "--quiet", "--data", "full.csv", "--id-col", "customer", "--k", "2", "--restarts", "1", "--epochs", "1", "--out", "r")
	if noCrash(t, r); r.code != 0 || strings.Count(r.stderr, want) != 1 {
		t.Errorf("train: exit %d, stderr %q, want %q once", r.code, r.stderr, want)
	}
	r = run(t, dir, "predict", "--quiet", "--model", "r", "--data", "full.csv", "--out", "-")
	if noCrash(t, r); r.code != 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("predict: exit %d, stderr %q, want %q", r.code, r.stderr, want)
	}
	r = run(t, dir, "predict", "--quiet", "--model", "r", "--data", "full.csv", "--id-col", "none", "--drop-cols", "customer", "--out", "-")
	if noCrash(t, r); r.code != 0 || strings.Contains(r.stderr, "IDs") {
		t.Errorf("predict without IDs: exit %d, stderr %q, want no warning", r.code, r.stderr)
	}
}

// An image folder's assignments name each image by its path under the folder, in
// train's and in predict's.
func TestFolderAssignmentsNamePaths(t *testing.T) {
	dir := t.TempDir()
	want := writeGrayImages(t, filepath.Join(dir, "imgs"), 28, 6, "cats", "dogs") // cats/0, cats/2, …, dogs/1, …
	trainArgs := []string{"train", "--quiet", "--dataset", "folder", "--data-dir", "imgs", "--epochs", "1", "--restarts", "1", "--k", "2", "--device", "cpu", "--out"}
	// A run among the images would be a class of them the next time.
	wantError(t, run(t, dir, append(trainArgs, "imgs/runs/r")...), 2, "--out imgs/runs/r is inside the data's folder ", "imgs; name a folder outside the data")
	wantError(t, run(t, filepath.Join(dir, "imgs"), "train", "--dataset", "folder", "--data-dir", ".", "--epochs", "1"), 2, "the run's folder, under runs/ here, is inside the data's folder")
	wantError(t, run(t, dir, "compare", "--dataset", "folder", "--data-dir", "imgs", "--k", "2", "--seeds", "1", "--out", "imgs/cmp"), 2, "--out imgs/cmp is inside the data's folder")
	if _, err := os.Stat(filepath.Join(dir, "imgs", "runs")); !os.IsNotExist(err) {
		t.Errorf("the refused run made its folder: %v", err)
	}
	r := run(t, dir, append(trainArgs, "r")...)
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	r = run(t, dir, "predict", "--model", "r", "--out", "p.csv", "--quiet")
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("predict: exit %d: %s", r.code, r.stderr)
	}
	// A table for an image model, images for a table's: said as such (was "the model
	// in r takes 28x28 image input, and ab.csv: …: arch mnist takes images; …").
	writeBlobTables(t, dir, "a,b", 20, func(_ int, a, b float64) string { return fmt.Sprintf("%g,%g", a, b) })
	wantError(t, run(t, dir, "predict", "--model", "r", "--data", "ab.csv", "--out", "-"), 1, "ab.csv: 20 rows × 2 features, but the model in r clusters 28x28 images: give it images")
	r = run(t, dir, "train", "--quiet", "--data", "ab.csv", "--k", "2", "--restarts", "1", "--epochs", "1", "--out", "v")
	if noCrash(t, r); r.code != 0 {
		t.Fatalf("train on ab.csv: exit %d: %s", r.code, r.stderr)
	}
	wantError(t, run(t, dir, "predict", "--model", "v", "--dataset", "folder", "--data-dir", "imgs", "--out", "-"), 1, "6 images 3x28x28, but the model in v clusters the rows of a table of 2 features: give it one (--data FILE)")

	// An image that cannot be read ends the load, unless --skip-bad-images leaves it
	// out: the run names it, saves the setting, and predict of the folder inherits it.
	if err := os.CopyFS(filepath.Join(dir, "bad"), os.DirFS(filepath.Join(dir, "imgs"))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad", "dogs", "9.png"), []byte("<html>not found</html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	badArgs := []string{"train", "--dataset", "folder", "--data-dir", "bad", "--epochs", "1", "--restarts", "1", "--k", "2", "--device", "cpu", "--out"}
	wantError(t, run(t, dir, append(badArgs, "rb0")...), 1, filepath.Join("dogs", "9.png")+": decode: image: unknown format (--skip-bad-images leaves out the images that cannot be read)")
	r = run(t, dir, append(badArgs, "rb", "--skip-bad-images")...)
	if noCrash(t, r); r.code != 0 || !strings.Contains(r.stderr, "6 images 3x28x28 (1 that cannot be read left out)") ||
		!strings.Contains(r.stderr, "warning: left out 1 image that cannot be read (--skip-bad-images): ") {
		t.Fatalf("train --skip-bad-images: exit %d: %s", r.code, r.stderr)
	}
	var sum struct {
		Skipped []string `json:"skipped_images"`
	}
	readJSON(t, filepath.Join(dir, "rb", "summary.json"), &sum)
	if len(sum.Skipped) != 1 || !strings.Contains(sum.Skipped[0], filepath.Join("bad", "dogs", "9.png")) || len(readLines(t, filepath.Join(dir, "rb", "assignments.csv"))) != 7 {
		t.Errorf("summary.json skipped_images %q, want bad/dogs/9.png; assignments of the 6 others", sum.Skipped)
	}
	r = run(t, dir, "predict", "--model", "rb", "--quiet", "--out", "-")
	if noCrash(t, r); r.code != 0 || strings.Count(r.stdout, "\n") != 7 || !strings.Contains(r.stderr, "warning: left out 1 image that cannot be read") {
		t.Errorf("predict of the run: exit %d, %d lines; stderr %s", r.code, strings.Count(r.stdout, "\n"), r.stderr)
	}
	wantError(t, run(t, dir, "predict", "--model", "rb", "--data", "ab.csv", "--skip-bad-images"), 2, "--skip-bad-images is for --dataset folder")
	wantError(t, run(t, dir, "train", "--dataset", "iris", "--skip-bad-images"), 2, "--skip-bad-images is for --dataset folder")

	// New images of the classes, named with --data-dir alone, are no warning.
	for _, name := range want[:4] {
		b, err := os.ReadFile(filepath.Join(dir, "imgs", name))
		if err == nil {
			err = os.MkdirAll(filepath.Join(dir, "new", filepath.Dir(name)), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "new", name), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r = run(t, dir, "predict", "--model", "r", "--data-dir", "new", "--out", "-")
	if noCrash(t, r); r.code != 0 || strings.Count(r.stdout, "\n") != 5 || strings.Contains(r.stderr, "warning") ||
		!strings.Contains(r.stderr, "holds other images than r trained on (their digest differs): clustering these") {
		t.Errorf("predict --data-dir new: exit %d, %d lines out; stderr %s", r.code, strings.Count(r.stdout, "\n"), r.stderr)
	}
	for _, f := range []string{filepath.Join("r", "assignments.csv"), "p.csv"} {
		rows := readLines(t, filepath.Join(dir, f))
		if len(rows) != 7 || rows[0] != "path,cluster,posterior,label" {
			t.Fatalf("%s: %d lines, header %q; want 7, path,cluster,posterior,label", f, len(rows), rows[0])
		}
		for i, row := range rows[1:] {
			class, _, _ := strings.Cut(want[i], string(filepath.Separator))
			if !strings.HasPrefix(row, want[i]+",") || !strings.HasSuffix(row, ","+class) {
				t.Errorf("%s: row %d is %q, want the path %s and the class %s", f, i, row, want[i], class)
			}
		}
	}
}

// A table labelled in part is clustered whole and scored on its labelled rows, by
// every verb, and each says how many rows it scored.
func TestPartialLabels(t *testing.T) {
	dir := t.TempDir()
	labelled := 0
	writeBlobTables(t, dir, "a,b,label", 60, func(i int, a, b float64) string {
		if i%3 == 0 {
			return fmt.Sprintf("%g,%g,", a, b)
		}
		labelled++
		return fmt.Sprintf("%g,%g,c%d", a, b, i%2)
	})
	scored := fmt.Sprintf("on %d labelled rows", labelled)
	trainArgs := []string{"train", "--data", "full.csv", "--label-col", "label", "--k", "2", "--restarts", "1", "--epochs", "2"}
	r := run(t, dir, append(trainArgs, "--out", "r")...)
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("60 rows × 2 features, %d of them labelled", labelled)) || !strings.Contains(r.stdout, scored) {
		t.Errorf("train does not say what it scored:\nstdout %s\nstderr %s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "K = ") {
		t.Errorf("train --k 2 warns of K: %s", r.stderr)
	}
	// K from the labels counts the classes of the labelled rows alone: said, on
	// --quiet too, by train and compare.
	kWarning := fmt.Sprintf("emclust: warning: K = 2, the classes among the %d rows with a label; the other %d may hold more: give --k if they do\n", labelled, 60-labelled)
	r = run(t, dir, "train", "--quiet", "--data", "full.csv", "--label-col", "label", "--restarts", "1", "--epochs", "1", "--out", "rk")
	if noCrash(t, r); r.code != 0 || r.stderr != kWarning {
		t.Errorf("train without --k: exit %d, stderr %q, want %q", r.code, r.stderr, kWarning)
	}
	// Once, though the baselines run again on the other features (was twice), and
	// on --quiet too (was not).
	for _, quiet := range []string{"--quiet=false", "--quiet"} {
		r = run(t, dir, "compare", "--data", "full.csv", "--label-col", "label", "--methods", "kmeans", "--seeds", "1", quiet)
		if noCrash(t, r); r.code != 0 || strings.Count(r.stderr, kWarning) != 1 {
			t.Errorf("compare %s without --k: exit %d, stderr %q, want %q in it once", quiet, r.code, r.stderr, kWarning)
		}
	}

	// The scores are those of the labelled rows alone, counted here from the
	// assignments, whose label cell is empty where the data's was.
	rows := readLines(t, filepath.Join(dir, "r", "assignments.csv"))
	if len(rows) != 61 || rows[0] != "index,cluster,posterior,label" {
		t.Fatalf("assignments: %d lines, header %q", len(rows), rows[0])
	}
	var table [2][2]int // class × cluster
	for i, row := range rows[1:] {
		f := strings.Split(row, ",")
		if (f[3] == "") != (i%3 == 0) {
			t.Fatalf("assignments row %d: %q, want the label cell empty just where the data's is", i, row)
		}
		if f[3] != "" {
			table[f[3][1]-'0'][f[1][0]-'0']++
		}
	}
	acc := float64(max(table[0][0]+table[1][1], table[0][1]+table[1][0])) / float64(labelled)
	var sum struct {
		Scores struct {
			ACC    float64 `json:"acc"`
			Scored int     `json:"scored_rows"`
		} `json:"scores"`
		KMeans *struct {
			Scored int `json:"scored_rows"`
		} `json:"kmeans"`
	}
	readJSON(t, filepath.Join(dir, "r", "summary.json"), &sum)
	if math.Abs(sum.Scores.ACC-acc) > 1e-6 || sum.Scores.Scored != labelled {
		t.Errorf("summary.json: ACC %v on %d rows; the assignments' labelled rows give %v on %d", sum.Scores.ACC, sum.Scores.Scored, acc, labelled)
	}
	if sum.KMeans == nil || sum.KMeans.Scored != labelled {
		t.Errorf("summary.json: k-means scored on %+v rows, want %d", sum.KMeans, labelled)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string // in stdout
	}{
		{"predict", []string{"predict", "--model", "r", "--out", "p.csv"}, scored},
		{"eval", []string{"eval", "--model", "r"}, scored},
		{"eval --json", []string{"eval", "--model", "r", "--json"}, fmt.Sprintf(`"scored_rows":%d`, labelled)},
		{"score", []string{"score", "--truth", "r/assignments.csv", "--pred", "p.csv"}, scored},
		{"compare", []string{"compare", "--data", "full.csv", "--label-col", "label", "--k", "2", "--methods", "kmeans", "--seeds", "1"}, "N=60, " + "scored " + scored},
		{"compare --k", []string{"compare", "--data", "full.csv", "--label-col", "label", "--k", "2,3", "--seeds", "2", "--epochs", "2"}, "The labels have 2 classes; NMI (" + scored + ")"},
		{"report", []string{"report", "r", "--out", "rep"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, dir, tc.args...)
			noCrash(t, r)
			if r.code != 0 || !strings.Contains(r.stdout, tc.want) {
				t.Errorf("exit %d, stdout %q, want %q in it; stderr %s", r.code, r.stdout, tc.want, r.stderr)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(dir, "rep", "index.html")); err != nil || !bytes.Contains(b, []byte(fmt.Sprintf("%d rows without a class", 60-labelled))) ||
		!bytes.Contains(b, []byte(fmt.Sprintf("%s of 60", scored))) {
		t.Errorf("report: %v; does it say what it left out, and what it scored?", err)
	}
	// score puts the rows without a class back in their places: its scores of the
	// run's assignments against predict's are eval's.
	var fromEval, fromScore eval.Scores
	for _, c := range []struct {
		args []string
		into *eval.Scores
	}{
		{[]string{"eval", "--model", "r", "--json"}, &fromEval},
		{[]string{"score", "--truth", "r/assignments.csv", "--pred", "p.csv", "--json"}, &fromScore},
	} {
		r := run(t, dir, c.args...)
		if err := json.Unmarshal([]byte(r.stdout), c.into); r.code != 0 || err != nil {
			t.Fatalf("%s: exit %d, %v: %s", c.args[0], r.code, err, r.stderr)
		}
	}
	if fromScore != fromEval || fromEval.Scored != labelled {
		t.Errorf("score gives %+v, eval %+v", fromScore, fromEval)
	}

	// The same values with a label cell now NA: not the labels the run was scored
	// against, and the message says what NA now means.
	b, err := os.ReadFile(filepath.Join(dir, "full.csv"))
	if err != nil {
		t.Fatal(err)
	}
	na := strings.Replace(string(b), ",c1\n", ",NA\n", 1)
	if err := os.WriteFile(filepath.Join(dir, "na.csv"), []byte(na), 0o644); err != nil {
		t.Fatal(err)
	}
	wantError(t, run(t, dir, "train", "--resume", "r", "--data", "na.csv", "--epochs", "3"), 2, "na.csv are not those the run in r was scored against", "label cells such as NA, NaN or null now mark rows without a class")

	for _, tc := range []struct {
		name, content string
		args          []string
		want          string
	}{
		{"no label at all", "a,b,label\n1,2,\n3,4,NA\n5,6,\n7,8,\n", nil, `nolabels.csv: column 2 ("label"): no row has a class (every label cell is empty or NA); to cluster without scoring, give --drop-cols label in place of --label-col`},
		{"supervised", "", []string{"--objective", "supervised"}, "objective supervised needs a class for every row, and 20 of the 60 rows have an empty or NA label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := slices.Concat(trainArgs, tc.args)
			if tc.content != "" {
				if err := os.WriteFile(filepath.Join(dir, "nolabels.csv"), []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
				args[2] = "nolabels.csv"
			}
			wantError(t, run(t, dir, append(args, "--out", "x")...), 1, tc.want)
			if tc.content != "" { // the advice works
				r := run(t, dir, "train", "--quiet", "--data", "nolabels.csv", "--drop-cols", "label", "--k", "2", "--restarts", "1", "--epochs", "1", "--out", "unscored")
				if noCrash(t, r); r.code != 0 {
					t.Errorf("train --drop-cols label: exit %d: %s", r.code, r.stderr)
				}
			}
		})
	}
}

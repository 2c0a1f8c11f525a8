package command

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"emclust/data"
	"emclust/eval"
)

type scoreOptions struct {
	Truth, Pred string
	JSON        bool
}

func scoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "score",
		Usage:     "compare two label files (one label per line, a NumPy array of them, or predict's assignments): prints ACC NMI ARI",
		UsageText: "emclust score --truth LABELS --pred LABELS [--json]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "truth", Usage: "file of ground-truth labels, one per line (or a NumPy .npy array of them), or assignments with a label column (required)"},
			&cli.StringFlag{Name: "pred", Usage: "file of predicted clusters, one per line (or a .npy array), or emclust's assignments (their cluster column; where --truth is assignments too whose first column has the same name, the rows are paired by it, not by line) (required)"},
			&cli.BoolFlag{Name: "json", Usage: "print the scores as JSON"},
		},
		Action: action(scoreOptionsFrom, runScore),
	}
}

func scoreOptionsFrom(c *cli.Context) (scoreOptions, error) {
	if err := requireFlags(c, "truth", "pred"); err != nil {
		return scoreOptions{}, err
	}
	return scoreOptions{Truth: c.String("truth"), Pred: c.String("pred"), JSON: c.Bool("json")}, nil
}

func runScore(_ context.Context, opts scoreOptions, stdout, _ io.Writer) error {
	truth, err := readScored(opts.Truth, "label")
	if err != nil {
		return err
	}
	pred, err := readScored(opts.Pred, "cluster")
	if err != nil {
		return err
	}
	if i := slices.IndexFunc(pred.labels, func(c int) bool { return c < 0 }); i >= 0 {
		return fmt.Errorf("%s: label %d of the predictions is missing (NA or the like): every point has a cluster", opts.Pred, i+1)
	}
	if n, m := len(truth.labels), len(pred.labels); n != m {
		hint := ""
		if (n-m == 1 || m-n == 1) && (truth.keys == nil || pred.keys == nil) {
			hint = " (a plain list's every line is a label: has one a header line?)"
		}
		return fmt.Errorf("%s has %d labels but %s has %d%s", opts.Truth, n, opts.Pred, m, hint)
	}
	if err := pred.alignTo(truth, opts.Pred, opts.Truth); err != nil {
		return err
	}
	sc, err := eval.ScoreLabelled(truth.labels, pred.labels)
	if err != nil {
		return fmt.Errorf("%s against %s: %w", opts.Pred, opts.Truth, err)
	}
	if opts.JSON {
		b, _ := json.Marshal(sc)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintln(stdout, sc.String())
	return nil
}

// scored is a file's labels, and where it is emclust's assignments, the rows' names
// from their first column (the index, the IDs or an image folder's paths) and that
// column's name.
type scored struct {
	labels  []int
	keys    []string
	keyName string
}

// readScored reads a file of one label a line, or the column named col of the
// assignments emclust writes (a header whose second field is "cluster"), so that
// predict's output is scored as it is. It reads path once: it may be a pipe.
func readScored(path, col string) (scored, error) {
	f, err := os.Open(path)
	if err != nil {
		return scored{}, fmt.Errorf("read labels: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(4096)
	if data.IsNPY(head) {
		labels, err := npyLabels(br, path)
		return scored{labels: labels}, err
	}
	first, _, _ := strings.Cut(string(head), "\n")
	fields, err := csv.NewReader(strings.NewReader(first)).Read()
	if err != nil || len(fields) < 2 || fields[1] != "cluster" {
		labels, err := eval.ParseLabels(br, path)
		return scored{labels: labels}, err
	}
	rows, err := csv.NewReader(br).ReadAll()
	if err != nil {
		return scored{}, fmt.Errorf("%s: %w", path, err)
	}
	// Past the first column, the index or the rows' IDs, whatever their name.
	at := slices.Index(rows[0][1:], col) + 1
	if at < 1 {
		return scored{}, fmt.Errorf("%s: emclust's assignments without a %s column (columns %s)", path, col, strings.Join(rows[0], ","))
	}
	// The cells are numbered as they are, commas and all (a class name may hold one).
	// A label cell is empty where the row had no class: -1, left out of the scores,
	// as it was when the run was scored (a prediction's is refused by runScore).
	if len(rows) == 1 {
		return scored{}, fmt.Errorf("%s: no rows", path)
	}
	cells := make([]string, len(rows)-1)
	keys := make([]string, len(rows)-1)
	for i, r := range rows[1:] {
		cells[i], keys[i] = r[at], r[0]
	}
	labels := eval.LabelColumn(cells)
	if !slices.ContainsFunc(labels, func(l int) bool { return l >= 0 }) {
		return scored{}, fmt.Errorf("%s: no row has a class (every cell of the %s column is empty or NA)", path, col)
	}
	return scored{labels: labels, keys: keys, keyName: rows[0][0]}, nil
}

// npyLabels reads a NumPy array of one label a row, of whole numbers (was "UTF-16
// text or a binary file"): the labels or clusters a Python script saved.
func npyLabels(r io.Reader, path string) ([]int, error) {
	v, err := data.ParseNPY(r, path)
	if err != nil {
		return nil, err
	}
	if v.D != 1 {
		return nil, fmt.Errorf("%s: an array of %d values a row; want one label a row (shape (N,))", path, v.D)
	}
	cells := make([]string, v.N)
	for i, x := range v.X {
		switch {
		case math.Abs(float64(x)) >= 1<<24:
			// Read as float32: 16777217 came back as 16777216, another class.
			return nil, fmt.Errorf("%s: row %d: %.0f is too large a label to read exactly from an array (2²⁴ or more); save the labels as text, one a line", path, i, x)
		case x != float32(math.Trunc(float64(x))):
			return nil, fmt.Errorf("%s: row %d: %g is not a whole number; labels are class or cluster numbers", path, i, x)
		}
		cells[i] = strconv.Itoa(int(x))
	}
	return eval.LabelColumn(cells), nil
}

// alignTo puts s's rows (read from path) in the order of to's (from toPath) where
// both are assignments whose first columns have the same name: rows named alike are
// paired, in whatever order each file holds them (was line by line, so a file of
// shuffled rows scored as noise). Rows whose names do not pair are refused. Else the
// files pair line by line.
func (s *scored) alignTo(to scored, path, toPath string) error {
	if s.keys == nil || to.keys == nil || s.keyName != to.keyName || slices.Equal(s.keys, to.keys) {
		return nil
	}
	at, err := rowsByName(s.keys, s.keyName, path, toPath)
	if err != nil {
		return err
	}
	if _, err := rowsByName(to.keys, to.keyName, toPath, path); err != nil {
		return err
	}
	labels := make([]int, len(to.keys))
	for i, k := range to.keys {
		j, ok := at[k]
		if !ok {
			return fmt.Errorf("%s: %s %q of %s (row %d) is not among its rows: score the assignments of the same rows", path, to.keyName, k, toPath, i+1)
		}
		labels[i] = s.labels[j]
	}
	s.labels, s.keys = labels, to.keys
	return nil
}

// rowsByName maps each of path's row names (its first column, col) to its row;
// a name given twice cannot pair the rows with other's.
func rowsByName(keys []string, col, path, other string) (map[string]int, error) {
	at := make(map[string]int, len(keys))
	for i, k := range keys {
		if _, dup := at[k]; dup {
			return nil, fmt.Errorf("%s: %s %q names two rows, so its rows cannot be paired with %s's by %s", path, col, k, other, col)
		}
		at[k] = i
	}
	return at, nil
}

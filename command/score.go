package command

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"emclust/eval"
)

type scoreOptions struct {
	Truth, Pred string
	JSON        bool
}

func scoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "score",
		Usage:     "compare two label files (one label per line, or predict's assignments): prints ACC NMI ARI",
		UsageText: "emclust score --truth LABELS --pred LABELS [--json]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "truth", Usage: "file of ground-truth labels, one per line, or assignments with a label column (required)"},
			&cli.StringFlag{Name: "pred", Usage: "file of predicted clusters, one per line, or emclust's assignments (their cluster column) (required)"},
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
	if i := slices.IndexFunc(pred, func(c int) bool { return c < 0 }); i >= 0 {
		return fmt.Errorf("%s: label %d of the predictions is missing (NA or the like): every point has a cluster", opts.Pred, i+1)
	}
	if len(truth) != len(pred) {
		return fmt.Errorf("%s has %d labels but %s has %d", opts.Truth, len(truth), opts.Pred, len(pred))
	}
	sc, err := eval.ScoreLabelled(truth, pred)
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

// readScored reads a file of one label a line, or the column named col of the
// assignments emclust writes (a header whose second field is "cluster"), so that
// predict's output is scored as it is. It reads path once: it may be a pipe.
func readScored(path, col string) ([]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read labels: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	head, _ := br.Peek(4096)
	first, _, _ := strings.Cut(string(head), "\n")
	fields, err := csv.NewReader(strings.NewReader(first)).Read()
	if err != nil || len(fields) < 2 || fields[1] != "cluster" {
		return eval.ParseLabels(br, path)
	}
	rows, err := csv.NewReader(br).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Past the first column, the index or the rows' IDs, whatever their name.
	at := slices.Index(rows[0][1:], col) + 1
	if at < 1 {
		return nil, fmt.Errorf("%s: emclust's assignments without a %s column (columns %s)", path, col, strings.Join(rows[0], ","))
	}
	// The cells are numbered as they are, commas and all (a class name may hold one).
	// A label cell is empty where the row had no class: -1, left out of the scores,
	// as it was when the run was scored (a prediction's is refused by runScore).
	if len(rows) == 1 {
		return nil, fmt.Errorf("%s: no rows", path)
	}
	cells := make([]string, len(rows)-1)
	for i, r := range rows[1:] {
		cells[i] = r[at]
	}
	labels := eval.LabelColumn(cells)
	if !slices.ContainsFunc(labels, func(l int) bool { return l >= 0 }) {
		return nil, fmt.Errorf("%s: no row has a class (every cell of the %s column is empty or NA)", path, col)
	}
	return labels, nil
}

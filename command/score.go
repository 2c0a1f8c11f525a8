package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

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
		Usage:     "compare two label files (one label per line): prints ACC NMI ARI",
		UsageText: "emclust score --truth LABELS --pred LABELS [--json]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "truth", Usage: "file of ground-truth labels, one per line (required)"},
			&cli.StringFlag{Name: "pred", Usage: "file of predicted clusters, one per line (required)"},
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
	truth, err := eval.ReadLabels(opts.Truth)
	if err != nil {
		return err
	}
	pred, err := eval.ReadLabels(opts.Pred)
	if err != nil {
		return err
	}
	if len(truth) != len(pred) {
		return fmt.Errorf("%s has %d labels but %s has %d", opts.Truth, len(truth), opts.Pred, len(pred))
	}
	sc, err := eval.Score(truth, pred)
	if err != nil {
		return fmt.Errorf("%s against %s: %w", opts.Pred, opts.Truth, err)
	}
	if opts.JSON {
		b, _ := json.Marshal(map[string]float64{"acc": sc.ACC, "nmi": sc.NMI, "ari": sc.ARI})
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintln(stdout, sc.String())
	return nil
}

package command

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"

	"emclust/eval"
)

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
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageError{fmt.Errorf("score takes flags only; unexpected %q", c.Args().First())}
			}
			if err := requireFlags(c, "truth", "pred"); err != nil {
				return err
			}
			truth, err := eval.ReadLabels(c.String("truth"))
			if err != nil {
				return err
			}
			pred, err := eval.ReadLabels(c.String("pred"))
			if err != nil {
				return err
			}
			if len(truth) != len(pred) {
				return fmt.Errorf("%s has %d labels but %s has %d", c.String("truth"), len(truth), c.String("pred"), len(pred))
			}
			sc, err := eval.Score(truth, pred)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				b, _ := json.Marshal(map[string]float64{"acc": sc.ACC, "nmi": sc.NMI, "ari": sc.ARI})
				fmt.Fprintln(c.App.Writer, string(b))
				return nil
			}
			fmt.Fprintln(c.App.Writer, sc.String())
			return nil
		},
	}
}

package command

import (
	"encoding/json"
	"fmt"

	"github.com/urfave/cli/v2"

	"emclust/eval"
	"emclust/train"
)

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "score a trained model on a labelled data set",
		UsageText: "emclust eval --model RUN [--dataset NAME --data-dir D | --data FILE.csv --label-col C] [--json]",
		Flags: append(dataFlags("the data the model trained on", "as in training"),
			&cli.StringFlag{Name: "model", Usage: "run folder or checkpoint file (required)"},
			deviceFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print the scores as JSON"},
		),
		Action: func(c *cli.Context) error {
			in, err := openInference(c)
			if err != nil {
				return err
			}
			defer in.Close()
			net, src, dev, prior := in.Net, in.src, in.dev, in.Prior
			labels := src.Labels()
			if labels == nil {
				return fmt.Errorf("%s has no labels to score against (give --label-col for a CSV)", src.Describe())
			}
			pred, err := train.Predict(net, src, dev, prior)
			if err != nil {
				return err
			}
			sc, err := eval.Score(labels, pred.Cluster)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				b, _ := json.Marshal(map[string]any{"acc": sc.ACC, "nmi": sc.NMI, "ari": sc.ARI, "n": len(labels),
					"sizes": eval.ClusterSizes(pred.Cluster, pred.K)})
				fmt.Fprintln(c.App.Writer, string(b))
				return nil
			}
			fmt.Fprintln(c.App.Writer, sc.String())
			return nil
		},
	}
}

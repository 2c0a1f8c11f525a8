package command

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"emclust/eval"
	"emclust/train"
)

func predictCommand() *cli.Command {
	return &cli.Command{
		Name:      "predict",
		Usage:     "assign rows or images to clusters with a trained model",
		UsageText: "emclust predict --model RUN [--data FILE.csv | --dataset NAME --data-dir D] --out assignments.csv",
		Flags: append(dataFlags("the data the model trained on", "as in training"),
			&cli.StringFlag{Name: "model", Usage: "run folder or checkpoint file (required)"},
			&cli.StringFlag{Name: "out", Value: "assignments.csv", Usage: "CSV of index,cluster,posterior (and label when known), written atomically"},
			deviceFlag(),
			&cli.BoolFlag{Name: "all-posteriors", Usage: "also write the posterior of every cluster (p0..pK-1)"},
			forceFlag,
		),
		Action: func(c *cli.Context) error {
			if err := checkModelArgs(c); err != nil {
				return err
			}
			if err := checkOutput(c, c.String("model"), c.String("data")); err != nil {
				return err
			}
			in, err := openInference(c)
			if err != nil {
				return err
			}
			defer in.Close()
			net, src, dev, prior := in.Net, in.src, in.dev, in.Prior
			pred, err := train.Predict(net, src, dev, prior)
			if err != nil {
				return err
			}
			if c.Bool("all-posteriors") {
				err = writePosteriors(c.String("out"), pred, src.Labels())
			} else {
				err = writeAssignments(c.String("out"), pred, src.Labels())
			}
			if err != nil {
				return err
			}
			sizes := eval.ClusterSizes(pred.Cluster, pred.K)
			fmt.Fprintf(c.App.ErrWriter, "emclust: %d rows → %s; cluster sizes %v\n", len(pred.Cluster), c.String("out"), sizes)
			if labels := src.Labels(); labels != nil {
				sc, err := eval.Score(labels, pred.Cluster)
				if err != nil {
					return err
				}
				fmt.Fprintln(c.App.Writer, sc.String())
			}
			return nil
		},
	}
}

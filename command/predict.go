package command

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"emclust/eval"
)

type predictOptions struct {
	modelOptions
	Out           string
	Force         bool
	AllPosteriors bool
}

func predictCommand() *cli.Command {
	return &cli.Command{
		Name:      "predict",
		Usage:     "assign rows or images to clusters with a trained model",
		UsageText: "emclust predict --model RUN [--data FILE.csv | --dataset NAME --data-dir D] --out assignments.csv",
		Flags: append(inferenceDataFlags("the data the model trained on"),
			&cli.StringFlag{Name: "model", Usage: "run folder or checkpoint file (required)"},
			&cli.StringFlag{Name: "out", Value: "assignments.csv", Usage: "CSV of index,cluster,posterior (and label when known), written atomically; - writes it to stdout"},
			deviceFlag(),
			&cli.BoolFlag{Name: "all-posteriors", Usage: "write the posterior of every cluster (columns p0..pK-1) in place of the assigned cluster's (column posterior)"},
			forceFlag,
			quietFlag(),
		),
		Action: endOnInterrupt(action(predictOptionsFrom, runPredict)),
	}
}

func predictOptionsFrom(c *cli.Context) (predictOptions, error) {
	m, err := modelOptionsFrom(c)
	return predictOptions{modelOptions: m, Out: c.String("out"), Force: c.Bool("force"), AllPosteriors: c.Bool("all-posteriors")}, err
}

func runPredict(_ context.Context, opts predictOptions, stdout, stderr io.Writer) error {
	in, err := openInferenceTo(opts.modelOptions, opts.Out, opts.Force, stderr)
	if err != nil {
		return err
	}
	defer in.Close()
	pred, err := in.predict()
	if err != nil {
		return err
	}
	labels := in.src.Labels()
	if err := writeClusters(opts.Out, stdout, pred, in.src, opts.AllPosteriors); err != nil {
		return err
	}
	if opts.Out == "-" {
		stdout = stderr // the rows took stdout: the summary line goes with the log
	}
	if !opts.Quiet {
		fmt.Fprintf(stderr, "emclust: %s → %s; cluster sizes %v\n", plural(len(pred.Cluster), "row"), outName(opts.Out), eval.ClusterSizes(pred.Cluster, pred.K))
	}
	if labels != nil {
		sc, err := eval.ScoreLabelled(labels, pred.Cluster)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, sc.String())
		return nil
	}
	// The line train prints for a script without labels.
	fmt.Fprintf(stdout, "clusters %d sizes %s\n", pred.K, strings.Trim(fmt.Sprint(eval.ClusterSizes(pred.Cluster, pred.K)), "[]"))
	return nil
}

package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"emclust/eval"
)

type evalOptions struct {
	modelOptions
	JSON bool
}

func evalCommand() *cli.Command {
	return &cli.Command{
		Name:      "eval",
		Usage:     "score a trained model on a labelled data set",
		UsageText: "emclust eval --model RUN [--dataset NAME --data-dir D | --data FILE.csv --label-col C] [--json]",
		Flags: append(inferenceDataFlags("the data the model trained on"),
			&cli.StringFlag{Name: "model", Usage: "run folder or checkpoint file (required)"},
			deviceFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print the scores as JSON"},
			quietFlag(),
		),
		Action: endOnInterrupt(action(evalOptionsFrom, runEval)),
	}
}

func evalOptionsFrom(c *cli.Context) (evalOptions, error) {
	m, err := modelOptionsFrom(c)
	return evalOptions{modelOptions: m, JSON: c.Bool("json")}, err
}

func runEval(_ context.Context, opts evalOptions, stdout, stderr io.Writer) error {
	in, err := openInference(opts.modelOptions, stderr)
	if err != nil {
		return err
	}
	defer in.Close()
	labels := in.src.Labels()
	if labels == nil {
		hint := ""
		switch trained := in.trainedLabel; {
		case in.Cfg.LabelCol != "":
			hint = fmt.Sprintf(" (no row of its label column %q has a class)", in.Cfg.LabelCol)
		case in.Cfg.LabelColFromModel: // looked for, and not there
			hint = fmt.Sprintf(" (the model's label column %q was not found there: give --label-col for a CSV or Parquet file)", trained)
		case in.Cfg.DataFile != "":
			hint = " (give --label-col for a CSV or Parquet file)"
		}
		return usageError{fmt.Errorf("%s has no labels to score against%s", in.src.Describe(), hint)}
	}
	pred, err := in.predict()
	if err != nil {
		return err
	}
	sc, err := eval.ScoreLabelled(labels, pred.Cluster)
	if err != nil {
		return err
	}
	if opts.JSON {
		out := map[string]any{"acc": sc.ACC, "nmi": sc.NMI, "ari": sc.ARI, "n": len(labels),
			"sizes": eval.ClusterSizes(pred.Cluster, pred.K)}
		if sc.Scored > 0 {
			out["scored_rows"] = sc.Scored // the labelled rows, where some are not
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintln(stdout, sc.String())
	return nil
}

package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"emclust/data"
	"emclust/torch"
	"emclust/train"
)

// embedCommand exports the 2-unit bottleneck of a supervised mnist2d run: the 2-d data
// set of the paper's §8.1, ready for `emclust train --data points.csv`.
func embedCommand() *cli.Command {
	return &cli.Command{
		Name:      "embed",
		Usage:     "write the 2-d bottleneck outputs of a supervised mnist2d model as CSV (x,y,label)",
		UsageText: "emclust embed --model RUN [--dataset NAME --data-dir D] --out points.csv",
		Flags: append(imageDataFlags("the images the model trained on"),
			&cli.StringFlag{Name: "model", Usage: "run folder of a supervised mnist2d run, as emclust train --arch mnist2d --objective supervised makes (required)"},
			&cli.StringFlag{Name: "out", Value: "points.csv", Usage: "CSV with columns x,y[,label] (the class's name where the data name their classes: Fashion-MNIST's, a folder's), written atomically; - writes it to stdout"},
			deviceFlag(),
			forceFlag,
		),
		Action: endOnInterrupt(action(embedOptionsFrom, runEmbed)),
	}
}

func embedOptionsFrom(c *cli.Context) (embedOptions, error) {
	if ds := c.String("dataset"); ds != "" && !train.IsImageSet(ds) {
		// Was exit 1, "arch mnist2d takes images; vectors use mlp", once the model loaded.
		return embedOptions{}, usageError{fmt.Errorf("--dataset %s: embed reads images (%s, or folder), which an mnist2d model takes", ds, strings.Join(data.ImageSetNames(), ", "))}
	}
	m, err := modelOptionsFrom(c)
	return embedOptions{modelOptions: m, Out: c.String("out"), Force: c.Bool("force")}, err
}

type embedOptions struct {
	modelOptions
	Out   string
	Force bool
}

func runEmbed(_ context.Context, opts embedOptions, stdout, stderr io.Writer) error {
	in, err := openInferenceTo(opts.modelOptions, opts.Out, opts.Force, stderr)
	if err != nil {
		return err
	}
	defer in.Close()
	net, src := in.Net, in.src
	if net.Spec.Arch != "mnist2d" {
		return usageError{fmt.Errorf("%s holds a model of --arch %s; embed needs one trained with --arch mnist2d --objective supervised", opts.Model, net.Spec.Arch)}
	}
	n := src.Len()
	points := make([]float32, 0, 2*n)
	all := torch.NoGrad()
	defer all.Close()
	rows := all.Arange(n, torch.Int64, src.IndexDevice())
	for lo := 0; lo < n; lo += 1024 {
		s := torch.NoGrad()
		x, _ := src.Batch(s, s.Narrow(rows, 0, lo, min(1024, n-lo)), nil)
		points = append(points, s.Float32s(net.Bottleneck(s, x))...)
		if err := s.Close(); err != nil {
			return err
		}
	}
	if err := all.Err(); err != nil {
		return err
	}
	if len(points) != 2*n {
		return errors.New("embed: bottleneck is not 2-d")
	}
	labels, classes := labelsOf(src)
	err = writeOut(opts.Out, stdout, func(w io.Writer) error {
		head := "x,y"
		if labels != nil {
			head += ",label"
		}
		fmt.Fprintln(w, head)
		buf := make([]byte, 0, 64)
		for i := 0; i < n; i++ {
			buf = strconv.AppendFloat(buf[:0], float64(points[2*i]), 'g', 7, 32)
			buf = append(buf, ',')
			buf = strconv.AppendFloat(buf, float64(points[2*i+1]), 'g', 7, 32)
			if labels != nil {
				buf = appendLabel(append(buf, ','), labels[i], classes)
			}
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "emclust: %d 2-d points → %s\n", n, outName(opts.Out))
	return nil
}

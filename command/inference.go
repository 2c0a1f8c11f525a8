package command

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"emclust/torch"
	"emclust/train"
)

// checkModelArgs checks the command line of predict, eval and embed.
func checkModelArgs(c *cli.Context) error {
	if c.Args().Present() {
		return usageError{fmt.Errorf("%s takes flags only; unexpected %q", c.Command.Name, c.Args().First())}
	}
	if err := requireFlags(c, "model"); err != nil {
		return err
	}
	if c.String("data") != "" && c.String("dataset") != "" {
		return usageError{errors.New("give either --data FILE or --dataset NAME, not both")}
	}
	return nil
}

// dataFor is the config of the data a command names, or else of the data the model
// trained on.
func dataFor(c *cli.Context, cfg *train.Config) (*train.Config, error) {
	d := *cfg
	if c.IsSet("data") || c.IsSet("dataset") {
		d.DataFile, d.Dataset, d.DataDir = c.String("data"), c.String("dataset"), c.String("data-dir")
		d.LabelCol, d.Header = c.String("label-col"), c.String("header")
		if c.IsSet("standardize") {
			d.Standardize = c.Bool("standardize")
		}
		if c.IsSet("image-size") {
			d.ImageSize = c.Int("image-size")
		}
		if err := train.CheckData(&d); err != nil {
			return nil, usageError{err}
		}
	}
	return &d, nil
}

// inference is a trained model and the data it is applied to: what predict, eval and
// embed share.
type inference struct {
	*train.Model
	src train.Source
	dev torch.Device
}

// openInference loads --model on --device and the data the flags name (or the data
// the model trained on), and checks that the data fit the model.
func openInference(c *cli.Context) (*inference, error) {
	if err := checkModelArgs(c); err != nil {
		return nil, err
	}
	dev, err := selectDevice(c.String("device"))
	if err != nil {
		return nil, err
	}
	m, err := train.LoadModel(c.String("model"), dev)
	if err != nil {
		return nil, err
	}
	in := &inference{Model: m, dev: dev}
	cfg, err := dataFor(c, m.Cfg)
	if err == nil {
		in.src, err = train.OpenSource(cfg, dev)
	}
	if err == nil {
		err = m.CheckInput(c.String("model"), in.src, cfg)
	}
	if err != nil {
		in.Close()
		return nil, err
	}
	in.Cfg = cfg
	return in, nil
}

// Close frees the model and the data.
func (in *inference) Close() {
	if in.src != nil {
		in.src.Close()
	}
	in.Model.Close()
}

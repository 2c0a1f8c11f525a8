package command

import (
	"testing"

	"github.com/urfave/cli/v2"

	"emclust/torch"
	"emclust/train"
)

// --epochs N means N epochs whatever the size of the table: the config of a new run
// and the settings a resumed run takes both drop the step bounds that would raise or
// lower them.
func TestEpochsFlagSetsStepBoundsAside(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		epochs int
	}{
		{[]string{"--epochs", "30"}, 30},
		{[]string{"--resume", "a-run", "--epochs", "40"}, 40},
	} {
		var opts trainOptions
		cmd := trainCommand()
		cmd.Action = func(c *cli.Context) error {
			var err error
			opts, err = trainOptionsFrom(c)
			return err
		}
		app := &cli.App{Name: "emclust", Commands: []*cli.Command{cmd}}
		if err := app.Run(append([]string{"emclust", "train"}, tc.args...)); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		cfg := opts.New.Config
		if opts.Resume != "" {
			cfg = train.VectorDefaults() // as a saved run's config holds them
			opts.Resumed.apply(&cfg)
		}
		for _, rows := range []int{150, 1797, 500000} {
			if got := cfg.EpochsFor(rows); got != tc.epochs {
				t.Errorf("%v: %d epochs on %d rows, want %d (min %d, max %d steps)", tc.args, got, rows, tc.epochs, cfg.MinSteps, cfg.MaxSteps)
			}
		}
	}
}

// The bf16 hint goes to a CNN trained in fp32 on a CPU with AMX, and to no one else.
func TestBF16Hint(t *testing.T) {
	image := train.ImageDefaults()
	image.Dataset = "fashion-mnist"
	vectors := train.VectorDefaults()
	bf16 := image
	bf16.Precision = "bf16"
	mlpOnImages := image
	mlpOnImages.Arch = "mlp"
	for _, tc := range []struct {
		name         string
		cfg          train.Config
		dev          torch.Device
		precisionSet bool
		hasAMX       bool
		want         bool
	}{
		{"CNN in fp32 on an AMX CPU", image, torch.CPU, false, true, true},
		{"no AMX", image, torch.CPU, false, false, false},
		{"on a GPU", image, torch.Device{CUDA: true}, false, true, false},
		{"--precision fp32 given", image, torch.CPU, true, true, false},
		{"already bf16", bf16, torch.CPU, false, true, false},
		{"vectors", vectors, torch.CPU, false, true, false},
		{"an MLP on images", mlpOnImages, torch.CPU, false, true, false},
	} {
		if got := bf16Hint(tc.cfg, tc.dev, tc.precisionSet, tc.hasAMX) != ""; got != tc.want {
			t.Errorf("%s: hint %v, want %v", tc.name, got, tc.want)
		}
	}
}

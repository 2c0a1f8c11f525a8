package command

import (
	"testing"

	"github.com/urfave/cli/v2"

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

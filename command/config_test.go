package command

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"emclust/torch"
	"emclust/train"
)

// trainOptionsOf is what emclust train makes of args, which must parse.
func trainOptionsOf(t *testing.T, args ...string) trainOptions {
	t.Helper()
	var opts trainOptions
	cmd := trainCommand()
	cmd.Action = func(c *cli.Context) error {
		var err error
		opts, err = trainOptionsFrom(c)
		return err
	}
	app := &cli.App{Name: "emclust", Commands: []*cli.Command{cmd}}
	if err := app.Run(append([]string{"emclust", "train"}, args...)); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return opts
}

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
		opts := trainOptionsOf(t, tc.args...)
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

// The precision hint goes to a CNN on a CPU: left in fp32 where the CPU has AMX, asked
// for in bf16 where it has not; to no one else.
func TestPrecisionHint(t *testing.T) {
	image := train.ImageDefaults()
	image.Dataset = "fashion-mnist"
	vectors := train.VectorDefaults()
	bf16 := image
	bf16.Precision = "bf16"
	mlpOnImages := image
	mlpOnImages.Arch = "mlp"
	vectorsBF16 := vectors
	vectorsBF16.Precision = "bf16"
	for _, tc := range []struct {
		name         string
		cfg          train.Config
		dev          torch.Device
		precisionSet bool
		hasAMX       bool
		want         string // what the hint names: "has AMX", "no AMX" or nothing
	}{
		{"CNN in fp32 on an AMX CPU", image, torch.CPU, false, true, "has AMX"},
		{"no AMX", image, torch.CPU, false, false, ""},
		{"on a GPU", image, torch.Device{CUDA: true}, false, true, ""},
		{"--precision fp32 given", image, torch.CPU, true, true, ""},
		{"already bf16", bf16, torch.CPU, false, true, ""},
		{"vectors", vectors, torch.CPU, false, true, ""},
		{"an MLP on images", mlpOnImages, torch.CPU, false, true, ""},
		{"bf16 given, no AMX", bf16, torch.CPU, true, false, "no AMX"},
		{"bf16 given, AMX", bf16, torch.CPU, true, true, ""},
		{"bf16 without AMX, on a GPU", bf16, torch.Device{CUDA: true}, true, false, ""},
		{"vectors in bf16 without AMX", vectorsBF16, torch.CPU, true, false, ""},
	} {
		got := precisionHint(tc.cfg, tc.dev, tc.precisionSet, tc.hasAMX)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: hint %q, want one naming %q", tc.name, got, tc.want)
		}
	}
}

// An image run starts as trials unless told otherwise, or too short for them to pay:
// the defaults' trials give way to --restarts 1, --keep-by, --trial-epochs 0 and short
// runs, and never reach vectors. --keep-by without --restarts, which would keep one
// seed, is refused (TestErrors).
func TestImageTrialDefaults(t *testing.T) {
	fm := []string{"--dataset", "fashion-mnist", "--data-dir", "nowhere"}
	trials, length := train.DefaultImageTrials, train.DefaultTrialEpochs
	for _, tc := range []struct {
		name                  string
		args                  []string
		restarts, trialEpochs int
	}{
		{"defaults", fm, trials, length},
		{"as long as the trials", append(fm, "--epochs", fmt.Sprint(trials*length)), 0, 0},
		{"one epoch longer", append(fm, "--epochs", fmt.Sprint(trials*length+1)), trials, length},
		{"one seed asked for", append(fm, "--restarts", "1"), 1, 0},
		{"restarts given, a short run", append(fm, "--restarts", "3", "--epochs", "20"), 3, length},
		{"restarts no longer than a trial", append(fm, "--restarts", "3", "--epochs", fmt.Sprint(length)), 3, 0},
		{"restarts kept by silhouette", append(fm, "--restarts", "3", "--keep-by", "silhouette"), 3, 0},
		{"no trials asked for", append(fm, "--trial-epochs", "0"), 0, 0},
		{"whole runs asked for", append(fm, "--restarts", "3", "--trial-epochs", "0"), 3, 0},
		{"whole runs kept by silhouette", append(fm, "--restarts", "3", "--trial-epochs", "0", "--keep-by", "silhouette"), 3, 0},
		{"trials asked for", append(fm, "--restarts", "2", "--trial-epochs", "5"), 2, 5},
		{"trials of a length asked for", append(fm, "--trial-epochs", "5", "--epochs", "8"), trials, 5},
		{"vectors", []string{"--dataset", "digits"}, train.DefaultVectorRestarts, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := trainOptionsOf(t, tc.args...).New.Config
			if cfg.Restarts != tc.restarts || cfg.TrialEpochs != tc.trialEpochs {
				t.Errorf("%v: restarts %d, trial epochs %d; want %d and %d", tc.args, cfg.Restarts, cfg.TrialEpochs, tc.restarts, tc.trialEpochs)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("%v: %v", tc.args, err)
			}
		})
	}
}

// A model's inputs are fixed at training: predict and eval refuse the other
// standardisation, which fed a network trained on z-scores raw features (ACC 1.00
// to 0.80 on one table) and one trained on raw features z-scores (1.00 to 0.60).
func TestInferenceStandardize(t *testing.T) {
	for _, tc := range []struct {
		trained bool
		given   *bool
		refused bool
	}{
		{true, nil, false}, {true, ptr(true), false}, {true, ptr(false), true},
		{false, nil, false}, {false, ptr(false), false}, {false, ptr(true), true},
	} {
		d := dataOptions{Given: true, DataFile: "new.csv", Standardize: tc.given}
		cfg, err := d.configFor("runs/m", &train.Config{DataFile: "old.csv", Standardize: tc.trained})
		var ue usageError
		switch {
		case tc.refused && (!errors.As(err, &ue) || !strings.Contains(err.Error(), "runs/m was trained on")):
			t.Errorf("trained %v, --standardize %v: err %v, want it refused", tc.trained, *tc.given, err)
		case !tc.refused && (err != nil || cfg.Standardize != tc.trained):
			t.Errorf("trained %v, given %v: %v, %v; want the trained setting", tc.trained, tc.given, cfg, err)
		}
	}
}

// Other data change the epochs a plan resolves from them too: a resume on them was
// told its --epochs differed, a flag the user never gave.
func TestPlanDifference(t *testing.T) {
	plan := func(epochs int, digest string) []byte {
		return fmt.Appendf(nil, `{"epochs":%d,"seeds":[1,2],"train":{"k":3,"lr":0.001,"data_digest":%q}}`, epochs, digest)
	}
	for _, tc := range []struct {
		name       string
		saved, now []byte
		want       string
	}{
		{"same", plan(100, "aa"), plan(100, "aa"), ""},
		{"epochs", plan(100, "aa"), plan(200, "aa"), "--epochs"},
		{"data and epochs", plan(100, "aa"), plan(200, "bb"), "the data"},
		{"learning rate", plan(100, "aa"), []byte(`{"epochs":100,"seeds":[1,2],"train":{"k":3,"lr":0.01,"data_digest":"aa"}}`), "--lr"},
	} {
		if got := planDifference(tc.saved, tc.now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// An out-of-memory error names only settings the data can take: --image-size is a
// folder's alone, --hidden a table's.
func TestOOMAdvice(t *testing.T) {
	for _, tc := range []struct {
		dataset     string
		want, avoid string
	}{
		{"folder", "--image-size", "--hidden"},
		{"fashion-mnist", "--precision bf16", "--image-size"},
		{"stl10", "--batch-size", "--image-size"},
		{"wine", "--hidden", "--image-size"},
		{"", "--hidden", "--precision"},
	} {
		got := oomAdvice(train.Config{Dataset: tc.dataset})
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.avoid) {
			t.Errorf("%q: %q, want %s and not %s", tc.dataset, got, tc.want, tc.avoid)
		}
	}
}

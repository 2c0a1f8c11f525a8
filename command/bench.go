package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"emclust/data"
	"emclust/model"
	"emclust/torch"
	"emclust/train"
)

// benchShapes are the paper's data sizes: rows per epoch and the input of each model.
var benchShapes = map[string]struct {
	rows, c, h, w, features int
}{
	"mlp":   {rows: 1797, features: 64},
	"mnist": {rows: 70000, c: 1, h: 28, w: 28},
	"cifar": {rows: 60000, c: 3, h: 32, w: 32},
	"stl10": {rows: 13000, c: 3, h: 96, w: 96},
}

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "time training steps of a model and objective on synthetic data of the paper's sizes",
		UsageText: "emclust bench --model mlp|mnist|cifar|stl10[,...] --objective em|em-aug|twofold|iic[,...] --device D [--json]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Value: "mlp,mnist", Usage: "comma-separated: mlp, mnist, cifar, stl10"},
			&cli.StringFlag{Name: "objective", Usage: "comma-separated objectives (default: em for mlp, twofold for CNNs)"},
			deviceFlag(),
			&cli.IntFlag{Name: "batch-size", Value: 128, Usage: "rows per step"},
			&cli.IntFlag{Name: "steps", Value: 20, Usage: "timed steps"},
			&cli.IntFlag{Name: "warmup", Value: 3, Usage: "untimed steps first (allocator, cuDNN autotuning)"},
			&cli.IntFlag{Name: "threads", Usage: "CPU threads for libtorch (0: as train, one per CPU and one for a step too small to share)"},
			&cli.StringFlag{Name: "precision", Value: "fp32", Usage: "comma-separated: fp32, bf16 (each is timed)"},
			&cli.StringFlag{Name: "channels-last", Value: "auto", Usage: "comma-separated: false, true, auto (train's default: true for CNNs); each is timed on the CNNs"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON lines instead of a table"},
		},
		Action: endOnInterrupt(action(benchOptionsFrom, runBench)),
	}
}

// benchOptions are bench's flags; each model × objective × precision × layout is timed.
type benchOptions struct {
	Models, Objectives []string // no objectives: each model's default
	Precisions         []string
	Layouts            []string // "true", "false" or "auto"
	Device             string
	BatchSize          int
	Steps, Warmup      int
	Threads            int
	JSON               bool
}

func benchOptionsFrom(c *cli.Context) (benchOptions, error) {
	opts := benchOptions{Device: c.String("device"), BatchSize: c.Int("batch-size"), Steps: c.Int("steps"), Warmup: c.Int("warmup"),
		Threads: c.Int("threads"), JSON: c.Bool("json")}
	for _, l := range []struct {
		flag string
		list *[]string
	}{{"model", &opts.Models}, {"objective", &opts.Objectives}, {"precision", &opts.Precisions}, {"channels-last", &opts.Layouts}} {
		var err error
		if *l.list, err = splitList(l.flag, c.String(l.flag)); err != nil {
			return opts, err
		}
		if len(*l.list) == 0 && l.flag != "objective" { // no objective: each model's default
			return opts, usageError{fmt.Errorf("--%s: nothing to time", l.flag)}
		}
		for i, v := range *l.list {
			if slices.Contains((*l.list)[:i], v) {
				return opts, usageError{fmt.Errorf("--%s: %s given twice", l.flag, v)}
			}
		}
	}
	if opts.Steps < 1 || opts.Warmup < 0 {
		return opts, usageError{fmt.Errorf("--steps %d --warmup %d: want at least 1 timed step and no negative warmup", opts.Steps, opts.Warmup)}
	}
	if opts.BatchSize < 2 || opts.BatchSize > maxBenchBatch {
		return opts, usageError{fmt.Errorf("--batch-size %d: want 2 (the relevance normalisation needs at least 2 rows a batch) to %d", opts.BatchSize, maxBenchBatch)}
	}
	if n := opts.Threads; n < 0 || n > runtime.NumCPU() {
		return opts, usageError{fmt.Errorf("--threads %d: want 0 (as train: one per CPU, one for a step too small to share) to %d, the CPUs this machine has", n, runtime.NumCPU())}
	}
	for _, m := range opts.Models {
		if _, ok := benchShapes[m]; !ok {
			return opts, usageError{fmt.Errorf("bench: unknown model %q: want mlp, mnist, cifar or stl10", m)}
		}
	}
	for _, name := range opts.Objectives {
		obj, err := train.LookupObjective(name)
		if err != nil {
			return opts, usageError{err}
		}
		if obj.Supervised {
			// Was refused by the first run, after the table's header.
			return opts, usageError{fmt.Errorf("--objective %s: bench's synthetic data have no labels; time em, em-aug, twofold or iic", name)}
		}
		if obj.Augmented && slices.Contains(opts.Models, "mlp") {
			return opts, usageError{fmt.Errorf("--objective %s trains on transformed images: time it on mnist, cifar or stl10, not mlp", name)}
		}
	}
	for _, p := range opts.Precisions {
		if err := (model.Compute{Precision: p}).Validate(); err != nil {
			return opts, usageError{err}
		}
	}
	for _, v := range opts.Layouts {
		if _, err := strconv.ParseBool(v); err != nil && v != "auto" {
			return opts, usageError{fmt.Errorf("--channels-last %q: want true, false or auto, comma-separated", v)}
		}
	}
	return opts, nil
}

func runBench(_ context.Context, opts benchOptions, stdout, _ io.Writer) error {
	dev, err := selectDevice(opts.Device)
	if err != nil {
		return err
	}
	if opts.Threads > 0 {
		torch.SetNumThreads(opts.Threads)
	}
	// Each row is printed as its configuration finishes: a long bench shows what it
	// has, and one stopped by Ctrl-C keeps its finished rows.
	printRow := func(res *train.BenchResult) {
		b, _ := json.Marshal(res)
		fmt.Fprintln(stdout, string(b))
	}
	if !opts.JSON {
		printRow = benchTable(stdout)
	}
	for _, m := range opts.Models {
		objs := opts.Objectives
		if len(objs) == 0 {
			objs = []string{train.ImageDefaults().Objective}
			if m == "mlp" {
				objs = []string{train.VectorDefaults().Objective}
			}
		}
		layouts := opts.Layouts
		if m == "mlp" {
			layouts = []string{"false"} // no convolutions to lay out: timed once
		}
		for _, obj := range objs {
			for _, prec := range opts.Precisions {
				for _, layout := range layouts {
					cl, _ := strconv.ParseBool(layout)
					if layout == "auto" {
						cl = defaultChannelsLast(m != "mlp")
					}
					comp := model.Compute{Precision: prec, ChannelsLast: cl}
					res, err := benchOne(m, obj, comp, dev, opts)
					if err != nil {
						return fmt.Errorf("bench %s %s %s: %w", m, obj, prec, err)
					}
					printRow(res)
				}
			}
		}
	}
	return nil
}

// benchTable prints the table's header and returns the function that prints a row
// under it. The columns have fixed widths, as no row waits for the others.
func benchTable(w io.Writer) func(*train.BenchResult) {
	header := []string{"model", "objective", "precision", "layout", "device", "params", "ms/step", "rows/s",
		"GFLOP/step", "TFLOP/s", "epoch rows", "epoch s", "peak MiB", "faults/step"}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			fmt.Fprintf(&b, "%*s", max(len(header[i]), 8), c)
		}
		fmt.Fprintln(w, b.String())
	}
	line(header)
	return func(r *train.BenchResult) {
		peak := "-"
		if r.PeakBytes >= 0 {
			peak = fmt.Sprintf("%.0f", float64(r.PeakBytes)/(1<<20))
		}
		layout := "NCHW"
		if r.ChannelsLast {
			layout = "NHWC"
		}
		if r.Arch == "mlp" {
			layout = "-"
		}
		line([]string{r.Arch, r.Objective, r.Precision, layout, r.Device, fmt.Sprint(r.Params),
			fmt.Sprintf("%.2f", r.StepMS), fmt.Sprintf("%.0f", r.ImagesPerSec), sigFig(r.GFLOPPerStep),
			sigFig(r.AchievedTFLOPS), fmt.Sprint(r.EpochRows), fmt.Sprintf("%.1f", r.EpochSeconds), peak,
			fmt.Sprintf("%.0f", r.FaultsPerStep)})
	}
}

// maxBenchBatch bounds --batch-size: bench makes 4 batches of synthetic data on the
// host, which at 4096 STL-10 images is 1.8 GB (a hundred million was Go's
// out-of-memory crash).
const maxBenchBatch = 4096

func benchOne(arch, obj string, comp model.Compute, dev torch.Device, opts benchOptions) (*train.BenchResult, error) {
	shape := benchShapes[arch]
	bs := opts.BatchSize
	n := max(4*bs, 1024)
	rng := rand.New(rand.NewPCG(1, 2))
	var src train.Source
	var err error
	cfg := train.ImageDefaults()
	if arch == "mlp" {
		cfg = train.VectorDefaults()
		v := &data.Vectors{N: n, D: shape.features, X: make([]float32, n*shape.features), Source: "synthetic"}
		for i := range v.X {
			v.X[i] = float32(rng.NormFloat64())
		}
		src, err = train.NewVectorSource(v, dev)
	} else {
		im := &data.Images{N: n, C: shape.c, H: shape.h, W: shape.w, Pix: make([]uint8, n*shape.c*shape.h*shape.w), Source: "synthetic"}
		for i := range im.Pix {
			im.Pix[i] = uint8(rng.IntN(256))
		}
		src, err = train.NewImageSource(im, dev)
	}
	if err != nil {
		return nil, err
	}
	defer src.Close()
	cfg.Arch, cfg.Objective, cfg.BatchSize, cfg.Device = arch, obj, bs, dev.String()
	cfg.Threads = opts.Threads // an explicit count is kept even for small steps
	cfg.Precision, cfg.ChannelsLast = comp.Precision, comp.ChannelsLast
	return train.Bench(cfg, src, dev, opts.Warmup, opts.Steps, shape.rows)
}

// sigFig formats a positive value with three significant digits, so that the MLP's
// few MFLOPs and a CNN's hundreds of GFLOPs both read sensibly in one column.
func sigFig(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"emclust/atomicfile"
	"emclust/data"
	"emclust/eval"
	"emclust/model"
	"emclust/torch"
	"emclust/train"
)

// loadModel rebuilds the network saved in a run folder (or checkpoint file) on dev.
func loadModel(path string, dev torch.Device) (*model.Net, *train.Config, *torch.Tensor, error) {
	f, cfg, spec, err := train.ReadCheckpoint(path)
	if err != nil {
		return nil, nil, nil, err
	}
	net, err := model.New(spec, dev)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := net.Load(f, "model."); err != nil {
		net.Close()
		return nil, nil, nil, err
	}
	if err := net.SetCompute(cfg.Compute()); err != nil {
		net.Close()
		return nil, nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var prior *torch.Tensor
	if _, ok := f.Shape("prior"); ok {
		s := torch.NoGrad()
		prior = s.Keep(s.LoadTensor(f, "prior", dev))
		if err := s.Close(); err != nil {
			net.Close()
			return nil, nil, nil, err
		}
	}
	return net, cfg, prior, nil
}

// checkModelArgs checks the command line of predict and eval.
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

// sourceFor opens the data a command names, or else the data the model trained on.
func sourceFor(c *cli.Context, cfg *train.Config, dev torch.Device) (train.Source, error) {
	if c.IsSet("data") || c.IsSet("dataset") {
		d := *cfg
		d.DataFile, d.Dataset, d.DataDir = c.String("data"), c.String("dataset"), c.String("data-dir")
		d.LabelCol, d.Header = c.String("label-col"), c.String("header")
		if c.IsSet("standardize") {
			d.Standardize = c.Bool("standardize")
		}
		if c.IsSet("image-size") {
			d.ImageSize = c.Int("image-size")
		}
		*cfg = d
	}
	return openSource(cfg, dev)
}

func checkInput(modelPath string, net *model.Net, src train.Source, cfg *train.Config) error {
	want := net.Spec
	got, err := src.Spec(cfg)
	if err != nil {
		return err
	}
	if got.In != want.In || got.H != want.H || got.W != want.W || got.InC != want.InC {
		msg := fmt.Sprintf("%s, but the model in %s takes %s input", src.Describe(), modelPath, describeInput(want))
		if want.Arch == "mlp" && got.Arch == "mlp" && got.In == want.In+1 && cfg.LabelCol == "" {
			msg += " (if one column holds labels, name it with --label-col)"
		}
		return errors.New(msg)
	}
	return nil
}

func describeInput(sp model.Spec) string {
	if sp.Arch == "mlp" {
		return fmt.Sprintf("%d-feature", sp.In)
	}
	return fmt.Sprintf("%dx%d image", sp.H, sp.W)
}

// inference is a trained model and the data it is applied to: what predict, eval and
// embed share.
type inference struct {
	net   *model.Net
	cfg   *train.Config
	prior *torch.Tensor
	src   train.Source
	dev   torch.Device
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
	net, cfg, prior, err := loadModel(c.String("model"), dev)
	if err != nil {
		return nil, err
	}
	in := &inference{net: net, cfg: cfg, prior: prior, dev: dev}
	if in.src, err = sourceFor(c, cfg, dev); err != nil {
		in.Close()
		return nil, err
	}
	if err := checkInput(c.String("model"), net, in.src, cfg); err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

// Close frees the model and the data.
func (in *inference) Close() {
	if in.src != nil {
		in.src.Close()
	}
	in.prior.Free()
	in.net.Close()
}

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
			net, src, dev, prior := in.net, in.src, in.dev, in.prior
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
			fmt.Fprintf(os.Stderr, "emclust: %d rows → %s; cluster sizes %v\n", len(pred.Cluster), c.String("out"), sizes)
			if labels := src.Labels(); labels != nil {
				sc, err := eval.Score(labels, pred.Cluster)
				if err != nil {
					return err
				}
				fmt.Println(sc.String())
			}
			return nil
		},
	}
}

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
			net, src, dev, prior := in.net, in.src, in.dev, in.prior
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
				fmt.Println(string(b))
				return nil
			}
			fmt.Println(sc.String())
			return nil
		},
	}
}

func scoreCommand() *cli.Command {
	return &cli.Command{
		Name:      "score",
		Usage:     "compare two label files (one label per line): prints ACC NMI ARI",
		UsageText: "emclust score --truth LABELS --pred LABELS [--json]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "truth", Usage: "file of ground-truth labels, one per line (required)"},
			&cli.StringFlag{Name: "pred", Usage: "file of predicted clusters, one per line (required)"},
			&cli.BoolFlag{Name: "json", Usage: "print the scores as JSON"},
		},
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageError{fmt.Errorf("score takes flags only; unexpected %q", c.Args().First())}
			}
			if err := requireFlags(c, "truth", "pred"); err != nil {
				return err
			}
			truth, err := eval.ReadLabels(c.String("truth"))
			if err != nil {
				return err
			}
			pred, err := eval.ReadLabels(c.String("pred"))
			if err != nil {
				return err
			}
			if len(truth) != len(pred) {
				return fmt.Errorf("%s has %d labels but %s has %d", c.String("truth"), len(truth), c.String("pred"), len(pred))
			}
			sc, err := eval.Score(truth, pred)
			if err != nil {
				return err
			}
			if c.Bool("json") {
				b, _ := json.Marshal(map[string]float64{"acc": sc.ACC, "nmi": sc.NMI, "ari": sc.ARI})
				fmt.Println(string(b))
				return nil
			}
			fmt.Println(sc.String())
			return nil
		},
	}
}

func devicesCommand() *cli.Command {
	return &cli.Command{
		Name:  "devices",
		Usage: "show the libtorch build and the devices it can use",
		Action: func(c *cli.Context) error {
			build := "CPU"
			if torch.BuiltWithCUDA() {
				build = "CUDA"
			}
			fmt.Printf("libtorch %s (%s build of the emtorch shim), %d CPU threads\n", torch.Version(), build, torch.NumThreads())
			fmt.Println("cpu")
			n := torch.CUDADeviceCount()
			if !torch.CUDAAvailable() {
				n = 0
			}
			for i := 0; i < n; i++ {
				name, mem, err := torch.CUDADeviceInfo(i)
				if err != nil {
					fmt.Printf("cuda:%d\n", i)
					continue
				}
				fmt.Printf("cuda:%d %s, %.1f GiB\n", i, name, float64(mem)/(1<<30))
			}
			if n == 0 {
				fmt.Println("no CUDA device")
			}
			return nil
		},
	}
}

func dataCommand() *cli.Command {
	return &cli.Command{
		Name:  "data",
		Usage: "manage data sets",
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageError{fmt.Errorf("unknown command \"data %s\"; see emclust data --help", c.Args().First())}
			}
			return cli.ShowSubcommandHelp(c)
		},
		Subcommands: []*cli.Command{{
			Name:      "fetch",
			Usage:     "download a data set's official files, check their MD5 and unpack them",
			UsageText: "emclust data fetch NAME --dir D   (NAME: mnist, fashion-mnist, cifar10, cifar100, stl10)",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "dir", Usage: "folder to put the files in (required)"},
				&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress bar"},
			},
			Action: func(c *cli.Context) error {
				args, err := interspersedFlags(c)
				if err != nil {
					return err
				}
				if len(args) != 1 {
					return usageError{errors.New("data fetch takes one data set name: mnist, fashion-mnist, cifar10, cifar100 or stl10")}
				}
				name := args[0]
				if err := requireFlags(c, "dir"); err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
				defer stop()
				var bar *progressbar.ProgressBar
				progress := func(done, total int64) {
					if c.Bool("quiet") || !term.IsTerminal(int(os.Stderr.Fd())) {
						return
					}
					if bar == nil || done == 0 {
						bar = progressbar.DefaultBytes(total, "downloading "+name)
					}
					bar.Set64(done)
				}
				if err := data.Fetch(ctx, name, c.String("dir"), progress); err != nil {
					if ctx.Err() != nil {
						return interruptedError{err}
					}
					return err
				}
				fmt.Fprintf(os.Stderr, "emclust: %s is in %s\n", name, c.String("dir"))
				return nil
			},
		}},
	}
}

// writeAssignments writes index,cluster,posterior[,label] atomically.
func writeAssignments(path string, pred *train.Prediction, labels []int) error {
	return writeClusters(path, pred, labels, false)
}

// writePosteriors writes every cluster's posterior (p0..pK-1) instead of the winner's.
func writePosteriors(path string, pred *train.Prediction, labels []int) error {
	return writeClusters(path, pred, labels, true)
}

func writeClusters(path string, pred *train.Prediction, labels []int, all bool) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		head := "index,cluster,posterior"
		if all {
			head = "index,cluster"
			for j := 0; j < pred.K; j++ {
				head += ",p" + strconv.Itoa(j)
			}
		}
		if labels != nil {
			head += ",label"
		}
		if _, err := fmt.Fprintln(w, head); err != nil {
			return err
		}
		buf := make([]byte, 0, 256)
		for i, c := range pred.Cluster {
			buf = strconv.AppendInt(buf[:0], int64(i), 10)
			buf = append(buf, ',')
			buf = strconv.AppendInt(buf, int64(c), 10)
			row := pred.Posterior[i*pred.K : (i+1)*pred.K]
			if !all {
				row = row[c : c+1]
			}
			for _, p := range row {
				buf = append(buf, ',')
				buf = strconv.AppendFloat(buf, float64(p), 'f', 6, 32)
			}
			if labels != nil {
				buf = append(buf, ',')
				buf = strconv.AppendInt(buf, int64(labels[i]), 10)
			}
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	})
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(path, append(b, '\n'))
}

// barProgress draws one progress bar per epoch with rate and ETA on a terminal, and
// prints one line per epoch otherwise (unless quiet).
type barProgress struct {
	w     io.Writer
	tty   bool
	quiet bool
	bar   *progressbar.ProgressBar
	epoch int
	of    int
}

func newProgress(w io.Writer, quiet bool) train.Progress {
	return &barProgress{w: w, quiet: quiet, tty: !quiet && term.IsTerminal(int(os.Stderr.Fd()))}
}

func (p *barProgress) Start(epoch, epochs, steps int) {
	p.epoch, p.of = epoch, epochs
	if !p.tty {
		return
	}
	p.bar = progressbar.NewOptions(steps,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(fmt.Sprintf("epoch %d/%d", epoch, epochs)),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("step"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetWidth(30),
	)
}

func (p *barProgress) Step(done int, loss float64, read bool) {
	if p.bar == nil {
		return
	}
	if read {
		p.bar.Describe(fmt.Sprintf("epoch %d/%d loss %.4f", p.epoch, p.of, loss))
	}
	p.bar.Set(done)
}

func (p *barProgress) End(m train.EpochMetrics) {
	if p.bar != nil {
		p.bar.Finish()
		p.bar = nil
	}
	if p.quiet {
		return
	}
	line := fmt.Sprintf("epoch %d/%d  loss %.4f", m.Epoch, p.of, m.Loss)
	if m.LossKL != 0 {
		line += fmt.Sprintf("  kl %.4f", m.LossKL)
	}
	if m.ACC != nil {
		line += fmt.Sprintf("  ACC %.4f NMI %.4f ARI %.4f", *m.ACC, *m.NMI, *m.ARI)
	}
	if m.Sizes != nil {
		line += fmt.Sprintf("  empty %d", m.Empty)
	}
	line += fmt.Sprintf("  %.1fs", m.Seconds)
	fmt.Fprintln(p.w, line)
}

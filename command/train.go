package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"emclust/baseline"
	"emclust/data"
	"emclust/eval"
	"emclust/loss"
	"emclust/torch"
	"emclust/train"
)

// dataFlags select what to cluster; train, predict and eval share them. dflt says
// what is read when none is given, standardize what --standardize defaults to.
func dataFlags(dflt, standardize string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "dataset", Usage: "digits (embedded), mnist, fashion-mnist, cifar10, cifar100, stl10, or folder (images under --data-dir)", DefaultText: dflt},
		&cli.StringFlag{Name: "data-dir", Usage: "folder with the data set's official files", DefaultText: "none; for fashion-mnist, Debian's " + data.DefaultImageDir("fashion-mnist")},
		&cli.StringFlag{Name: "data", Usage: "vectors to cluster: a .csv/.tsv/.txt (optionally .gz) or .npy file", DefaultText: dflt},
		&cli.StringFlag{Name: "label-col", Usage: "CSV column holding ground-truth labels, by name or 0-based index (-1: last); used only for scoring", DefaultText: "none"},
		&cli.StringFlag{Name: "header", Value: "auto", Usage: "CSV header row: auto, yes or no"},
		&cli.BoolFlag{Name: "standardize", Usage: "z-score each feature column", DefaultText: standardize},
		&cli.IntFlag{Name: "image-size", Usage: "with --dataset folder: resize images to this square size (0: keep, all must match)"},
		&cli.BoolFlag{Name: "gray", Usage: "with --dataset folder: load images as grayscale"},
	}
}

// modelFlags choose the network and how it trains; train and compare share them, and
// their defaults are the library's (train.VectorDefaults, train.ImageDefaults).
func modelFlags() []cli.Flag {
	vd, id := train.VectorDefaults(), train.ImageDefaults()
	both := func(v, i any) string {
		if fmt.Sprint(v) == fmt.Sprint(i) {
			return fmt.Sprint(v)
		}
		return fmt.Sprintf("%v for vectors, %v for images", v, i)
	}
	return []cli.Flag{
		&cli.IntFlag{Name: "k", Usage: "number of clusters", DefaultText: fmt.Sprintf("the number of classes when labels are known, else %d", vd.K)},
		&cli.IntFlag{Name: "epochs", Usage: "passes over the data", DefaultText: both(vd.Epochs, id.Epochs)},
		&cli.IntFlag{Name: "batch-size", Usage: "rows per batch; the relevance normalisation runs over each batch", DefaultText: both(vd.BatchSize, id.BatchSize)},
		&cli.StringFlag{Name: "gamma", Usage: "γ in h = sigmoid(a*/γ): a number, or auto = ((n−1)/√n)/2.245 for batch size n", DefaultText: both(vd.Gamma, id.Gamma)},
		&cli.Float64Flag{Name: "lr", Usage: "Adam learning rate of the EM (or IIC) step", DefaultText: both(vd.LR, id.LR)},
		&cli.Float64Flag{Name: "lr-kl", Usage: "Adam learning rate of the KL step (twofold)", DefaultText: both(vd.LRKL, id.LRKL)},
		&cli.StringFlag{Name: "arch", Usage: "network: mlp, mnist, cifar or stl10", DefaultText: "chosen from the data"},
		&cli.StringFlag{Name: "hidden", Usage: "MLP hidden layer widths", DefaultText: strings.Trim(strings.ReplaceAll(fmt.Sprint(vd.Hidden), " ", ","), "[]")},
		&cli.BoolFlag{Name: "no-norm", Usage: "turn off the relevance normalisation (the paper's ablation: expect collapse)"},
		&cli.StringFlag{Name: "prior", Usage: "cluster prior: uniform (the paper) or learned (running mean of posteriors, for imbalanced data)", DefaultText: both(vd.Prior, id.Prior)},
		deviceFlag(),
		threadsFlag(),
		&cli.StringFlag{Name: "precision", Usage: "fp32, or bf16: convolutions and matrix products in bfloat16 as under autocast (weights, normalisation and loss stay float32)", DefaultText: both(vd.Precision, id.Precision)},
		&cli.BoolFlag{Name: "channels-last", Usage: "lay images and conv weights out N,H,W,C (CNNs only; --channels-last=false: off)", DefaultText: "on for CNNs on the CPU, off on GPUs"},
		&cli.BoolFlag{Name: "deterministic", Usage: "on a GPU: cuDNN's deterministic algorithms only, so that a rerun or a resumed run matches bit for bit (slower)"},
		&cli.BoolFlag{Name: "data-on-host", Usage: "keep images in (pinned) host memory and copy each batch to the device, for sets larger than GPU memory"},
	}
}

func trainCommand() *cli.Command {
	flags := append(dataFlags("the embedded digits", "on for the embedded digits, else off"), modelFlags()...)
	flags = append(flags,
		&cli.StringFlag{Name: "objective", Usage: objectiveHelp(), DefaultText: "em for vectors, twofold for images"},
		&cli.Uint64Flag{Name: "seed", Usage: "seed for init, shuffling and augmentation", DefaultText: fmt.Sprint(train.VectorDefaults().Seed)},
		&cli.IntFlag{Name: "eval-every", Usage: "epochs between full evaluations (0: only at the end)", DefaultText: fmt.Sprint(train.VectorDefaults().EvalEvery)},
		&cli.BoolFlag{Name: "kmeans", Usage: "also cluster the same features with k-means and print both (--kmeans=false: off)", DefaultText: "true for vectors, false for images"},
		&cli.StringFlag{Name: "out", Usage: "run folder for config, metrics, checkpoint and assignments", DefaultText: "runs/<data>-<time>"},
		&cli.StringFlag{Name: "resume", Usage: "continue the run in this folder from its last checkpoint (--epochs may extend it; the run's other settings are kept)", DefaultText: "off"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only the summary line"},
		&cli.BoolFlag{Name: "json", Usage: "print the summary as JSON"},
	)
	return &cli.Command{
		Name:      "train",
		Usage:     "cluster a data set and save the run",
		UsageText: "emclust train [--dataset NAME --data-dir D | --data FILE.csv --label-col C] --k K --epochs N --out RUN",
		Flags:     flags,
		Action:    runTrain,
	}
}

func runTrain(c *cli.Context) error {
	// Catch Ctrl-C (and SIGTERM) from the start, so that one arriving while the data
	// load still ends in the one-line message below; a second one kills at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	var cfg train.Config
	var runDir string
	var ckpt *torch.SafeFile
	if dir := c.String("resume"); dir != "" {
		if err := checkResumeFlags(c); err != nil {
			return err
		}
		if err := checkRunDir(dir); err != nil {
			return err
		}
		f, saved, _, err := train.ReadCheckpoint(dir)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		cfg, runDir, ckpt = *saved, dir, f
		// Refuse before anything is written: a refused resume must leave the run's
		// config.json as it was.
		done, err := train.CheckpointEpochs(f)
		if err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if epochs := c.Int("epochs"); c.IsSet("epochs") && epochs <= done {
			return usageError{fmt.Errorf("--epochs %d with --resume: %s already finished %d epochs; pass --epochs N with N > %d to train longer", epochs, dir, done, done)}
		}
		if !c.IsSet("epochs") && done >= saved.Epochs && summaryEpochs(dir) == done {
			// A run killed, or out of disk, between its last checkpoint and its
			// summary is finished by resuming it; a complete one is not redone.
			// summary.json is the last file a run writes, and says which epoch.
			return fmt.Errorf("resume: %s already finished %d of %d epochs; pass --epochs N with N > %d to train longer", dir, done, saved.Epochs, done)
		}
		// Recompute the standardisation from the same training data: bit-for-bit the
		// inputs of the first sitting, which the saved float32 statistics are not.
		cfg.InputMean, cfg.InputStd = nil, nil
		if c.IsSet("epochs") {
			cfg.Epochs = c.Int("epochs")
		}
		if c.IsSet("device") {
			cfg.Device = c.String("device")
		}
		if c.IsSet("threads") {
			cfg.Threads = c.Int("threads")
		}
		// How to compute may change between sittings, like the device; what to
		// compute may not.
		if c.IsSet("precision") {
			cfg.Precision = c.String("precision")
		}
		if c.IsSet("channels-last") {
			cfg.ChannelsLast = c.Bool("channels-last")
		}
		if c.IsSet("deterministic") {
			cfg.Deterministic = c.Bool("deterministic")
		}
	} else {
		var err error
		if cfg, err = configFromFlags(c); err != nil {
			return err
		}
		runDir = c.String("out")
		if runDir == "" {
			runDir = filepath.Join("runs", fmt.Sprintf("%s-%s", train.DataName(cfg), time.Now().Format("20060102-150405")))
		}
		if _, err := os.Stat(filepath.Join(runDir, "checkpoint.safetensors")); err == nil {
			return fmt.Errorf("%s already holds a run; continue it with --resume %s or pick another --out", runDir, runDir)
		}
	}
	dev, err := selectDevice(cfg.Device)
	if err != nil {
		return err
	}
	if ckpt == nil && !c.IsSet("channels-last") {
		cfg.ChannelsLast = defaultChannelsLast(train.IsImageSet(cfg.Dataset) && cfg.Arch != "mlp", dev)
	}
	if cfg.Threads > 0 {
		torch.SetNumThreads(cfg.Threads)
	}
	quiet := c.Bool("quiet")
	src, err := train.OpenSource(&cfg, dev)
	if err != nil {
		return err
	}
	defer src.Close()
	if !c.IsSet("k") && ckpt == nil {
		if n := numClasses(src.Labels()); n > 0 {
			cfg.K = n
		}
	}
	if cfg.K > src.Len() {
		name := cfg.DataFile
		if name == "" {
			name = cfg.Dataset
		}
		if src.Len() == 0 {
			return fmt.Errorf("%s holds no rows or images to cluster", name)
		}
		return fmt.Errorf("--k %d: more clusters than the %d rows of %s", cfg.K, src.Len(), name)
	}
	run, err := train.New(cfg, src, dev, runDir)
	if err != nil {
		return err
	}
	defer run.Close()
	if ckpt != nil {
		if err := run.Restore(ckpt); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	log := io.Writer(c.App.ErrWriter)
	if quiet {
		log = io.Discard
	}
	fmt.Fprintf(log, "emclust: %s on %v (libtorch %s, %d threads, %v)\n", src.Describe(), dev, torch.Version(), torch.NumThreads(), run.Net.Compute())
	fmt.Fprintf(log, "emclust: %s net, %d params, K=%d, objective %s, γ=%.4g, batch %d, %d epochs → %s\n",
		run.Spec.Arch, run.Net.NumParams(), run.Cfg.K, run.Cfg.Objective, run.Cfg.GammaVal, run.Cfg.BatchSize, run.Cfg.Epochs, runDir)
	if ckpt != nil {
		fmt.Fprintf(log, "emclust: resuming after epoch %d\n", run.EpochsDone())
	}
	run.Progress = newProgress(log, quiet)

	start := time.Now()
	if run.EpochsDone() >= run.Cfg.Epochs {
		// Resumed only to write what the first sitting could not (see above).
		fmt.Fprintf(log, "emclust: all %d epochs were done; writing the assignments\n", run.EpochsDone())
		return finishRun(c, run, src, dev, 0, log)
	}
	if err := run.Train(ctx); err != nil {
		if errors.Is(err, context.Canceled) {
			if run.EpochsDone() == 0 {
				return interruptedError{fmt.Errorf("interrupted before the first epoch ended, so %s holds no checkpoint to resume: start the run again", runDir)}
			}
			return interruptedError{fmt.Errorf("interrupted after %s; checkpoint kept in %s: continue with emclust train --resume %s",
				plural(run.EpochsDone(), "epoch"), runDir, runDir)}
		}
		return train.ExplainOOM(err, "lower --batch-size, try --precision bf16, or a smaller --image-size")
	}
	return finishRun(c, run, src, dev, time.Since(start), log)
}

// finishRun writes assignments and the summary, runs the k-means baseline and prints.
func finishRun(c *cli.Context, run *train.Run, src train.Source, dev torch.Device, elapsed time.Duration, log io.Writer) error {
	pred, err := train.Predict(run.Net, src, dev, run.Prior())
	if err != nil {
		return err
	}
	labels := src.Labels()
	if err := writeAssignments(filepath.Join(run.Dir, "assignments.csv"), pred, labels); err != nil {
		return err
	}
	sum := summary{Run: run.Dir, Epochs: run.EpochsDone(), Seconds: round3(elapsed.Seconds()), K: run.Cfg.K,
		Sizes: eval.ClusterSizes(pred.Cluster, run.Cfg.K)}
	if labels != nil {
		sc, err := eval.Score(labels, pred.Cluster)
		if err != nil {
			return err
		}
		sum.Scores = &sc
		if run.Cfg.KMeans {
			t0 := time.Now()
			km, err := kmeansScores(src, run.Cfg.K, run.Cfg.Seed, labels)
			if err != nil {
				return fmt.Errorf("k-means baseline: %w", err)
			}
			sum.KMeans = km
			sum.KMeansSeconds = round3(time.Since(t0).Seconds())
		}
	}
	if err := writeJSONFile(filepath.Join(run.Dir, "summary.json"), sum); err != nil {
		return err
	}
	return printSummary(c, sum, log)
}

type summary struct {
	Run           string       `json:"run"`
	Epochs        int          `json:"epochs"`
	Seconds       float64      `json:"seconds"`
	K             int          `json:"k"`
	Sizes         []int        `json:"sizes"`
	Scores        *eval.Scores `json:"scores,omitempty"`
	KMeans        *eval.Scores `json:"kmeans,omitempty"`
	KMeansSeconds float64      `json:"kmeans_seconds,omitempty"`
}

func printSummary(c *cli.Context, s summary, log io.Writer) error {
	if c.Bool("json") {
		b, _ := json.Marshal(s)
		fmt.Fprintln(c.App.Writer, string(b))
		return nil
	}
	empty := 0
	for _, n := range s.Sizes {
		if n == 0 {
			empty++
		}
	}
	fmt.Fprintf(log, "emclust: %d epochs in %.1fs; cluster sizes %v (%d empty); run saved in %s\n", s.Epochs, s.Seconds, s.Sizes, empty, s.Run)
	if s.Scores == nil {
		fmt.Fprintf(c.App.Writer, "clusters %d sizes %s\n", s.K, strings.Trim(fmt.Sprint(s.Sizes), "[]"))
		return nil
	}
	if s.KMeans != nil {
		fmt.Fprintf(log, "emclust  %s\nk-means  %s  (%.1fs, same features, 10 restarts)\n", s.Scores, s.KMeans, s.KMeansSeconds)
	}
	fmt.Fprintln(c.App.Writer, s.Scores.String())
	return nil
}

func kmeansScores(src train.Source, k int, seed uint64, labels []int) (*eval.Scores, error) {
	s := torch.NoGrad()
	defer s.Close()
	x := src.Features(s)
	if err := s.Err(); err != nil {
		return nil, err
	}
	res, err := baseline.KMeans(x, baseline.KMeansConfig{K: k, Restarts: 10, Seed: seed})
	if err != nil {
		return nil, err
	}
	sc, err := eval.Score(labels, res.Labels)
	return &sc, err
}

// configFromFlags starts from the library's defaults for the kind of data and applies
// the flags the user set. compare reads its flags here too: a flag a command does not
// define is never set.
func configFromFlags(c *cli.Context) (train.Config, error) {
	images := train.IsImageSet(c.String("dataset"))
	cfg := train.VectorDefaults()
	if images {
		cfg = train.ImageDefaults()
	}
	cfg.Dataset = c.String("dataset")
	// Absolute paths, so that --resume works from any folder.
	cfg.DataDir = absPath(c.String("data-dir"))
	cfg.DataFile = absPath(c.String("data"))
	cfg.LabelCol = c.String("label-col")
	cfg.Header = c.String("header")
	if h := cfg.Header; h != "auto" && h != "yes" && h != "no" {
		return cfg, usageError{fmt.Errorf("--header %q: want auto, yes or no", h)}
	}
	cfg.Standardize = c.Bool("standardize")
	if err := train.CheckData(&cfg); err != nil {
		return cfg, usageError{err}
	}
	if cfg.DataFile == "" && (cfg.Dataset == "" || cfg.Dataset == "digits") {
		cfg.Dataset = "digits"
		if !c.IsSet("standardize") {
			cfg.Standardize = true
		}
	}
	// Only what the user set: every default is the library's.
	setInt := func(dst *int, name string) {
		if c.IsSet(name) {
			*dst = c.Int(name)
		}
	}
	setString := func(dst *string, name string) {
		if c.IsSet(name) {
			*dst = c.String(name)
		}
	}
	setFloat := func(dst *float64, name string) {
		if c.IsSet(name) {
			*dst = c.Float64(name)
		}
	}
	setBool := func(dst *bool, name string) {
		if c.IsSet(name) {
			*dst = c.Bool(name)
		}
	}
	setInt(&cfg.K, "k")
	setInt(&cfg.Epochs, "epochs")
	setInt(&cfg.BatchSize, "batch-size")
	setString(&cfg.Gamma, "gamma")
	setFloat(&cfg.LR, "lr")
	setFloat(&cfg.LRKL, "lr-kl")
	setString(&cfg.Objective, "objective")
	setString(&cfg.Arch, "arch")
	if c.IsSet("arch") && !images && cfg.Arch != "mlp" {
		return cfg, usageError{fmt.Errorf("--arch %s is a network for images; vectors train an mlp", cfg.Arch)}
	}
	if c.IsSet("hidden") {
		hidden, err := parseInts(c.String("hidden"))
		if err != nil {
			return cfg, usageError{fmt.Errorf("--hidden: %w", err)}
		}
		cfg.Hidden = hidden
	}
	if c.IsSet("no-norm") {
		cfg.Norm = !c.Bool("no-norm")
	}
	setString(&cfg.Prior, "prior")
	setString(&cfg.Precision, "precision")
	setBool(&cfg.ChannelsLast, "channels-last")
	if cfg.ChannelsLast && !images {
		return cfg, usageError{errors.New("--channels-last lays out images for convolutions; vectors train an mlp, which has none")}
	}
	setBool(&cfg.Deterministic, "deterministic")
	setBool(&cfg.KMeans, "kmeans")
	if c.IsSet("seed") {
		cfg.Seed = c.Uint64("seed")
	}
	setString(&cfg.Device, "device")
	setInt(&cfg.Threads, "threads")
	setInt(&cfg.EvalEvery, "eval-every")
	if images {
		setInt(&cfg.ImageSize, "image-size")
		setBool(&cfg.Gray, "gray")
		setBool(&cfg.DataOnHost, "data-on-host")
	}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{err}
	}
	// γ auto depends on the batch size, which the data may lower; a number is
	// checked here, before any data are read.
	if cfg.Gamma != "auto" {
		if _, err := loss.ParseGamma(cfg.Gamma, cfg.BatchSize); err != nil {
			return cfg, usageError{err}
		}
	}
	if obj, _ := train.LookupObjective(cfg.Objective); !images && obj.Augmented {
		return cfg, usageError{fmt.Errorf("objective %q trains on augmented copies of images; vectors (--data, digits) use --objective %s", cfg.Objective,
			train.ObjectiveNames(func(o train.Objective) bool { return !o.Augmented }))}
	}
	return cfg, nil
}

// resumeFlags are the train flags that apply to a resumed run; the rest of its
// settings come from the checkpoint.
var resumeFlags = map[string]bool{"resume": true, "epochs": true, "device": true, "threads": true,
	"precision": true, "channels-last": true, "deterministic": true, "quiet": true, "json": true}

func checkResumeFlags(c *cli.Context) error {
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if c.IsSet(name) && !resumeFlags[name] {
			if name == "out" && c.String("out") == c.String("resume") {
				continue
			}
			return usageError{fmt.Errorf("--%s with --resume: a resumed run keeps the settings saved in %s; only --epochs, --device, --threads, --precision, --channels-last, --deterministic, --quiet and --json apply",
				name, filepath.Join(c.String("resume"), "config.json"))}
		}
	}
	return nil
}

// summaryEpochs is the epoch count of RUN/summary.json, or -1 when it is missing or
// unreadable.
func summaryEpochs(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return -1
	}
	var sum struct {
		Epochs *int `json:"epochs"`
	}
	if json.Unmarshal(b, &sum) != nil || sum.Epochs == nil {
		return -1
	}
	return *sum.Epochs
}

// checkRunDir explains a --resume folder without a checkpoint better than the error
// from opening it would.
func checkRunDir(dir string) error {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("resume: %s does not exist", dir)
	}
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if !st.IsDir() {
		return nil // a checkpoint file
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoint.safetensors")); errors.Is(err, os.ErrNotExist) {
		// A run killed while writing its first checkpoint left the partial file.
		if err := train.RemoveStale(dir); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		return fmt.Errorf("resume: %s has no checkpoint.safetensors (a run saves one after each epoch); start a new run with --out %s", dir, dir)
	}
	return nil
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// defaultChannelsLast is --channels-last's default: on for a CNN on the CPU, where it
// cut a Fashion-MNIST twofold epoch by a fifth at the same accuracy (docs/RESULTS.md);
// off on a GPU until it is measured there.
func defaultChannelsLast(cnn bool, dev torch.Device) bool {
	return cnn && !dev.CUDA
}

func numClasses(labels []int) int {
	n := 0
	for _, l := range labels {
		n = max(n, l+1)
	}
	return n
}

func parseInts(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// objectiveHelp lists the objectives for --help, one per line.
func objectiveHelp() string {
	var b strings.Builder
	b.WriteString("training objective:")
	for _, o := range train.Objectives {
		fmt.Fprintf(&b, "\n\t%s: %s", o.Name, o.Help)
	}
	return b.String()
}

package command

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"emclust/atomicfile"
	"emclust/data"
	"emclust/train"
)

// forceFlag lets --out replace an existing file.
var forceFlag = &cli.BoolFlag{Name: "force", Usage: "replace the --out file if it exists"}

// checkOutput refuses an --out path before any work is done: a folder, a device or
// pipe, a file a run folder, a comparison or a report owns, one of the command's
// inputs, or an existing file without --force.
func checkOutput(out string, force bool, inputs ...string) error {
	return checkOutputFlag("--out", out, force, inputs...)
}

// checkOutputFlag is checkOutput for the file flag names (--out, --markdown).
func checkOutputFlag(flag, out string, force bool, inputs ...string) error {
	if strings.TrimSpace(out) == "" {
		return usageError{fmt.Errorf("%s %q: name a file", flag, out)}
	}
	// Whether or not the file exists yet: a run still training writes it later. As
	// typed and with its links resolved: the write replaces a link's target.
	for _, path := range []string{out, realPath(out)} {
		dir, base := filepath.Split(path)
		for _, owned := range append(train.RunFiles, train.LockName) {
			if base != owned {
				continue
			}
			for _, marker := range []string{"checkpoint.safetensors", "config.json"} {
				if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
					return usageError{fmt.Errorf("%s %s belongs to the run in %s; name a file outside the run folder", flag, out, filepath.Clean(dir))}
				}
			}
		}
		// As a run folder's: a comparison's tables and plan (its --resume reads the
		// plan), and a report's page.
		if (base == "compare.json" || base == comparePlanName) && holdsComparison(dir) {
			return usageError{fmt.Errorf("%s %s belongs to the comparison in %s; name a file outside its folder", flag, out, filepath.Clean(dir))}
		}
		if base == "index.html" && isReportPage(path) {
			return usageError{fmt.Errorf("%s %s is the page of the report in %s; name another file", flag, out, filepath.Clean(dir))}
		}
	}
	st, err := os.Stat(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if dir := filepath.Dir(out); dir != "." {
			if d, err := os.Stat(dir); err != nil || !d.IsDir() {
				return usageError{fmt.Errorf("%s %s: folder %s does not exist", flag, out, dir)}
			}
		}
		return writableFolder(flag, out)
	case err != nil:
		return fmt.Errorf("%s %s: %w", flag, out, err)
	case st.IsDir():
		return usageError{fmt.Errorf("%s %s is a folder; name the file to write", flag, out)}
	case !st.Mode().IsRegular():
		// The write goes to a temporary file renamed over out, which a device or
		// pipe cannot take: said after all the work, as "not a regular file".
		hint := ""
		if flag == "--out" {
			hint = ", or --out - for stdout"
		}
		return usageError{fmt.Errorf("%s %s is not a regular file (a device, pipe or socket); name a file to write%s", flag, out, hint)}
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		if ist, err := os.Stat(in); err == nil && os.SameFile(st, ist) {
			return usageError{fmt.Errorf("%s %s is this command's input; name another file", flag, out)}
		}
	}
	if !force {
		return usageError{fmt.Errorf("%s %s exists; pass --force to replace it", flag, out)}
	}
	return writableFolder(flag, out)
}

// checkSkipBadImages refuses --skip-bad-images, where given, for data cfg reads that
// are not an image folder: a table or an image set is read whole, or not at all.
func checkSkipBadImages(given bool, cfg train.Config) error {
	if given && cfg.Dataset != "folder" {
		return usageError{fmt.Errorf("--skip-bad-images is for --dataset folder, and the data here are %s", train.DataName(cfg))}
	}
	return nil
}

// writableFolder says why the folder that takes the temporary file renamed over out
// (its link's target's, where out is a link) cannot be written, where it cannot:
// found now, not after the work that fills it.
func writableFolder(flag, out string) error {
	dir, err := atomicfile.Folder(out)
	if err != nil {
		return usageError{fmt.Errorf("%s %w", flag, err)}
	}
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return usageError{fmt.Errorf("%s %s: folder %s cannot be written: %w", flag, out, dir, err)}
	}
	return nil
}

// quietFlag turns off predict's and eval's progress bar, which a terminal shows.
func quietFlag() cli.Flag {
	return &cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress bar or log lines; warnings and the result remain"}
}

// deviceFlag and threadsFlag are the same on every command that computes. Each call
// makes a new flag: urfave/cli keeps parse state in the flag value.
func deviceFlag() cli.Flag {
	return &cli.StringFlag{Name: "device", Value: "auto", Usage: "auto, cpu, cuda or cuda:N"}
}

func threadsFlag() cli.Flag {
	return &cli.IntFlag{Name: "threads", Usage: "CPU threads for libtorch (0: one per CPU, and a training step too small to share runs on one, its restarts side by side, one per CPU; N: N threads, restarts one after another)"}
}

// headerHelp says what --header takes, for train's flag and for the one predict and
// eval default to the training's.
const headerHelp = "CSV header row: yes, no, or auto: a first line of names (some cells may be empty) is a header, one of numbers is data, and one of both or of empty cells only is asked about"

// autoStandardizeHelp says what train and compare do when --standardize is not given.
var autoStandardizeHelp = fmt.Sprintf("auto: on when the columns' standard deviations differ as units do (the largest over the lower median above %d), or a column's mean is more than %d of them from 0", data.SpreadToStandardize, data.OffsetToStandardize)

// dataFlags select what to cluster, for train and compare (the verbs that apply a
// model take inferenceDataFlags or imageDataFlags). dflt says what is read when none
// is given, standardize what --standardize defaults to.
func dataFlags(dflt, standardize string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "dataset", Usage: "digits, wine, iris, breast-cancer (embedded tables), mnist, fashion-mnist, cifar10, cifar100, stl10, or folder (images under --data-dir)", DefaultText: dflt},
		&cli.StringFlag{Name: "data-dir", Usage: "folder with the data set's official files", DefaultText: "none; for fashion-mnist, Debian's " + data.DefaultImageDir("fashion-mnist")},
		&cli.StringFlag{Name: "data", Usage: "vectors to cluster: a .csv/.tsv/.txt (optionally .gz), .npy or .parquet file, or a pipe such as <(zcat t.csv.gz)", DefaultText: dflt},
		&cli.StringFlag{Name: "label-col", Usage: "CSV or Parquet column holding ground-truth labels, by name or 0-based index (-1: last); used only for scoring, over the rows whose label cell is not empty or NA", DefaultText: "none"},
		&cli.StringSliceFlag{Name: "drop-cols", Usage: "CSV or Parquet columns that are neither features nor labels (an ID, a date, a note), by name or 0-based index, comma-separated; their cells are not read", DefaultText: "none"},
		&cli.StringFlag{Name: "id-col", Usage: "CSV or Parquet column of row IDs, by name or 0-based index: not a feature; the assignments name each row by it in place of its index", DefaultText: "none"},
		&cli.StringFlag{Name: "header", Value: "auto", Usage: headerHelp},
		&cli.BoolFlag{Name: "standardize", Usage: "z-score each feature column; --standardize=false keeps them raw", DefaultText: standardize},
		&cli.IntFlag{Name: "image-size", Usage: "with --dataset folder: resize images to this square size (0: keep, all must match)"},
		&cli.BoolFlag{Name: "gray", Usage: "with --dataset folder: load images as grayscale"},
		&cli.BoolFlag{Name: "skip-bad-images", Usage: "with --dataset folder: leave out the images that cannot be read (damaged, truncated, not the image their name says), rather than stop: warned of, and listed in a run's summary.json", DefaultText: "off; as in training for predict, eval and report"},
	}
}

// inferenceDataFlags are dataFlags for the verbs that apply a trained model (predict,
// eval, report): without --gray, which the model's first layer decides.
func inferenceDataFlags(dflt string) []cli.Flag {
	flags := without(dataFlags(dflt, "as in training"), "gray")
	for i, f := range flags {
		switch f.Names()[0] {
		case "data-dir":
			flags[i] = &cli.StringFlag{Name: "data-dir", Usage: "folder with the data set's official files; alone, where the image set the model trained on lies now", DefaultText: "as in training"}
		case "image-size":
			flags[i] = &cli.IntFlag{Name: "image-size", Usage: "with --dataset folder: resize images to this square size (0: keep, all must match the model's input)", DefaultText: "as in training"}
		case "standardize":
			flags[i] = &cli.BoolFlag{Name: "standardize", Usage: "new rows are z-scored by the training data's statistics where the model trained on z-scores, else read raw; another setting than the model's is refused", DefaultText: "as in training"}
		case "label-col":
			flags[i] = &cli.StringFlag{Name: "label-col", Usage: "CSV or Parquet column holding ground-truth labels, by name or 0-based index (-1: last); used only for scoring, over the rows whose label cell is not empty or NA", DefaultText: "the model's where it named one and the new rows, read from a file (not a pipe), have a column of that name; else none"}
		case "id-col":
			flags[i] = &cli.StringFlag{Name: "id-col", Usage: "CSV or Parquet column of row IDs, by name or 0-based index, which predict's assignments name each row by; --id-col none reads none", DefaultText: "as in training"}
		case "drop-cols":
			flags[i] = &cli.StringSliceFlag{Name: "drop-cols", Usage: "CSV or Parquet columns that are neither features nor labels, by name or 0-based index, comma-separated; --drop-cols none drops none", DefaultText: "as in training"}
		case "header":
			// A header of numbers (wavelengths, years) read as training read it: auto
			// would take it for a row.
			flags[i] = &cli.StringFlag{Name: "header", Usage: headerHelp, DefaultText: "as in training"}
		}
	}
	return flags
}

// imageDataFlags are inferenceDataFlags without the vectors' flags, for embed, whose
// mnist2d model sees images only.
func imageDataFlags(dflt string) []cli.Flag {
	out := without(inferenceDataFlags(dflt), "data", "label-col", "drop-cols", "id-col", "header", "standardize")
	for i, f := range out {
		if f.Names()[0] == "dataset" {
			out[i] = &cli.StringFlag{Name: "dataset", Usage: "mnist, fashion-mnist, cifar10, cifar100, stl10, or folder (images under --data-dir)", DefaultText: dflt}
		}
	}
	return out
}

// without is flags less those named.
func without(flags []cli.Flag, names ...string) []cli.Flag {
	var out []cli.Flag
	for _, f := range flags {
		if !slices.Contains(names, f.Names()[0]) {
			out = append(out, f)
		}
	}
	return out
}

// checkDataFlags refuses data flags that the data named would ignore: a user who
// gives them expects them to act.
func checkDataFlags(c *cli.Context) error {
	dataset := c.String("dataset")
	if err := checkDataDir(c); err != nil {
		return err
	}
	if h := c.String("header"); c.IsSet("header") && h != "auto" && h != "yes" && h != "no" {
		return usageError{fmt.Errorf("--header %q: want auto, yes or no", h)}
	}
	if n := c.Int("image-size"); c.IsSet("image-size") && (n < 0 || n > data.MaxImageSide) {
		return usageError{fmt.Errorf("--image-size %d: want 0 (keep) to %d", n, data.MaxImageSide)}
	}
	if dataset != "" {
		// Before the flags that depend on the data set's kind, which a typo changes.
		if err := train.UnknownDataset(dataset); err != nil {
			return usageError{err}
		}
	}
	switch {
	case c.IsSet("data-dir") && c.IsSet("data"):
		return usageError{errors.New("--data-dir with --data: --data names the file itself; --data-dir holds an image set's files")}
	case c.IsSet("data-dir") && dataset != "" && !train.IsImageSet(dataset):
		return usageError{fmt.Errorf("--data-dir with --dataset %s: the table is built in; --data-dir holds an image set's files", dataset)}
	case dataset != "" && (c.IsSet("label-col") || c.IsSet("drop-cols") || c.IsSet("id-col") || c.IsSet("header")):
		flag := "--header"
		for _, f := range []string{"id-col", "drop-cols", "label-col"} {
			if c.IsSet(f) {
				flag = "--" + f
			}
		}
		return usageError{fmt.Errorf("%s with --dataset %s: it reads a CSV or Parquet file given with --data; the embedded tables and image sets bring their own labels", flag, dataset)}
	case dataset != "folder" && c.IsSet("image-size"):
		return usageError{errors.New("--image-size is for --dataset folder (images of any size in class folders); other data sets have sizes of their own")}
	case dataset != "folder" && c.IsSet("gray"):
		return usageError{errors.New("--gray is for --dataset folder (images in colour or gray in class folders); other data sets have their own channels")}
	}
	return nil
}

// dropCols reads --drop-cols: the columns, trimmed; "none" alone says none, for a
// model's new data.
func dropCols(c *cli.Context) ([]string, error) {
	given := c.StringSlice("drop-cols")
	if len(given) == 1 && strings.TrimSpace(given[0]) == "none" {
		return []string{}, nil
	}
	var cols []string
	for _, s := range given {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, usageError{fmt.Errorf("--drop-cols %q: an empty column name (an unset shell variable?)", strings.Join(given, ","))}
		}
		if slices.Contains(cols, s) {
			return nil, usageError{fmt.Errorf("--drop-cols: %s given twice", s)}
		}
		cols = append(cols, s)
	}
	return cols, nil
}

// checkDataDir refuses a file as --data-dir: a folder walk from a PNG read it as an
// image set of one.
func checkDataDir(c *cli.Context) error {
	if !c.IsSet("data-dir") {
		return nil
	}
	return refuseFile("--data-dir", c.String("data-dir"), "name the folder that holds the image set's files")
}

// refuseFile refuses a file where flag names a folder, before any work: found when
// written, it cost a run, or read "mkdir …: not a directory" (exit 1).
func refuseFile(flag, path, want string) error {
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		return usageError{fmt.Errorf("%s %s is a file; %s", flag, path, want)}
	}
	return nil
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
		&cli.IntFlag{Name: "epochs", Usage: "passes over the data", DefaultText: fmt.Sprintf("%d for vectors, raised to make at least %d steps or lowered to the fewest that make %d; %d for images", vd.Epochs, vd.MinSteps, vd.MaxSteps, id.Epochs)},
		&cli.IntFlag{Name: "batch-size", Usage: "rows per batch; the relevance normalisation runs over each batch", DefaultText: both(vd.BatchSize, id.BatchSize)},
		&cli.StringFlag{Name: "gamma", Usage: "γ in h = sigmoid(a*/γ): a number, or auto = ((n−1)/√n)/2.245 for batch size n", DefaultText: both(vd.Gamma, id.Gamma)},
		&cli.Float64Flag{Name: "lr", Usage: "Adam learning rate of the EM (or IIC) step", DefaultText: both(vd.LR, id.LR)},
		&cli.Float64Flag{Name: "lr-kl", Usage: "Adam learning rate of the KL step (twofold)", DefaultText: both(vd.LRKL, id.LRKL)},
		&cli.StringFlag{Name: "arch", Usage: "network: mlp (vectors), mnist, cifar or stl10 (images), or mnist2d (section 8.1's 2-unit bottleneck, with --objective supervised)", DefaultText: "chosen from the data"},
		&cli.StringFlag{Name: "keep-by", Usage: "what keeps one of several restarts: silhouette (of the clustering on the z-scored features) or agreement (mean adjusted Rand index with the other restarts; of two, the higher mean max posterior); labels are never used. On images it makes --restarts R whole runs rather than trials", DefaultText: both(vd.KeepBy, id.KeepBy)},
		&cli.StringFlag{Name: "hidden", Usage: "MLP hidden layer widths; none: a linear map from features to scores (lets clusters differ in size; docs/RESULTS.md section 24); auto: train both, the linear map with a learned prior, and keep the clustering of higher silhouette on the features of those that use at least 70% of the clusters (sections 29 and 73); with one restart or several processes, the MLP alone",
			DefaultText: "auto, between " + strings.Trim(strings.ReplaceAll(fmt.Sprint(vd.Hidden), " ", ","), "[]") + " and none"},
		&cli.IntFlag{Name: "heads", Usage: "clustering heads on the shared network, trained with the same objective; predictions use the head whose clustering agrees most with the others', of those using the most clusters (IIC's sub-heads)", DefaultText: "1"},
		&cli.BoolFlag{Name: "no-norm", Usage: "turn off the relevance normalisation (the paper's ablation: expect collapse)"},
		&cli.StringFlag{Name: "prior", Usage: "cluster prior: uniform (the paper) or learned (running mean of posteriors, for imbalanced data)", DefaultText: both(vd.Prior, id.Prior)},
		deviceFlag(),
		threadsFlag(),
		&cli.StringFlag{Name: "precision", Usage: "fp32, or bf16: convolutions and matrix products in bfloat16 as under autocast (weights, normalisation and loss stay float32)", DefaultText: both(vd.Precision, id.Precision)},
		&cli.BoolFlag{Name: "channels-last", Usage: "lay images and conv weights out N,H,W,C (CNNs only; --channels-last=false: off)", DefaultText: "on for CNNs"},
		&cli.BoolFlag{Name: "deterministic", Usage: "on a GPU: cuDNN's deterministic algorithms only, so that a rerun or a resumed run matches bit for bit (slower)"},
		&cli.BoolFlag{Name: "no-memory-check", Usage: "train what the CPU's memory check refuses as larger than the memory free (a network, batch or set of restarts), for memory it cannot see, such as swap; should it not fit, the system ends the run without a message"},
		&cli.BoolFlag{Name: "data-on-host", Usage: "keep images in host memory and copy each batch to the device, for sets larger than GPU memory"},
	}
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

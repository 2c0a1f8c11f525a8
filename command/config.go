package command

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"emclust/data"
	"emclust/loss"
	"emclust/model"
	"emclust/torch"
	"emclust/train"
)

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
	if cfg.IDCol = strings.TrimSpace(c.String("id-col")); cfg.IDCol == "none" {
		cfg.IDCol = ""
	}
	var err error
	if cfg.DropCols, err = dropCols(c); err != nil {
		return cfg, err
	}
	cfg.Standardize = c.Bool("standardize")
	if err := checkDataFlags(c); err != nil {
		return cfg, err
	}
	for flag, path := range map[string]string{"--data": cfg.DataFile, "--data-dir": cfg.DataDir} {
		if !utf8.ValidString(path) {
			// config.json would record it with U+FFFD for those bytes: predict and
			// --resume would look for a file of another name.
			return cfg, usageError{fmt.Errorf("%s %s: the name is not UTF-8, which a run's config.json cannot record; rename it", flag, strings.ToValidUTF8(path, "?"))}
		}
	}
	if err := train.CheckData(&cfg); err != nil {
		return cfg, usageError{err}
	}
	if err := checkArrayFlags(cfg.DataFile, cfg.LabelCol, cfg.IDCol, cfg.DropCols, cfg.Header); err != nil {
		return cfg, err
	}
	if cfg.DataFile == "" && (cfg.Dataset == "" || cfg.Dataset == "digits") {
		cfg.Dataset = "digits"
		if c.IsSet("data-dir") {
			return cfg, usageError{errors.New("--data-dir without --dataset: the default data, the digits, are built in; --data-dir holds the files of the image set --dataset names")}
		}
	}
	// Vectors unless told: the data decide (train.OpenSource).
	cfg.StandardizeAuto = !images && !c.IsSet("standardize")
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
	if c.IsSet("k") {
		// compare's --k may list several K for a sweep: the first stands for them here.
		ks, err := parseInts("k", c.String("k"), 1)
		if err != nil || len(ks) == 0 {
			return cfg, usageError{fmt.Errorf("--k %q: want a number of clusters, 2 or more", c.String("k"))}
		}
		cfg.K = ks[0]
	}
	if c.IsSet("epochs") {
		cfg.SetEpochs(c.Int("epochs")) // as many as asked
	}
	setInt(&cfg.BatchSize, "batch-size")
	setString(&cfg.Gamma, "gamma")
	setFloat(&cfg.LR, "lr")
	setFloat(&cfg.LRKL, "lr-kl")
	setString(&cfg.Objective, "objective")
	setString(&cfg.Arch, "arch")
	if c.IsSet("arch") && !slices.Contains(model.Archs, cfg.Arch) {
		return cfg, usageError{fmt.Errorf("--arch %q: want one of %s", cfg.Arch, strings.Join(model.Archs, ", "))}
	}
	if c.IsSet("arch") && !images && cfg.Arch != "mlp" {
		return cfg, usageError{fmt.Errorf("--arch %s is a network for images; vectors train an mlp", cfg.Arch)}
	}
	switch v := c.String("hidden"); {
	case !c.IsSet("hidden"):
	case v == "auto":
		if images {
			return cfg, usageError{errors.New("--hidden auto chooses between an MLP and a linear map for vectors; images train a CNN")}
		}
		cfg.HiddenAuto = true
	case v == "none":
		cfg.Hidden, cfg.HiddenAuto = nil, false // the scores are a linear map of the features
	default:
		hidden, err := parseInts("hidden", v, 1)
		if err != nil {
			return cfg, err
		}
		cfg.Hidden, cfg.HiddenAuto = hidden, false
	}
	if images && c.IsSet("hidden") && c.String("hidden") != "auto" {
		return cfg, usageError{errors.New("--hidden sets the widths of the MLP for vectors; images train a CNN (--arch)")}
	}
	if images && c.IsSet("standardize") {
		return cfg, usageError{errors.New("--standardize z-scores the columns of vectors; images are scaled to [0, 1] and seen through Sobel filters")}
	}
	setInt(&cfg.Heads, "heads")
	// 0 stands for the default in a Config; given on the command line it is a mistake.
	if c.IsSet("heads") && cfg.Heads < 1 {
		return cfg, usageError{fmt.Errorf("--heads %d: want 1 to %d", cfg.Heads, model.MaxHeads)}
	}
	if cfg.Heads > 1 && cfg.HiddenAuto {
		// Heads share one network (train.NetworkCandidates).
		if c.IsSet("hidden") {
			return cfg, usageError{fmt.Errorf("--hidden auto with --heads %d: the heads share the MLP, and the linear map's learned prior is one head's; name the network", cfg.Heads)}
		}
		cfg.HiddenAuto = false
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
	setBool(&cfg.NoMemoryCheck, "no-memory-check")
	setInt(&cfg.EvalEvery, "eval-every")
	setInt(&cfg.Restarts, "restarts")
	if c.IsSet("restarts") && (cfg.Restarts < 1 || cfg.Restarts > 1000) {
		return cfg, usageError{fmt.Errorf("--restarts %d: want 1 (a single run) to 1000", cfg.Restarts)}
	}
	setString(&cfg.KeepBy, "keep-by")
	setInt(&cfg.TrialEpochs, "trial-epochs")
	// Image runs start as trials where they fit: a run longer than the trials together
	// (restarts R, given, are R trials of a run longer than one), unless restarts are
	// to be kept by --keep-by; and trials of a length asked for are DefaultImageTrials.
	switch {
	case !images:
	case !c.IsSet("trial-epochs") && !c.IsSet("keep-by"):
		if !c.IsSet("restarts") && cfg.Epochs > train.DefaultImageTrials*train.DefaultTrialEpochs {
			cfg.Restarts = train.DefaultImageTrials
		}
		if cfg.Restarts > 1 && cfg.Epochs > train.DefaultTrialEpochs {
			cfg.TrialEpochs = train.DefaultTrialEpochs
		}
	case c.IsSet("trial-epochs") && cfg.TrialEpochs > 0 && !c.IsSet("restarts"):
		cfg.Restarts = train.DefaultImageTrials
	}
	switch {
	case !c.IsSet("trial-epochs"):
	case !images:
		return cfg, usageError{errors.New("--trial-epochs is for images: vector restarts train whole runs, kept by their agreement with each other")}
	case cfg.Restarts < 2 && cfg.TrialEpochs > 0:
		return cfg, usageError{fmt.Errorf("--trial-epochs %d with one restart: give --restarts 2 or more trials to choose among", cfg.TrialEpochs)}
	case c.IsSet("keep-by") && cfg.TrialEpochs > 0:
		return cfg, usageError{errors.New("--keep-by with --trial-epochs: trials are kept by their own agreement over epochs, not by --keep-by")}
	}
	if images {
		setInt(&cfg.ImageSize, "image-size")
		setBool(&cfg.Gray, "gray")
		setBool(&cfg.SkipBadImages, "skip-bad-images")
	}
	if err := checkSkipBadImages(c.IsSet("skip-bad-images"), cfg); err != nil {
		return cfg, err
	}
	if images {
		setBool(&cfg.DataOnHost, "data-on-host")
	} else if c.IsSet("data-on-host") {
		return cfg, usageError{errors.New("--data-on-host keeps images in host memory; vectors are held once on the device (docs/RESULTS.md section 36)")}
	}
	if c.IsSet("keep-by") && cfg.Restarts < 2 {
		if !c.IsSet("restarts") { // images: --keep-by turns the default trials off
			return cfg, usageError{errors.New("--keep-by keeps one of several restarts, and an image run without --restarts trains one seed: give --restarts R (2 or more), whole runs that --keep-by chooses among")}
		}
		return cfg, usageError{fmt.Errorf("--keep-by with --restarts %d: it keeps one of several restarts", cfg.Restarts)}
	}
	if c.IsSet("kmeans") && c.Bool("kmeans") && cfg.DataFile != "" && cfg.LabelCol == "" {
		return cfg, usageError{errors.New("--kmeans scores k-means beside the run against the labels; the data have none (give --label-col)")}
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
	if obj, _ := train.LookupObjective(cfg.Objective); c.IsSet("lr-kl") && !obj.KLStep {
		return cfg, usageError{fmt.Errorf("--lr-kl is the KL step's learning rate; --objective %s has no KL step (twofold has)", cfg.Objective)}
	}
	if obj, _ := train.LookupObjective(cfg.Objective); obj.Supervised {
		// New turns the normalisation off for it, and only EM steps move the prior.
		for _, name := range []string{"no-norm", "prior"} {
			if c.IsSet(name) {
				return cfg, usageError{fmt.Errorf("--%s shapes the mixture's EM step; --objective supervised trains cross-entropy on the labels, without either", name)}
			}
		}
	}
	if obj, _ := train.LookupObjective(cfg.Objective); !images && obj.Augmented {
		return cfg, usageError{fmt.Errorf("objective %q trains on augmented copies of images; vectors (--data, digits) use --objective %s", cfg.Objective,
			train.ObjectiveNames(func(o train.Objective) bool { return !o.Augmented }))}
	}
	return cfg, nil
}

// defaultChannelsLast is --channels-last's default: on for the CNNs. On the CPU it
// cut a Fashion-MNIST twofold epoch by a fifth at the same accuracy; on an H100 it
// halved the STL-10 step in bf16 (59 → 29 ms) and cut it by a third in fp32, and left
// the small models within a few percent (docs/RESULTS.md §18).
func defaultChannelsLast(cnn bool) bool {
	return cnn
}

func numClasses(labels []int) int {
	n := 0
	for _, l := range labels {
		n = max(n, l+1)
	}
	return n
}

// parseInts reads flag's comma-separated list of integers of at least least, as
// splitList splits it; nil when empty.
func parseInts(flag, s string, least int) ([]int, error) {
	fields, err := splitList(flag, s)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range fields {
		v, err := strconv.Atoi(f)
		if err != nil || v < least {
			return nil, usageError{fmt.Errorf("--%s %q: %q is not an integer ≥ %d", flag, s, f, least)}
		}
		out = append(out, v)
	}
	return out, nil
}

// checkArrayFlags refuses --label-col, --drop-cols, --id-col and --header yes|no for a .npy array, which
// has neither a label column nor a header line: they were ignored, and the column
// named clustered as a feature. (Checked on the command line only: runs saved before
// keep them in their config.)
func checkArrayFlags(file, labelCol, idCol string, dropCols []string, header string) error {
	if !strings.EqualFold(filepath.Ext(file), ".npy") {
		return nil
	}
	if labelCol != "" {
		return usageError{fmt.Errorf("--label-col %s: %s is a NumPy array, which has no label column; give the labels as a CSV column, or leave --label-col out", labelCol, file)}
	}
	if len(dropCols) > 0 {
		return usageError{fmt.Errorf("--drop-cols %s: %s is a NumPy array, whose columns --drop-cols does not select; save only the features, or leave --drop-cols out", strings.Join(dropCols, ","), file)}
	}
	if idCol != "" {
		return usageError{fmt.Errorf("--id-col %s: %s is a NumPy array, which has no ID column; save the IDs apart, in the rows' order, or leave --id-col out", idCol, file)}
	}
	if header == "yes" || header == "no" {
		return usageError{fmt.Errorf("--header %s: %s is a NumPy array, which has no header line; leave --header out", header, file)}
	}
	return nil
}

func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// newRun is a new run's config, from the library's defaults and the flags, and what
// the flags left to the device and the data.
type newRun struct {
	Config                train.Config
	KSet, ChannelsLastSet bool // else the data and the device decide (resolve)
	// RestartsSet, TrialEpochsSet, KeepBySet: --restarts, --trial-epochs, --keep-by
	// was given. A run over several processes trains one restart unless told
	// (runRank), and then refuses.
	RestartsSet, TrialEpochsSet, KeepBySet bool
	// PrecisionSet: --precision was given, so the user has chosen (precisionHint).
	PrecisionSet bool
}

func newRunFrom(c *cli.Context) (newRun, error) {
	cfg, err := configFromFlags(c)
	return newRun{Config: cfg, KSet: c.IsSet("k"), ChannelsLastSet: c.IsSet("channels-last"), RestartsSet: c.IsSet("restarts"),
		TrialEpochsSet: c.IsSet("trial-epochs") && c.Int("trial-epochs") > 0, KeepBySet: c.IsSet("keep-by"),
		PrecisionSet: c.IsSet("precision")}, err
}

// trainsCNN reports whether cfg trains a convolutional network: images, unless --arch
// mlp.
func trainsCNN(cfg *train.Config) bool {
	return train.IsImageSet(cfg.Dataset) && cfg.Arch != "mlp"
}

// resolve settles in cfg what the flags left to the network and the data:
// channels-last (on for CNNs), K from the labels. (train.New settles the rest: the
// batch clamp, γ auto and the network for the data.) It refuses a K from a label
// column of one class, or of about as many classes as rows.
func (n newRun) resolve(cfg *train.Config, dev torch.Device, src train.Source) error {
	if !n.ChannelsLastSet {
		cfg.ChannelsLast = defaultChannelsLast(trainsCNN(cfg))
	}
	if !n.KSet {
		k := numClasses(src.Labels())
		labels := "the labels of " + src.Describe() // an image folder's class folders
		if cfg.LabelCol != "" {
			labels = "label column " + cfg.LabelCol
		}
		switch {
		case k == 1:
			return usageError{fmt.Errorf("%s: one class, and K defaults to the classes: give --k", labels)}
		case k > 2 && 10*k > 9*src.Len():
			// A column of ids made K the rows: a run 20 times slower that used
			// few of its clusters.
			return usageError{fmt.Errorf("%s: %d classes in %s, and K defaults to the classes: a column of ids? give --k", labels, k, plural(src.Len(), "row"))}
		}
		if k > 0 {
			cfg.K = k
		}
	}
	return nil
}

// partialKWarning warns, where K was not given and came from labels that only some
// rows have, that it counts the classes among those rows alone: a user who labelled
// a sample of three classes got K = 3 for data of twelve, without a word.
func (n newRun) partialKWarning(cfg *train.Config, src train.Source) string {
	labels := src.Labels()
	if n.KSet || labels == nil {
		return ""
	}
	scored := data.CountLabelled(labels)
	if scored == len(labels) {
		return ""
	}
	return fmt.Sprintf("emclust: warning: K = %d, the classes among the %s with a label; the other %d may hold more: give --k if they do",
		cfg.K, plural(scored, "row"), len(labels)-scored)
}

// checkK refuses data of no rows, and a K above the rows of src for the one K a run
// trains (a sweep's are compare.CheckKs'); given says whether --k gave it.
func checkK(cfg *train.Config, src train.Source, given bool) error {
	if err := checkRows(cfg, src); err != nil {
		return err
	}
	if cfg.K > src.Len() {
		if !given {
			return usageError{fmt.Errorf("K = %d, the default for data without labels, is more clusters than the %s of %s; give a smaller --k", cfg.K, plural(src.Len(), "row"), dataPath(*cfg))}
		}
		return usageError{fmt.Errorf("--k %d: more clusters than the %s of %s; give a smaller --k", cfg.K, plural(src.Len(), "row"), dataPath(*cfg))}
	}
	return nil
}

// checkRows refuses data of no rows (was "more clusters than the 0 rows").
func checkRows(cfg *train.Config, src train.Source) error {
	if src.Len() == 0 {
		return fmt.Errorf("%s holds no rows or images to cluster", dataPath(*cfg))
	}
	return nil
}

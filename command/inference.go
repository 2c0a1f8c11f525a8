package command

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"emclust/data"
	"emclust/launch"
	"emclust/torch"
	"emclust/train"
)

// dataOptions are the data flags of a verb that applies a trained model: other data
// than the model trained on. Nil pointers keep the model's setting.
type dataOptions struct {
	Given                                        bool // --data or --dataset was given
	Dataset, DataDir, DataFile, LabelCol, Header string
	LabelColGiven                                bool     // else a table's is the model's where it has one
	DropCols                                     []string // nil: the model's
	IDCol                                        *string  // nil: the model's
	Standardize                                  *bool
	ImageSize                                    *int
	SkipBadImages                                *bool
}

// dataOptionsFrom reads the data flags and checks, before any work, that the data
// they name can be opened (train.CheckData).
func dataOptionsFrom(c *cli.Context) (dataOptions, error) {
	d := dataOptions{Given: c.IsSet("data") || c.IsSet("dataset"),
		Dataset: c.String("dataset"), DataDir: c.String("data-dir"), DataFile: c.String("data"),
		LabelCol: c.String("label-col"), LabelColGiven: c.IsSet("label-col"), Header: c.String("header")}
	if err := checkDataFlags(c); err != nil {
		return d, err
	}
	if c.IsSet("drop-cols") {
		cols, err := dropCols(c)
		if err != nil {
			return d, err
		}
		d.DropCols = append([]string{}, cols...) // not nil: "none" is none dropped
	}
	if c.IsSet("id-col") {
		v := strings.TrimSpace(c.String("id-col"))
		if v == "none" {
			v = ""
		}
		d.IDCol = &v
	}
	if !d.Given {
		// The model's own data are read as it trained on them; only their folder may
		// have moved (dataOptions.config).
		for _, name := range []string{"label-col", "drop-cols", "id-col", "header", "standardize", "image-size"} {
			if c.IsSet(name) {
				return d, usageError{fmt.Errorf("--%s without --data or --dataset: the model's own data are read as it trained on them; name the data to read them otherwise", name)}
			}
		}
	}
	if c.String("data") != "" || c.String("dataset") != "" {
		named := train.Config{DataFile: d.DataFile, Dataset: d.Dataset, DataDir: d.DataDir}
		if err := train.CheckData(&named); err != nil {
			return d, usageError{err}
		}
		if err := checkArrayFlags(d.DataFile, d.LabelCol, deref(d.IDCol), d.DropCols, d.Header); err != nil {
			return d, err
		}
	}
	if c.IsSet("standardize") {
		v := c.Bool("standardize")
		d.Standardize = &v
	}
	if c.IsSet("image-size") {
		v := c.Int("image-size")
		d.ImageSize = &v
	}
	if c.IsSet("skip-bad-images") {
		v := c.Bool("skip-bad-images")
		d.SkipBadImages = &v
	}
	return d, nil
}

// explainDropped adds to err, where a column that the model's data left out is
// missing from the new data, that they were read as the model's were.
func (d dataOptions) explainDropped(err error, cfg *train.Config) error {
	var missing *data.MissingColumnError
	if !errors.As(err, &missing) {
		return err
	}
	var given string
	switch {
	case missing.Flag == "--drop-cols" && d.DropCols == nil:
		given = data.ShellQuote(strings.Join(cfg.DropCols, ","))
	case missing.Flag == "--id-col" && d.IDCol == nil:
		given = data.ShellQuote(cfg.IDCol)
	default:
		return err // the user's own flag
	}
	return fmt.Errorf("%w (new data are read as the model's were, with %s %s; for data without those columns pass %s none)",
		err, missing.Flag, given, missing.Flag)
}

// warnUnfinished warns where the model saved at path is a run's checkpoint before
// its last epoch.
func warnUnfinished(log io.Writer, m *train.Model, path string) {
	if !m.Unfinished() {
		return
	}
	run := path
	if st, err := os.Stat(run); err == nil && !st.IsDir() {
		run = filepath.Dir(run) // --resume takes the folder
	}
	fmt.Fprintf(log, "emclust: warning: %s holds epoch %d of %d: its run was stopped, or is still training (continue it with emclust train --resume %s)\n", path, m.Epoch, m.Cfg.Epochs, data.ShellQuote(run))
}

// openModelData opens the data cfg names for the model m (saved at path): a label
// column taken from the model is left out where the new rows lack it or the user's
// --drop-cols or --id-col names it, and a column the model's data left out that
// they lack is explained (dataOptions.explainDropped).
func openModelData(m *train.Model, path string, cfg *train.Config, d dataOptions, dev torch.Device) (train.Source, error) {
	src, err := m.OpenSource(path, cfg, dev)
	var missing *data.MissingColumnError
	var roles *data.RolesError
	switch {
	case !cfg.LabelColFromModel:
	case errors.As(err, &missing) && missing.Flag == "--label-col":
		cfg.LabelCol = "" // LabelColFromModel stays: the model's was looked for (eval says so)
		src, err = m.OpenSource(path, cfg, dev)
	case errors.As(err, &roles) && roles.Label:
		cfg.LabelCol, cfg.LabelColFromModel = "", false
		src, err = m.OpenSource(path, cfg, dev)
	}
	return src, d.explainDropped(err, cfg)
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// configFor is config for the model saved at model, refusing --data-dir alone for a
// model that did not train on an image set.
func (d dataOptions) configFor(model string, trained *train.Config) (*train.Config, error) {
	if !d.Given && d.DataDir != "" && (trained.DataFile != "" || !train.IsImageSet(trained.Dataset)) {
		return nil, usageError{fmt.Errorf("--data-dir without --data or --dataset: %s was trained on %s, which is not an image set", model, train.DataName(*trained))}
	}
	if d.Standardize != nil && *d.Standardize != trained.Standardize {
		// The network's inputs are fixed at training: new rows are z-scored by the
		// training data's statistics where it was, and left raw where it was not.
		was := map[bool]string{true: "z-scores", false: "raw features"}[trained.Standardize]
		return nil, usageError{fmt.Errorf("--standardize=%v: %s was trained on %s, and new data are read as it was trained; leave --standardize out", *d.Standardize, model, was)}
	}
	cfg := d.config(trained)
	if err := checkSkipBadImages(d.SkipBadImages != nil, *cfg); err != nil {
		return nil, err
	}
	if !d.Given && d.DataDir == "" {
		if err := savedDataGone(model, cfg, false); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// savedDataGone says, when the file or folder a run trained on is no longer where its
// config recorded it, which flags name it where it moved (was "lstat DIR: no such
// file or directory"). A resumed run keeps its other data settings; a verb that
// applies the model reads a file it is given as new data, so it is told the label
// column and the header setting again.
func savedDataGone(run string, cfg *train.Config, resume bool) error {
	path, flags := cfg.DataFile, "--data FILE"
	switch {
	case path == "":
		path, flags = cfg.DataDir, "--data-dir D"
	case !resume:
		if cfg.LabelCol != "" {
			flags += " --label-col " + data.ShellQuote(cfg.LabelCol)
		}
		if cfg.Header != "" && cfg.Header != "auto" {
			flags += " --header " + cfg.Header
		}
	}
	if path == "" || data.InDevOrProc(path) {
		return nil // an embedded table, a default folder, a pipe: said where read
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("%s trained on %s, which is not there now; where it moved, give %s", run, path, flags)
}

// config is the model's training config with the data these options name, or the
// training data when they name none.
func (d dataOptions) config(trained *train.Config) *train.Config {
	cfg := *trained
	cfg.ForModel = true
	if d.SkipBadImages != nil {
		cfg.SkipBadImages = *d.SkipBadImages
	}
	if !d.Given {
		if d.DataDir != "" {
			cfg.DataDir = d.DataDir // where the model's image set lies now
		}
		return &cfg
	}
	cfg.DataFile, cfg.Dataset, cfg.DataDir = d.DataFile, d.Dataset, d.DataDir
	cfg.LabelCol = d.LabelCol
	// Where not given, the columns the model's data left out, of a table.
	table := cfg.DataFile != "" && !strings.EqualFold(filepath.Ext(cfg.DataFile), ".npy")
	if !table {
		cfg.DropCols, cfg.IDCol = nil, ""
	}
	// And its label column, given by name, where the new rows have it (new rows of the
	// training file's layout were refused: the labels read as a feature). Not of a
	// pipe, which cannot be read again without it.
	if _, err := strconv.Atoi(trained.LabelCol); !d.LabelColGiven && table && trained.LabelCol != "" && err != nil /* a name */ && !data.IsStream(cfg.DataFile) {
		cfg.LabelCol, cfg.LabelColFromModel = trained.LabelCol, true
	}
	cfg.ColumnsFromModel = len(cfg.DropCols) > 0 && d.DropCols == nil || cfg.IDCol != "" && d.IDCol == nil
	if d.DropCols != nil {
		cfg.DropCols = d.DropCols
	}
	if d.IDCol != nil {
		cfg.IDCol = *d.IDCol
	}
	if d.Header != "" || cfg.Header == "" {
		cfg.Header = d.Header
	} // else as the model's data were read
	if cfg.Header == "" {
		cfg.Header = "auto"
	}
	if d.ImageSize != nil {
		cfg.ImageSize = *d.ImageSize
	}
	return &cfg
}

// modelOptions are the flags predict, eval and embed share: the model, its device and
// the data to apply it to.
type modelOptions struct {
	Model  string
	Device string
	Data   dataOptions
	Quiet  bool // no progress bar (predict, eval)
}

// modelOptionsFrom reads the shared flags; --model is required.
func modelOptionsFrom(c *cli.Context) (modelOptions, error) {
	if err := requireFlags(c, "model"); err != nil {
		return modelOptions{}, err
	}
	d, err := dataOptionsFrom(c)
	return modelOptions{Model: c.String("model"), Device: c.String("device"), Data: d, Quiet: c.Bool("quiet")}, err
}

// inference is a trained model and the data it is applied to.
type inference struct {
	*train.Model
	path string // the model's, as given
	src  train.Source
	dev  torch.Device
	log  io.Writer // where a terminal shows predict's progress
	bar  bool      // whether it may
	// trainedLabel is the label column the model trained with (Cfg becomes the data's).
	trainedLabel string
}

// openInference loads the model on its device and the data the options name (or the
// data the model trained on), and checks that the data fit the model. It warns on
// log when the model is a run's checkpoint before its last epoch.
func openInference(opts modelOptions, log io.Writer) (*inference, error) {
	dev, err := selectDevice(opts.Device)
	if err != nil {
		return nil, err
	}
	m, err := train.LoadModel(opts.Model, dev)
	if err != nil {
		return nil, err
	}
	warnUnfinished(log, m, opts.Model)
	cfg, err := opts.Data.configFor(opts.Model, m.Cfg)
	if err != nil {
		m.Close()
		return nil, err
	}
	in := &inference{Model: m, path: opts.Model, dev: dev, log: log, bar: !opts.Quiet, trainedLabel: m.Cfg.LabelCol}
	trainedOn := m.Cfg.DataDigest
	in.src, err = openModelData(m, opts.Model, cfg, opts.Data, dev)
	if err == nil {
		err = m.CheckInput(opts.Model, in.src, cfg)
	}
	if err != nil {
		in.Close()
		return nil, err
	}
	warnSkippedImages(log, in.src)
	warnDuplicateIDs(log, in.src)
	switch {
	case opts.Data.Given || trainedOn == "" || cfg.DataDigest == trainedOn:
	case opts.Data.DataDir != "" && cfg.Dataset == "folder" && realPath(opts.Data.DataDir) != realPath(m.Cfg.DataDir):
		// New images in a folder of the same classes: what --data-dir is for too.
		fmt.Fprintf(log, "emclust: %s holds other images than %s trained on (their digest differs): clustering these\n", dataPath(*cfg), opts.Model)
	default:
		fmt.Fprintf(log, "emclust: warning: %s changed since %s trained on it (its values' digest differs): the clusters are of the rows it holds now\n", dataPath(*cfg), opts.Model)
	}
	in.Cfg = cfg
	return in, nil
}

// openInferenceTo is openInference for a verb that writes out: out is checked
// before the model loads, and again against the data once they are known (without
// --data, the model's training data).
func openInferenceTo(opts modelOptions, out string, force bool, log io.Writer) (*inference, error) {
	if out == "-" {
		return openInference(opts, log) // stdout
	}
	if err := checkOutput(out, force, opts.Model, opts.Data.DataFile); err != nil {
		return nil, err
	}
	in, err := openInference(opts, log)
	if err != nil {
		return nil, err
	}
	if err := checkOutput(out, force, in.Cfg.DataFile); err != nil {
		in.Close()
		return nil, err
	}
	if dataDir := imageDir(*in.Cfg); dataDir != "" && within(realPath(out), realPath(dataDir)) && (exists(out) || data.IsImageName(out)) {
		// --force or not: a file there is an image or a file of the set (a PNG was
		// replaced by CSV text), and a new image would join the set.
		in.Close()
		return nil, usageError{fmt.Errorf("--out %s is a file of the data's folder %s; name another file", out, dataDir)}
	}
	return in, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// predict clusters the data; an error names them.
func (in *inference) predict() (*train.Prediction, error) {
	var done func(int)
	if in.bar && launch.IsTerminal(in.log) {
		bar := newBar(in.log, in.src.Len(), "row", "clustering")
		defer bar.Finish()
		done = func(rows int) { bar.Set(rows) }
	}
	pred, err := train.PredictProgress(in.Net, in.src, in.dev, in.Prior, done)
	if errors.Is(err, train.ErrNotFinite) {
		if name, werr := in.NotFinite(); werr != nil || name != "" {
			if werr != nil {
				return nil, fmt.Errorf("%s: %w, and checking its weights failed: %v", in.path, err, werr)
			}
			return nil, fmt.Errorf("%s: %w: its %s holds values that are not finite (NaN or infinite), whatever the data; train the model again", in.path, train.ErrNotFinite, name)
		}
		return nil, fmt.Errorf("%s: %w; is a value far outside the range of the training data?", dataPath(*in.Cfg), err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dataPath(*in.Cfg), err)
	}
	return pred, nil
}

// dataPath names the data for a message: the file as given, or the data set.
func dataPath(cfg train.Config) string {
	if cfg.DataFile != "" {
		return cfg.DataFile
	}
	return train.DataName(cfg)
}

// Close frees the model and the data.
func (in *inference) Close() {
	if in.src != nil {
		in.src.Close()
	}
	in.Model.Close()
}

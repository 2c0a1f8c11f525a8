package train

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"emclust/atomicfile"
	"emclust/data"
	"emclust/model"
	"emclust/torch"
)

// IsImageSet reports whether a Config's Dataset holds images: one of data's image
// sets, or "folder". The embedded tables (data.TableNames) and a --data file are
// vectors.
func IsImageSet(name string) bool {
	return name == "folder" || slices.Contains(data.ImageSetNames(), name)
}

// CheckData checks that cfg names data it can open, before any are read.
func CheckData(cfg *Config) error {
	switch {
	case cfg.DataFile != "" && cfg.Dataset != "":
		return errors.New("give either --data FILE or --dataset NAME, not both")
	case cfg.DataFile != "":
		return data.CheckVectorPath(cfg.DataFile)
	case cfg.Dataset == "" || slices.Contains(data.TableNames(), cfg.Dataset):
		return nil
	case cfg.Dataset == "folder" && cfg.DataDir == "":
		return errors.New("--dataset folder needs --data-dir with the images")
	case !IsImageSet(cfg.Dataset):
		return UnknownDataset(cfg.Dataset)
	}
	return nil
}

// UnknownDataset is the error of a --dataset that names no data set, or nil where
// name is one: an embedded table, an image set or "folder". It suggests the name
// meant where case, dashes and underscores are all that differ ("CIFAR-10").
func UnknownDataset(name string) error {
	known := append(append(data.TableNames(), data.ImageSetNames()...), "folder")
	if slices.Contains(known, name) {
		return nil
	}
	plain := func(s string) string { return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(s)) }
	for _, k := range known {
		if plain(k) == plain(name) {
			return fmt.Errorf("unknown dataset %q: did you mean %s?", name, k)
		}
	}
	return fmt.Errorf("unknown dataset %q: want %s, %s or folder", name, strings.Join(data.TableNames(), ", "), strings.Join(data.ImageSetNames(), ", "))
}

// DataName names a run's data for its default folder and for titles: the file's
// base name, an image folder's name, or the data set.
func DataName(cfg Config) string {
	if cfg.DataFile != "" {
		base := filepath.Base(cfg.DataFile)
		if data.IsStream(cfg.DataFile) && filepath.Ext(base) == "" {
			return "pipe" // /dev/stdin, or /dev/fd/63 of a shell's <(...)
		}
		return strings.TrimSuffix(base, filepath.Ext(base))
	}
	if cfg.Dataset == "" {
		return "digits"
	}
	if cfg.Dataset == "folder" && cfg.DataDir != "" {
		// The folder's own name, which says more than "folder" in a title or run name.
		if abs, err := filepath.Abs(cfg.DataDir); err == nil {
			if base := filepath.Base(abs); base != "/" && base != "." {
				return base
			}
		}
	}
	return cfg.Dataset
}

// OpenSource loads the data cfg names onto dev and records their digest in cfg. With Standardize set it z-scores
// vectors by cfg's saved statistics (a trained model sees new data as it saw its
// training data), or computes them and saves them in cfg. With StandardizeAuto it
// first decides Standardize from the vectors' FeatureSpread.
func OpenSource(cfg *Config, dev torch.Device) (Source, error) {
	return openSource(cfg, dev, nil)
}

// OpenSource is OpenSource (the function) for data the model, saved at modelPath, is
// to take: a table whose first line shows another width than the model's is refused
// there, rather than once all of it is parsed (seconds a gigabyte). CheckInput still
// checks the data it returns.
func (m *Model) OpenSource(modelPath string, cfg *Config, dev torch.Device) (Source, error) {
	want := m.Net.Spec
	if want.Arch != "mlp" {
		return openSource(cfg, dev, nil)
	}
	return openSource(cfg, dev, func(d int, names []string) error {
		if d == want.In {
			return nil
		}
		err := widthError(fmt.Sprintf("%s has %d feature columns", cfg.DataFile, d), fmt.Sprintf("the model in %s", modelPath), d, want.In, cfg, m.Cfg.LabelCol, &names)
		if diff := columnsDiffer(m.Cfg.Features, names); diff != "" {
			err = fmt.Errorf("%w (%s)", err, diff)
		}
		return err
	})
}

// columnsDiffer names the feature columns, by the names of both headers, that the
// training data had and new data lack, and those the new data have beyond them
// (was a count alone: "127 feature columns, but … takes 128"); "" where either has
// no names or none differ.
func columnsDiffer(trained, got []string) string {
	if trained == nil || got == nil {
		return ""
	}
	some := func(names []string) string {
		const most = 3
		q := make([]string, 0, most)
		for _, n := range names[:min(len(names), most)] {
			q = append(q, strconv.Quote(n))
		}
		if len(names) > most {
			q = append(q, fmt.Sprintf("and %d more", len(names)-most))
		}
		return strings.Join(q, ", ")
	}
	var parts []string
	if lack := without(trained, got); len(lack) > 0 {
		parts = append(parts, "they lack "+some(lack))
	}
	if extra := without(got, trained); len(extra) > 0 {
		parts = append(parts, "the model took no "+some(extra))
	}
	return strings.Join(parts, "; ")
}

// without is the names in a that b lacks, in a's order.
func without(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, n := range b {
		in[n] = true
	}
	var out []string
	for _, n := range a {
		if !in[n] {
			out = append(out, n)
		}
	}
	return out
}

// widthError says that input, of have feature columns, are not the want that model
// takes; with one too many, that a CSV's label column may be among them (a NumPy
// array has none, and --label-col is refused for one, as for an embedded table),
// and which one the model trained with, trainedLabel, where it did. header, where
// known, points to the names of the feature columns as read (nil: no header line).
func widthError(input, model string, have, want int, cfg *Config, trainedLabel string, header *[]string) error {
	msg := fmt.Sprintf("%s, but %s takes %d-feature input", input, model, want)
	if have == want+1 && cfg.LabelCol == "" && cfg.DataFile != "" && !strings.HasSuffix(strings.ToLower(cfg.DataFile), ".npy") {
		_, err := strconv.Atoi(trainedLabel)
		byIndex := err == nil
		switch {
		case trainedLabel == "":
			msg += " (if one column holds labels, name it with --label-col)"
		case byIndex || header == nil || data.IsStream(cfg.DataFile):
			msg += fmt.Sprintf(" (it trained with --label-col %s: give it again for these data)", data.ShellQuote(trainedLabel))
		case *header == nil:
			// Read with the model's label column first, by its name (dataOptions.config).
			msg += fmt.Sprintf(" (it trained with --label-col %s, a name, and these data have no header: if a column holds labels, give its index with --label-col)", data.ShellQuote(trainedLabel))
		default:
			msg += fmt.Sprintf(" (it trained with --label-col %s, a column these data lack: if one of theirs holds labels, name it with --label-col)", data.ShellQuote(trainedLabel))
		}
	}
	if have < want && len(cfg.DropCols) > 0 {
		msg += fmt.Sprintf(" (--drop-cols %s left columns out of these data; if they lack those columns, pass --drop-cols none)", data.ShellQuote(strings.Join(cfg.DropCols, ",")))
	}
	return errors.New(msg)
}

func openSource(cfg *Config, dev torch.Device, features func(d int, names []string) error) (Source, error) {
	if err := CheckData(cfg); err != nil {
		return nil, err
	}
	if cfg.DataFile != "" || !IsImageSet(cfg.Dataset) {
		var v *data.Vectors
		var err error
		// On the CPU the rows become the tensor where they were parsed: a copy would
		// hold them twice at the load's peak. (On a GPU the host's are copied there
		// and freed.)
		var host *torch.HostFloats
		defer func() { host.Free() }() // unless adopted
		alloc := func(n int) []float32 {
			if dev.CUDA {
				return nil
			}
			h, err := torch.NewHostFloats(n)
			if err != nil {
				return nil // Go's heap, then a copy
			}
			host = h
			return h.Slice()
		}
		if cfg.DataFile != "" {
			v, err = data.LoadVectors(cfg.DataFile, data.CSVOptions{Header: cfg.Header, LabelCol: cfg.LabelCol, DropCols: cfg.DropCols, IDCol: cfg.IDCol, ColumnsFromModel: cfg.ColumnsFromModel, ClasslessLabels: cfg.ForModel, Features: features, Alloc: alloc})
		} else {
			name := cfg.Dataset
			if name == "" {
				name = "digits"
			}
			v, err = data.Table(name)
		}
		if err != nil {
			return nil, err
		}
		cfg.DataDigest, cfg.LabelsDigest = v.Digest(), data.LabelsDigest(v.Labels, v.Classes)
		if err := matchFeatures(cfg, v); err != nil {
			return nil, err
		}
		if err := standardize(cfg, v); err != nil {
			return nil, err
		}
		big := v.N*v.D >= 1<<24
		if !host.Holds(v.X) {
			host.Free() // outgrown: the rows are in Go's heap
		}
		src, err := newVectorSource(v, dev, host)
		if big {
			// The host's rows are garbage now. Training allocates too little on Go's
			// heap for its collector to run again soon: without this they would stay
			// in the process for the whole run.
			debug.FreeOSMemory()
		}
		if err != nil {
			return nil, err // not a nil *VectorSource in a non-nil Source
		}
		return src, nil
	}
	var im *data.Images
	var err error
	if cfg.Dataset == "folder" {
		im, err = data.LoadImageFolderWith(cfg.DataDir, data.FolderOptions{Size: cfg.ImageSize, Gray: cfg.Gray, SkipBad: cfg.SkipBadImages})
	} else {
		im, err = data.LoadImages(cfg.Dataset, cfg.DataDir)
	}
	if err != nil {
		return nil, err
	}
	cfg.DataDigest, cfg.LabelsDigest = im.Digest(), data.LabelsDigest(im.Labels, im.Classes)
	if cfg.DataOnHost {
		src, err := NewHostImageSource(im, dev)
		if err != nil {
			return nil, err
		}
		return src, nil
	}
	src, err := NewImageSource(im, dev)
	if err != nil {
		mib := float64(im.N*im.C*im.H*im.W) / (1 << 20)
		return nil, ExplainOOM(err, fmt.Sprintf("the %d images take %.0f MiB on %v; keep them in host memory with --data-on-host", im.N, mib, dev))
	}
	return src, nil
}

// matchFeatures records the names of v's columns in cfg, or, where cfg has the names
// of the data a model trained on, refuses v's when they differ: a model takes its
// columns by position, and columns in another order were clustered without a word.
// Data without names, or of another width (said by the checks after), pass.
func matchFeatures(cfg *Config, v *data.Vectors) error {
	if v.Features == nil {
		return nil
	}
	if cfg.Features == nil {
		cfg.Features = v.Features
		return nil
	}
	if len(cfg.Features) != len(v.Features) || slices.Equal(cfg.Features, v.Features) {
		return nil
	}
	i := 0
	for cfg.Features[i] == v.Features[i] {
		i++
	}
	if a, b := slices.Sorted(slices.Values(cfg.Features)), slices.Sorted(slices.Values(v.Features)); slices.Equal(a, b) {
		return fmt.Errorf("%s has the model's columns in another order: column %d is %q, where the model took %q; write the columns in the training data's order",
			v.Source, i, v.Features[i], cfg.Features[i])
	}
	hint := "name them as the training data did, or delete the header line: columns without names are taken by position"
	if strings.HasSuffix(strings.ToLower(v.Source), ".parquet") {
		hint = "name them as the training data did" // a Parquet file's columns always have names
	}
	return fmt.Errorf("%s's columns are not those the model was trained on: column %d is %q, where the model took %q (the same columns under other names? %s)",
		v.Source, i, v.Features[i], cfg.Features[i], hint)
}

func standardize(cfg *Config, v *data.Vectors) error {
	if cfg.StandardizeAuto && cfg.FeatureSpread == 0 {
		spread, offset := v.FeatureSpread(), v.FeatureOffset()
		cfg.FeatureSpread = math.Round(spread*1000) / 1000
		cfg.FeatureOffset = math.Round(offset*1000) / 1000
		cfg.Standardize = spread > data.SpreadToStandardize || offset > data.OffsetToStandardize
	}
	if !cfg.Standardize {
		return nil
	}
	if cfg.InputMean != nil {
		// Said here as CheckInput says it, which runs after this.
		if d := len(cfg.InputMean); d != v.D {
			return widthError(fmt.Sprintf("%s has %d feature columns", v.Source, v.D), "the model", v.D, d, cfg, "", nil)
		}
		return v.ApplyStandardize(cfg.InputMean, cfg.InputStd)
	}
	cfg.InputMean, cfg.InputStd = v.Standardize()
	return nil
}

// ExplainOOM adds what to change to an allocation failure; other errors pass as they
// are. libtorch's message already says how much was asked.
func ExplainOOM(err error, advice string) error {
	var te *torch.Error
	if errors.As(err, &te) && te.OutOfMemory() {
		return fmt.Errorf("%w (out of memory: %s)", err, advice)
	}
	return err
}

// Model is a trained network read back from a run folder or checkpoint file.
type Model struct {
	Net   *model.Net
	Cfg   *Config
	Prior *torch.Tensor // the learned prior; nil for a uniform one
	// Epoch is the epochs trained into the model, and Chosen whether it is a run's
	// chosen epoch (chosen.safetensors) rather than its checkpoint.
	Epoch  int
	Chosen bool
}

// Unfinished says whether the model is a checkpoint of a run that has not trained
// all its epochs: one stopped, or still training.
func (m *Model) Unfinished() bool { return !m.Chosen && m.Epoch < m.Cfg.Epochs }

// LoadModel rebuilds the network saved in a run folder (or checkpoint file) on dev,
// in the arithmetic it trained with.
func LoadModel(path string, dev torch.Device) (*Model, error) {
	// The optimiser's moments, twice the weights, are not needed to cluster.
	weights := func(name string) bool { return strings.HasPrefix(name, "model.") || name == "prior" }
	f, cfg, spec, err := readCheckpoint(path, weights)
	if f != nil {
		defer f.Release() // for the activations of inference to use
	}
	if errors.Is(err, fs.ErrNotExist) {
		ckpt := path
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			ckpt = filepath.Join(path, checkpointName)
		}
		if err := atomicfile.LinkToNothing(ckpt); err != nil {
			return nil, err
		}
		switch fi, serr := os.Stat(path); {
		case StoppedInTrials(path):
			return nil, fmt.Errorf("%s stopped among its trials or restarts, before it had a model: emclust train --resume %s goes on with them", path, data.ShellQuote(path))
		case serr != nil:
			return nil, fmt.Errorf("%s: no such run folder or checkpoint file", path)
		case fi.IsDir() && isRegular(filepath.Join(path, "config.json")):
			return nil, fmt.Errorf("%s holds no checkpoint: its run stopped before its first epoch ended, or is still in it (a run saves one after each epoch); a stopped one trains again with --out %s", path, data.ShellQuote(path))
		case fi.IsDir():
			return nil, fmt.Errorf("%s holds no run (no checkpoint.safetensors): name a run folder or checkpoint file", path)
		}
	}
	if err != nil {
		return nil, err
	}
	net, err := model.New(spec, dev)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m := &Model{Net: net, Cfg: cfg, Chosen: f.Meta["chosen"] != ""}
	if m.Epoch, err = strconv.Atoi(f.Meta["epoch"]); err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: epoch %q: not a number", path, f.Meta["epoch"])
	}
	if err := net.Load(f, "model."); err != nil {
		m.Close()
		return nil, err
	}
	if err := net.SetCompute(cfg.Compute()); err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, ok := f.Shape("prior"); ok {
		if err := checkPrior(f, "prior", cfg.K); err != nil {
			m.Close()
			return nil, err
		}
		s := torch.NoGrad()
		m.Prior = s.Keep(s.LoadTensor(f, "prior", dev))
		if err := s.Close(); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}

// NotFinite names the first of the model's tensors (parameters, running statistics,
// prior) holding a value that is not finite, "" where all are finite: a model's
// outputs that are not finite come from it, or else from the data.
//
// With several heads only the selected one's rows of the heads' tensors (those of
// K·heads rows) count, as only its outputs are judged (Predict): another head's
// values do not reach them.
func (m *Model) NotFinite() (string, error) {
	tensors := append(m.Net.Params(), m.Net.Buffers()...)
	if m.Prior != nil {
		tensors = append(tensors, torch.Named{Name: "prior", Tensor: m.Prior})
	}
	k, heads := m.Net.Spec.K, m.Net.Spec.NumHeads()
	s := torch.NoGrad()
	defer s.Close()
	for _, t := range tensors {
		x := t.Tensor
		if shape := x.Shape(); heads > 1 && len(shape) > 0 && shape[0] == k*heads {
			x = s.Narrow(x, 0, m.Net.Head()*k, k)
		}
		bad := s.CountNotFinite(x)
		if err := s.Err(); err != nil {
			return "", err
		}
		if bad > 0 {
			return t.Name, nil
		}
	}
	return "", nil
}

// Close frees the network and the prior.
func (m *Model) Close() {
	m.Prior.Free()
	m.Net.Close()
}

// CheckInput checks that src fits the model's input; the error names both.
func (m *Model) CheckInput(modelPath string, src Source, cfg *Config) error {
	want := m.Net.Spec
	_, vectors := src.(*VectorSource)
	switch {
	case vectors && want.Arch != "mlp":
		return fmt.Errorf("%s, but the model in %s clusters %dx%d images: give it images (--dataset, or --dataset folder --data-dir D)", src.Describe(), modelPath, want.H, want.W)
	case !vectors && want.Arch == "mlp":
		return fmt.Errorf("%s, but the model in %s clusters the rows of a table of %d features: give it one (--data FILE)", src.Describe(), modelPath, want.In)
	}
	got, err := src.Spec(cfg)
	if err != nil {
		// Not wrapped: a SettingsError is the command line's, and here the data
		// and the model disagree (exit 1, as other input of the wrong shape).
		return fmt.Errorf("the model in %s takes %s input, and %s: %v", modelPath, describeInput(want), src.Describe(), err)
	}
	if got.In != want.In || got.H != want.H || got.W != want.W || got.InC != want.InC {
		if want.Arch == "mlp" && got.Arch == "mlp" {
			return widthError(src.Describe(), "the model in "+modelPath, got.In, want.In, cfg, m.Cfg.LabelCol, nil)
		}
		return fmt.Errorf("%s, but the model in %s takes %s input", src.Describe(), modelPath, describeInput(want))
	}
	return nil
}

func describeInput(sp model.Spec) string {
	if sp.Arch == "mlp" {
		return fmt.Sprintf("%d-feature", sp.In)
	}
	return fmt.Sprintf("%dx%d image", sp.H, sp.W)
}

// isRegular says whether path is a regular file.
func isRegular(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

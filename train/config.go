// Package train runs the paper's batch-wise EM: one loop, every hyper-parameter in one
// Config saved with each run, a checkpoint per epoch written atomically, and a run
// folder a script can read (config.json, metrics.jsonl, assignments.csv, summary.json).
package train

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"runtime"

	"emclust/atomicfile"
	"emclust/data"
	"emclust/model"
	"emclust/transform"
)

// MaxJSONBytes bounds a run's JSON files (config.json, summary.json) when read:
// far past what a run writes.
const MaxJSONBytes = 1 << 28

// Config holds every choice a run makes. It is saved as RUN/config.json and inside
// each checkpoint, and a resumed run takes it from there.
type Config struct {
	// Data: one of Dataset (embedded digits or an image set) or DataFile (vectors).
	Dataset  string `json:"dataset,omitempty"`
	DataDir  string `json:"data_dir,omitempty"`
	DataFile string `json:"data_file,omitempty"`
	LabelCol string `json:"label_col,omitempty"`
	// DropCols are the table's columns that are neither features nor labels.
	DropCols []string `json:"drop_cols,omitempty"`
	// IDCol is the table's column of row IDs, written beside each row's cluster.
	IDCol string `json:"id_col,omitempty"`
	// ColumnsFromModel says DropCols and IDCol are a trained model's, applied to new
	// data (data.CSVOptions.ColumnsFromModel).
	ColumnsFromModel bool `json:"-"`
	// LabelColFromModel says LabelCol is a trained model's, named for new data that
	// may not have it: an open that finds no such column is tried again without it
	// (LabelCol emptied, this left set).
	LabelColFromModel bool `json:"-"`
	// ForModel says the data are read for a trained model to assign: a label column
	// in which no row has a class is read as no labels (data.CSVOptions.ClasslessLabels).
	ForModel    bool   `json:"-"`
	Header      string `json:"header,omitempty"`
	Standardize bool   `json:"standardize"`
	// StandardizeAuto leaves Standardize to the data: OpenSource sets it when the
	// FeatureSpread of the vectors exceeds data.SpreadToStandardize or their
	// FeatureOffset data.OffsetToStandardize, and records both.
	StandardizeAuto bool    `json:"standardize_auto,omitempty"`
	FeatureSpread   float64 `json:"feature_spread,omitempty"`
	FeatureOffset   float64 `json:"feature_offset,omitempty"`
	// DataDigest is data.Vectors.Digest (or Images.Digest) of the data as OpenSource
	// last read them: a resumed run checks that it goes on with the data it began on.
	DataDigest string `json:"data_digest,omitempty"`
	// LabelsDigest is data.LabelsDigest of the labels read with them, if any.
	LabelsDigest string `json:"labels_digest,omitempty"`
	// Features are the names of the training data's feature columns, where the data
	// named them (a CSV's header): new data with other names, or the same in another
	// order, are refused rather than clustered column by column.
	Features []string `json:"features,omitempty"`
	// InputMean and InputStd are the training data's column statistics when
	// Standardize is set; predict applies them to new data.
	InputMean []float64 `json:"input_mean,omitempty"`
	InputStd  []float64 `json:"input_std,omitempty"`  // 0: a constant column
	ImageSize int       `json:"image_size,omitempty"` // folder images: resize to this square size
	Gray      bool      `json:"gray,omitempty"`       // folder images: load as grayscale
	// SkipBadImages leaves out a folder's images that cannot be read
	// (data.FolderOptions.SkipBad).
	SkipBadImages bool `json:"skip_bad_images,omitempty"`
	DataOnHost    bool `json:"data_on_host,omitempty"` // images stay in host memory; batches are copied over

	// Model.
	Arch   string `json:"arch"`             // mlp, mnist, cifar, stl10 (chosen from the data when empty)
	Hidden []int  `json:"hidden,omitempty"` // MLP hidden widths
	// HiddenAuto has TrainRestarts train Restarts runs of two networks, the MLP of
	// Hidden (with Prior) and a linear map with a learned prior, and keep the one
	// whose clustering has the higher silhouette on the features trained on, of those
	// that use at least MinClustersUsed percent of the clusters (NetworkCandidates,
	// chooseNetwork); one restart, or several heads, train the MLP. A saved run's
	// Hidden and Prior are the network it kept.
	HiddenAuto bool `json:"hidden_auto,omitempty"`
	K          int  `json:"k"`
	Norm       bool `json:"norm"` // relevance normalisation (off only for the ablation)
	// Heads trains that many clustering heads on the shared network, each with the
	// objective (their mean), and predicts with the one whose clustering agrees best
	// with the others' at the last evaluation; 0 and 1: one head, the paper's.
	Heads int `json:"heads,omitempty"`
	// Arithmetic (model.Compute): products in fp32 or bf16, images channels-last.
	Precision    string `json:"precision,omitempty"`
	ChannelsLast bool   `json:"channels_last,omitempty"`
	// Deterministic keeps a CUDA run bit-identical from one run or resume to the next:
	// cuDNN's deterministic algorithms, no autotuning. Slower; the CPU always is.
	Deterministic bool `json:"deterministic,omitempty"`

	// Optimisation.
	Objective string `json:"objective"` // em, em-aug, twofold, iic
	Epochs    int    `json:"epochs"`
	// MinSteps raises Epochs, in New, until training takes at least this many steps:
	// on a table of a few hundred rows 30 epochs are 30 steps (docs/RESULTS.md
	// section 17). MaxSteps lowers them to the fewest, one at least, that make this
	// many: on a large table the network has converged long before 30 epochs
	// (section 35). 0 leaves Epochs as given.
	MinSteps  int     `json:"min_steps,omitempty"`
	MaxSteps  int     `json:"max_steps,omitempty"`
	BatchSize int     `json:"batch_size"`
	Gamma     string  `json:"gamma"`       // a number or "auto"
	GammaVal  float64 `json:"gamma_value"` // the γ in use
	LR        float64 `json:"lr"`          // the EM (or IIC) optimiser
	LRKL      float64 `json:"lr_kl"`       // the KL optimiser of twofold
	Prior     string  `json:"prior"`       // uniform, learned
	Seed      uint64  `json:"seed"`        // shuffling, init and augmentation
	Device    string  `json:"device"`      // as given: auto, cpu, cuda, cuda:N
	EvalEvery int     `json:"eval_every"`  // epochs between full evaluations (0: last only)
	Threads   int     `json:"threads"`     // CPU intra-op threads (0: libtorch's default)
	KMeans    bool    `json:"kmeans"`      // also run the k-means baseline on the same features
	LogEvery  int     `json:"log_every"`   // steps between loss reads for the progress bar
	// Restarts trains seeds Seed, Seed+1, ... and keeps the run whose clustering
	// agrees best with the others' (TrainRestarts); 0 and 1 train one run.
	Restarts int `json:"restarts,omitempty"`
	// TrialEpochs, with several restarts, makes them trials (TrainTrials): each
	// trains this many epochs, evaluating each, and the one whose clustering agreed
	// most with its own earlier evaluations goes on to Epochs. 0: restarts train
	// whole runs and are kept by KeepBy.
	TrialEpochs int `json:"trial_epochs,omitempty"`
	// KeepBy is what keeps one of several restarts: "silhouette" (of the clustering
	// on the z-scored features) or "agreement" (with the other restarts' clusterings);
	// "" in runs saved before it existed, which kept by agreement.
	KeepBy string `json:"keep_by,omitempty"`
	// WorldSize is the number of data-parallel ranks that train the run; BatchSize is
	// the global batch, split evenly over them.
	WorldSize int `json:"world_size"`
	// LocalRanks is how many of the ranks run on this machine and share its memory,
	// which the memory check divides among them (0: one). Not saved: it says where a
	// run trains, not how.
	LocalRanks int `json:"-"`
	// NoMemoryCheck trains what the memory check would refuse: for memory it cannot
	// count (swap, a process about to end). Not saved, as LocalRanks.
	NoMemoryCheck bool `json:"-"`
	// LocalStats keeps each rank's batch statistics (BatchNorm, the relevance
	// normalisation) to its own rows: cheaper, but a different algorithm from one
	// process at the global batch. Without it they span the global batch.
	LocalStats bool                     `json:"local_stats,omitempty"`
	Augment    *transform.AugmentConfig `json:"augment,omitempty"`
}

// VectorMaxSteps is VectorDefaults' MaxSteps: 10 epochs of the 70 000 2-d
// Fashion-MNIST points, where the paper's vector network converges (§8.1); 30 epochs
// there scored no better and took three times as long (docs/RESULTS.md section 35).
const VectorMaxSteps = 5000

// VectorDefaults are the paper's §8.1 settings for vector data.
func VectorDefaults() Config {
	return Config{
		Arch: "mlp", Hidden: []int{32, 32}, HiddenAuto: true, K: 10, Norm: true,
		Objective: "em", Epochs: 30, MinSteps: 1000, MaxSteps: VectorMaxSteps, BatchSize: 128, Gamma: "5", LR: 1e-3, LRKL: 1e-4,
		Prior: "uniform", Seed: 1, Device: "auto", EvalEvery: 1, KMeans: true, LogEvery: 20, Precision: "fp32",
		Restarts: DefaultVectorRestarts, KeepBy: KeepByAgreement,
	}
}

// DefaultVectorRestarts is how many restarts a vector run trains unless told: kept by
// their agreement, ten lifted every embedded table above its one-seed mean and
// narrowed the spread between seeds (docs/RESULTS.md section 20), as scikit-learn's
// KMeans once ran n_init=10. An MLP run on the digits takes about 0.4 s.
const DefaultVectorRestarts = 10

// ImageDefaults are the paper's §8.2 settings for images.
func ImageDefaults() Config {
	aug := transform.DefaultAugment()
	return Config{
		K: 10, Norm: true,
		Objective: "twofold", Epochs: 250, BatchSize: 128, Gamma: "5", LR: 5e-5, LRKL: 1e-4,
		Prior: "uniform", Seed: 1, Device: "auto", EvalEvery: 1, KMeans: false, LogEvery: 20, Precision: "fp32",
		Augment: &aug, KeepBy: KeepByAgreement,
	}
}

// DefaultImageTrials and DefaultTrialEpochs are how emclust train starts an image run
// unless told: four trials of ten epochs, the most settled of which goes on. Replayed
// on eight 19-epoch runs of the full Fashion-MNIST on a GPU, that kept seed scored
// 0.042 above one seed's mean, and the trials' agreement ranked the seeds at Spearman
// +0.90 (docs/RESULTS.md section 51); over 250 epochs they cost 30 more.
// ImageDefaults trains one seed: where trials fit is the command's choice
// (configFromFlags).
const (
	DefaultImageTrials = 4
	DefaultTrialEpochs = 10
)

// EpochsFor is the number of epochs the run trains on rows rows: Epochs, raised to
// make MinSteps steps of min(BatchSize, rows) rows, or lowered to the fewest that make
// MaxSteps, and at least one.
func (c *Config) EpochsFor(rows int) int {
	perEpoch := rows / max(min(c.BatchSize, rows), 1)
	epochs := c.Epochs
	if perEpoch <= 0 {
		return epochs
	}
	if c.MinSteps > 0 {
		epochs = max(epochs, (c.MinSteps+perEpoch-1)/perEpoch)
	}
	if c.MaxSteps > 0 {
		epochs = min(epochs, max((c.MaxSteps+perEpoch-1)/perEpoch, 1))
	}
	return epochs
}

// SetEpochs makes the run train n epochs, whatever the size of its data.
func (c *Config) SetEpochs(n int) { c.Epochs, c.MinSteps, c.MaxSteps = n, 0, 0 }

// Compute is the arithmetic the run trains (and predict infers) with.
func (c *Config) Compute() model.Compute {
	return model.Compute{Precision: c.Precision, ChannelsLast: c.ChannelsLast}
}

// needsAugment reports whether the objective trains on transformed batches.
func (c *Config) needsAugment() bool { return c.objective().Augmented }

// Validate checks the settings that do not depend on the data.
func (c *Config) Validate() error {
	obj, err := LookupObjective(c.Objective)
	if err != nil {
		return err
	}
	switch {
	case c.K < 2:
		// One cluster takes every row whatever the network learns.
		return fmt.Errorf("--k %d: want at least 2 clusters", c.K)
	case c.Epochs < 1:
		return fmt.Errorf("--epochs %d: want at least 1", c.Epochs)
	case c.MinSteps < 0:
		return fmt.Errorf("min steps %d: want ≥ 0", c.MinSteps)
	case c.MaxSteps < 0 || (c.MaxSteps > 0 && c.MaxSteps < c.MinSteps):
		return fmt.Errorf("max steps %d: want 0 (no limit) or at least the min steps, %d", c.MaxSteps, c.MinSteps)
	case c.BatchSize < 2:
		return fmt.Errorf("--batch-size %d: the relevance normalisation needs at least 2 rows a batch", c.BatchSize)
	case !(c.LR > 0) || math.IsInf(c.LR, 1):
		return fmt.Errorf("--lr %v: want a finite rate > 0", c.LR)
	case obj.KLStep && (!(c.LRKL > 0) || math.IsInf(c.LRKL, 1)):
		return fmt.Errorf("--lr-kl %v: want a finite rate > 0", c.LRKL)
	case c.Threads < 0 || c.Threads > runtime.NumCPU():
		// Far more threads than CPUs did not finish a 1-second run in 300 s.
		return fmt.Errorf("--threads %d: want 0 (one per CPU) to %d, the CPUs this machine has", c.Threads, runtime.NumCPU())
	case c.ImageSize < 0 || c.ImageSize > data.MaxImageSide:
		return fmt.Errorf("--image-size %d: want 0 (keep) to %d", c.ImageSize, data.MaxImageSide)
	case c.Prior != "uniform" && c.Prior != "learned":
		return fmt.Errorf("--prior %q: want uniform or learned", c.Prior)
	case c.EvalEvery < 0:
		return fmt.Errorf("--eval-every %d: want ≥ 0", c.EvalEvery)
	case c.Restarts < 0 || c.Restarts > 1000:
		return fmt.Errorf("--restarts %d: want 0 to 1000", c.Restarts)
	case !SeedTakesRestarts(c.Seed, c.Restarts):
		return fmt.Errorf("--seed %d: its %d restarts would take seeds past 2⁶⁴−1; give a smaller --seed", c.Seed, c.Restarts)
	case c.TrialEpochs != 0 && (c.TrialEpochs < 2 || c.TrialEpochs > c.Epochs):
		// One evaluation has no earlier one to agree with.
		return fmt.Errorf("--trial-epochs %d: want 0 (no trials), or from 2 up to the run's %d epochs", c.TrialEpochs, c.Epochs)
	case c.KeepBy != "" && c.KeepBy != KeepBySilhouette && c.KeepBy != KeepByAgreement:
		return fmt.Errorf("--keep-by %q: want %s or %s", c.KeepBy, KeepBySilhouette, KeepByAgreement)
	case c.Heads < 0 || c.Heads > model.MaxHeads:
		return fmt.Errorf("--heads %d: want 1 to %d", c.Heads, model.MaxHeads)
	case c.Heads > 1 && obj.Supervised:
		return fmt.Errorf("--heads %d: the supervised objective trains one head", c.Heads)
	case c.Heads > 1 && c.Prior == "learned":
		return fmt.Errorf("--heads %d: a learned prior is one head's; use --prior uniform or one head", c.Heads)
	}
	return c.Compute().Validate()
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.WriteBytes(path, append(b, '\n'))
}

// WriteConfig writes cfg as dir/config.json, as a run does: what a run folder holds
// before its first checkpoint (its trials', say) says what run it is.
func WriteConfig(dir string, cfg Config) error {
	return writeJSON(filepath.Join(dir, "config.json"), cfg)
}

// ReadConfig reads dir/config.json.
func ReadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, "config.json")
	b, err := atomicfile.ReadFile(path, MaxJSONBytes)
	if err != nil {
		return nil, err
	}
	var cfg Config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &cfg, nil
}

// SeedTakesRestarts reports whether seed's restarts, which train seed+i, all have
// seeds: past 2⁶⁴−1 they would be seeds 0, 1, … and a run kept among them would
// record a seed never given.
func SeedTakesRestarts(seed uint64, restarts int) bool {
	return seed <= math.MaxUint64-uint64(max(restarts, 1)-1)
}

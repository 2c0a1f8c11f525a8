package train

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"emclust/atomicfile"
	"emclust/model"
	"emclust/torch"
)

// Checkpoint layout: model tensors under "model.", optimiser moments under
// "optA.<i>.*" / "optB.<i>.*", the learned prior as "prior", the clusterings of the
// last evaluations as "recent.<i>", and the chosen epoch's model under "chosen."
// while it is not the last; config, spec, epoch, optimiser step counts, history,
// the chosen epoch and the restarts in the metadata.
const checkpointName = "checkpoint.safetensors"

type checkpointMeta struct {
	Epoch   int            `json:"epoch"`
	StepsA  []int64        `json:"steps_a"`
	StepsB  []int64        `json:"steps_b,omitempty"`
	History []EpochMetrics `json:"history"`
	Chosen  *Chosen        `json:"chosen,omitempty"`
	// Restarts is Run.Restarts.
	Restarts []Restart `json:"restarts,omitempty"`
}

// Save writes RUN/checkpoint.safetensors and RUN/metrics.jsonl atomically, then
// ChosenName (ExportChosen). Train saves after the first and the last epoch, and in
// between at most every checkpointInterval.
func (r *Run) Save() error {
	s := torch.NoGrad()
	defer s.Close()
	var ts []torch.Named
	for _, nt := range append(r.Net.Params(), r.Net.Buffers()...) {
		ts = append(ts, torch.Named{Name: "model." + nt.Name, Tensor: nt.Tensor})
	}
	meta := checkpointMeta{Epoch: r.epoch, History: r.History, Chosen: r.chosen, Restarts: r.Restarts}
	for _, o := range []struct {
		name  string
		opt   *torch.Adam
		steps *[]int64
	}{{"optA", r.optA, &meta.StepsA}, {"optB", r.optB, &meta.StepsB}} {
		if o.opt == nil {
			continue
		}
		for i := 0; i < o.opt.Len(); i++ {
			m, v, st := o.opt.State(s, i)
			ts = append(ts, torch.Named{Name: fmt.Sprintf("%s.%d.exp_avg", o.name, i), Tensor: m},
				torch.Named{Name: fmt.Sprintf("%s.%d.exp_avg_sq", o.name, i), Tensor: v})
			*o.steps = append(*o.steps, st)
		}
	}
	if r.prior != nil {
		ts = append(ts, torch.Named{Name: "prior", Tensor: r.prior})
	}
	for i, c := range r.recent {
		ts = append(ts, torch.Named{Name: fmt.Sprintf("recent.%d", i), Tensor: s.FromInt64(convertInts[int64](c), []int{len(c)}, torch.CPU)})
	}
	if r.chosen != nil && r.chosen.Epoch != r.epoch {
		for _, nt := range r.chosenState {
			ts = append(ts, torch.Named{Name: "chosen." + nt.Name, Tensor: nt.Tensor})
		}
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	md, err := r.metadata(meta)
	if err != nil {
		return err
	}
	if err := torch.SaveSafetensors(filepath.Join(r.Dir, checkpointName), ts, md); err != nil {
		return err
	}
	r.savedEpoch, r.lastSave = r.epoch, time.Now()
	if err := r.writeMetrics(); err != nil {
		return err
	}
	_, err = r.ExportChosen()
	return err
}

// metadata is a checkpoint's metadata: the run's config and spec, and state. An
// error (a value JSON cannot hold) leaves the checkpoint on disk as it was.
func (r *Run) metadata(state checkpointMeta) (map[string]string, error) {
	cfgJSON, err := json.Marshal(r.Cfg)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: config: %w", err)
	}
	stateJSON, err := json.Marshal(state)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: state: %w", err)
	}
	return map[string]string{
		"format":   "emclust-checkpoint-1",
		"config":   string(cfgJSON),
		"spec":     r.Net.Spec.JSON(),
		"state":    string(stateJSON),
		"epoch":    strconv.Itoa(state.Epoch),
		"libtorch": torch.Version(),
	}, nil
}

func (r *Run) writeMetrics() error {
	var buf []byte
	for _, m := range r.History {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	return atomicfile.WriteBytes(filepath.Join(r.Dir, "metrics.jsonl"), buf)
}

// ReadCheckpoint reads a run's checkpoint and the config and spec saved in it.
func ReadCheckpoint(runDir string) (*torch.SafeFile, *Config, model.Spec, error) {
	return readCheckpoint(runDir, nil)
}

// readCheckpoint is ReadCheckpoint keeping only the tensors keep accepts (all
// where keep is nil).
func readCheckpoint(runDir string, keep func(name string) bool) (*torch.SafeFile, *Config, model.Spec, error) {
	path := runDir
	if st, err := os.Stat(runDir); err == nil && st.IsDir() {
		path = filepath.Join(runDir, checkpointName)
	}
	var cfg Config
	var spec model.Spec
	// Judged before the data is read: a large file that is no checkpoint of
	// emclust's is refused at once.
	header := func(meta map[string]string) error {
		if meta["format"] != "emclust-checkpoint-1" {
			return fmt.Errorf("%s: not an emclust checkpoint (format %q)", path, meta["format"])
		}
		// Every checkpoint emclust writes carries them: one without was damaged where
		// the key was, and would be read unchecked.
		if meta[torch.ChecksumKey] == "" {
			return fmt.Errorf("%s: no checksum of its tensor data (%s) in the header: the file is damaged, or older than emclust's checksums (2026-11-22)", path, torch.ChecksumKey)
		}
		if meta[torch.HeaderChecksumKey] == "" {
			return fmt.Errorf("%s: no checksum of its header (%s): the file is damaged, or older than emclust's header checksums (2026-11-28), whose runs an emclust built before then reads, and this one trains again", path, torch.HeaderChecksumKey)
		}
		if err := json.Unmarshal([]byte(meta["config"]), &cfg); err != nil {
			return fmt.Errorf("%s: config: %w", path, err)
		}
		if err := json.Unmarshal([]byte(meta["spec"]), &spec); err != nil {
			return fmt.Errorf("%s: spec: %w", path, err)
		}
		return nil
	}
	f, err := torch.ReadSafetensorsWith(path, torch.ReadOptions{Keep: keep, Header: header})
	if err != nil {
		return nil, nil, model.Spec{}, err
	}
	return f, &cfg, spec, nil
}

// RunFiles are the files a run folder owns, written through atomicfile (the CLI
// writes the last two). Other commands must not write over them.
var RunFiles = []string{"config.json", checkpointName, ChosenName, "metrics.jsonl", "assignments.csv", "summary.json"}

func removeStale(dir string) {
	for _, f := range RunFiles {
		atomicfile.RemoveStale(filepath.Join(dir, f))
	}
}

// RemoveStale deletes the partial files a run killed while writing left in dir. It
// takes the folder's lock for it, so it fails rather than touch a running run's
// files.
func RemoveStale(dir string) error {
	stale := false
	for _, f := range RunFiles {
		m, _ := filepath.Glob(filepath.Join(dir, "."+f+".tmp*"))
		stale = stale || len(m) > 0
	}
	if !stale {
		return nil // and no lock file left in a folder that may not be a run's
	}
	lock, err := lockRunDir(dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	removeStale(dir)
	return nil
}

// CheckpointEpochs is the number of epochs a checkpoint had completed.
func CheckpointEpochs(f *torch.SafeFile) (int, error) {
	var meta checkpointMeta
	if err := json.Unmarshal([]byte(f.Meta["state"]), &meta); err != nil {
		return 0, fmt.Errorf("%s: state: %w", f.Path, err)
	}
	return meta.Epoch, nil
}

// Restore loads a checkpoint's network, optimiser states, prior and history into r,
// which must have been built with the same config. It releases f's tensor data,
// whether or not it succeeds: a resumed run would otherwise hold its whole
// checkpoint a second time while it trains (413 MB more at the peak of a run of
// 36 M weights).
func (r *Run) Restore(f *torch.SafeFile) error {
	defer f.Release() // libtorch holds its own copies
	if f.Meta["chosen"] != "" {
		return fmt.Errorf("%s holds only the model of a chosen epoch, without optimiser states; resume from the run folder", f.Path)
	}
	var spec model.Spec
	if err := json.Unmarshal([]byte(f.Meta["spec"]), &spec); err != nil {
		return fmt.Errorf("%s: spec: %w", f.Path, err)
	}
	if spec.JSON() != r.Net.Spec.JSON() {
		return fmt.Errorf("%s: saved model %s does not match this run's %s", f.Path, spec.JSON(), r.Net.Spec.JSON())
	}
	if err := r.Net.Load(f, "model."); err != nil {
		return err
	}
	var meta checkpointMeta
	if err := json.Unmarshal([]byte(f.Meta["state"]), &meta); err != nil {
		return fmt.Errorf("%s: state: %w", f.Path, err)
	}
	s := torch.NoGrad()
	defer s.Close()
	for _, o := range []struct {
		name  string
		opt   *torch.Adam
		steps []int64
	}{{"optA", r.optA, meta.StepsA}, {"optB", r.optB, meta.StepsB}} {
		if o.opt == nil {
			continue
		}
		if len(o.steps) != o.opt.Len() {
			return fmt.Errorf("%s: %s has %d parameter states, this run needs %d", f.Path, o.name, len(o.steps), o.opt.Len())
		}
		for i := 0; i < o.opt.Len(); i++ {
			// Straight into the optimiser's moments, and the file's copy goes before
			// the next, where a resume held them all at once (docs/RESULTS.md
			// section 69). SetState then sets the step: its copy of each moment
			// onto itself is none.
			mName, vName := fmt.Sprintf("%s.%d.exp_avg", o.name, i), fmt.Sprintf("%s.%d.exp_avg_sq", o.name, i)
			m, v, _ := o.opt.State(s, i)
			s.LoadInto(m, f, mName)
			s.LoadInto(v, f, vName)
			if err := s.Err(); err != nil {
				return fmt.Errorf("%w (the file is damaged, or not emclust's)", err)
			}
			if err := o.opt.SetState(i, m, v, o.steps[i]); err != nil {
				return fmt.Errorf("%s: %s state %d: %w", f.Path, o.name, i, err)
			}
			f.Drop(mName)
			f.Drop(vName)
		}
	}
	if r.prior != nil {
		if err := checkPrior(f, "prior", r.Cfg.K); err != nil {
			return err
		}
		s.CopyInto(r.prior, s.LoadTensor(f, "prior", r.Dev))
	}
	if err := s.Err(); err != nil {
		return err
	}
	r.epoch, r.savedEpoch, r.resumedAfter = meta.Epoch, meta.Epoch, meta.Epoch
	r.History = meta.History
	r.Restarts = meta.Restarts
	r.recent = nil
	for i := 0; ; i++ {
		name := fmt.Sprintf("recent.%d", i)
		if _, ok := f.Shape(name); !ok {
			break
		}
		c := s.Int64s(s.LoadTensor(f, name, torch.CPU))
		if len(c) != r.Src.Len() {
			return fmt.Errorf("%s: the run trained on %d rows, and the data hold %d; a resumed run needs the data it trained on", f.Path, len(c), r.Src.Len())
		}
		r.recent = append(r.recent, convertInts[int32](c))
	}
	if err := s.Err(); err != nil {
		return err
	}
	r.chosen, r.chosenFile = meta.Chosen, 0
	if r.chosen != nil {
		if e := r.chosen.Epoch; e < 1 || e > len(r.History) {
			return fmt.Errorf("%s: the chosen epoch %d is not among the %d the run has trained", f.Path, e, len(r.History))
		}
		r.chosen.Empty = r.History[r.chosen.Epoch-1].Empty
	}
	r.dropChosenState()
	if r.Dir != "" {
		// A save that stopped between the checkpoint and metrics.jsonl left the
		// file behind the checkpoint; a run resumed only to finish writes no other.
		if err := r.writeMetrics(); err != nil {
			return err
		}
	}
	if r.chosen == nil || r.Dir == "" {
		return nil
	}
	if r.chosen.Epoch == r.epoch {
		// The checkpoint is the chosen epoch's, which later epochs overwrite.
		return r.snapshotChosen()
	}
	for _, nt := range r.chosenSource() {
		name := "chosen." + nt.Name
		if _, ok := f.Shape(name); !ok {
			return fmt.Errorf("%s: no tensor %q for the chosen epoch %d", f.Path, name, r.chosen.Epoch)
		}
		if err := f.CheckLike(name, nt.Tensor, "the run's "+nt.Name); err != nil {
			return fmt.Errorf("%w (the file is damaged, or not emclust's)", err)
		}
		if nt.Name == "prior" {
			if err := checkPrior(f, name, r.Cfg.K); err != nil {
				return err
			}
		}
		r.chosenState = append(r.chosenState, torch.Named{Name: nt.Name, Tensor: s.Keep(s.LoadTensor(f, name, r.Dev))})
		f.Drop(name)
	}
	return s.Err()
}

// Chosen is the epoch ranked first so far, nil before any evaluation.
func (r *Run) Chosen() *Chosen { return r.chosen }

// consider makes the epoch just evaluated the chosen one if it ranks first, and keeps
// its tensors for Save when the run has a folder.
func (r *Run) consider(m EpochMetrics) error {
	if m.Criteria == nil {
		return nil
	}
	c := Chosen{Epoch: m.Epoch, Criteria: *m.Criteria, Agreement: m.Agreement, Empty: m.Empty}
	if r.chosen != nil && !r.better(c, *r.chosen) {
		return nil
	}
	r.chosen = &c
	if r.Dir == "" && !r.keepChosen {
		return nil
	}
	return r.snapshotChosen()
}

// chosenSource names the tensors a chosen epoch keeps, as they are now.
func (r *Run) chosenSource() []torch.Named {
	var out []torch.Named
	for _, nt := range append(r.Net.Params(), r.Net.Buffers()...) {
		out = append(out, torch.Named{Name: "model." + nt.Name, Tensor: nt.Tensor})
	}
	if r.prior != nil {
		out = append(out, torch.Named{Name: "prior", Tensor: r.prior})
	}
	return out
}

// snapshotChosen copies the network (and prior) as they are now, for ChosenName.
func (r *Run) snapshotChosen() error {
	r.dropChosenState()
	s := torch.NoGrad()
	defer s.Close()
	for _, nt := range r.chosenSource() {
		r.chosenState = append(r.chosenState, torch.Named{Name: nt.Name, Tensor: s.Keep(s.Clone(nt.Tensor))})
	}
	if err := s.Err(); err != nil {
		r.dropChosenState()
		return fmt.Errorf("keep the chosen epoch: %w", err)
	}
	return nil
}

func (r *Run) dropChosenState() {
	for _, nt := range r.chosenState {
		nt.Tensor.Free()
	}
	r.chosenState = nil
}

// ExportChosen writes the chosen epoch's model to ChosenName unless the file holds
// it already, and returns the file's path; "" when the chosen epoch is the latest, so
// that the checkpoint is its model (an earlier epoch's file would only mislead, and
// is removed), or when there is no choice or folder.
func (r *Run) ExportChosen() (string, error) {
	if r.chosen == nil || r.Dir == "" {
		return "", nil
	}
	path := filepath.Join(r.Dir, ChosenName)
	if r.chosen.Epoch == r.epoch {
		r.chosenFile = 0
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return "", fmt.Errorf("remove %s: %w", path, err)
		}
		return "", nil
	}
	if r.chosenFile == r.chosen.Epoch {
		return path, nil
	}
	if r.chosenState == nil {
		return "", fmt.Errorf("chosen epoch %d: its model was not kept", r.chosen.Epoch)
	}
	md, err := r.metadata(checkpointMeta{Epoch: r.chosen.Epoch, History: r.History[:r.chosen.Epoch], Chosen: r.chosen})
	if err != nil {
		return "", err
	}
	md["chosen"] = "the epoch whose clustering agreed best with the evaluations before it; no optimiser states, not for --resume"
	if err := torch.SaveSafetensors(path, r.chosenState, md); err != nil {
		return "", err
	}
	r.chosenFile = r.chosen.Epoch
	return path, nil
}

// checkPrior refuses a saved prior (tensor name of f) that is not a distribution
// over k clusters, 1×k float32: libtorch would broadcast another shape or cast
// another type, and a file written by another tool would cluster by it silently.
func checkPrior(f *torch.SafeFile, name string, k int) error {
	dt, _ := f.DType(name)
	shape, ok := f.Shape(name)
	if !ok {
		return fmt.Errorf("%s: no tensor %q; a run with a learned prior saves one", f.Path, name)
	}
	if dt != torch.Float32 || !slices.Equal(shape, []int{1, k}) {
		return fmt.Errorf("%s: the prior is %v of shape %v; a run of %d clusters saves float32 of [1 %d] (the file is damaged, or not emclust's)", f.Path, dt, shape, k, k)
	}
	s := torch.NoGrad()
	defer s.Close()
	p := s.Float32s(s.LoadTensor(f, name, torch.CPU))
	if err := s.Err(); err != nil {
		return err
	}
	sum := 0.0
	for j, v := range p {
		if !(v >= 0) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%s: the prior of cluster %d is %g, not a probability (the file is damaged, or not emclust's)", f.Path, j, v)
		}
		sum += float64(v)
	}
	// A running mean of posteriors sums to 1 but for float32's rounding, far below.
	if math.Abs(sum-1) > 1e-3 {
		return fmt.Errorf("%s: the prior sums to %g, not 1 (the file is damaged, or not emclust's)", f.Path, sum)
	}
	return nil
}

package compare

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"emclust/eval"
	"emclust/train"
)

// Stat summarises one score of one method over its seeds.
type Stat struct {
	Mean   float64 `json:"mean"`
	Margin float64 `json:"margin"` // half-width of the 95% confidence interval of the mean (Student's t)
	Std    float64 `json:"std"`    // sample standard deviation
	N      int     `json:"n"`
}

// NewStat summarises xs with eval.MeanCI95.
func NewStat(xs []float64) Stat {
	mean, margin := eval.MeanCI95(xs)
	_, std := eval.MeanStd(xs)
	return Stat{Mean: mean, Margin: margin, Std: std, N: len(xs)}
}

// String formats s as "0.6000 ± 0.2484", or the mean alone from a single run, where
// no interval can be estimated (a "± 0.0000" would claim certainty instead).
func (s Stat) String() string {
	switch {
	case s.N == 0 || math.IsNaN(s.Mean):
		return "—"
	case s.N == 1:
		return fmt.Sprintf("%.4f", s.Mean)
	}
	return fmt.Sprintf("%.4f ± %.4f", s.Mean, s.Margin)
}

// Summary is one row of the table: a method over all its seeds.
type Summary struct {
	Method  string  `json:"method"`
	Runs    int     `json:"runs"`
	ACC     Stat    `json:"acc"`
	NMI     Stat    `json:"nmi"`
	ARI     Stat    `json:"ari"`
	Seconds float64 `json:"seconds"` // mean wall time of a run
	// Features is set on a baseline's summary taken from Report.OtherFeatures:
	// "raw" or "standardized", the features its runs clustered.
	Features string `json:"features,omitempty"`
}

// Summarize groups results by method, in the order of methods; a method without
// results is left out.
func Summarize(results []Result, methods []string) []Summary {
	var out []Summary
	for _, m := range methods {
		var acc, nmi, ari, secs []float64
		for _, r := range results {
			if r.Method == m {
				acc, nmi, ari, secs = append(acc, r.ACC), append(nmi, r.NMI), append(ari, r.ARI), append(secs, r.Seconds)
			}
		}
		if len(acc) == 0 {
			continue
		}
		meanSecs, _ := eval.MeanStd(secs)
		out = append(out, Summary{Method: m, Runs: len(acc), ACC: NewStat(acc), NMI: NewStat(nmi), ARI: NewStat(ari), Seconds: meanSecs})
	}
	return out
}

// Report is a whole comparison: what was compared on which data, every run, and the
// per-method summaries. It is what compare --json prints.
type Report struct {
	Data string `json:"data"`
	N    int    `json:"n"`
	// Scored is how many of the N rows have a class, where some have none (an empty
	// label cell): the scores count those. 0: all have one.
	Scored int      `json:"scored_rows,omitempty"`
	K      int      `json:"k"`
	Seeds  []uint64 `json:"seeds"`
	Epochs int      `json:"epochs,omitempty"` // of the neural methods; 0 when only baselines ran
	// Restarts per seed of the neural methods, when more than one.
	Restarts int `json:"restarts,omitempty"`
	// KeepBy is what kept one of the restarts (train.Config.KeepBy).
	KeepBy string `json:"keep_by,omitempty"`
	// TrialEpochs: the restarts were trials of that many epochs (train.TrainTrials).
	TrialEpochs int `json:"trial_epochs,omitempty"`
	// ChoosesNetwork: each neural run trained the MLP and the linear map and kept one
	// (train.Config.HiddenAuto); Result.Network says which.
	ChoosesNetwork bool   `json:"chooses_network,omitempty"`
	Device         string `json:"device"`
	// Standardized: the vectors were z-scored (by the rule or as asked).
	Standardized bool      `json:"standardized,omitempty"`
	Runs         []Result  `json:"runs"`
	Methods      []Summary `json:"methods"`
	// OtherFeatures is the baselines' comparison on the other choice of
	// standardisation (PreferBaselines), with its runs.
	OtherFeatures *Report `json:"other_features,omitempty"`
}

// PreferBaselines takes other, the same baselines on the other choice of
// standardisation, and shows each baseline at its better mean ACC: a baseline's
// summary is replaced by other's where that is higher, marked with its features.
// The labels choose, so this is the strongest baseline, not a rule a user could
// apply; the neural methods keep the features their rule chose.
func (r *Report) PreferBaselines(other *Report) {
	r.OtherFeatures = other
	features := "raw"
	if other.Standardized {
		features = "standardized"
	}
	for i, s := range r.Methods {
		if Neural(s.Method) {
			continue
		}
		for _, o := range other.Methods {
			if o.Method == s.Method && o.ACC.Mean > s.ACC.Mean {
				o.Features = features
				r.Methods[i] = o
			}
		}
	}
}

// NewReport summarises results for the methods of opt.
func NewReport(data string, n int, opt Options, device string, results []Result) *Report {
	r := &Report{Data: data, N: n, K: opt.Train.K, Seeds: opt.Seeds, Device: device, Runs: results,
		Methods: Summarize(results, opt.Methods)}
	for _, m := range opt.Methods {
		if Neural(m) {
			r.Epochs = opt.Train.EpochsFor(n)
			if opt.Train.Restarts > 1 {
				r.Restarts, r.KeepBy, r.TrialEpochs = opt.Train.Restarts, opt.Train.KeepBy, opt.Train.TrialEpochs
			}
			r.ChoosesNetwork = len(train.NetworkCandidates(opt.Train)) > 1
		}
	}
	return r
}

// Markdown renders the report as a header line and a table like the paper's: a row per
// method, its scores as mean ± margin, and the mean seconds a run took. Cells are
// padded so the table also reads as plain text.
func (r *Report) Markdown() string {
	seeds := make([]string, len(r.Seeds))
	for i, s := range r.Seeds {
		seeds[i] = fmt.Sprint(s)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: N=%d", r.Data, r.N)
	if r.Scored > 0 {
		fmt.Fprintf(&b, ", scored on %d labelled rows", r.Scored)
	}
	fmt.Fprintf(&b, ", K=%d, %s (%s)", r.K, plural(len(r.Seeds), "seed"), strings.Join(seeds, ","))
	if r.Epochs > 0 {
		fmt.Fprintf(&b, ", %s", plural(r.Epochs, "epoch"))
	}
	if r.Restarts > 0 {
		fmt.Fprintf(&b, ", %s", restartsNote(r.Restarts, r.KeepBy, r.TrialEpochs))
	}
	if r.ChoosesNetwork {
		b.WriteString(", " + networkNote)
	}
	fmt.Fprintf(&b, ", device %s", r.Device)
	if len(r.Seeds) > 1 {
		b.WriteString("; mean ± 95% confidence half-width (Student's t over seeds)")
	}
	b.WriteString("\n\n")

	rows := [][]string{{"method", "ACC", "NMI", "ARI", "s/run"}}
	for _, s := range r.Methods {
		method := s.Method
		if s.Features != "" {
			method += " (" + s.Features + ")"
		}
		rows = append(rows, []string{method, s.ACC.String(), s.NMI.String(), s.ARI.String(), formatSeconds(s.Seconds)})
	}
	writeTable(&b, rows)
	notes := r.networkNotes()
	if r.OtherFeatures != nil {
		notes = append(notes, otherFeaturesNote)
	}
	if n := r.resumedRuns(); n > 0 {
		what := "1 run went on from an earlier sitting (compare --resume): its s/run counts"
		if n > 1 {
			what = fmt.Sprintf("%d runs went on from an earlier sitting (compare --resume): their s/run counts", n)
		}
		notes = append(notes, what+" the last sitting only.")
	}
	for _, n := range append(notes, r.regNotes()...) {
		b.WriteString("\n" + n + "\n")
	}
	return b.String()
}

// resumedRuns counts the runs trained over more than one sitting.
func (r *Report) resumedRuns() int {
	n := 0
	for _, run := range r.Runs {
		if run.Resumed {
			n++
		}
	}
	return n
}

// otherFeaturesNote explains a baseline row marked with the features it ran on
// (PreferBaselines).
const otherFeaturesNote = "Each baseline ran on the raw and on the standardized features, and its row shows the better: " +
	"marked (raw) or (standardized) where those are not the features the title names. " +
	"The labels chose, so that is the strongest baseline, not a rule emclust could apply."

// networkNote says how the neural runs chose their network (train.NetworkCandidates).
const networkNote = "network: the MLP or the linear map (learned prior), whichever has the higher silhouette of those that use at least 70% of the clusters"

// networkNotes says, for each neural method that chose its network, which it kept
// for how many seeds.
func (r *Report) networkNotes() []string {
	if !r.ChoosesNetwork {
		return nil
	}
	var notes []string
	for _, s := range r.Methods {
		if !Neural(s.Method) {
			continue
		}
		linear := 0
		for _, run := range r.Runs {
			if run.Method == s.Method && run.Network == "linear" {
				linear++
			}
		}
		every := fmt.Sprintf("each of the %d seeds", s.Runs)
		if s.Runs == 1 {
			every = "its one seed"
		}
		switch linear {
		case 0:
			notes = append(notes, fmt.Sprintf("%s kept the MLP for %s.", s.Method, every))
		case s.Runs:
			notes = append(notes, fmt.Sprintf("%s kept the linear map for %s.", s.Method, every))
		default:
			notes = append(notes, fmt.Sprintf("%s kept the linear map for %d of %s and the MLP for the rest.", s.Method, linear, plural(s.Runs, "seed")))
		}
	}
	return notes
}

// SuiteMarkdown renders several reports of the same methods and seeds as one table:
// a row per data set, its ACC per method as mean ± margin, the best mean in bold.
func SuiteMarkdown(reps []*Report) string {
	var b strings.Builder
	if len(reps) == 0 {
		return ""
	}
	first := reps[0]
	how := "" // how the runs were made, after the seeds
	if first.Restarts > 0 {
		how = ", " + restartsNote(first.Restarts, first.KeepBy, first.TrialEpochs)
	}
	if first.ChoosesNetwork {
		how += ", " + networkNote
	}
	for _, r := range reps {
		if r.OtherFeatures != nil {
			how += "; each baseline on the features, raw or standardized, it scored higher on (marked where not the row's)"
			break
		}
	}
	fmt.Fprintf(&b, "suite: ACC, %s%s, device %s; mean ± 95%% confidence half-width (Student's t over seeds)\n\n",
		plural(len(first.Seeds), "seed"), how, first.Device)
	head := []string{"data", "N", "K"}
	for _, m := range first.Methods {
		head = append(head, m.Method)
	}
	rows := [][]string{head}
	for _, r := range reps {
		row := []string{r.Data, fmt.Sprint(r.N), fmt.Sprint(r.K)}
		best := 0.0
		for _, m := range r.Methods {
			best = max(best, m.ACC.Mean)
		}
		for _, name := range head[3:] {
			cell := "—"
			for _, m := range r.Methods {
				if m.Method == name {
					cell = m.ACC.String()
					if m.ACC.Mean == best {
						cell = "**" + cell + "**"
					}
					if m.Features != "" {
						cell += " (" + m.Features + ")"
					}
				}
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	writeTable(&b, rows)
	noted := false
	for _, r := range reps {
		for _, n := range r.networkNotes() {
			fmt.Fprintf(&b, "\n%s: %s", r.Data, n)
			noted = true
		}
	}
	if noted {
		b.WriteString("\n")
	}
	return b.String()
}

// writeTable writes rows (the first is the header) as a markdown table padded to read
// as plain text: the first column left-aligned, the others right.
func writeTable(b *strings.Builder, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for j, c := range row {
			width[j] = max(width[j], utf8.RuneCountInString(c), 3)
		}
	}
	line := func(cells []string) {
		b.WriteString("|")
		for j, c := range cells {
			pad := strings.Repeat(" ", width[j]-utf8.RuneCountInString(c))
			if j == 0 {
				fmt.Fprintf(b, " %s%s |", c, pad) // names left, numbers right
			} else {
				fmt.Fprintf(b, " %s%s |", pad, c)
			}
		}
		b.WriteString("\n")
	}
	line(rows[0])
	rule := make([]string, len(width))
	for j, w := range width {
		if j == 0 {
			rule[j] = ":" + strings.Repeat("-", w-1)
		} else {
			rule[j] = strings.Repeat("-", w-1) + ":"
		}
	}
	line(rule)
	for _, row := range rows[1:] {
		line(row)
	}
}

// regNotes lists the GMM runs that needed more than the usual covariance
// regulariser, since they fit a slightly different model: those of the runs each
// row summarises (OtherFeatures' for a row taken from there).
func (r *Report) regNotes() []string {
	var notes []string
	for _, s := range r.Methods {
		runs := r.Runs
		if s.Features != "" && r.OtherFeatures != nil {
			runs = r.OtherFeatures.Runs
		}
		var parts []string
		for _, reg := range GMMRegs[1:] {
			var seeds []string
			for _, run := range runs {
				if run.Method == s.Method && run.Reg == reg {
					seeds = append(seeds, fmt.Sprint(run.Seed))
				}
			}
			switch len(seeds) {
			case 0:
			case 1:
				parts = append(parts, fmt.Sprintf("%g for seed %s", reg, seeds[0]))
			default:
				parts = append(parts, fmt.Sprintf("%g for seeds %s", reg, strings.Join(seeds, ", ")))
			}
		}
		if len(parts) > 0 {
			notes = append(notes, fmt.Sprintf("%s: covariance regulariser raised from %g (a float32 covariance was not positive definite): %s.",
				s.Method, GMMRegs[0], strings.Join(parts, "; ")))
		}
	}
	return notes
}

// formatSeconds keeps two significant decimals for the fast baselines without
// printing hours of training to the millisecond.
func formatSeconds(s float64) string {
	if s < 10 {
		return fmt.Sprintf("%.2f", s)
	}
	return fmt.Sprintf("%.1f", s)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// restartsNote says how many restarts each seed trained and what kept one, as
// train.TrainRestarts (or, with trial epochs, train.TrainTrials) decides.
func restartsNote(n int, keepBy string, trialEpochs int) string {
	if trialEpochs > 0 {
		return fmt.Sprintf("%d trials of %s per seed, the one that agreed most with itself trained on", n, plural(trialEpochs, "epoch"))
	}
	return fmt.Sprintf("%d restarts per seed kept by %s", n, train.KeptBy(keepBy, n))
}

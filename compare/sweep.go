package compare

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"emclust/eval"
	"emclust/torch"
	"emclust/train"
)

// SweepOptions configure SweepK: one neural method trained at several K, each over
// the same seeds. A user without labels reads the label-free columns of its report to
// choose K; labels, where the data have them, only add a reference column.
type SweepOptions struct {
	Method string
	Ks     []int
	Seeds  []uint64
	Train  train.Config // K and Seed are set per run, Objective to Method; one run a seed
	Device torch.Device
	// Done, when set, is called after each run with how many are done of how many.
	Done func(r KRun, done, total int)
}

// KRun is one run of a sweep: the label-free criteria of its final eval-mode
// clustering, and its scores against the labels when there are labels.
type KRun struct {
	K        int            `json:"k"`
	Seed     uint64         `json:"seed"`
	Criteria train.Criteria `json:"criteria"`
	Empty    int            `json:"empty_clusters"`
	NMI      *float64       `json:"nmi,omitempty"`
	ACC      *float64       `json:"acc,omitempty"`
	Seconds  float64        `json:"seconds"`
	clusters []int          // for the agreement between seeds
}

// CheckKs rejects a K list that cannot be swept: fewer than two values, a repeat, or
// a K below 2 or above the rows.
func CheckKs(ks []int, rows int) error {
	if len(ks) < 2 {
		return errors.New("a sweep needs at least two values of K")
	}
	for i, k := range ks {
		if k < 2 {
			return fmt.Errorf("K = %d: want at least 2", k)
		}
		if rows > 0 && k > rows {
			return fmt.Errorf("K = %d: want 2 to %d (the rows of data)", k, rows)
		}
		if slices.Contains(ks[:i], k) {
			return fmt.Errorf("K = %d given twice", k)
		}
	}
	return nil
}

// SweepK trains opt.Method at every K of opt.Ks for every seed, K by K, the seeds of
// a K as restarts train (train.TrainSeeds). When ctx is cancelled it returns the K
// finished so far with an error wrapping ctx's.
func SweepK(ctx context.Context, src train.Source, opt SweepOptions) ([]KRun, error) {
	if !Neural(opt.Method) {
		return nil, fmt.Errorf("compare: a K sweep trains a network; %q is not one of its objectives", opt.Method)
	}
	if err := CheckKs(opt.Ks, src.Len()); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	if err := CheckSeeds(opt.Seeds); err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	for _, k := range opt.Ks {
		cfg := opt.Train
		cfg.Objective, cfg.K = opt.Method, k
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("compare: K = %d: %w", k, err)
		}
	}
	total := len(opt.Ks) * len(opt.Seeds)
	runs := make([]KRun, 0, total)
	for _, k := range opt.Ks {
		if err := ctx.Err(); err != nil {
			return runs, fmt.Errorf("compare: stopped after %d of %d runs: %w", len(runs), total, err)
		}
		krs, err := opt.runK(ctx, src, k)
		if err != nil {
			return runs, fmt.Errorf("compare: K = %d: %w", k, err)
		}
		for _, r := range krs {
			runs = append(runs, r)
			if opt.Done != nil {
				opt.Done(r, len(runs), total)
			}
		}
	}
	return runs, nil
}

// runK trains opt.Method at k for every seed, as restarts train (side by side and
// stacked where they would be), and scores each run. A run's seconds are its share of
// the time all took.
func (opt *SweepOptions) runK(ctx context.Context, src train.Source, k int) ([]KRun, error) {
	cfg := opt.Train
	cfg.Objective, cfg.K = opt.Method, k
	start := time.Now()
	trained, err := train.TrainSeeds(ctx, cfg, opt.Seeds, src, opt.Device)
	defer func() {
		for _, r := range trained {
			if r != nil {
				r.Close()
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	out := make([]KRun, len(trained))
	for i, run := range trained {
		pred, err := train.PredictWithCriteria(run.Net, src, opt.Device, run.Prior(), run.Cfg.GammaVal)
		if err != nil {
			return nil, fmt.Errorf("seed %d: predict: %w", opt.Seeds[i], err)
		}
		out[i] = KRun{K: k, Seed: opt.Seeds[i], Criteria: *pred.Criteria, Empty: emptyClusters(pred.Cluster, k), clusters: pred.Cluster}
		if labels := src.Labels(); labels != nil {
			sc, err := eval.ScoreLabelled(labels, pred.Cluster)
			if err != nil {
				return nil, err
			}
			out[i].NMI, out[i].ACC = &sc.NMI, &sc.ACC
		}
	}
	each := time.Since(start).Seconds() / float64(len(out))
	for i := range out {
		out[i].Seconds = each
	}
	return out, nil
}

// KSummary is one row of a sweep's table: a K over its seeds.
type KSummary struct {
	K             int     `json:"k"`
	Runs          int     `json:"runs"`
	LogLikelihood Stat    `json:"log_likelihood"`
	MaxPosterior  Stat    `json:"max_posterior"`
	SizeEntropy   Stat    `json:"size_entropy"`
	Empty         float64 `json:"empty_clusters"` // mean over seeds
	// Agreement is the adjusted Rand index between the clusterings of every two
	// seeds: how reproducible the clustering at this K is. Its values are each
	// seed's mean index with the others (seedAgreement). It needs two seeds (nil
	// with one).
	Agreement *Stat   `json:"agreement,omitempty"`
	NMI       *Stat   `json:"nmi,omitempty"`
	Seconds   float64 `json:"seconds"`
}

// SweepReport is a whole sweep, what compare --k --json prints.
type SweepReport struct {
	Data    string     `json:"data"`
	N       int        `json:"n"`
	Method  string     `json:"method"`
	Seeds   []uint64   `json:"seeds"`
	Epochs  int        `json:"epochs"`
	Device  string     `json:"device"`
	Runs    []KRun     `json:"runs"`
	Ks      []KSummary `json:"ks"`
	Classes int        `json:"classes,omitempty"` // in the labels, when there are labels
	// Scored is how many rows have a class where some have none: NMI counts those.
	Scored int `json:"scored_rows,omitempty"`
}

// NewSweepReport summarises runs per K, in the order of opt.Ks. classes is the
// number of classes in the labels (0 without labels).
func NewSweepReport(data string, n int, opt SweepOptions, device string, runs []KRun, classes int) (*SweepReport, error) {
	rep := &SweepReport{Data: data, N: n, Method: opt.Method, Seeds: opt.Seeds, Epochs: opt.Train.EpochsFor(n),
		Device: device, Runs: runs, Classes: classes}
	for _, k := range opt.Ks {
		var ll, mp, se, empty, secs, nmi []float64
		var clusterings [][]int
		for _, r := range runs {
			if r.K != k {
				continue
			}
			ll, mp, se = append(ll, r.Criteria.LogLikelihood), append(mp, r.Criteria.MaxPosterior), append(se, r.Criteria.SizeEntropy)
			empty, secs = append(empty, float64(r.Empty)), append(secs, r.Seconds)
			if r.NMI != nil {
				nmi = append(nmi, *r.NMI)
			}
			clusterings = append(clusterings, r.clusters)
		}
		if len(ll) == 0 {
			continue
		}
		agree, err := seedAgreement(clusterings)
		if err != nil {
			return nil, fmt.Errorf("compare: agreement at K = %d: %w", k, err)
		}
		s := KSummary{K: k, Runs: len(ll), LogLikelihood: NewStat(ll), MaxPosterior: NewStat(mp), SizeEntropy: NewStat(se)}
		if len(agree) > 0 {
			st := NewStat(agree)
			s.Agreement = &st
		}
		s.Empty, _ = eval.MeanStd(empty)
		s.Seconds, _ = eval.MeanStd(secs)
		if len(nmi) > 0 {
			st := NewStat(nmi)
			s.NMI = &st
		}
		rep.Ks = append(rep.Ks, s)
	}
	return rep, nil
}

// seedAgreement is, for each seed's clustering, its mean adjusted Rand index with the
// other seeds': one value per seed, so that the interval over them has as many
// degrees of freedom as seeds, less one. (The S(S−1)/2 pairs share seeds; taken as
// independent they made the interval 0.58 times as wide at 5 seeds.) Two seeds give
// their one pair's index alone, nil fewer.
func seedAgreement(clusterings [][]int) ([]float64, error) {
	n := len(clusterings)
	if n < 2 {
		return nil, nil
	}
	sums := make([]float64, n)
	for i := range clusterings {
		for j := i + 1; j < n; j++ {
			ari, err := eval.ARI(clusterings[i], clusterings[j])
			if err != nil {
				return nil, err
			}
			sums[i] += ari
			sums[j] += ari
		}
	}
	if n == 2 {
		return sums[:1], nil
	}
	for i := range sums {
		sums[i] /= float64(n - 1)
	}
	return sums, nil
}

// Markdown renders the sweep as a header, a row per K, and what the columns can and
// cannot say.
func (r *SweepReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s: N=%d, %s, %s, device %s", r.Method, r.Data, r.N, plural(len(r.Seeds), "seed"), plural(r.Epochs, "epoch"), r.Device)
	if len(r.Seeds) > 1 {
		b.WriteString("; mean ± 95% confidence half-width over seeds")
	}
	b.WriteString("\n\n")
	head := []string{"K", "log-likelihood", "max posterior", "size balance", "empty", "agreement (ARI)"}
	if r.Classes > 0 {
		head = append(head, "NMI vs labels")
	}
	head = append(head, "s/run")
	best := math.Inf(-1)
	for _, s := range r.Ks {
		if s.Agreement != nil {
			best = max(best, s.Agreement.Mean)
		}
	}
	rows := [][]string{head}
	for _, s := range r.Ks {
		agree := optStat(s.Agreement)
		if s.Agreement != nil && s.Agreement.Mean == best {
			agree = "**" + agree + "**"
		}
		row := []string{fmt.Sprint(s.K), s.LogLikelihood.String(), s.MaxPosterior.String(), s.SizeEntropy.String(),
			fmt.Sprintf("%.1f", s.Empty), agree}
		if r.Classes > 0 {
			row = append(row, optStat(s.NMI))
		}
		rows = append(rows, append(row, formatSeconds(s.Seconds)))
	}
	writeTable(&b, rows)
	b.WriteString("\nagreement: adjusted Rand index between the clusterings of every two seeds (1: the same partition),\n" +
		"its margin over each seed's mean index with the others; the K that seeds agree on most (bold) is\n" +
		"the best supported, and on the embedded tables it was the number of classes. size balance:\n" +
		"entropy of the cluster sizes over log K (1: equal sizes). The relevance normalisation keeps\n" +
		"clusters near equal in size, so balance and the log-likelihood move little with K, and the max\n" +
		"posterior tracks how sure the network is, not whether K is right (it fell with K on the digits,\n" +
		"and may rise): read them for a run that went wrong, not to pick K. README's \"Choosing K\" says\n" +
		"what was measured.\n")
	if len(r.Seeds) < 2 {
		b.WriteString("One seed: no agreement to compare; give --seeds 5 or more.\n")
	}
	if r.Classes > 0 {
		scored := ""
		if r.Scored > 0 {
			scored = fmt.Sprintf(" (on %d labelled rows)", r.Scored)
		}
		fmt.Fprintf(&b, "The labels have %d classes; NMI%s is shown for reference and plays no part in the other columns.\n", r.Classes, scored)
	}
	return b.String()
}

// optStat formats a statistic that may be absent.
func optStat(s *Stat) string {
	if s == nil {
		return "—"
	}
	return s.String()
}

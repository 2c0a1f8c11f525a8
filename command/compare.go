package command

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"emclust/atomicfile"
	"emclust/compare"
	"emclust/data"
	"emclust/eval"
	"emclust/launch"
	"emclust/torch"
	"emclust/train"
)

func compareCommand() *cli.Command {
	flags := append(dataFlags("the embedded digits", autoStandardizeHelp), modelFlags()...)
	for i, f := range flags {
		if f.Names()[0] == "k" {
			// One K as in train, or several: a sweep that prints the label-free criteria per K.
			flags[i] = &cli.StringFlag{Name: "k", Usage: "number of clusters, or several (6,8,10,12) to train one neural method at each and print the label-free criteria per K, an aid for choosing K",
				DefaultText: "the number of classes when labels are known, else 10"}
		}
	}
	flags = append(flags,
		&cli.StringFlag{Name: "methods", Usage: "methods to compare, comma-separated: " + strings.Join(compare.Methods(), ", "),
			DefaultText: strings.Join(compare.DefaultMethods(false), ",") + " for vectors, " + strings.Join(compare.DefaultMethods(true), ",") + " for images"},
		&cli.IntFlag{Name: "seeds", Value: 5, Usage: "run each method with seeds 1..N"},
		&cli.StringFlag{Name: "seed-list", Usage: "run each method with these seeds instead, e.g. 3,7,9"},
		&cli.StringFlag{Name: "markdown", Usage: "also write the table to this file (atomically)"},
		&cli.BoolFlag{Name: "json", Usage: "print every run and the summaries as JSON instead of the table"},
		&cli.StringFlag{Name: "out", Usage: "keep each neural run's folder as DIR/<method>-s<seed> (its score in result.json), what the comparison runs as DIR/compare-plan.json (for --resume), and the JSON report as DIR/compare.json", DefaultText: "keep nothing"},
		&cli.BoolFlag{Name: "force", Usage: "replace an earlier comparison's files in --out and --markdown"},
		&cli.BoolFlag{Name: "resume", Usage: "go on with the comparison stopped in --out (Ctrl-C, a killed job): give the command line it began with and --resume; runs that finished are not trained again, and a stopped one goes on from its checkpoint"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress lines on stderr"},
		&cli.IntFlag{Name: "restarts", Usage: "neural methods: train R restarts per seed and keep the one --keep-by chooses, as train --restarts does (seed s trains seeds s·R … s·R+R−1)", DefaultText: fmt.Sprintf("%d for vectors; %d trials for images, 1 where --epochs is at most %d; with --keep-by, give it; 1 in a K sweep", train.DefaultVectorRestarts, train.DefaultImageTrials, train.DefaultImageTrials*train.DefaultTrialEpochs)},
		&cli.IntFlag{Name: "trial-epochs", Usage: "with --restarts R on images: each restart trains this many epochs and the one whose clustering agreed most with its own earlier evaluations goes on, as train --trial-epochs does; 0: restarts train whole runs", DefaultText: fmt.Sprintf("%d on images with several restarts and more epochs than that; 0 with --keep-by, or where one seed trains", train.DefaultTrialEpochs)},
		&cli.BoolFlag{Name: "suite", Usage: "compare on every embedded table (" + strings.Join(data.TableNames(), ", ") + ") with the defaults, and print one table of ACC"},
		&cli.StringFlag{Name: "tables", Usage: "with --suite: these CSV or Parquet tables instead of the embedded ones, each with the label column --label-col names: comma-separated files, or a folder's *.csv, *.csv.gz and *.parquet (data/heldout holds five that the defaults were not chosen on)"},
	)
	return &cli.Command{
		Name:  "compare",
		Usage: "compare methods over several seeds: mean ± 95% confidence margin of ACC, NMI and ARI",
		UsageText: "emclust compare [--dataset NAME --data-dir D | --data FILE.csv --label-col C] " +
			"--methods em,kmeans,gmm-diag,gmm-full --seeds 5 [--markdown table.md] [--json] [--out DIR]",
		Description: "Runs every method once per seed on the same data and prints a markdown table with a row per\n" +
			"method: ACC, NMI and ARI as mean ± the half-width of their 95% confidence interval (Student's t\n" +
			"over seeds), and the mean seconds a run took. The data need labels. Neural methods train like\n" +
			"emclust train and are scored on their final eval-mode clustering. The baselines cluster the same\n" +
			"features, and where the standardisation was left to the rule, also the other choice (raw or\n" +
			"standardized); each shows the better, marked. The same seeds give the same numbers on the CPU.\n\n" +
			"With several values of --k (say --k 6,8,10,12) it trains one neural method (--methods, default em\n" +
			"for vectors, twofold for images) at each K over the seeds instead, and prints per K the criteria\n" +
			"that need no labels: log-likelihood, mean max posterior, size balance, empty clusters and the\n" +
			"agreement between seeds. Labels are not needed then; where there are some, NMI is shown beside.",
		Flags:  flags,
		Action: action(compareOptionsFrom, runCompare),
	}
}

type compareOptions struct {
	Run           newRun // the neural methods' training config
	Methods       []string
	Seeds         []uint64
	Out, Markdown string
	Force, Resume bool
	JSON, Quiet   bool
	Suite         bool     // every embedded table in turn, or every one of Tables
	Tables        []string // CSV files the suite runs on instead of the embedded tables
	Ks            []int    // several: a K sweep of Methods[0] instead of a comparison
}

// compareOptionsFrom reads and checks everything the command line alone decides,
// before any data are read.
func compareOptionsFrom(c *cli.Context) (compareOptions, error) {
	opts := compareOptions{Out: c.String("out"), Markdown: c.String("markdown"), Force: c.Bool("force"), Resume: c.Bool("resume"),
		JSON: c.Bool("json"), Quiet: c.Bool("quiet"), Suite: c.Bool("suite")}
	var err error
	if opts.Resume && (opts.Out == "" || opts.Force) {
		return opts, usageError{errors.New("--resume goes on with the comparison in --out: give --out, and not --force, which starts it over")}
	}
	if c.IsSet("tables") {
		if !opts.Suite {
			return opts, usageError{errors.New("--tables without --suite: --data compares on one table")}
		}
		if !c.IsSet("label-col") {
			return opts, usageError{errors.New("--tables needs --label-col: compare scores every run against the labels")}
		}
		if opts.Tables, err = suiteTables(c.String("tables")); err != nil {
			return opts, usageError{err}
		}
	}
	if opts.Suite {
		for _, f := range []string{"data", "dataset", "data-dir", "label-col", "drop-cols", "id-col", "header", "out"} {
			if c.IsSet(f) && !((f == "label-col" || f == "drop-cols" || f == "id-col" || f == "header") && opts.Tables != nil) {
				why := "the suite runs on the embedded tables, or on --tables"
				if f == "out" {
					why = "the suite keeps no run folders"
				}
				return opts, usageError{fmt.Errorf("--%s with --suite: %s", f, why)}
			}
		}
	}
	if c.IsSet("k") {
		if opts.Ks, err = parseInts("k", c.String("k"), 1); err != nil || len(opts.Ks) == 0 {
			return opts, usageError{fmt.Errorf("--k %q: want a number of clusters, 2 or more, or several comma-separated", c.String("k"))}
		}
	}
	sweep := len(opts.Ks) > 1
	if sweep {
		if err := compare.CheckKs(opts.Ks, 0); err != nil {
			return opts, usageError{fmt.Errorf("--k: %w", err)}
		}
		for _, f := range []string{"suite", "out", "restarts", "trial-epochs", "keep-by"} {
			if c.IsSet(f) {
				why := "a K sweep trains one run per K and seed, and keeps no run folders"
				if f == "suite" {
					why = "a K sweep trains on one data set"
				}
				return opts, usageError{fmt.Errorf("--%s with several --k: %s", f, why)}
			}
		}
	}
	if opts.Run, err = newRunFrom(c); err != nil {
		return opts, err
	}
	opts.Run.Config.EvalEvery = 0  // only the final clustering is scored
	opts.Run.Config.KMeans = false // k-means is a method of its own here
	if sweep {
		// The sweep's measure is the agreement between single runs (docs/RESULTS.md
		// section 19); restarts chosen by agreement would agree at every K.
		opts.Run.Config.Restarts, opts.Run.Config.TrialEpochs = 1, 0
	}
	images := train.IsImageSet(opts.Run.Config.Dataset)
	opts.Methods = compare.DefaultMethods(images)
	if c.IsSet("methods") {
		if opts.Methods, err = splitList("methods", c.String("methods")); err != nil {
			return opts, err
		}
	}
	if err := compare.CheckMethods(opts.Methods, images); err != nil {
		return opts, usageError{fmt.Errorf("--methods: %w", err)}
	}
	if sweep {
		if !c.IsSet("methods") {
			opts.Methods = opts.Methods[:1] // the data's default neural method
		}
		if len(opts.Methods) != 1 || !compare.Neural(opts.Methods[0]) {
			return opts, usageError{fmt.Errorf("--methods %s with several --k: a K sweep trains one neural method; name one", strings.Join(opts.Methods, ","))}
		}
	}
	if opts.Seeds, err = compareSeeds(c); err != nil {
		return opts, err
	}
	for _, seed := range opts.Seeds {
		if r := opts.Run.Config.Restarts; !train.SeedTakesRestarts(seed, r) {
			return opts, usageError{fmt.Errorf("--seed-list: seed %d's %d restarts would take seeds past 2⁶⁴−1; give smaller seeds", seed, r)}
		}
	}
	return opts, checkCompareOutputs(opts)
}

func runCompare(ctx context.Context, opts compareOptions, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// A second Ctrl-C kills at once.
		<-ctx.Done()
		stop()
	}()
	// The data are read again for the baselines on the other features, and a
	// comparison resumed reads them anew: a pipe holds them once.
	for _, f := range append([]string{opts.Run.Config.DataFile}, opts.Tables...) {
		if f != "" && data.IsStream(f) {
			return usageError{fmt.Errorf("%s is a pipe or device, which compare would need to read more than once; save it to a file first", f)}
		}
	}
	// Only a comparison that replaces one removes the run folders of the one it
	// replaced: --force on a folder of train runs removes none of them.
	replacing := opts.Force && opts.Out != "" && hadComparison(opts.Out)
	if opts.Out != "" {
		// Held until the tables are written: a second comparison in the folder would
		// train the same run folders and write compare.json too, and its outputs
		// were checked before this one wrote any.
		out := &runFolder{dir: opts.Out, made: firstMissing(opts.Out)}
		lock, err := train.LockDir(opts.Out)
		if err != nil {
			out.removeMade()
			return err
		}
		defer func() {
			lock.Close()
			// A comparison that wrote nothing (it failed on its data, say) leaves
			// no folder made for it.
			if entries, err := os.ReadDir(opts.Out); err == nil && len(entries) == 1 && entries[0].Name() == train.LockName {
				os.Remove(filepath.Join(opts.Out, train.LockName))
				out.removeMade()
			}
		}()
		if err := checkCompareOutputs(opts); err != nil {
			return err
		}
		// What a comparison killed while writing them left; the lock keeps out any
		// other writer.
		for _, name := range []string{"compare.json", comparePlanName} {
			atomicfile.RemoveStale(filepath.Join(opts.Out, name))
		}
	}
	dev, err := selectDevice(opts.Run.Config.Device)
	if err != nil {
		return err
	}
	if opts.Run.Config.Threads > 0 {
		if err := torch.SetNumThreads(opts.Run.Config.Threads); err != nil {
			return err
		}
	}
	log := stderr
	if opts.Quiet {
		log = io.Discard
	}
	if len(opts.Ks) > 1 {
		return runSweep(ctx, opts, dev, log, stdout)
	}
	if opts.Suite {
		var reps []*compare.Report
		cfgs := suiteConfigs(opts)
		// Every table is read first: one that cannot be compared (no --label-col
		// column, say) would otherwise end the suite after the tables before it
		// trained, and the suite prints its table whole or not at all.
		for _, cfg := range cfgs {
			src, err := openCompared(opts, &cfg, dev)
			if err != nil {
				return fmt.Errorf("%s: %w", train.DataName(cfg), err)
			}
			src.Close()
		}
		for _, cfg := range cfgs {
			rep, err := compareOn(ctx, opts, cfg, dev, log, stderr)
			if err == nil {
				err = baselinesOnOtherFeatures(ctx, opts, cfg, rep, dev, log)
			}
			var ie interruptedError
			if errors.As(err, &ie) {
				// Nothing is printed: the suite's table would be partial.
				return interruptedError{fmt.Errorf("interrupted on %s, after %d of %d tables; the suite prints its table whole or not at all, and wrote nothing",
					train.DataName(cfg), len(reps), len(cfgs))}
			}
			if err != nil {
				return fmt.Errorf("%s: %w", train.DataName(cfg), err)
			}
			reps = append(reps, rep)
		}
		return writeSuite(reps, opts, stdout)
	}
	rep, err := compareOn(ctx, opts, opts.Run.Config, dev, log, stderr)
	var ie interruptedError
	if errors.As(err, &ie) && rep != nil && len(rep.Runs) > 0 {
		// Print what finished, but write no files: a partial table saved under the
		// name asked for could later pass for the whole comparison.
		finished := make([]int, len(opts.Methods))
		for _, r := range rep.Runs {
			finished[slices.Index(opts.Methods, r.Method)]++
		}
		done := seedsDone(opts.Methods, finished, len(opts.Seeds))
		if perr := printPartial(rep, opts.JSON, done, stdout); perr != nil {
			return perr
		}
		return interruptedError{fmt.Errorf("interrupted after %d of %d runs; %s covers those, and %s",
			len(rep.Runs), len(opts.Methods)*len(opts.Seeds), above(opts.JSON), unwritten(opts))}
	}
	if err != nil {
		return err
	}
	if err := baselinesOnOtherFeatures(ctx, opts, opts.Run.Config, rep, dev, log); err != nil {
		if errors.As(err, &ie) {
			if perr := printPartial(rep, opts.JSON, "every run on the features the rule chose, none of the baselines' on the others", stdout); perr != nil {
				return perr
			}
			return interruptedError{fmt.Errorf("interrupted while the baselines ran on the other choice of standardisation; %s shows every run on the features the rule chose, and %s", above(opts.JSON), unwritten(opts))}
		}
		return err
	}
	if err := writeCompare(rep, opts, stdout); err != nil {
		return err
	}
	if replacing {
		return removeEarlierRuns(opts, log)
	}
	return nil
}

// hadComparison reports whether dir holds a comparison's compare.json or plan.
func hadComparison(dir string) bool {
	for _, f := range []string{comparePlanName, "compare.json"} {
		if fi, err := os.Lstat(filepath.Join(dir, f)); err == nil && fi.Mode().IsRegular() {
			return true
		}
	}
	return false
}

// removeEarlierRuns removes, once a comparison replaced with --force is written, the
// run folders in --out of the comparison it replaced that this one did not train
// (other methods or seeds): left, they would sit beside a compare.json that does not
// describe them. Only a folder that a comparison finished (it holds compare's
// result.json) and that no process holds is removed; one holding any file no
// emclust command wrote is kept.
func removeEarlierRuns(opts compareOptions, log io.Writer) error {
	entries, err := os.ReadDir(opts.Out)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	var removed []string
	for _, e := range entries {
		method, seed, ok := runDirName(e.Name())
		if !e.IsDir() || !ok || slices.Contains(opts.Methods, method) && slices.Contains(opts.Seeds, seed) {
			continue // not a run folder, or this comparison's
		}
		run := filepath.Join(opts.Out, e.Name())
		if fi, err := os.Lstat(filepath.Join(run, compare.ResultName)); err != nil || !fi.Mode().IsRegular() || len(foreignInRun(run)) > 0 {
			continue
		}
		lock, err := train.LockDir(run)
		if err != nil {
			continue // in use, by a resumed run say
		}
		err = os.RemoveAll(run)
		lock.Close()
		if err != nil {
			return fmt.Errorf("compare: removing the earlier comparison's %s: %w", run, err)
		}
		removed = append(removed, e.Name())
	}
	if len(removed) > 0 {
		fmt.Fprintf(log, "emclust: removed %s of the replaced comparison, which this one did not train: %s\n",
			plural(len(removed), "run folder"), strings.Join(removed, ", "))
	}
	return nil
}

// suiteTables lists the CSV files --tables names: the comma-separated files as given,
// or a folder's *.csv, *.csv.gz and *.parquet in name order.
func suiteTables(arg string) ([]string, error) {
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
		entries, err := os.ReadDir(arg)
		if err != nil {
			return nil, fmt.Errorf("--tables: %w", err)
		}
		var files []string
		for _, e := range entries {
			if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".csv") || strings.HasSuffix(n, ".csv.gz") || strings.HasSuffix(n, ".parquet")) {
				files = append(files, absPath(filepath.Join(arg, n)))
			}
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("--tables %s: the folder holds no .csv, .csv.gz or .parquet file", arg)
		}
		return files, nil // ReadDir sorts by name
	}
	names, err := splitList("tables", arg)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range names {
		if base := strings.ToLower(strings.TrimSuffix(f, ".gz")); strings.HasSuffix(base, ".npy") {
			// Was "has no labels (give --label-col for a CSV)", --label-col given.
			return nil, usageError{fmt.Errorf("--tables: %s is a NumPy array, which holds no labels; the suite scores CSV tables by their --label-col", f)}
		}
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("--tables: %w", err)
		}
		if slices.Contains(files, absPath(f)) {
			return nil, usageError{fmt.Errorf("--tables: %s given twice", f)}
		}
		files = append(files, absPath(f))
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("--tables %q: name CSV files or a folder of them", arg)
	}
	return files, nil
}

// suiteConfigs are the suite's data sets, each with opts' training config: the
// embedded tables, or the files of --tables (each standardised or not by the rule
// train.OpenSource applies, unless --standardize says).
func suiteConfigs(opts compareOptions) []train.Config {
	var cfgs []train.Config
	if opts.Tables == nil {
		for _, name := range data.TableNames() {
			cfg := opts.Run.Config
			cfg.Dataset = name
			cfgs = append(cfgs, cfg)
		}
		return cfgs
	}
	for _, f := range opts.Tables {
		cfg := opts.Run.Config
		cfg.Dataset, cfg.DataFile = "", f
		cfgs = append(cfgs, cfg)
	}
	return cfgs
}

// baselinesOnOtherFeatures runs the baselines of opts again on the vectors of cfg
// with the other choice of standardisation, when the rule chose it, and has rep show
// each at its better (compare.Report.PreferBaselines): a comparison asks whether
// emclust beats the strongest baseline, and k-means on wine scored 0.70 raw and 0.97
// standardized (docs/RESULTS.md section 17).
func baselinesOnOtherFeatures(ctx context.Context, opts compareOptions, cfg train.Config, rep *compare.Report, dev torch.Device, log io.Writer) error {
	var baselines []string
	for _, m := range opts.Methods {
		if !compare.Neural(m) {
			baselines = append(baselines, m)
		}
	}
	if !cfg.StandardizeAuto || len(baselines) == 0 || train.IsImageSet(cfg.Dataset) {
		return nil
	}
	cfg.StandardizeAuto, cfg.Standardize = false, !rep.Standardized
	opts.Methods = baselines
	opts.Out = "" // baselines keep no folders, and the plan is the comparison's
	// Warned of by the comparison these baselines join.
	other, err := compareOn(ctx, opts, cfg, dev, log, nil)
	if err != nil {
		return err
	}
	rep.PreferBaselines(other)
	return nil
}

// openCompared opens cfg's data for a comparison, which scores against their labels,
// and resolves cfg's settings on them.
func openCompared(opts compareOptions, cfg *train.Config, dev torch.Device) (train.Source, error) {
	src, err := train.OpenSource(cfg, dev)
	if err != nil {
		return nil, err
	}
	if src.Labels() == nil {
		err = usageError{fmt.Errorf("%s has no labels, and compare scores every run against them (give --label-col for a CSV)", src.Describe())}
	}
	if err == nil {
		err = opts.Run.resolve(cfg, dev, src)
	}
	if err == nil {
		err = checkK(cfg, src, opts.Run.KSet)
	}
	if err != nil {
		src.Close()
		return nil, err
	}
	return src, nil
}

// compareOn runs every method and seed of opts on the data cfg names, warning on warn
// (nil: not) of what the data make of the settings. Interrupted, it returns the report
// of the runs that finished and an interruptedError.
func compareOn(ctx context.Context, opts compareOptions, cfg train.Config, dev torch.Device, log, warn io.Writer) (*compare.Report, error) {
	methods, seeds := opts.Methods, opts.Seeds
	src, err := openCompared(opts, &cfg, dev)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if w := opts.Run.partialKWarning(&cfg, src); w != "" && warn != nil {
		fmt.Fprintln(warn, w) // on --quiet too
	}
	plan := ""
	if opts.Out != "" {
		if plan, err = keepPlan(opts, cfg, src.Len(), dev); err != nil {
			return nil, err
		}
	}

	deviceName := deviceLabel(dev)
	features := "" // vectors: which features, since the baselines may run on both
	if !train.IsImageSet(cfg.Dataset) {
		features = map[bool]string{true: " (standardized)", false: " (raw)"}[cfg.Standardize]
	}
	fmt.Fprintf(log, "emclust: %s%s on %s; %s × %s\n", src.Describe(), features, deviceName, strings.Join(methods, ","), plural(len(seeds), "seed"))
	warnData(log, src)
	opt := compare.Options{Methods: methods, Seeds: seeds, Train: cfg, Device: dev, Dir: opts.Out, Replace: opts.Force, Resume: opts.Resume, Plan: plan,
		Done: func(r compare.Result, done, total int) {
			when := ""
			switch {
			case r.Earlier:
				when = " (an earlier sitting's)"
			case r.Resumed:
				when = " (resumed)"
			}
			fmt.Fprintf(log, "emclust: [%*d/%d] %-8s seed %-3d ACC %.4f NMI %.4f ARI %.4f  %.1fs%s\n",
				len(strconv.Itoa(total)), done, total, r.Method, r.Seed, r.ACC, r.NMI, r.ARI, r.Seconds, when)
		}}
	var bar *runBar
	var restarts *restartsProgress
	if log != io.Discard {
		// A neural run takes minutes to hours: a bar with its rate and ETA meanwhile,
		// or off a terminal a line a minute.
		opt.Progress = func(method string, seed uint64) (train.Progress, train.RestartHooks) {
			name := fmt.Sprintf("%s seed %d", method, seed)
			what := name + ": restarts"
			if cfg.TrialEpochs > 0 {
				what = name + ": trials"
			}
			restarts = newRestartsProgress(log, false, cfg.RestartRuns(), what)
			if !launch.IsTerminal(log) {
				return newRunLines(log, name), restarts.hooks(func(int, train.Restart) {})
			}
			bar = &runBar{w: log, name: name}
			return bar, restarts.hooks(func(int, train.Restart) {})
		}
	}
	results, err := compare.Run(ctx, src, opt)
	if err != nil {
		// A run stopped part-way leaves its bar drawn: the message starts a line.
		bar.clear()
		restarts.clear()
	}
	interrupted := errors.Is(err, context.Canceled)
	if err != nil && !interrupted {
		return nil, err
	}
	rep := compare.NewReport(dataLabel(cfg), src.Len(), opt, deviceName, results)
	rep.Standardized = cfg.Standardize
	rep.Scored = eval.ScoredRows(src.Labels())
	if interrupted {
		if len(results) == 0 {
			return nil, interruptedError{fmt.Errorf("interrupted before the first of %d runs finished; %s", len(methods)*len(seeds), unwritten(opts))}
		}
		return rep, interruptedError{context.Canceled}
	}
	return rep, nil
}

// writeSuite prints the suite, one table of ACC over the embedded tables or every
// report as JSON, then writes --markdown (after, as writeCompare).
func writeSuite(reps []*compare.Report, opts compareOptions, stdout io.Writer) error {
	md := compare.SuiteMarkdown(reps)
	if opts.JSON {
		js, err := json.Marshal(reps)
		if err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		fmt.Fprintln(stdout, string(js))
	} else {
		fmt.Fprint(stdout, md)
	}
	if path := opts.Markdown; path != "" {
		return atomicfile.WriteBytes(path, []byte(md))
	}
	return nil
}

// deviceLabel names the device in a report, with the CPU's thread count.
func deviceLabel(dev torch.Device) string {
	if dev.CUDA {
		return dev.String()
	}
	return fmt.Sprintf("%s (%s)", dev, plural(torch.NumThreads(), "thread"))
}

// dataLabel names the data in a report, saying when they were standardized.
func dataLabel(cfg train.Config) string {
	if cfg.Standardize {
		return train.DataName(cfg) + " (standardized)"
	}
	return train.DataName(cfg)
}

// printCompare prints a report (a comparison or a K sweep): the table, or the JSON
// with --json.
func printCompare(rep interface{ Markdown() string }, asJSON bool, stdout io.Writer) error {
	return printReport(rep, asJSON, false, stdout)
}

// printPartial prints what an interrupted comparison finished: the table after a
// line saying how much that is (done), as its heading names every seed asked for;
// the JSON with "interrupted": true, which a script could not tell otherwise.
func printPartial(rep interface{ Markdown() string }, asJSON bool, done string, stdout io.Writer) error {
	if !asJSON {
		fmt.Fprintf(stdout, "Interrupted: %s; each row is over the seeds it finished.\n\n", done)
	}
	return printReport(rep, asJSON, true, stdout)
}

// seedsDone says for each of names how many of its seeds finished.
func seedsDone(names []string, finished []int, seeds int) string {
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s: %d of %d seeds", name, finished[i], seeds)
	}
	return strings.Join(parts, ", ")
}

func printReport(rep interface{ Markdown() string }, asJSON, interrupted bool, stdout io.Writer) error {
	if asJSON {
		js, err := json.Marshal(rep)
		if err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		if interrupted && len(js) > 2 {
			js = append([]byte(`{"interrupted":true,`), js[1:]...)
		}
		fmt.Fprintln(stdout, string(js))
		return nil
	}
	fmt.Fprint(stdout, rep.Markdown())
	return nil
}

// above names what an interrupted comparison printed.
func above(asJSON bool) string {
	if asJSON {
		return "the JSON above"
	}
	return "the table above"
}

// unwritten says what an interrupted comparison did not write: its tables. The
// folders of the neural runs it finished (and of the one it stopped) stay in --out.
func unwritten(opts compareOptions) string {
	var files []string
	if opts.Out != "" {
		files = append(files, filepath.Join(opts.Out, "compare.json"))
	}
	if opts.Markdown != "" {
		files = append(files, opts.Markdown)
	}
	none := "no file was written"
	switch len(files) {
	case 1:
		none = files[0] + " was not written"
	case 2:
		none = fmt.Sprintf("neither %s nor %s was written", files[0], files[1])
	}
	// A neural run saves as it trains: itself, or its trials or image restarts in
	// its folder (vector restarts take seconds, and are chosen in memory).
	if _, err := os.Stat(filepath.Join(opts.Out, comparePlanName)); err != nil || !slices.ContainsFunc(opts.Methods, compare.Neural) {
		return none
	}
	return fmt.Sprintf("%s; the same command with --resume goes on with the runs %s keeps", none, opts.Out)
}

// plannedMarkdown is the --markdown file of the comparison planned in dir, "" if none.
func plannedMarkdown(dir string) string {
	var plan comparePlan
	if b, err := atomicfile.ReadFile(filepath.Join(dir, comparePlanName), train.MaxJSONBytes); err == nil && json.Unmarshal(b, &plan) == nil {
		return plan.Markdown
	}
	return ""
}

// holdsComparison says whether dir holds what compare --out writes: its plan, the
// report of a comparison made before plans were kept, or such a comparison's run
// folders alone (one stopped before its report).
func holdsComparison(dir string) bool {
	if hadComparison(dir) {
		return true
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		return false
	}
	for _, e := range entries {
		if e.Name() == train.LockName && train.IsRunLock(filepath.Join(dir, e.Name())) {
			continue // a comparison's, held while it runs
		}
		if _, _, ok := runDirName(e.Name()); !ok || !e.IsDir() {
			return false
		}
	}
	return true
}

// runDirName reads the method and seed out of the name of a run folder that
// compare.RunDir names, "em-s3".
func runDirName(name string) (method string, seed uint64, ok bool) {
	i := strings.LastIndex(name, "-s")
	if i < 0 {
		return "", 0, false
	}
	method = name[:i]
	seed, err := strconv.ParseUint(name[i+2:], 10, 64)
	return method, seed, err == nil && slices.Contains(compare.Methods(), method)
}

func entryNames(entries []fs.DirEntry) []string {
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names
}

// comparePlanName is the file in --out that records what a comparison runs, so that
// --resume goes on only with the comparison begun there.
const comparePlanName = "compare-plan.json"

// comparePlan is what decides a comparison's runs: a resume must repeat it.
type comparePlan struct {
	Methods []string     `json:"methods"`
	Seeds   []uint64     `json:"seeds"`
	Epochs  int          `json:"epochs"` // each neural run's, for these data
	Train   train.Config `json:"train"`  // resolved for the data, with their digests
	// Markdown is the --markdown file the comparison writes at its end (absolute),
	// which its resume may write even where the file is there already.
	Markdown string `json:"markdown,omitempty"`
}

// keepPlan writes the comparison's plan in --out, or, resuming, refuses a command
// line or data that would not repeat the plan found there, naming what differs. It
// returns the plan's digest, which each run's kept result carries (compare.Run clears
// what an earlier comparison left in the run folders a new one plans).
func keepPlan(opts compareOptions, cfg train.Config, rows int, dev torch.Device) (string, error) {
	path := filepath.Join(opts.Out, comparePlanName)
	cfg.Device = dev.String() // as resolved: auto and cpu are one on a machine without a GPU
	md := ""
	if opts.Markdown != "" {
		md = absPath(opts.Markdown)
	}
	now, err := json.Marshal(comparePlan{Methods: opts.Methods, Seeds: opts.Seeds, Train: cfg, Epochs: cfg.EpochsFor(rows), Markdown: md})
	if err != nil {
		return "", fmt.Errorf("compare: %w", err)
	}
	now = append(now, '\n')
	sum := sha256.Sum256(now)
	digest := hex.EncodeToString(sum[:])
	if !opts.Resume {
		if err := os.MkdirAll(opts.Out, 0o755); err != nil {
			return "", fmt.Errorf("compare: %w", err)
		}
		return digest, atomicfile.WriteBytes(path, now)
	}
	saved, err := atomicfile.ReadFile(path, train.MaxJSONBytes)
	if err != nil {
		return "", fmt.Errorf("--resume: %w", err)
	}
	if field := planDifference(saved, now); field != "" {
		if field == comparePlanName {
			return "", fmt.Errorf("--resume: %s is not a comparison's plan (damaged?)", path)
		}
		return "", usageError{fmt.Errorf("--resume: this command line differs in %s from the one %s was begun with; give that one (%s records it)",
			field, opts.Out, path)}
	}
	sum = sha256.Sum256(saved)
	return hex.EncodeToString(sum[:]), nil
}

// planDifference names the first setting (in name order) in which two plans differ,
// as the flag that sets it where there is one; "" when they do not differ in what
// decides a result; or the file's name when the saved one is not a plan.
func planDifference(saved, now []byte) string {
	var a, b map[string]any
	if json.Unmarshal(saved, &a) != nil || json.Unmarshal(now, &b) != nil {
		return comparePlanName
	}
	at, ok1 := a["train"].(map[string]any)
	bt, ok2 := b["train"].(map[string]any)
	if !ok1 || !ok2 {
		return comparePlanName
	}
	for _, m := range []map[string]any{at, bt} {
		// What the data's digests, the resolved epochs (the plan's own "epochs") and
		// the resolved device already say, or what changes no result.
		for _, k := range []string{"dataset", "data_file", "data_dir", "header", "label_col", "features", "standardize_auto",
			"feature_spread", "feature_offset", "epochs", "min_steps", "max_steps", "threads", "log_every", "world_size", "deterministic", "gamma_value", "eval_every"} {
			delete(m, k)
		}
		if g, ok := m["gamma"].(string); ok {
			if v, err := strconv.ParseFloat(g, 64); err == nil {
				m["gamma"] = v
			}
		}
		if h, ok := m["heads"].(float64); ok && h <= 1 {
			delete(m, "heads") // 0 is one head
		}
	}
	for _, k := range []string{"train", "markdown"} {
		delete(a, k)
		delete(b, k)
	}
	flag := map[string]string{"data_digest": "the data", "labels_digest": "the labels", "input_mean": "the data", "input_std": "the data",
		"hidden_auto": "--hidden", "arch": "--hidden", "norm": "--no-norm", "seeds": "--seeds or --seed-list", "device": "--device (as resolved)"}
	differs := func(x, y any) bool {
		bx, _ := json.Marshal(x)
		by, _ := json.Marshal(y)
		return string(bx) != string(by)
	}
	// Other data first: they change what the plan resolved from them (its epochs).
	for _, k := range []string{"data_digest", "labels_digest", "input_mean", "input_std"} {
		if differs(at[k], bt[k]) {
			return flag[k]
		}
	}
	for _, pair := range []struct{ a, b map[string]any }{{a, b}, {at, bt}} {
		keys := slices.Sorted(maps.Keys(pair.a))
		for k := range pair.b {
			if _, ok := pair.a[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			if differs(pair.a[k], pair.b[k]) {
				if f, ok := flag[k]; ok {
					return f
				}
				return "--" + strings.ReplaceAll(k, "_", "-")
			}
		}
	}
	return ""
}

// checkCompareOutputs refuses, unless --force, to write over an earlier comparison:
// its compare.json, the --markdown file, or a run folder a neural method would
// retrain in place; and even with --force, a --markdown that is the data compared
// or a run folder's own file.
func checkCompareOutputs(opts compareOptions) error {
	if opts.Resume {
		if _, err := os.Stat(filepath.Join(opts.Out, comparePlanName)); err != nil {
			return usageError{fmt.Errorf("--resume: %s holds no comparison begun by emclust compare --out (no %s)", opts.Out, comparePlanName)}
		}
	}
	var taken, runDirs []string
	if dir := opts.Out; dir != "" {
		// Found only when the results are written, a file here cost every run.
		if err := refuseFile("--out", dir, "name a folder"); err != nil {
			return err
		}
		if _, err := os.Stat(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return usageError{fmt.Errorf("--out %s: %w", dir, err)}
		}
		if err := outsideImageFolder("--out "+dir, dir, opts.Run.Config); err != nil {
			return err
		}
		// A folder of anything but comparisons (a run folder, /) is the user's, or a run's.
		if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 && !holdsComparison(dir) {
			return usageError{fmt.Errorf("--out %s holds files no comparison wrote (%s); name a new or empty folder", dir, someNames(entryNames(entries)))}
		}
		taken = append(taken, filepath.Join(dir, "compare.json"))
		for _, m := range opts.Methods {
			if !compare.Neural(m) {
				continue
			}
			for _, seed := range opts.Seeds {
				run := compare.RunDir(dir, m, seed)
				taken = append(taken, filepath.Join(run, "checkpoint.safetensors"))
				runDirs = append(runDirs, run)
			}
		}
	}
	for _, path := range taken {
		if _, err := os.Stat(path); err == nil && !opts.Force && !opts.Resume {
			return usageError{fmt.Errorf("%s exists from an earlier comparison; pass --force to replace it, --resume to go on with it, or pick another --out", path)}
		}
	}
	// Even with --force: a run folder of files no run wrote is the user's.
	for _, run := range runDirs {
		if _, err := os.Stat(filepath.Join(run, "checkpoint.safetensors")); err == nil {
			// An earlier comparison's run: its files are replaced, and any other
			// file in it was kept beside a model it no longer described.
			if foreign := foreignInRun(run); len(foreign) > 0 {
				return usageError{fmt.Errorf("%s holds files no emclust command wrote (%s), which a comparison would leave beside another run; move them, or pick another --out", run, someNames(foreign))}
			}
			continue
		}
		if train.StoppedInTrials(run) && isRunConfig(filepath.Join(run, train.TrialsDir, "config.json")) {
			if opts.Resume || opts.Force {
				continue
			}
			return usageError{fmt.Errorf("%s holds the trials or restarts of a comparison stopped among them; go on with the same command and --resume, or replace it with --force", run)}
		}
		if err := checkNewRunDir(run); err != nil {
			return err
		}
	}
	md := opts.Markdown
	if md == "" {
		return nil
	}
	// Even with --force: never the data compared, compare.json, nor a run folder's
	// own files. Paths are compared with their links resolved.
	real := realPath(md)
	if dataDir := imageDir(opts.Run.Config); dataDir != "" && within(real, realPath(dataDir)) {
		return usageError{fmt.Errorf("--markdown %s is inside the data's folder %s; name a file outside the data", md, dataDir)}
	}
	for _, table := range opts.Tables {
		if dir := filepath.Dir(realPath(table)); filepath.Dir(real) == dir && strings.HasSuffix(strings.TrimSuffix(md, ".gz"), ".csv") {
			return usageError{fmt.Errorf("--markdown %s is a CSV among the --tables; name another file", md)}
		}
	}
	if out := opts.Out; out != "" {
		outReal := realPath(out)
		switch {
		case real == filepath.Join(outReal, "compare.json") || real == filepath.Join(outReal, comparePlanName) || real == filepath.Join(outReal, train.LockName):
			return usageError{fmt.Errorf("--markdown %s is the comparison's own %s; name another file", md, filepath.Base(md))}
		case within(real, outReal) && filepath.Dir(real) != outReal:
			return usageError{fmt.Errorf("--markdown %s is inside a run folder of --out %s; name a file outside them", md, out)}
		}
		if _, err := os.Stat(out); errors.Is(err, os.ErrNotExist) && filepath.Dir(real) == outReal {
			return nil // a new file in the --out folder the comparison makes
		}
	}
	inputs := append([]string{opts.Run.Config.DataFile}, opts.Tables...)
	// A resumed comparison writes the file its first sitting was to write.
	return checkOutputFlag("--markdown", md, opts.Force || (opts.Resume && plannedMarkdown(opts.Out) == absPath(md)), inputs...)
}

// foreignInRun lists what in an earlier comparison's run folder no emclust command
// wrote: not the run's files, its result, trials, lock or partial files, nor a
// report of it (report RUN writes RUN/report), which compare.ClearRun removes.
func foreignInRun(run string) []string {
	entries, _ := os.ReadDir(run)
	var foreign []string
	for _, e := range entries {
		name := e.Name()
		switch {
		case slices.Contains(train.RunFiles, name), name == compare.ResultName, name == train.LockName, isPartialRunFile(name):
		case name == train.TrialsDir && e.IsDir():
		case name == compare.ReportDir && e.IsDir() && isReportPage(filepath.Join(run, name, "index.html")):
		default:
			foreign = append(foreign, name)
		}
	}
	return foreign
}

// within says whether path lies in dir or below it (both absolute).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// outsideImageFolder refuses out, what names it, inside cfg's image folder
// (--dataset folder), whose next read would take a run's folder for a class.
func outsideImageFolder(what, out string, cfg train.Config) error {
	if dataDir := imageDir(cfg); cfg.Dataset == "folder" && within(realPath(out), realPath(dataDir)) {
		return usageError{fmt.Errorf("%s is inside the data's folder %s; name a folder outside the data", what, dataDir)}
	}
	return nil
}

// imageDir is the folder of cfg's image set, or "" for a table.
func imageDir(cfg train.Config) string {
	if cfg.DataDir != "" {
		return cfg.DataDir
	}
	return data.DefaultImageDir(cfg.Dataset)
}

// realPath is path made absolute with the links of its longest existing part
// resolved, so that two spellings of one place compare equal.
func realPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	rest := ""
	for d := abs; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest)
		}
		if d == filepath.Dir(d) {
			return abs
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}

// writeCompare prints the report and writes the files asked for: the report first,
// so that a file that cannot be written costs no result.
func writeCompare(rep *compare.Report, opts compareOptions, stdout io.Writer) error {
	js, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("compare: %w", err)
	}
	printed := printCompare(rep, opts.JSON, stdout)
	md := rep.Markdown()
	if dir := opts.Out; dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("compare: %w", err)
		}
		if err := atomicfile.WriteBytes(filepath.Join(dir, "compare.json"), append(js, '\n')); err != nil {
			return err
		}
	}
	if path := opts.Markdown; path != "" {
		if err := atomicfile.WriteBytes(path, []byte(md)); err != nil {
			return err
		}
	}
	return printed
}

// compareSeeds reads --seeds N (1..N) or --seed-list.
func compareSeeds(c *cli.Context) ([]uint64, error) {
	if c.IsSet("seed-list") {
		if c.IsSet("seeds") {
			return nil, usageError{errors.New("give either --seeds N or --seed-list, not both")}
		}
		list, err := splitList("seed-list", c.String("seed-list"))
		if err != nil {
			return nil, err
		}
		var seeds []uint64
		for _, f := range list {
			s, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				return nil, usageError{fmt.Errorf("--seed-list: %q is not a seed (a non-negative integer)", f)}
			}
			seeds = append(seeds, s)
		}
		if len(seeds) > maxSeeds {
			return nil, usageError{fmt.Errorf("--seed-list: %d seeds; want at most %d", len(seeds), maxSeeds)}
		}
		if err := compare.CheckSeeds(seeds); err != nil {
			return nil, usageError{fmt.Errorf("--seed-list: %w", err)}
		}
		return seeds, nil
	}
	n := c.Int("seeds")
	if n < 1 || n > maxSeeds {
		return nil, usageError{fmt.Errorf("--seeds %d: want 1 to %d", n, maxSeeds)}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds, nil
}

// maxSeeds bounds a comparison's seeds, as train.Config bounds restarts: more is a
// slip, not a study (and ten billion were an out-of-memory crash).
const maxSeeds = 1000

// splitList splits flag's comma-separated value. An empty entry ("1,,2", a comma at
// the end) is refused: it is a slip, and the entry meant may be missing.
func splitList(flag, s string) ([]string, error) {
	if s == "" {
		return nil, nil // the flag's default, or nothing named: the caller's checks say
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, usageError{fmt.Errorf("--%s %q: an empty entry in the list", flag, s)}
		}
		out = append(out, f)
	}
	return out, nil
}

// runSweep trains opts.Methods[0] at each K of opts.Ks over the seeds and prints the
// criteria per K. Interrupted, it prints the K finished so far and writes no files.
func runSweep(ctx context.Context, opts compareOptions, dev torch.Device, log, stdout io.Writer) error {
	cfg := opts.Run.Config
	src, err := train.OpenSource(&cfg, dev)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := opts.Run.resolve(&cfg, dev, src); err != nil {
		return err
	}
	if err := checkRows(&cfg, src); err != nil {
		return err
	}
	if err := compare.CheckKs(opts.Ks, src.Len()); err != nil {
		return usageError{fmt.Errorf("--k: %w", err)} // as train's --k above the rows
	}
	deviceName := deviceLabel(dev)
	fmt.Fprintf(log, "emclust: %s on %s; %s at K = %s × %s\n", src.Describe(), deviceName, opts.Methods[0],
		strings.Trim(strings.ReplaceAll(fmt.Sprint(opts.Ks), " ", ","), "[]"), plural(len(opts.Seeds), "seed"))
	warnData(log, src)
	opt := compare.SweepOptions{Method: opts.Methods[0], Ks: opts.Ks, Seeds: opts.Seeds, Train: cfg, Device: dev,
		Done: func(r compare.KRun, done, total int) {
			nmi := ""
			if r.NMI != nil {
				nmi = fmt.Sprintf("  NMI %.4f", *r.NMI)
			}
			fmt.Fprintf(log, "emclust: [%*d/%d] K %-3d seed %-3d log-likelihood %.4f  max posterior %.4f  empty %d%s  %.1fs\n",
				len(strconv.Itoa(total)), done, total, r.K, r.Seed, r.Criteria.LogLikelihood, r.Criteria.MaxPosterior, r.Empty, nmi, r.Seconds)
		}}
	runs, err := compare.SweepK(ctx, src, opt)
	interrupted := errors.Is(err, context.Canceled)
	if err != nil && !interrupted {
		return err
	}
	rep, rerr := compare.NewSweepReport(dataLabel(cfg), src.Len(), opt, deviceName, runs, numClasses(src.Labels()))
	if rerr != nil {
		return rerr
	}
	rep.Scored = eval.ScoredRows(src.Labels())
	if interrupted {
		if len(runs) > 0 {
			ks := make([]string, len(opts.Ks))
			for i, k := range opts.Ks {
				ks[i] = fmt.Sprintf("K=%d", k)
			}
			finished := make([]int, len(opts.Ks))
			for _, r := range runs {
				finished[slices.Index(opts.Ks, r.K)]++
			}
			done := seedsDone(ks, finished, len(opts.Seeds))
			if perr := printPartial(rep, opts.JSON, done, stdout); perr != nil {
				return perr
			}
		}
		return interruptedError{fmt.Errorf("interrupted after %d of %d runs; no files were written", len(runs), len(opts.Ks)*len(opts.Seeds))}
	}
	printed := printCompare(rep, opts.JSON, stdout) // before the file, as writeCompare
	if path := opts.Markdown; path != "" {
		if err := atomicfile.WriteBytes(path, []byte(rep.Markdown())); err != nil {
			return err
		}
	}
	return printed
}

package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"emclust/atomicfile"
	"emclust/compare"
	"emclust/launch"
	"emclust/report"
	"emclust/torch"
	"emclust/train"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "write an HTML report of a run: curves, clusters, best members, synthesised inputs, filters, t-SNE, 2-d distributions",
		UsageText: "emclust report RUN [--out DIR] [--dataset NAME --data-dir D | --data FILE.csv --label-col C]\n" +
			"   [--compare-run RUN2] [--tsne-points N | --no-tsne] [--device D]",
		Description: "Writes DIR/index.html (DIR defaults to RUN/report) and its figures, PNG and SVG files beside it;\n" +
			"the folder is self-contained. Without data flags the report uses the data the run trained on.\n" +
			"Prints the path of index.html.",
		ArgsUsage: "RUN",
		Flags: append(inferenceDataFlags("the data the run trained on"),
			&cli.StringFlag{Name: "out", Usage: "report folder", DefaultText: "RUN/report"},
			deviceFlag(),
			&cli.IntFlag{Name: "tsne-points", Value: 2000, Usage: "rows, drawn at random, in the t-SNE map of the final-layer responses (0: no map)"},
			&cli.BoolFlag{Name: "no-tsne", Usage: "leave out the t-SNE map (it takes a while on a CPU)"},
			&cli.StringFlag{Name: "compare-run", Usage: "2-d data: a second run on the same data (say, trained with --no-norm) whose distributions are drawn beside RUN's"},
			&cli.StringFlag{Name: "clusters", Usage: "2-d data: the clusters whose distributions are drawn, e.g. 3,5,9", DefaultText: "all, at most 12"},
			&cli.IntFlag{Name: "steps", Value: 150, Usage: "gradient-ascent steps of the activation maximisation"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed for the random subsets, the t-SNE layout and the starting images"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress lines"},
			&cli.BoolFlag{Name: "force", Usage: "replace the report already in --out"},
		),
		Action: endOnInterrupt(action(reportOptionsFrom, runReport)),
	}
}

type reportOptions struct {
	Run, CompareRun string
	Out             string // the report folder: --out, or RUN/report
	Device          string
	Data            dataOptions
	Report          report.Options // all but Log, Progress and Compare
	Force, Quiet    bool
	StepsSet        bool // --steps given: refused where nothing is synthesised
}

// maxTSNEPoints bounds --tsne-points.
const maxTSNEPoints = 10000

func reportOptionsFrom(c *cli.Context) (reportOptions, error) {
	var opts reportOptions
	args, err := interspersedFlags(c)
	if err != nil {
		return opts, err
	}
	if len(args) != 1 {
		return opts, usageError{errors.New("report takes one run folder: emclust report RUN [flags]")}
	}
	data, err := dataOptionsFrom(c)
	if err != nil {
		return opts, err
	}
	// Exact t-SNE holds three n×n matrices of float64: 10 000 points take 2.4 GB.
	if n := c.Int("tsne-points"); n < 0 || (n > 0 && n < 5) || n > maxTSNEPoints {
		return opts, usageError{fmt.Errorf("--tsne-points %d: want 5 to %d, or 0 (no map, as --no-tsne)", n, maxTSNEPoints)}
	}
	if c.Int("steps") < 1 {
		return opts, usageError{fmt.Errorf("--steps %d: want ≥ 1", c.Int("steps"))}
	}
	clusters, err := parseInts("clusters", c.String("clusters"), 0)
	if err != nil {
		return opts, usageError{fmt.Errorf("--clusters %q: want cluster indices like 3,5,9", c.String("clusters"))}
	}
	opts = reportOptions{Run: args[0], CompareRun: c.String("compare-run"), Out: c.String("out"), Device: c.String("device"),
		Data: data, Force: c.Bool("force"), Quiet: c.Bool("quiet"), StepsSet: c.IsSet("steps"),
		Report: report.Options{Out: c.String("out"), TSNEPoints: c.Int("tsne-points"), Seed: c.Uint64("seed"),
			ActMax: report.ActMaxConfig{Steps: c.Int("steps")}, Clusters: clusters}}
	if opts.Out == "" {
		opts.Out = filepath.Join(opts.Run, compare.ReportDir)
	}
	if c.Bool("no-tsne") {
		if c.IsSet("tsne-points") {
			return opts, usageError{errors.New("--tsne-points with --no-tsne: give one")}
		}
		opts.Report.TSNEPoints = 0
	}
	return opts, nil
}

func runReport(_ context.Context, opts reportOptions, stdout, stderr io.Writer) error {
	runDir, out := opts.Run, opts.Out
	if _, _, err := checkReportDir(out, opts.Force); err != nil { // before any work
		return err
	}
	dev, err := selectDevice(opts.Device)
	if err != nil {
		return err
	}

	m, run, err := openReportRun(runDir, dev)
	if err != nil {
		return err
	}
	defer m.Close()
	warnUnfinished(stderr, m, runDir)
	if err := report.CheckPlane(m.Net.Spec, opts.Report.Clusters, opts.CompareRun != ""); err != nil {
		return usageError{err}
	}
	if opts.StepsSet && m.Net.Spec.Arch == "mlp" {
		return usageError{fmt.Errorf("--steps sets the activation maximisation of image networks; %s's network takes vectors", runDir)}
	}
	// The compared run is checked before any work: a mismatch found after the
	// figures would leave a folder that blocks the rerun.
	var other *report.Run
	if opts.CompareRun != "" {
		cm, cmp, err := openReportRun(opts.CompareRun, dev)
		if err != nil {
			return fmt.Errorf("--compare-run: %w", err)
		}
		defer cm.Close()
		if err := report.CheckCompare(run, cmp); err != nil {
			return usageError{err}
		}
		other = cmp
	}
	cfg, err := opts.Data.configFor(runDir, m.Cfg)
	if err != nil {
		return err
	}
	// Figures written among the images would join the data set the next time it is read.
	if dataDir := imageDir(*cfg); dataDir != "" && within(realPath(out), realPath(dataDir)) {
		return usageError{fmt.Errorf("--out %s is inside the data's folder %s; name a folder outside the data", out, dataDir)}
	}
	src, err := openModelData(m, runDir, cfg, opts.Data, dev)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := m.CheckInput(runDir, src, cfg); err != nil {
		return err
	}
	run.Cfg = cfg
	opt := opts.Report
	opt.Log = stderr
	if !opts.Quiet && launch.IsTerminal(stderr) {
		opt.Progress = func(total int, unit string) func(int) {
			bar := newBar(stderr, total, unit, "")
			return func(done int) {
				bar.Set(done)
				if done >= total {
					bar.Finish()
				}
			}
		}
	}
	if opts.Quiet {
		opt.Log = io.Discard
	}
	opt.Compare = other
	// Two reports into one folder would each take the other's files for its own.
	lock, err := train.LockDir(out)
	if err != nil {
		return err
	}
	defer lock.Close()
	// Again under the lock: another report may have finished there meanwhile.
	partial, replaced, err := checkReportDir(out, opts.Force)
	if err != nil {
		return err
	}
	for _, name := range partial {
		os.Remove(filepath.Join(out, name))
	}
	opt.Replaces = replaced
	index, err := report.Write(run, src, opt)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, index)
	return nil
}

// openReportRun loads a run folder's model and its metrics.jsonl; the caller closes
// the model.
func openReportRun(dir string, dev torch.Device) (*train.Model, *report.Run, error) {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		// Its curves are in the folder's metrics.jsonl: a model file alone has none.
		hint := ""
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "config.json")); err == nil {
			hint = fmt.Sprintf(" (%s?)", filepath.Dir(dir)) // a run's checkpoint
		}
		return nil, nil, usageError{fmt.Errorf("%s is a file; report takes a run folder%s", dir, hint)}
	}
	m, err := train.LoadModel(dir, dev)
	if err != nil {
		return nil, nil, err
	}
	hist, err := report.ReadMetrics(dir)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, &report.Run{Dir: dir, Cfg: m.Cfg, Net: m.Net, Prior: m.Prior, History: hist}, nil
}

// checkReportDir refuses, unless --force, an --out that holds a report already or
// figures: the report would replace files of the same names. (A report stopped before
// index.html, its last file, leaves figures that are refused alike: they cannot be
// told from a user's.) Even with --force it refuses an index.html that is no
// report's and files other than figures, which a report never writes. It returns the
// temporary files of a killed report, for the caller to remove under the lock, and,
// replacing a report, its figures.
func checkReportDir(out string, force bool) (partial, replaced []string, err error) {
	if err := refuseFile("--out", out, "a report is a folder: name a new or empty one"); err != nil {
		return nil, nil, err
	}
	entries, err := os.ReadDir(out)
	if err != nil || len(entries) == 0 {
		return nil, nil, nil // a new folder, or an empty one (what is not a folder fails when written)
	}
	var foreign, figures []string
	hasReport, hasLock := false, false
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == train.LockName && e.Type().IsRegular() && train.IsRunLock(filepath.Join(out, name)):
			// an earlier report's, or one writing now, which the lock will tell
			hasLock = true
		case e.Type().IsRegular() && isReportTemp(name):
			partial = append(partial, name) // a report killed while writing this file
		case name == "index.html" && e.Type().IsRegular():
			if !isReportPage(filepath.Join(out, name)) {
				return nil, nil, usageError{fmt.Errorf("--out %s holds an index.html that no emclust report wrote; name another folder", out)}
			}
			hasReport = true
		case e.Type().IsRegular() && slices.Contains(report.FigureNames, name):
			figures = append(figures, name)
		default:
			foreign = append(foreign, name)
		}
	}
	switch {
	case len(foreign) > 0:
		return nil, nil, usageError{fmt.Errorf("--out %s holds files a report does not write (%s); name a new or empty folder", out, someNames(foreign))}
	case force && hasReport:
		// The figures its index.html shows: those the new one does not draw go.
		return partial, shownBy(filepath.Join(out, "index.html"), figures), nil
	case force || len(figures) == 0 && !hasReport:
		return partial, nil, nil // removed once the folder's lock is held
	case !hasReport && hasLock:
		// A report stopped before its page (Ctrl-C): the lock says an emclust
		// command wrote the figures (of which run, it cannot say), and a new report
		// draws them again, as --force would.
		return partial, nil, nil
	case hasReport:
		return nil, nil, usageError{fmt.Errorf("%s holds a report already; pass --force to replace it, or pick another --out", out)}
	}
	return nil, nil, usageError{fmt.Errorf("--out %s holds figures but no finished report (%s); name a new or empty folder, or pass --force to write the report over them (a report stopped before its end leaves only its figures)", out, someNames(figures))}
}

// maxReportPage bounds the index.html that shownBy reads; a larger one shows none.
const maxReportPage = 64 << 20

// shownBy is those of names that the report page at index shows; a user's own
// figures in the folder are not among them.
func shownBy(index string, names []string) []string {
	page, err := atomicfile.ReadFile(index, maxReportPage)
	if err != nil {
		return nil
	}
	var shown []string
	for _, name := range names {
		if bytes.Contains(page, []byte(`src="`+name+`"`)) {
			shown = append(shown, name)
		}
	}
	return shown
}

// isReportTemp says whether name is a temporary file atomicfile.Write leaves when a
// report is killed while writing index.html or a figure.
func isReportTemp(name string) bool {
	i := strings.LastIndex(name, ".tmp")
	if i < 0 {
		return false
	}
	base := strings.TrimPrefix(name[:i], ".")
	isFile := base == "index.html" || slices.Contains(report.FigureNames, base)
	return isFile && atomicfile.IsTemp(name, base)
}

// isReportPage says whether the file at path is a report's index.html: its title,
// near the top, is the one report.Write gives.
func isReportPage(path string) bool {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 4096)
	n, _ := io.ReadFull(f, head)
	return strings.Contains(string(head[:n]), "<title>emclust report: ")
}

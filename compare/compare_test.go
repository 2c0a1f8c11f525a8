package compare

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"emclust/baseline"
	"emclust/data"
	"emclust/torch"
	"emclust/train"
)

func digitsSource(t *testing.T) *train.VectorSource {
	t.Helper()
	v, err := data.Digits()
	if err != nil {
		t.Fatal(err)
	}
	v.Standardize()
	src, err := train.NewVectorSource(v, testDevice)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	return src
}

func digitsOptions(methods []string, seeds ...uint64) Options {
	cfg := train.VectorDefaults()
	cfg.MinSteps, cfg.MaxSteps = 0, 0 // the epochs as set
	cfg.Epochs = 3
	cfg.EvalEvery = 0
	return Options{Methods: methods, Seeds: seeds, Train: cfg, Device: testDevice}
}

// scores drops the wall times, the one part of a result that may differ between
// identical runs.
func scores(rs []Result) []Result {
	out := make([]Result, len(rs))
	for i, r := range rs {
		r.Seconds = 0
		out[i] = r
	}
	return out
}

// The same seeds give exactly the same numbers; another seed gives other numbers.
func TestRunReproducible(t *testing.T) {
	src := digitsSource(t)
	opt := digitsOptions([]string{"em", "kmeans"}, 1, 2)
	var done []int
	opt.Done = func(r Result, n, total int) {
		if total != 4 {
			t.Errorf("Done: total %d, want 4", total)
		}
		done = append(done, n)
	}
	first, err := Run(context.Background(), src, opt)
	if err != nil {
		t.Fatal(err)
	}
	opt.Done = nil
	second, err := Run(context.Background(), src, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 4 || len(done) != 4 || done[3] != 4 {
		t.Fatalf("%d results, Done called %v; want 4 runs", len(first), done)
	}
	for i, want := range []struct {
		method string
		seed   uint64
	}{{"em", 1}, {"em", 2}, {"kmeans", 1}, {"kmeans", 2}} {
		if r := first[i]; r.Method != want.method || r.Seed != want.seed {
			t.Errorf("run %d is %s seed %d, want %s seed %d", i, r.Method, r.Seed, want.method, want.seed)
		}
	}
	a, b := scores(first), scores(second)
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("rerun differs:\n first %+v\nsecond %+v", a[i], b[i])
		}
	}
	// Different seeds differ, k-means's too: with baseline.KMeans's own seeding,
	// seeds 1 and 2 share nine of ten restarts and return the same clustering here.
	for _, i := range []int{0, 2} {
		r1, r2 := a[i], a[i+1]
		if r1.ACC == r2.ACC && r1.NMI == r2.NMI && r1.ARI == r2.ARI {
			t.Errorf("%s seeds 1 and 2 score the same (%+v)", r1.Method, r1)
		}
	}
	// Three epochs already cluster the digits well beyond chance (ACC 0.1), and
	// k-means does too. (em reaches ACC 0.44 and NMI 0.39 here; the bound leaves room
	// for another CPU's arithmetic.)
	for _, r := range first {
		if r.ACC < 0.2 || r.NMI < 0.2 || !(r.Seconds > 0) {
			t.Errorf("%+v: not learning", r)
		}
	}
}

// The GMMs run and are reproducible too, each on a regulariser from GMMRegs. Which
// one gmm-full needs depends on the CPU's float32 arithmetic (1e-05 on one Intel
// machine, 1e-04 on an AMD one, for seed 4), so the test asserts that the value used
// is reported, and noted exactly when it was raised; TestRetryMessage pins the error
// the retries depend on.
func TestRunGMM(t *testing.T) {
	src := digitsSource(t)
	opt := digitsOptions([]string{"gmm-diag", "gmm-full"}, 4)
	a, err := Run(context.Background(), src, opt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(context.Background(), src, opt)
	if err != nil {
		t.Fatal(err)
	}
	a, b = scores(a), scores(b)
	var raised []string
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("rerun differs:\n first %+v\nsecond %+v", a[i], b[i])
		}
		if a[i].NMI < 0.3 {
			t.Errorf("%+v: far too low", a[i])
		}
		if !slices.Contains(GMMRegs, a[i].Reg) {
			t.Errorf("%s: regulariser %g is none of %v", a[i].Method, a[i].Reg, GMMRegs)
		}
		if a[i].Reg != GMMRegs[0] {
			raised = append(raised, fmt.Sprintf("\n%s: covariance regulariser raised from %g (a float32 covariance was not positive definite): %g for seed 4.\n",
				a[i].Method, GMMRegs[0], a[i].Reg))
		}
	}
	t.Logf("regularisers: %s %g, %s %g", a[0].Method, a[0].Reg, a[1].Method, a[1].Reg)
	md := NewReport("digits", src.Len(), opt, "cpu", a).Markdown()
	for _, note := range raised {
		if !strings.Contains(md, note) {
			t.Errorf("Markdown\n%s\nlacks the note\n%s", md, note)
		}
	}
	if len(raised) == 0 && strings.Contains(md, "raised from") {
		t.Errorf("Markdown notes a raised regulariser that was not:\n%s", md)
	}
}

// The retries above go on only while baseline's error says "not positive definite";
// baseline has no sentinel for it, so a rewording must fail here. An indefinite
// covariance fails the same way in any arithmetic.
func TestRetryMessage(t *testing.T) {
	s := torch.NoGrad()
	defer s.Close()
	// Two points whose features are equal: the covariance of one component is
	// [[1 1] [1 1]], exact in any arithmetic and singular, and Reg = 1e-300 is lost
	// when added to 1 in float64.
	x := s.FromFloat32([]float32{0, 0, 2, 2}, []int{2, 2}, testDevice)
	_, err := baseline.GMM(context.Background(), x, baseline.GMMConfig{K: 1, Covariance: "full", Reg: 1e-300})
	if err == nil || !strings.Contains(err.Error(), "not positive definite") {
		t.Fatalf("GMM on a singular covariance: err = %v, want one saying \"not positive definite\"", err)
	}
}

// A mistake in the options fails before any run.
func TestRunChecksFirst(t *testing.T) {
	src := digitsSource(t)
	tests := []struct {
		name    string
		methods []string
		seeds   []uint64
		want    string
	}{
		{"image method on vectors", []string{"em", "kmeans", "twofold"}, []uint64{1}, "twofold trains on augmented copies of images"},
		{"iic on vectors", []string{"iic"}, []uint64{1}, "vectors take em, kmeans, gmm-diag, gmm-full"},
		{"unknown", []string{"em", "dbscan"}, []uint64{1}, `unknown method "dbscan"`},
		{"twice", []string{"kmeans", "kmeans"}, []uint64{1}, "kmeans named twice"},
		{"no methods", nil, []uint64{1}, "no methods"},
		{"seed twice", []string{"em"}, []uint64{3, 3}, "seed 3 given twice"},
		{"no seeds", []string{"em"}, nil, "no seeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := digitsOptions(tt.methods, tt.seeds...)
			opt.Done = func(r Result, _, _ int) { t.Errorf("ran %s seed %d before failing", r.Method, r.Seed) }
			res, err := Run(context.Background(), src, opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if len(res) != 0 {
				t.Errorf("%d results with the error", len(res))
			}
		})
	}
	if err := CheckMethods([]string{"twofold", "em-aug", "em", "iic", "kmeans", "gmm-diag", "gmm-full"}, true); err != nil {
		t.Errorf("every method on images: %v", err)
	}
}

// A cancelled context stops between runs and keeps the finished ones.
func TestRunCancelled(t *testing.T) {
	src := digitsSource(t)
	ctx, cancel := context.WithCancel(context.Background())
	opt := digitsOptions([]string{"kmeans"}, 1, 2, 3)
	opt.Done = func(Result, int, int) { cancel() }
	res, err := Run(ctx, src, opt)
	if err == nil || !strings.Contains(err.Error(), "after 1 of 3 runs") {
		t.Fatalf("error %v, want a stop after 1 of 3 runs", err)
	}
	if len(res) != 1 {
		t.Errorf("%d results kept, want 1", len(res))
	}
}

func TestStatString(t *testing.T) {
	// std = 0.1 and t(0.975, 2) = 4.302652729911275, so the margin is
	// 0.1 × 4.302652729911275 / √3 = 0.24841..
	s := NewStat([]float64{0.5, 0.6, 0.7})
	if want := 0.1 * 4.302652729911275 / math.Sqrt(3); math.Abs(s.Margin-want) > 1e-9 {
		t.Errorf("margin %v, want %v", s.Margin, want)
	}
	tests := []struct {
		xs   []float64
		want string
	}{
		{[]float64{0.5, 0.6, 0.7}, "0.6000 ± 0.2484"},
		{[]float64{0.8, 0.8}, "0.8000 ± 0.0000"},
		{[]float64{0.42}, "0.4200"},
		{nil, "—"},
	}
	for _, tt := range tests {
		if got := NewStat(tt.xs).String(); got != tt.want {
			t.Errorf("NewStat(%v) = %q, want %q", tt.xs, got, tt.want)
		}
	}
}

func TestMarkdown(t *testing.T) {
	runs := []Result{
		{Method: "em", Seed: 1, ACC: 0.5, NMI: 0.4, ARI: 0.3, Seconds: 12, Network: "linear"},
		{Method: "kmeans", Seed: 1, ACC: 0.7, NMI: 0.6, ARI: 0.5, Seconds: 0.25},
		{Method: "em", Seed: 2, ACC: 0.6, NMI: 0.5, ARI: 0.4, Seconds: 13, Network: "mlp"},
		{Method: "kmeans", Seed: 2, ACC: 0.7, NMI: 0.6, ARI: 0.5, Seconds: 0.35},
		{Method: "em", Seed: 3, ACC: 0.7, NMI: 0.6, ARI: 0.5, Seconds: 14, Network: "linear"},
		{Method: "kmeans", Seed: 3, ACC: 0.7, NMI: 0.6, ARI: 0.5, Seconds: 0.3},
	}
	opt := digitsOptions([]string{"em", "kmeans", "gmm-diag"}, 1, 2, 3)
	r := NewReport("digits (standardized)", 1797, opt, "cpu", runs)
	if len(r.Methods) != 2 {
		t.Fatalf("%d summaries, want em and kmeans (gmm-diag has no runs)", len(r.Methods))
	}
	want := "digits (standardized): N=1797, K=10, 3 seeds (1,2,3), 3 epochs, 10 restarts per seed kept by agreement, " +
		"network: the MLP or the linear map (learned prior), whichever has the higher silhouette of those that use at least 70% of the clusters, device cpu; mean ± 95% confidence half-width (Student's t over seeds)\n" +
		"\n" +
		"| method |             ACC |             NMI |             ARI | s/run |\n" +
		"| :----- | --------------: | --------------: | --------------: | ----: |\n" +
		"| em     | 0.6000 ± 0.2484 | 0.5000 ± 0.2484 | 0.4000 ± 0.2484 |  13.0 |\n" +
		"| kmeans | 0.7000 ± 0.0000 | 0.6000 ± 0.0000 | 0.5000 ± 0.0000 |  0.30 |\n" +
		"\n" +
		"em kept the linear map for 2 of 3 seeds and the MLP for the rest.\n"
	if got := r.Markdown(); got != want {
		t.Errorf("Markdown:\n%s\nwant:\n%s", got, want)
	}

	// Baselines alone have no epochs to state, one seed no margins.
	r = NewReport("blobs.csv", 10, digitsOptions([]string{"kmeans"}, 7), "cuda:0", runs[1:2])
	if got := strings.SplitN(r.Markdown(), "\n", 2)[0]; got != "blobs.csv: N=10, K=10, 1 seed (7), device cuda:0" {
		t.Errorf("header %q", got)
	}
	r.Scored = 6 // rows without a class: the scores count the others
	if got := strings.SplitN(r.Markdown(), "\n", 2)[0]; got != "blobs.csv: N=10, scored on 6 labelled rows, K=10, 1 seed (7), device cuda:0" {
		t.Errorf("header %q", got)
	}
}

// With Restarts, seed s of a neural method is train.TrainRestarts from seed s·R: the
// same clustering, and so the same scores, as those restarts run directly.
func TestRunRestarts(t *testing.T) {
	src := digitsSource(t)
	opt := digitsOptions([]string{"em"}, 2)
	opt.Train.Restarts = 3
	res, err := Run(context.Background(), src, opt)
	if err != nil {
		t.Fatal(err)
	}
	cfg := opt.Train
	cfg.Objective, cfg.Seed = "em", 6
	run, all, err := train.TrainRestarts(context.Background(), cfg, src, testDevice, train.RestartHooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	// Seeds 6, 7, 8 of the MLP, then of the linear map (the network is left to the data).
	if len(all) != 6 || all[0].Seed != 6 || all[3].Seed != 6 || all[5].Seed != 8 {
		t.Fatalf("restarts %+v, want seeds 6, 7, 8 of each network", all)
	}
	if res[0].Network == "" || res[0].Network != train.NetworkName(run.Cfg) {
		t.Errorf("compare kept the %q network, the restarts run directly %q", res[0].Network, train.NetworkName(run.Cfg))
	}
	pred, err := train.Predict(run.Net, src, testDevice, run.Prior())
	if err != nil {
		t.Fatal(err)
	}
	want, err := score("em", 2, src.Labels(), pred.Cluster, cfg.K, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].ACC != want.ACC || res[0].NMI != want.NMI {
		t.Errorf("compare with 3 restarts: ACC %v NMI %v; the restarts run directly: %v %v", res[0].ACC, res[0].NMI, want.ACC, want.NMI)
	}
	rep := NewReport("digits", src.Len(), opt, "cpu", res)
	if md := rep.Markdown(); !strings.Contains(md, "3 restarts per seed") || !strings.Contains(md, "network: the MLP or the linear map") ||
		!strings.Contains(md, "em kept the "+map[bool]string{true: "linear map", false: "MLP"}[res[0].Network == "linear"]+" for its one seed.") {
		t.Errorf("the table does not say the runs had restarts, and which network each kept:\n%s", md)
	}
}

// The header names what train.TrainRestarts keeps restarts by.
func TestRestartsNote(t *testing.T) {
	tests := []struct {
		n      int
		keepBy string
		trial  int
		want   string
	}{
		{10, train.KeepBySilhouette, 0, "10 restarts per seed kept by silhouette"},
		{2, train.KeepBySilhouette, 0, "2 restarts per seed kept by silhouette"},
		{10, train.KeepByAgreement, 0, "10 restarts per seed kept by agreement"},
		{10, "", 0, "10 restarts per seed kept by agreement"}, // a report written before keep_by
		{2, train.KeepByAgreement, 0, "2 restarts per seed kept by max posterior"},
		{4, train.KeepByAgreement, 25, "4 trials of 25 epochs per seed, the one that agreed most with itself trained on"},
	}
	for _, tt := range tests {
		if got := restartsNote(tt.n, tt.keepBy, tt.trial); got != tt.want {
			t.Errorf("restartsNote(%d, %q, %d) = %q, want %q", tt.n, tt.keepBy, tt.trial, got, tt.want)
		}
	}
}

// PreferBaselines shows each baseline at its better choice of standardisation, marked
// when that is the other report's, and leaves the neural methods on theirs.
func TestPreferBaselines(t *testing.T) {
	stat := func(acc float64) Stat { return Stat{Mean: acc, N: 1} }
	// The GMM runs needed raised regularisers, which a row notes for the runs it shows.
	rep := &Report{Data: "wine", N: 178, K: 3, Seeds: []uint64{1}, Device: "cpu", Methods: []Summary{
		{Method: "em", Runs: 1, ACC: stat(0.8)}, {Method: "kmeans", Runs: 1, ACC: stat(0.7)},
		{Method: "gmm-diag", Runs: 1, ACC: stat(0.9)}, {Method: "gmm-full", Runs: 1, ACC: stat(0.6)}},
		Runs: []Result{{Method: "gmm-diag", Seed: 1, ACC: 0.9, Reg: GMMRegs[1]}, {Method: "gmm-full", Seed: 1, ACC: 0.6, Reg: GMMRegs[2]}}}
	other := &Report{Data: "wine (standardized)", Standardized: true, Methods: []Summary{
		{Method: "kmeans", Runs: 1, ACC: stat(0.97)}, {Method: "gmm-diag", Runs: 1, ACC: stat(0.85)}, {Method: "gmm-full", Runs: 1, ACC: stat(0.65)}},
		Runs: []Result{{Method: "gmm-diag", Seed: 1, ACC: 0.85, Reg: GMMRegs[2]}, {Method: "gmm-full", Seed: 1, ACC: 0.65, Reg: GMMRegs[1]}}}
	rep.PreferBaselines(other)
	want := []struct {
		method   string
		acc      float64
		features string
	}{{"em", 0.8, ""}, {"kmeans", 0.97, "standardized"}, {"gmm-diag", 0.9, ""}, {"gmm-full", 0.65, "standardized"}}
	for i, w := range want {
		if m := rep.Methods[i]; m.Method != w.method || m.ACC.Mean != w.acc || m.Features != w.features {
			t.Errorf("row %d: %s %v on %q, want %s %v on %q", i, m.Method, m.ACC.Mean, m.Features, w.method, w.acc, w.features)
		}
	}
	if rep.OtherFeatures != other || other.Methods[0].Features != "" {
		t.Error("the other report is not kept as it was")
	}
	md := rep.Markdown()
	for _, s := range []string{"| kmeans (standardized)   |", "| gmm-diag                |", otherFeaturesNote,
		"gmm-diag: covariance regulariser raised from 1e-06 (a float32 covariance was not positive definite): 1e-05 for seed 1.",
		"gmm-full: covariance regulariser raised from 1e-06 (a float32 covariance was not positive definite): 1e-05 for seed 1."} {
		if !strings.Contains(md, s) {
			t.Errorf("table lacks %q:\n%s", s, md)
		}
	}
	md = SuiteMarkdown([]*Report{rep})
	for _, s := range []string{"**0.9700** (standardized)", "|   0.9000 |", "each baseline on the features, raw or standardized"} {
		if !strings.Contains(md, s) {
			t.Errorf("suite table lacks %q:\n%s", s, md)
		}
	}
}

// A kept result is taken only for its own plan, method and seed, with scores in range.
func TestReadResult(t *testing.T) {
	path := filepath.Join(t.TempDir(), ResultName)
	good := Result{Method: "em", Seed: 2, ACC: 0.9, NMI: 0.8, ARI: 0.7, Seconds: 1.5, Network: "mlp"}
	for _, tc := range []struct {
		name string
		plan string
		r    Result
		want string // "" for taken
	}{
		{"its own", "p1", good, ""},
		{"another plan", "p0", good, "another comparison"},
		{"another seed", "p1", Result{Method: "em", Seed: 3, ACC: 0.9}, "seed 3"},
		{"another method", "p1", Result{Method: "twofold", Seed: 2}, `"twofold"`},
		{"ACC past 1", "p1", Result{Method: "em", Seed: 2, ACC: 1.5}, "out of range"},
		{"negative time", "p1", Result{Method: "em", Seed: 2, ACC: 0.5, Seconds: -1}, "out of range"},
		{"negative empty clusters", "p1", Result{Method: "em", Seed: 2, Empty: -5}, "out of range"},
		{"unknown network", "p1", Result{Method: "em", Seed: 2, Network: "zzz"}, `network "zzz"`},
	} {
		b, err := json.Marshal(keptResult{Plan: tc.plan, Result: tc.r})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r, ok, err := readResult(path, "p1", "em", 2)
		switch {
		case tc.want == "" && (err != nil || !ok || r.ACC != good.ACC || !r.Earlier):
			t.Errorf("%s: %+v, %v, %v; want the result, marked earlier", tc.name, r, ok, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || ok):
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
	}
	if _, ok, err := readResult(filepath.Join(t.TempDir(), ResultName), "p1", "em", 2); ok || err != nil {
		t.Errorf("no file: %v, %v; want none and no error", ok, err)
	}
}

// A run folder another comparison trains in is not cleared under it.
func TestClearRunTakesTheLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "em-s1")
	lock, err := train.LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644)
	if err := ClearRun(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("ClearRun of a locked folder: %v, want in use", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Errorf("the locked run lost its config.json: %v", err)
	}
	lock.Close()
	if err := ClearRun(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); !os.IsNotExist(err) {
		t.Errorf("config.json after ClearRun: %v", err)
	}
}

// A run's saved config is refused where another command changed what its result
// depends on: its epochs, or its processes.
func TestOtherRun(t *testing.T) {
	planned := train.VectorDefaults()
	planned.Objective, planned.K = "em", 3
	for _, tc := range []struct {
		name string
		edit func(*train.Config)
		want string
	}{
		{"the same", func(*train.Config) {}, ""},
		{"another seed, network and threads", func(c *train.Config) { c.Seed, c.Hidden, c.Threads = 14, nil, 1 }, ""},
		{"more epochs", func(c *train.Config) { c.SetEpochs(4000) }, "number of epochs"},
		{"two processes", func(c *train.Config) { c.WorldSize = 2 }, "number of processes"},
		{"other data", func(c *train.Config) { c.DataDigest = "x" }, "data"},
	} {
		saved := planned
		tc.edit(&saved)
		if got := otherRun(planned, 150, saved); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

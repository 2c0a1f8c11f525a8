package command

// End-to-end tests of the emclust command as a user runs it: the binary is built
// once, run with os/exec, and judged by its exit status, stdout, stderr and the
// files it leaves.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"emclust/compare"
	"emclust/data"
	"emclust/data/datatest"
	"emclust/eval"
	"emclust/torch"
	"emclust/train"
)

var (
	repo     string // the repository's root, absolute: tests change folders
	bin      string // the emclust binary built by TestMain
	fixtures string // shared input files, and a tiny trained run in fixtures/r4
)

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "emclust-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if repo, err = filepath.Abs(".."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// EMCLUST_TEST_BIN names a binary built beforehand, for machines without Go: the
	// GPU machine, and the libtorch 2.x root of `make test-libtorch2`.
	if bin = os.Getenv("EMCLUST_TEST_BIN"); bin == "" {
		bin = filepath.Join(tmp, "emclust")
		build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, filepath.Join(repo, "cmd/emclust"))
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build emclust:", err)
			return 1
		}
	}
	fixtures = filepath.Join(tmp, "fixtures")
	if err := makeFixtures(fixtures); err != nil {
		fmt.Fprintln(os.Stderr, "fixtures:", err)
		return 1
	}
	return m.Run()
}

// hugeCSV is 40 rows of ±3e38 in 4 columns: float32's range, not its precision,
// decides what the first layer computes.
func hugeCSV() string {
	var b strings.Builder
	rng := rand.New(rand.NewPCG(5, 6))
	for range 40 {
		for j := range 4 {
			if j > 0 {
				b.WriteByte(',')
			}
			if rng.IntN(2) == 0 {
				b.WriteByte('-')
			}
			b.WriteString("3e38")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// makeFixtures writes the small input files the tests share and trains a tiny run
// on a 4-feature CSV (fixtures/r4) for the predict and eval tests.
func makeFixtures(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"text.csv":            "a,b,c,label\n1,2,3,x\n4,foo,6,y\n",
		"nan.csv":             "a,b,c\n1,2,3\n4,NaN,6\n",
		"ragged.csv":          "1,2,3\n4,5\n",
		"empty.csv":           "",
		"one.csv":             "1,2,3\n",
		"oneclass.csv":        "x,y,c\n1,2,a\n1.1,2.1,a\n5,6,a\n5.1,6.2,a\n",
		"huge.csv":            hugeCSV(),
		"ten.csv":             randomCSV(10, 4, 2, 1, true),
		"four.csv":            randomCSV(200, 4, 2, 2, true),
		"four-noheader.csv":   randomCSV(200, 4, 2, 2, false),
		"four-unlabelled.csv": randomCSV(50, 4, 0, 3, false),
		"three.csv":           randomCSV(20, 3, 0, 4, false),
		// score: truth 000111 against pred 001111 (worked by hand below).
		"truth.txt":           "0\n0\n0\n1\n1\n1\n",
		"pred.txt":            "0\n0\n1\n1\n1\n1\n",
		"short.txt":           "0\n1\n",
		"garbage.safetensors": "this is not a checkpoint\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	// A truncated MNIST: the header promises 60000 images, the file holds 1000 bytes.
	promised := datatest.Images{N: 60000, C: 1, H: 28, W: 28, Labels: make([]int, 60000)}
	images := datatest.IDXImages(datatest.Images{N: 0, C: 1, H: 28, W: 28}, 0, 0)
	binary.BigEndian.PutUint32(images[4:], uint32(promised.N))
	images = append(images, make([]byte, 1000)...)
	if err := datatest.WriteFile(filepath.Join(dir, "mnist", "train-images-idx3-ubyte"), images); err != nil {
		return err
	}
	if err := datatest.WriteFile(filepath.Join(dir, "mnist", "train-labels-idx1-ubyte"), datatest.IDXLabels(promised.Labels)); err != nil {
		return err
	}
	// An MNIST of no images: four well-formed IDX files of 0 entries.
	none := datatest.Images{C: 1, H: 28, W: 28}
	for _, split := range []string{"train", "t10k"} {
		if err := datatest.WriteFile(filepath.Join(dir, "mnist0", split+"-images-idx3-ubyte"), datatest.IDXImages(none, 0, 0)); err != nil {
			return err
		}
		if err := datatest.WriteFile(filepath.Join(dir, "mnist0", split+"-labels-idx1-ubyte"), datatest.IDXLabels(nil)); err != nil {
			return err
		}
	}

	r := runIn(dir, slowWait, "train", "--quiet", "--data", "four.csv", "--label-col", "label",
		"--epochs", "2", "--batch-size", "32", "--kmeans=false", "--out", "r4")
	if r.code != 0 {
		return fmt.Errorf("train r4: exit %d: %s", r.code, r.stderr)
	}
	ckpt, err := os.ReadFile(filepath.Join(dir, "r4", "checkpoint.safetensors"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "truncated.safetensors"), ckpt[:len(ckpt)/2], 0o644); err != nil {
		return err
	}
	// A run folder that stopped before its first checkpoint, under a name to quote,
	// and one killed while a table's restarts trained, which left its lock alone.
	if err := os.MkdirAll(filepath.Join(dir, "be gun"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "be gun", "config.json"), []byte("{}\n"), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "locked"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "locked", train.LockName), []byte("4242\n"), 0o644); err != nil {
		return err
	}
	// A run folder whose checkpoint lost its tail.
	if err := os.MkdirAll(filepath.Join(dir, "torn"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "torn", "checkpoint.safetensors"), ckpt[:len(ckpt)-100], 0o644)
}

// randomCSV makes n rows of d Gaussian features, with a header, and a label column
// of `classes` classes (shifting the features' mean by class) when classes > 0.
// Without labels, k-means is set beside the run by their agreement, and in
// summary.json by each clustering's silhouette; the run's is its assignments'.
func TestTrainKMeansUnlabelled(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("x,y\n")
	var rows [][2]float64
	rng := rand.New(rand.NewPCG(8, 9))
	for i := range 90 {
		p := [2]float64{4*float64(i%3) + rng.NormFloat64(), 2*float64(i%3) + rng.NormFloat64()}
		rows = append(rows, p)
		fmt.Fprintf(&b, "%.5f,%.5f\n", p[0], p[1])
	}
	if err := os.WriteFile(filepath.Join(dir, "blobs.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	train := []string{"train", "--data", "blobs.csv", "--k", "3", "--restarts", "1", "--epochs", "20", "--standardize=false"}
	r := run(t, dir, append(train, "--out", "u")...)
	noCrash(t, r)
	if r.code != 0 || !strings.Contains(r.stderr, "\nk-means  ARI ") {
		t.Fatalf("exit %d; stderr without k-means' agreement:\n%s", r.code, r.stderr)
	}
	var sum struct {
		U *struct {
			Silhouette       float64 `json:"silhouette"`
			KMeansSilhouette float64 `json:"kmeans_silhouette"`
			Agreement        float64 `json:"agreement_ari"`
		} `json:"kmeans_unlabelled"`
	}
	readJSON(t, filepath.Join(dir, "u", "summary.json"), &sum)
	if sum.U == nil {
		t.Fatal("summary.json has no kmeans_unlabelled")
	}
	for _, v := range []float64{sum.U.Silhouette, sum.U.KMeansSilhouette, sum.U.Agreement} {
		if !(v >= -1 && v <= 1) {
			t.Errorf("kmeans_unlabelled %+v: outside [-1, 1]", *sum.U)
		}
	}
	// The silhouette of the assignments, by its definition.
	cluster := make([]int, len(rows))
	for i, line := range readLines(t, filepath.Join(dir, "u", "assignments.csv"))[1:] {
		f := strings.Split(line, ",")
		cluster[i], _ = strconv.Atoi(f[1])
	}
	var total float64
	for i, p := range rows {
		sums, counts := make([]float64, 3), make([]float64, 3)
		for j, q := range rows {
			if j != i {
				sums[cluster[j]] += math.Hypot(p[0]-q[0], p[1]-q[1])
				counts[cluster[j]]++
			}
		}
		if counts[cluster[i]] == 0 {
			continue // a lone row scores 0
		}
		a, bMin := sums[cluster[i]]/counts[cluster[i]], math.Inf(1)
		for c := range 3 {
			if c != cluster[i] && counts[c] > 0 {
				bMin = min(bMin, sums[c]/counts[c])
			}
		}
		total += (bMin - a) / max(a, bMin)
	}
	if want := total / float64(len(rows)); math.Abs(sum.U.Silhouette-want) > 1e-3 {
		t.Errorf("the run's silhouette %.4f, its assignments' %.4f", sum.U.Silhouette, want)
	}

	r = run(t, dir, append(train, "--kmeans=false", "--out", "n")...)
	if r.code != 0 || strings.Contains(r.stderr, "k-means") {
		t.Errorf("--kmeans=false: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func randomCSV(n, d, classes int, seed uint64, header bool) string {
	rng := rand.New(rand.NewPCG(seed, 7))
	var b strings.Builder
	if header {
		for j := 0; j < d; j++ {
			fmt.Fprintf(&b, "f%d,", j)
		}
		if classes > 0 {
			b.WriteString("label")
		}
		b.WriteString("\n")
	}
	for i := 0; i < n; i++ {
		for j := 0; j < d; j++ {
			v := rng.NormFloat64()
			if classes > 0 {
				v += 3 * float64(i%classes)
			}
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(v, 'f', 5, 64))
		}
		if classes > 0 {
			fmt.Fprintf(&b, ",%d", i%classes)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

type result struct {
	code           int
	stdout, stderr string
}

// runIn runs emclust in dir and waits at most timeout.
func runIn(dir string, timeout time.Duration, args ...string) result {
	return runProgram(bin, dir, nil, timeout, args...)
}

// emclustCmd is exec.Command of the emclust under test, which dies with the test
// binary (diesWithTest).
func emclustCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = diesWithTest()
	return cmd
}

// diesWithTest has a child killed when the test binary ends, as go test -timeout
// ends it without running the cleanups: one such child trained on for 1.5 h. (The
// signal follows the thread that started the child, and Go ends a thread only with a
// goroutine locked to it, which these tests have none of.)
func diesWithTest() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// runProgram runs prog in dir with env (nil: this process's) and waits at most
// timeout; the exit code is -1 when a signal killed it and -2 when it could not run.
func runProgram(prog, dir string, env []string, timeout time.Duration, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = diesWithTest()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode() // -1 when killed by a signal
	default:
		r.code = -2
		r.stderr += "\n(test: " + err.Error() + ")"
	}
	if ctx.Err() != nil {
		r.stderr += "\n(test: timed out after " + timeout.String() + ")"
	}
	return r
}

// runProc runs the emclust binary in dir: for what needs a process of its own
// (signals, locks, a resume in a fresh process, the help a shell prints).
func runProc(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return runIn(dir, slowWait, args...)
}

// run runs emclust's Main in this process, in dir.
func run(t *testing.T, dir string, args ...string) result {
	t.Helper()
	t.Chdir(dir)
	return runMain(args...)
}

// writeGrayImages writes n gray PNGs of size×size, image i with pixel i lit, as
// folder/classes[i mod len]/i.png, or folder/i.png without classes, and returns
// their names under folder in the folder's order.
func writeGrayImages(t *testing.T, folder string, size, n int, classes ...string) []string {
	t.Helper()
	var names []string
	for i := range n {
		im := image.NewGray(image.Rect(0, 0, size, size))
		im.Pix[i] = 255
		var b bytes.Buffer
		if err := png.Encode(&b, im); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("%d.png", i)
		if classes != nil {
			name = filepath.Join(classes[i%len(classes)], name)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(folder, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(folder, name), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// noCrash fails the test when the output shows a Go panic or a signal.
func noCrash(t *testing.T, r result) {
	t.Helper()
	for _, bad := range []string{"panic:", "goroutine ", "SIGSEGV", "signal "} {
		if strings.Contains(r.stderr, bad) || strings.Contains(r.stdout, bad) {
			t.Fatalf("crash (%q) in output:\nstdout: %s\nstderr: %s", bad, r.stdout, r.stderr)
		}
	}
}

// wantError checks a failed run: the exit status, nothing on stdout, and one line
// on stderr that starts with "emclust: " and holds every one of want.
func wantError(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	noCrash(t, r)
	if r.code != code {
		t.Errorf("exit status %d, want %d; stderr: %s", r.code, code, r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout should be empty on error, got %q", r.stdout)
	}
	msg := strings.TrimSuffix(r.stderr, "\n")
	if msg == "" || strings.Contains(msg, "\n") {
		t.Errorf("want one line on stderr, got %q", r.stderr)
	}
	if !strings.HasPrefix(msg, "emclust: ") {
		t.Errorf("stderr %q does not start with \"emclust: \"", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("stderr %q does not mention %q", msg, w)
		}
	}
}

var scoreLine = regexp.MustCompile(`^ACC \d\.\d{4} NMI \d\.\d{4} ARI -?\d\.\d{4}$`)

// wantScoreLine checks a successful run that prints exactly one ACC NMI ARI line.
func wantScoreLine(t *testing.T, r result) string {
	t.Helper()
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("exit status %d; stderr: %s", r.code, r.stderr)
	}
	line := strings.TrimSuffix(r.stdout, "\n")
	if !scoreLine.MatchString(line) {
		t.Fatalf("stdout %q is not one line matching %s", r.stdout, scoreLine)
	}
	return line
}

// devices is the output of emclust devices, run once.
var devices = sync.OnceValue(func() result { return runIn(os.TempDir(), time.Minute, "devices") })

func cudaAvailable() bool {
	r := devices()
	return r.code == 0 && !strings.Contains(r.stdout, "no CUDA device")
}

func TestErrors(t *testing.T) {
	noCUDA := !cudaAvailable()
	train := []string{"train", "--quiet", "--epochs", "1", "--kmeans=false"}
	ten := slices.Clip(append(train[:len(train):len(train)], "--data", "ten.csv", "--label-col", "label")) // each case appends to a copy
	cases := []struct {
		name string
		args []string
		code int
		want []string
		skip bool
	}{
		{name: "text in a number cell", args: append(train, "--data", "text.csv", "--label-col", "label"), code: 1,
			want: []string{"text.csv:3", "column 1", `"foo"`}},
		{name: "NaN", args: append(train, "--data", "nan.csv"), code: 1, want: []string{"nan.csv:3", "NaN", "column 1"}},
		{name: "ragged", args: append(train, "--data", "ragged.csv"), code: 1, want: []string{"ragged.csv:2", "fields"}},
		{name: "empty", args: append(train, "--data", "empty.csv"), code: 1, want: []string{"empty.csv", "no data rows"}},
		{name: "missing file", args: append(train, "--data", "missing.csv"), code: 1, want: []string{"missing.csv", "no such file"}},
		{name: "unknown label column", args: append(train, "--data", "ten.csv", "--label-col", "nope"), code: 1,
			want: []string{"ten.csv", `"nope"`, "label"}},
		{name: "k above rows", args: append(ten, "--k", "50"), code: 2, want: []string{"--k 50", "10 rows", "ten.csv"}},
		// Was accepted: one cluster takes every row, whatever is trained.
		{name: "one cluster", args: append(ten, "--k", "1"), code: 2, want: []string{"--k 1", "at least 2 clusters"}},
		// Were K = 50, a cluster a row: a column of values all different given as labels.
		{name: "labels all different", args: append(train, "--data", "four-unlabelled.csv", "--label-col", "0"), code: 2,
			want: []string{"label column 0: 50 classes in 50 rows", "give --k"}},
		// Was "--k 1: want at least 2 clusters", exit 1, of a --k not given.
		{name: "labels of one class", args: append(train, "--data", "oneclass.csv", "--label-col", "c"), code: 2,
			want: []string{"label column c: one class", "give --k"}},
		{name: "labels all different, compare", args: []string{"compare", "--data", "four-unlabelled.csv", "--label-col", "0", "--seeds", "1"}, code: 2,
			want: []string{"label column 0: 50 classes in 50 rows"}},
		// Was exit 1 and "unknown vector file type" for a folder.
		{name: "data is a folder", args: append(train, "--data", "mnist"), code: 2, want: []string{"mnist is a folder", "--dataset folder --data-dir"}},
		{name: "unknown file type", args: append(train, "--data", "ten.xlsx"), code: 2, want: []string{"ten.xlsx", "unknown vector file type"}},
		// Were exit 1: command-line mistakes found once the data were read.
		{name: "sweep K above the rows", args: []string{"compare", "--data", "ten.csv", "--label-col", "label", "--k", "2,50", "--seeds", "1"}, code: 2, want: []string{"--k: K = 50", "want 2 to 10"}},
		// Was ignored, and the column clustered as a feature.
		{name: "label column of an array", args: append(train, "--data", "ten.npy", "--label-col", "0"), code: 2, want: []string{"--label-col 0", "ten.npy is a NumPy array"}},
		// Were ignored: an array has no header line.
		{name: "header of an array", args: append(train, "--data", "ten.npy", "--header", "yes"), code: 2, want: []string{"--header yes: ", "ten.npy is a NumPy array, which has no header line"}},
		{name: "header of an array to predict", args: []string{"predict", "--model", "r4", "--data", "ten.npy", "--header", "no"}, code: 2, want: []string{"--header no: ten.npy is a NumPy array"}},
		{name: "label column of an array to predict", args: []string{"predict", "--model", "r4", "--data", "ten.npy", "--label-col", "0"}, code: 2, want: []string{"ten.npy is a NumPy array"}},
		// Were "exists; pass --force", then, forced, "not a regular file" after the work.
		{name: "out is a device", args: []string{"predict", "--model", "r4", "--out", "/dev/null", "--force"}, code: 2,
			want: []string{"--out /dev/null is not a regular file", "--out - for stdout"}},
		// Trained, then recorded with U+FFFD in config.json: predict looked for another file.
		{name: "data name not UTF-8", args: append(train, "--data", "t\xfe.csv"), code: 2, want: []string{"--data", "not UTF-8"}},
		{name: "data is a dash", args: append(train, "--data", "-"), code: 2, want: []string{"no such file; to read standard input, give /dev/stdin"}},
		{name: "bench supervised", args: []string{"bench", "--model", "mlp", "--objective", "supervised", "--device", "cpu"}, code: 2, want: []string{"--objective supervised: bench's synthetic data have no labels"}},
		{name: "embed a table", args: []string{"embed", "--model", "r4", "--dataset", "iris"}, code: 2, want: []string{"--dataset iris: embed reads images"}},
		{name: "unknown device", args: append(ten, "--device", "gpu"), code: 2, want: []string{"--device", `"gpu"`, "cuda:N"}},
		{name: "cuda on a CPU build", args: append(ten, "--device", "cuda"), code: 1, want: []string{`device "cuda"`, "CUDA"}, skip: !noCUDA},
		{name: "too many heads", args: append(ten, "--heads", "40"), code: 2, want: []string{"heads 40", "1 to 32"}},
		// Were accepted as the defaults, or "want 0 to 1000" with no word of what 0 is.
		{name: "no heads", args: append(ten, "--heads", "0"), code: 2, want: []string{"--heads 0", "1 to 32"}},
		// Were seeds 2⁶⁴−1, 0 and 1, and a run kept as seed 0.
		{name: "seeds past the last", args: append(ten, "--restarts", "3", "--seed", "18446744073709551615"), code: 2, want: []string{"--seed 18446744073709551615: its 3 restarts would take seeds past 2⁶⁴−1"}},
		{name: "listed seeds past the last", args: []string{"compare", "--dataset", "iris", "--methods", "em", "--restarts", "3", "--seed-list", "1,18446744073709551614", "--device", "cpu"}, code: 2, want: []string{"--seed-list: seed 18446744073709551614's 3 restarts would take seeds past 2⁶⁴−1"}},
		{name: "no restarts", args: append(ten, "--restarts", "0"), code: 2, want: []string{"--restarts 0", "1 (a single run) to 1000"}},
		{name: "unknown arch", args: append(ten, "--arch", "foo"), code: 2, want: []string{`--arch "foo"`, "mlp, mnist"}},
		// Was "Target 7 is out of bounds" from inside the loss (a device-side assert on a GPU).
		{name: "supervised with K under the classes", args: append(train, "--dataset", "digits", "--objective", "supervised", "--k", "3", "--restarts", "1"), code: 1,
			want: []string{"10 classes", "--k is 3", "--k 10"}},
		// Was one seed trained, the flag ignored.
		{name: "keep-by on images without restarts", args: append(train, "--dataset", "fashion-mnist", "--data-dir", "nowhere", "--keep-by", "silhouette"), code: 2,
			want: []string{"--keep-by", "--restarts R"}},
		{name: "unknown objective", args: append(ten, "--objective", "foo"), code: 2, want: []string{"objective", `"foo"`, "em, em-aug, twofold, iic"}},
		// Was a nil-tensor panic in loss.KL: image objectives on vectors.
		{name: "twofold on vectors", args: append(ten, "--objective", "twofold"), code: 2, want: []string{"twofold", "--objective em"}},
		{name: "em-aug on vectors", args: append(ten, "--objective", "em-aug"), code: 2, want: []string{"em-aug", "--objective em"}},
		{name: "batch size 1", args: append(ten, "--batch-size", "1"), code: 2, want: []string{"--batch-size 1"}},
		{name: "unknown precision", args: append(ten, "--precision", "fp16"), code: 2, want: []string{"precision", `"fp16"`, "fp32 or bf16"}},
		{name: "channels-last on vectors", args: append(ten, "--channels-last"), code: 2, want: []string{"channels-last", "mlp"}},
		{name: "batch size not a number", args: append(ten, "--batch-size", "abc"), code: 2, want: []string{"batch-size", `"abc"`}},
		{name: "gamma 0", args: append(ten, "--gamma", "0"), code: 2, want: []string{"gamma", `"0"`}},
		{name: "gamma abc", args: append(ten, "--gamma", "abc"), code: 2, want: []string{"gamma", `"abc"`}},
		{name: "epochs 0", args: []string{"train", "--data", "ten.csv", "--epochs", "0"}, code: 2, want: []string{"epochs"}},
		{name: "bad hidden", args: append(ten, "--hidden", "32,x"), code: 2, want: []string{"--hidden", `"x"`}},
		// Was "DefaultCPUAllocator: can't allocate memory", or, for widths whose memory
		// Linux hands out lazily, the OOM killer's SIGKILL with no message.
		{name: "network larger than memory", args: append(ten, "--hidden", "3000000000,3000000000"), code: 2,
			want: []string{"--hidden: the network mlp 4→3000000000→3000000000→2", "more than the", "use a smaller --hidden", "add --no-memory-check"}},
		// Unchecked, a first layer of 480 TB, past what a process can address (128 TB)
		// whatever the machine: the allocator's refusal, named the same way.
		{name: "network larger than memory, unchecked", args: append(ten, "--hidden", "30000000000000,2", "--no-memory-check"), code: 2,
			want: []string{"--hidden: the network mlp 4→30000000000000→2→2", "building it ran out of memory on cpu", "use a smaller --hidden"}},
		{name: "network larger than memory, compare", args: []string{"compare", "--quiet", "--data", "ten.csv", "--label-col", "label", "--methods", "em", "--seeds", "1", "--hidden", "3000000000,3000000000"}, code: 2,
			want: []string{"--hidden: the network mlp 4→3000000000→3000000000→2", "add --no-memory-check"}},
		{name: "network larger than memory, compare unchecked", args: []string{"compare", "--quiet", "--data", "ten.csv", "--label-col", "label", "--methods", "em", "--seeds", "1", "--hidden", "30000000000000,2", "--no-memory-check"}, code: 2,
			want: []string{"--hidden: the network mlp 4→30000000000000→2→2", "building it ran out of memory on cpu"}},
		{name: "nproc -1", args: append(ten, "--nproc", "-1"), code: 2, want: []string{"--nproc -1", "1 to 1024"}},
		{name: "nproc 0", args: append(ten, "--nproc", "0"), code: 2, want: []string{"--nproc 0", "1 to 1024"}},
		{name: "suite with data", args: []string{"compare", "--suite", "--data", "ten.csv"}, code: 2, want: []string{"--data with --suite"}},
		{name: "suite with header", args: []string{"compare", "--suite", "--header", "no"}, code: 2, want: []string{"--header with --suite"}},
		// Were exit 1, "mkdir …: not a directory".
		{name: "report into a file", args: []string{"report", "r4", "--out", "ten.csv"}, code: 2, want: []string{"--out ten.csv is a file"}},
		{name: "fetch into a file", args: []string{"data", "fetch", "mnist", "--dir", "ten.csv"}, code: 2, want: []string{"--dir ten.csv is a file"}},
		{name: "suite of an array", args: []string{"compare", "--suite", "--tables", "ten.npy", "--label-col", "0"}, code: 2, want: []string{"--tables: ten.npy is a NumPy array"}},
		// Was exit 1: the command line's, as eval's is.
		// Was exit 1, "compare: k = 50: want 1 to 10 (the rows of data)".
		{name: "compare K above the rows", args: []string{"compare", "--data", "ten.csv", "--label-col", "label", "--k", "50", "--methods", "kmeans"}, code: 2, want: []string{"--k 50: more clusters than the 10 rows"}},
		{name: "compare without labels", args: []string{"compare", "--data", "three.csv", "--methods", "kmeans"}, code: 2, want: []string{"three.csv", "has no labels"}},
		// Found after every run, with no table printed.
		{name: "compare out a file", args: []string{"compare", "--data", "ten.csv", "--methods", "kmeans", "--out", "ten.csv"}, code: 2, want: []string{"--out ten.csv is a file"}},
		{name: "tables without suite", args: []string{"compare", "--tables", "ten.csv", "--label-col", "label"}, code: 2, want: []string{"--tables without --suite"}},
		{name: "tables without labels", args: []string{"compare", "--suite", "--tables", "ten.csv"}, code: 2, want: []string{"--tables needs --label-col"}},
		{name: "tables missing", args: []string{"compare", "--suite", "--tables", "ten.csv,gone.csv", "--label-col", "label"}, code: 2, want: []string{"--tables", "gone.csv"}},
		{name: "tables twice", args: []string{"compare", "--suite", "--tables", "ten.csv,./ten.csv", "--label-col", "label"}, code: 2, want: []string{"--tables", "./ten.csv given twice"}},
		{name: "seed list with a gap", args: []string{"compare", "--data", "ten.csv", "--seed-list", "1,,2"}, code: 2, want: []string{`--seed-list "1,,2"`, "empty entry"}},
		{name: "methods with a trailing comma", args: []string{"compare", "--data", "ten.csv", "--methods", "kmeans,"}, code: 2, want: []string{`--methods "kmeans,"`, "empty entry"}},
		{name: "bench models with a gap", args: []string{"bench", "--model", "mlp,,mnist"}, code: 2, want: []string{`--model "mlp,,mnist"`, "empty entry"}},
		{name: "bench of no precision", args: []string{"bench", "--model", "mlp", "--precision", ","}, code: 2, want: []string{"--precision", "empty entry"}},
		// Were the embedded digits, a new run, or "open : no such file": `--data "$F"` with F unset.
		{name: "blank data", args: []string{"train", "--data", ""}, code: 2, want: []string{`--data ""`, "empty"}},
		{name: "blank dataset", args: []string{"compare", "--dataset", " "}, code: 2, want: []string{`--dataset " "`, "empty"}},
		{name: "blank resume", args: []string{"train", "--resume", ""}, code: 2, want: []string{`--resume ""`, "empty"}},
		{name: "blank run", args: []string{"report", ""}, code: 2, want: []string{"report: an empty argument"}},
		// Was a set of one image (a folder walk from a file visits the file).
		{name: "data-dir is a file", args: []string{"train", "--dataset", "folder", "--data-dir", "ten.csv"}, code: 2, want: []string{"--data-dir ten.csv is a file"}},
		{name: "data-dir alone is a file", args: []string{"eval", "--model", "r4", "--data-dir", "ten.csv"}, code: 2, want: []string{"--data-dir ten.csv is a file"}},
		{name: "k sweep with a repeat", args: []string{"compare", "--data", "ten.csv", "--k", "2,3,2"}, code: 2, want: []string{"--k", "K = 2 given twice"}},
		{name: "k not a number", args: []string{"compare", "--data", "ten.csv", "--k", "2,x"}, code: 2, want: []string{"--k", `"2,x"`}},
		{name: "k sweep of a baseline", args: []string{"compare", "--data", "ten.csv", "--k", "2,3", "--methods", "kmeans"}, code: 2, want: []string{"--methods kmeans", "one neural method"}},
		{name: "k sweep with suite", args: []string{"compare", "--suite", "--k", "2,3"}, code: 2, want: []string{"--suite with several --k"}},
		{name: "k sweep with restarts", args: []string{"compare", "--data", "ten.csv", "--k", "2,3", "--restarts", "3"}, code: 2, want: []string{"--restarts with several --k"}},
		{name: "k sweep with keep-by", args: []string{"compare", "--data", "ten.csv", "--k", "2,3", "--keep-by", "silhouette"}, code: 2, want: []string{"--keep-by with several --k"}},
		// Were accepted and did nothing.
		{name: "keep-by of one restart", args: append(ten, "--restarts", "1", "--keep-by", "silhouette"), code: 2, want: []string{"--keep-by with --restarts 1"}},
		{name: "kmeans without labels", args: append(train, "--data", "three.csv", "--kmeans"), code: 2, want: []string{"--kmeans", "--label-col"}},
		{name: "lr-kl with em", args: append(ten, "--lr-kl", "1e-3"), code: 2, want: []string{"--lr-kl", "--objective em", "no KL step"}},
		// Were accepted and changed nothing.
		{name: "prior of supervised", args: append(ten, "--objective", "supervised", "--prior", "learned"), code: 2, want: []string{"--prior", "supervised"}},
		{name: "no-norm of supervised", args: append(ten, "--objective", "supervised", "--no-norm"), code: 2, want: []string{"--no-norm", "supervised"}},
		{name: "data-on-host with vectors", args: append(ten, "--data-on-host"), code: 2, want: []string{"--data-on-host", "vectors"}},
		{name: "hidden with images", args: []string{"train", "--dataset", "mnist", "--data-dir", "nowhere", "--hidden", "64"}, code: 2, want: []string{"--hidden", "CNN"}},
		{name: "standardize with images", args: []string{"train", "--dataset", "mnist", "--data-dir", "nowhere", "--standardize"}, code: 2, want: []string{"--standardize", "images"}},
		{name: "k list in train", args: append(ten, "--k", "2,3"), code: 2, want: []string{"k", `"2,3"`}},
		{name: "dist-timeout 0", args: append(ten, "--dist-timeout", "0s"), code: 2, want: []string{"--dist-timeout", "positive"}},
		{name: "unknown dist-backend", args: append(ten, "--dist-backend", "mpi"), code: 2, want: []string{"--dist-backend", `"mpi"`, "gloo"}},
		{name: "sync-stats on resume", args: []string{"train", "--resume", "nonexistent-run", "--sync-stats=false"}, code: 2, want: []string{"--sync-stats with --resume"}},
		{name: "hidden width 0", args: append(ten, "--hidden", "0"), code: 2, want: []string{"--hidden", `"0"`}},
		{name: "hidden empty entry", args: append(ten, "--hidden", "32,,16"), code: 2, want: []string{"--hidden", "empty entry"}},
		{name: "hidden auto on images", args: []string{"train", "--dataset", "mnist", "--data-dir", "nowhere", "--hidden", "auto"}, code: 2, want: []string{"--hidden auto", "CNN"}},
		{name: "trial epochs on vectors", args: append(ten, "--restarts", "3", "--trial-epochs", "5"), code: 2, want: []string{"--trial-epochs", "images"}},
		// Was exit 1, the line twice (each rank's) and a third naming rank 1's exit.
		{name: "nproc with restarts", args: append(ten, "--nproc", "2", "--restarts", "3"), code: 2, want: []string{"--restarts, --trial-epochs or --keep-by with 2 processes"}},
		// Was accepted: the ranks train one restart, which nothing keeps.
		{name: "nproc with keep-by", args: append(ten, "--nproc", "2", "--keep-by", "silhouette"), code: 2, want: []string{"--restarts, --trial-epochs or --keep-by with 2 processes"}},
		{name: "trial epochs of one restart", args: []string{"train", "--dataset", "mnist", "--data-dir", "nowhere", "--restarts", "1", "--trial-epochs", "5"}, code: 2, want: []string{"--trial-epochs 5", "--restarts"}},
		{name: "trial epochs with keep-by", args: []string{"train", "--dataset", "mnist", "--data-dir", "nowhere", "--restarts", "2", "--trial-epochs", "2", "--keep-by", "silhouette"}, code: 2, want: []string{"--keep-by with --trial-epochs"}},
		{name: "trial epochs 1", args: []string{"train", "--dataset", "mnist", "--data-dir", "nowhere", "--restarts", "2", "--trial-epochs", "1"}, code: 2, want: []string{"--trial-epochs 1", "from 2 up to the run's"}},
		{name: "trial epochs past the run", args: []string{"train", "--dataset", "mnist", "--data-dir", "nowhere", "--restarts", "2", "--trial-epochs", "9", "--epochs", "8"}, code: 2, want: []string{"--trial-epochs 9", "8 epochs"}},
		{name: "hidden auto with heads", args: append(ten, "--hidden", "auto", "--heads", "2"), code: 2, want: []string{"--heads 2", "--hidden auto"}},
		{name: "negative cluster index", args: []string{"report", "r4", "--clusters", "1,-2"}, code: 2, want: []string{"--clusters", `"1,-2"`}},
		// Were found after the other figures were drawn (and left a folder a rerun
		// refused), or ignored.
		{name: "compare-run of 4 features", args: []string{"report", "r4", "--compare-run", "r4", "--out", "rep-c"}, code: 2, want: []string{"--compare-run", "4 features"}},
		{name: "clusters of 4 features", args: []string{"report", "r4", "--clusters", "1", "--out", "rep-c"}, code: 2, want: []string{"--clusters", "4 features"}},
		{name: "tsne-points and no-tsne", args: []string{"report", "r4", "--tsne-points", "50", "--no-tsne", "--out", "rep-c"}, code: 2, want: []string{"--tsne-points with --no-tsne"}},
		// 3 dropped the map without a word; 60 000 asked exact t-SNE for 86 GB.
		{name: "tsne-points too few", args: []string{"report", "r4", "--tsne-points", "3", "--out", "rep-c"}, code: 2, want: []string{"--tsne-points 3", "want 5 to 10000"}},
		{name: "tsne-points too many", args: []string{"report", "r4", "--tsne-points", "60000", "--out", "rep-c"}, code: 2, want: []string{"--tsne-points 60000"}},
		{name: "steps of a vector run", args: []string{"report", "r4", "--steps", "7", "--out", "rep-c"}, code: 2, want: []string{"--steps", "takes vectors"}},
		// Were exit 1: usage mistakes found only when the data were read.
		{name: "header maybe", args: append(ten, "--header", "maybe"), code: 2, want: []string{"--header", `"maybe"`, "auto, yes or no"}},
		{name: "cifar net on vectors", args: append(ten, "--arch", "cifar"), code: 2, want: []string{"--arch cifar", "mlp"}},
		// The advice named --lr and --gamma, not --standardize, which fixes it.
		{name: "raw features near float32's limit", args: append(train, "--data", "huge.csv", "--k", "2"), code: 1,
			want: []string{"diverged", "--standardize"}},
		// Was "json: unsupported value: NaN" after a checkpoint that could not be resumed:
		// the loss of the one step was finite, the network it left was not.
		{name: "lr 1e20", args: append(ten, "--lr", "1e20", "--restarts", "1"), code: 1,
			want: []string{"epoch 1", "outputs are not finite", "diverged", "--lr"}},
		// Was a NaN posterior with exit 0 at --k 1: the batch was lowered to the 1 row.
		{name: "one row", args: append(train, "--data", "one.csv", "--k", "2"), code: 2, want: []string{"--k 2: more clusters than the 1 row of", "one.csv"}},
		// Was "--k 10: …; give a smaller --k (10 where not given …)" whether given or not.
		{name: "one row, K not given", args: append(train, "--data", "one.csv"), code: 2, want: []string{"K = 10, the default for data without labels, is more clusters than the 1 row of", "one.csv; give a smaller --k"}},
		// Was accepted, then failed writing config.json without naming the flag.
		{name: "lr inf", args: append(ten, "--lr", "inf"), code: 2, want: []string{"lr +Inf", "finite"}},
		{name: "lr-kl NaN", args: append(train, "--dataset", "mnist", "--data-dir", "mnist", "--lr-kl", "NaN"), code: 2, want: []string{"lr-kl NaN", "finite"}},
		// Was a hang: 10 000 threads on 2 cores; -1 was accepted silently.
		{name: "threads -1", args: append(ten, "--threads", "-1"), code: 2, want: []string{"threads -1", "CPUs"}},
		{name: "threads 10000", args: append(ten, "--threads", "10000"), code: 2, want: []string{"threads 10000", "CPUs"}},
		{name: "bench batch 1", args: []string{"bench", "--model", "mlp", "--batch-size", "1"}, code: 2, want: []string{"--batch-size 1", "at least 2"}},
		// Were Go's "fatal error: runtime: out of memory" and a goroutine dump.
		{name: "bench batch 1e8", args: []string{"bench", "--model", "mlp", "--batch-size", "100000000"}, code: 2, want: []string{"--batch-size 100000000", "4096"}},
		{name: "seeds 1e11", args: []string{"compare", "--data", "ten.csv", "--label-col", "label", "--methods", "kmeans", "--seeds", "100000000000"}, code: 2,
			want: []string{"--seeds 100000000000", "1 to 1000"}},
		{name: "bench threads -1", args: []string{"bench", "--model", "mlp", "--threads", "-1"}, code: 2, want: []string{"--threads -1", "CPUs"}},
		// Was Go's "fatal error: runtime: out of memory" and a 179-line trace.
		{name: "image size 100000", args: append(train, "--dataset", "folder", "--data-dir", "mnist", "--image-size", "100000"), code: 2,
			want: []string{"--image-size 100000", "16384"}},
		{name: "truncated IDX", args: append(train, "--dataset", "mnist", "--data-dir", "mnist"), code: 1,
			want: []string{"train-images-idx3-ubyte", "truncated"}},
		{name: "unknown dataset", args: append(train, "--dataset", "imagenet"), code: 2, want: []string{`"imagenet"`}},
		// Was "--data-dir with --dataset cifar-10: the table is built in".
		{name: "misspelt dataset with data-dir", args: append(train, "--dataset", "CIFAR-10", "--data-dir", "images"), code: 2, want: []string{`unknown dataset "CIFAR-10": did you mean cifar10?`}},
		{name: "unknown dataset with data-dir", args: append(train, "--dataset", "fmnist", "--data-dir", "images"), code: 2, want: []string{`unknown dataset "fmnist": want digits`}},
		// Was "more clusters than the 0 rows".
		{name: "IDX of no images", args: append(train, "--dataset", "mnist", "--data-dir", "mnist0"), code: 1, want: []string{"mnist", "no rows or images"}},
		{name: "K sweep of no images", args: []string{"compare", "--dataset", "mnist", "--data-dir", "mnist0", "--k", "2,3"}, code: 1, want: []string{"mnist holds no rows or images"}},
		// The first K alone was checked as a run's, and the message hung on the order.
		{name: "K sweep above the rows", args: []string{"compare", "--dataset", "iris", "--k", "200,3"}, code: 2, want: []string{"--k: K = 200: want 2 to 150"}},
		{name: "data and dataset", args: append(train, "--data", "ten.csv", "--dataset", "digits"), code: 2, want: []string{"--data", "--dataset"}},
		// Were ignored without a word.
		{name: "data-dir with data", args: slices.Concat(ten, []string{"--data-dir", "mnist"}), code: 2, want: []string{"--data-dir with --data"}},
		{name: "label-col with a table", args: append(train, "--dataset", "iris", "--label-col", "species"), code: 2, want: []string{"--label-col with --dataset iris"}},
		{name: "data-dir with a table", args: append(train, "--dataset", "iris", "--data-dir", "mnist"), code: 2, want: []string{"--data-dir with --dataset iris", "built in"}},
		{name: "data-dir with the digits", args: append(train, "--data-dir", "mnist"), code: 2, want: []string{"--data-dir without --dataset", "digits"}},
		{name: "label-col without data", args: []string{"eval", "--model", "r4", "--label-col", "label"}, code: 2, want: []string{"--label-col without --data or --dataset"}},
		{name: "bench of a model twice", args: []string{"bench", "--model", "mlp,mlp"}, code: 2, want: []string{"--model: mlp given twice"}},
		{name: "bench precision", args: []string{"bench", "--model", "mlp", "--precision", "fp16"}, code: 2, want: []string{`emclust: --precision "fp16": want fp32 or bf16`}},
		// Exited 1, as a failure at run time.
		{name: "header of eval", args: []string{"eval", "--model", "r4", "--data", "ten.csv", "--header", "maybe"}, code: 2, want: []string{`--header "maybe": want auto, yes or no`}},
		{name: "image size of predict", args: []string{"predict", "--model", "r4", "--dataset", "folder", "--data-dir", "mnist", "--image-size", "-1"}, code: 2, want: []string{"--image-size -1: want 0 (keep) to"}},
		{name: "standardize without data", args: []string{"predict", "--model", "r4", "--standardize", "--out", "p.csv"}, code: 2, want: []string{"--standardize without --data or --dataset"}},
		{name: "data-dir of a model of vectors", args: []string{"predict", "--model", "r4", "--data-dir", "mnist", "--out", "p.csv"}, code: 2,
			want: []string{"--data-dir without --data or --dataset", "r4", "not an image set"}},
		{name: "header with an image set", args: []string{"predict", "--model", "r4", "--dataset", "mnist", "--header", "no"}, code: 2, want: []string{"--header with --dataset mnist"}},
		{name: "image size of mnist", args: append(train, "--dataset", "mnist", "--data-dir", "mnist", "--image-size", "32"), code: 2, want: []string{"--image-size", "--dataset folder"}},
		{name: "gray vectors", args: slices.Concat(ten, []string{"--gray"}), code: 2, want: []string{"--gray", "--dataset folder"}},
		{name: "predict of data and dataset", args: []string{"predict", "--model", "r4", "--data", "ten.csv", "--dataset", "mnist", "--out", "p.csv"}, code: 2,
			want: []string{"--data", "--dataset"}},
		// Was "open r4/checkpoint.safetensors/metrics.jsonl: not a directory".
		{name: "report of a model file", args: []string{"report", "r4/checkpoint.safetensors"}, code: 2, want: []string{"is a file", "run folder (r4?)"}},
		{name: "report of a folder without its images", args: []string{"report", "r4", "--dataset", "folder"}, code: 2, want: []string{"folder", "--data-dir"}},
		{name: "unknown flag", args: []string{"train", "--bogus"}, code: 2, want: []string{"unknown flag --bogus", "train --help"}},
		// Were Go's "invalid value "-1" for flag -seed: parse error", one dash and no word of what fits.
		{name: "negative seed", args: append(ten, "--seed", "-1"), code: 2, want: []string{`--seed "-1"`, "whole number, 0 or more"}},
		{name: "epochs not a number", args: append(ten, "--epochs", "x"), code: 2, want: []string{`--epochs "x"`, "whole number"}},
		{name: "bool not a bool", args: append(ten, "--kmeans=maybe"), code: 2, want: []string{`--kmeans "maybe"`, "true or false"}},
		{name: "duration without unit", args: append(ten, "--dist-timeout", "5"), code: 2, want: []string{`--dist-timeout "5"`, "90s"}},
		{name: "unknown short flag", args: []string{"train", "-x"}, code: 2, want: []string{"unknown flag -x", "train --help"}},
		{name: "misspelt flag", args: []string{"train", "--epoch", "5"}, code: 2, want: []string{"unknown flag --epoch (--epochs?)"}},
		{name: "several K to train", args: []string{"train", "--k", "2,3"}, code: 2, want: []string{`--k "2,3": want a whole number; several K are compared with emclust compare --k 2,3`}},
		{name: "a model as an argument", args: []string{"predict", "r4"}, code: 2, want: []string{`predict takes flags only; unexpected "r4" (--model r4?)`}},
		{name: "unknown command", args: []string{"trian"}, code: 2, want: []string{`"trian"`}},
		{name: "positional argument", args: []string{"train", "ten.csv"}, code: 2, want: []string{`"ten.csv"`}},
		// Was "… no checkpoint.safetensors: its run stopped …; start it again with --out mnist".
		{name: "resume of a data folder", args: []string{"train", "--resume", "mnist"}, code: 1, want: []string{"resume: mnist holds no run (no config.json, no checkpoint.safetensors)"}},
		{name: "resume of restarts killed", args: []string{"train", "--resume", "locked"}, code: 1, want: []string{"locked has no checkpoint", "the restarts of a table save the kept run once all have trained"}},
		{name: "resume without checkpoint", args: []string{"train", "--resume", "be gun"}, code: 1, want: []string{"be gun has no checkpoint", "start it again with --out 'be gun'"}},
		{name: "resume of nothing", args: []string{"train", "--resume", "nowhere"}, code: 1, want: []string{"nowhere", "does not exist"}},
		{name: "resume with a setting", args: []string{"train", "--resume", "r4", "--lr", "0.1"}, code: 2, want: []string{"--lr", "--resume", "--epochs"}},
		{name: "resume of a torn checkpoint", args: []string{"train", "--resume", "torn", "--epochs", "5"}, code: 1, want: []string{"torn/checkpoint.safetensors"}},
		// Was "mkdir …: not a directory".
		{name: "resume of a checkpoint file", args: []string{"train", "--resume", "r4/checkpoint.safetensors", "--epochs", "50"}, code: 2,
			want: []string{"is a file", "run folder"}},
		{name: "predict without model", args: []string{"predict", "--data", "three.csv"}, code: 2, want: []string{"--model", "required"}},
		{name: "predict on other features", args: []string{"predict", "--model", "r4", "--data", "three.csv", "--out", "p.csv"}, code: 1,
			want: []string{"three.csv has 3 feature columns", "4-feature", "r4"}},
		// Rows with a header read the model's label column by its name (TestPredictInheritsLabelCol).
		{name: "predict with the label as feature", args: []string{"predict", "--model", "r4", "--data", "four-noheader.csv", "--out", "p.csv"}, code: 1,
			want: []string{"four-noheader.csv has 5 feature columns", "4-feature", "it trained with --label-col label, a name, and these data have no header: if a column holds labels, give its index with --label-col"}},
		{name: "predict with a garbage checkpoint", args: []string{"predict", "--model", "garbage.safetensors", "--data", "three.csv"}, code: 1,
			want: []string{"garbage.safetensors"}},
		{name: "predict with a truncated checkpoint", args: []string{"predict", "--model", "truncated.safetensors", "--data", "three.csv"}, code: 1,
			want: []string{"truncated.safetensors", "truncated"}},
		{name: "predict with a missing model", args: []string{"predict", "--model", "nowhere", "--data", "three.csv"}, code: 1,
			want: []string{"nowhere"}},
		{name: "predict to a missing folder", args: []string{"predict", "--model", "r4", "--data", "four-unlabelled.csv", "--out", "no/such/dir/p.csv"}, code: 2,
			want: []string{"no/such/dir/p.csv", "does not exist"}},
		// Was data loss: the CSV replaced the trained model, exit 0.
		{name: "predict over the run's checkpoint", args: []string{"predict", "--model", "r4", "--data", "four-unlabelled.csv", "--out", "r4/checkpoint.safetensors"}, code: 2,
			want: []string{"r4/checkpoint.safetensors", "belongs to the run"}},
		// A run still training writes its assignments later: refused before they exist.
		{name: "predict to a run's future assignments", args: []string{"predict", "--model", "r4", "--data", "four-unlabelled.csv", "--out", "torn/assignments.csv"}, code: 2,
			want: []string{"torn/assignments.csv", "belongs to the run"}},
		{name: "predict over the run's assignments", args: []string{"predict", "--model", "r4", "--data", "four-unlabelled.csv", "--out", "r4/assignments.csv", "--force"}, code: 2,
			want: []string{"r4/assignments.csv", "belongs to the run"}},
		{name: "predict over its input", args: []string{"predict", "--model", "r4", "--data", "four-unlabelled.csv", "--out", "four-unlabelled.csv", "--force"}, code: 2,
			want: []string{"four-unlabelled.csv", "input"}},
		{name: "predict onto a folder", args: []string{"predict", "--model", "r4", "--data", "four-unlabelled.csv", "--out", "mnist"}, code: 2,
			want: []string{"--out mnist", "folder"}},
		{name: "predict onto an existing file", args: []string{"predict", "--model", "r4", "--data", "four-unlabelled.csv", "--out", "ten.csv"}, code: 2,
			want: []string{"--out ten.csv", "--force"}},
		// Was the whole help on stdout and exit 1.
		{name: "embed without model", args: []string{"embed"}, code: 2, want: []string{"--model", "required"}},
		{name: "embed of vectors", args: []string{"embed", "--model", "r4", "--data", "ten.csv"}, code: 2, want: []string{"unknown flag --data"}},
		{name: "embed onto an existing file", args: []string{"embed", "--model", "r4", "--out", "ten.csv"}, code: 2,
			want: []string{"--out ten.csv", "--force"}},
		// Was exit 1, as if the model had failed to run.
		{name: "embed of an MLP", args: []string{"embed", "--model", "r4", "--out", "e.csv"}, code: 2, want: []string{"r4 holds a model of --arch mlp", "--arch mnist2d"}},
		{name: "eval without labels", args: []string{"eval", "--model", "r4", "--data", "four-unlabelled.csv"}, code: 2,
			want: []string{"four-unlabelled.csv", "no labels", "--label-col"}},
		{name: "score of different lengths", args: []string{"score", "--truth", "truth.txt", "--pred", "short.txt"}, code: 1,
			want: []string{"truth.txt", "6", "short.txt", "2"}},
		{name: "score of a missing file", args: []string{"score", "--truth", "truth.txt", "--pred", "nowhere.txt"}, code: 1,
			want: []string{"nowhere.txt"}},
		{name: "score without pred", args: []string{"score", "--truth", "truth.txt"}, code: 2, want: []string{"--pred", "required"}},
		{name: "fetch without dir", args: []string{"data", "fetch", "mnist"}, code: 2, want: []string{"--dir", "required"}},
		// Was "takes one data set name", for the order README showed: the flag is
		// read now, and the missing --dir value is what is refused.
		{name: "fetch with the flag last", args: []string{"data", "fetch", "cifar10", "--dir"}, code: 2,
			want: []string{"data fetch", "flag needs an argument: --dir"}},
		{name: "fetch of an unknown set, flag last", args: []string{"data", "fetch", "imagenet", "--dir", "d"}, code: 2,
			want: []string{`"imagenet"`, "fashion-mnist"}},
		{name: "bench of an unknown model", args: []string{"bench", "--model", "resnet"}, code: 2, want: []string{`"resnet"`}},
		{name: "bench of an unknown precision", args: []string{"bench", "--model", "mlp", "--precision", "fp32,int8"}, code: 2, want: []string{"--precision", `"int8"`}},
		{name: "bench of a bad layout", args: []string{"bench", "--model", "mlp", "--channels-last", "yes"}, code: 2, want: []string{"--channels-last", `"yes"`}},
		// Were exit 1, found when the model came to be timed.
		{name: "bench of an unknown objective", args: []string{"bench", "--model", "mlp", "--objective", "bar"}, code: 2, want: []string{`--objective "bar"`, "em-aug"}},
		{name: "bench of twofold on vectors", args: []string{"bench", "--model", "mnist,mlp", "--objective", "twofold"}, code: 2, want: []string{"--objective twofold", "not mlp"}},
	}
	// In this process, one row after another: the rows name fixtures by relative
	// paths, and a process per row cost a libtorch start each.
	t.Chdir(fixtures)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.skip {
				t.Skip("a CUDA device is present")
			}
			wantError(t, runMain(tc.args...), tc.code, tc.want...)
		})
	}
}

// runMain runs emclust's Main in this process, in the current folder.
func runMain(args ...string) result {
	var out, errb bytes.Buffer
	code := Main(append([]string{"emclust"}, args...), &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func TestTrainDigits(t *testing.T) {
	dir := t.TempDir()
	r := run(t, dir, "train", "--quiet", "--epochs", "3", "--restarts", "1", "--out", "run")
	wantScoreLine(t, r)
	if r.stderr != "" {
		t.Errorf("--quiet should keep stderr empty, got %q", r.stderr)
	}
	runDir := filepath.Join(dir, "run")

	var cfg map[string]any
	readJSON(t, filepath.Join(runDir, "config.json"), &cfg)
	if cfg["dataset"] != "digits" || cfg["epochs"] != 3.0 || cfg["k"] != 10.0 {
		t.Errorf("config.json: dataset %v epochs %v k %v, want digits 3 10", cfg["dataset"], cfg["epochs"], cfg["k"])
	}

	lines := readLines(t, filepath.Join(runDir, "metrics.jsonl"))
	if len(lines) != 3 {
		t.Fatalf("metrics.jsonl has %d lines, want 3", len(lines))
	}
	for i, l := range lines {
		var m struct {
			Epoch int      `json:"epoch"`
			Loss  float64  `json:"loss"`
			ACC   *float64 `json:"acc"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("metrics.jsonl line %d: %v", i+1, err)
		}
		if m.Epoch != i+1 || m.ACC == nil {
			t.Errorf("metrics.jsonl line %d: epoch %d acc %v", i+1, m.Epoch, m.ACC)
		}
	}

	if st, err := os.Stat(filepath.Join(runDir, "checkpoint.safetensors")); err != nil || st.Size() == 0 {
		t.Errorf("checkpoint.safetensors: %v", err)
	}
	if epoch := checkpointEpoch(t, filepath.Join(runDir, "checkpoint.safetensors")); epoch != 3 {
		t.Errorf("checkpoint is of epoch %d, want 3", epoch)
	}

	rows := readLines(t, filepath.Join(runDir, "assignments.csv"))
	if len(rows) != 1798 || rows[0] != "index,cluster,posterior,label" {
		t.Errorf("assignments.csv: %d lines starting %q, want 1797 rows + header", len(rows), rows[0])
	}
	for i, row := range rows[1:] {
		f := strings.Split(row, ",")
		if len(f) != 4 || f[0] != strconv.Itoa(i) {
			t.Fatalf("assignments.csv row %d: %q", i+1, row)
		}
	}

	var sum struct {
		Epochs    int   `json:"epochs"`
		K         int   `json:"k"`
		Sizes     []int `json:"sizes"`
		Scores    *struct{ ACC, NMI, ARI float64 }
		KMeans    *struct{ ACC float64 } `json:"kmeans"`
		KMeansRaw *struct{ ACC float64 } `json:"kmeans_raw"`
		KMeansStd *struct{ ACC float64 } `json:"kmeans_standardized"`
	}
	readJSON(t, filepath.Join(runDir, "summary.json"), &sum)
	// The digits' 64 pixels share a unit, so they stay raw by default: k-means runs on
	// the same raw features, and on the standardized ones beside.
	if sum.KMeans == nil || sum.KMeansRaw != nil || sum.KMeansStd == nil || !(sum.KMeans.ACC > 0.1 && sum.KMeans.ACC <= 1) || !(sum.KMeansStd.ACC > 0.1 && sum.KMeansStd.ACC <= 1) {
		t.Errorf("summary.json k-means %+v, on the raw features %+v, on the standardized %+v; want the first and the last, ACC in (0.1, 1]", sum.KMeans, sum.KMeansRaw, sum.KMeansStd)
	}
	var saved struct {
		Standardize     bool    `json:"standardize"`
		StandardizeAuto bool    `json:"standardize_auto"`
		FeatureSpread   float64 `json:"feature_spread"`
	}
	readJSON(t, filepath.Join(runDir, "config.json"), &saved)
	if saved.Standardize || !saved.StandardizeAuto || !(saved.FeatureSpread > 1 && saved.FeatureSpread < data.SpreadToStandardize) {
		t.Errorf("config.json %+v: want the digits kept raw by the automatic choice, spread in (1, %d)", saved, data.SpreadToStandardize)
	}
	total := 0
	for _, n := range sum.Sizes {
		total += n
	}
	if sum.Epochs != 3 || sum.K != 10 || total != 1797 || sum.Scores == nil {
		t.Errorf("summary.json: %+v", sum)
	}
	if got := fmt.Sprintf("ACC %.4f NMI %.4f ARI %.4f", sum.Scores.ACC, sum.Scores.NMI, sum.Scores.ARI); got+"\n" != r.stdout {
		t.Errorf("summary.json scores %q differ from stdout %q", got, r.stdout)
	}

	// The same run folder again is refused, not overwritten.
	r = run(t, dir, "train", "--quiet", "--epochs", "3", "--out", "run")
	wantError(t, r, 2, "run", "--resume run")
}

// A run shows k-means on the features it did not use too: a standardized run on the
// raw ones, a raw run on the standardized ones, which are the standardized run's own.
func TestTrainKMeansBothFeatures(t *testing.T) {
	dir := t.TempDir()
	type scores struct{ ACC, NMI, ARI float64 }
	type sum struct {
		KMeans    *scores `json:"kmeans"`
		KMeansRaw *scores `json:"kmeans_raw"`
		KMeansStd *scores `json:"kmeans_standardized"`
	}
	var std, raw sum
	for _, tc := range []struct {
		flag string
		into *sum
	}{{"--standardize", &std}, {"--standardize=false", &raw}} {
		wantScoreLine(t, run(t, dir, "train", "--dataset", "wine", "--quiet", "--epochs", "1", "--restarts", "1", tc.flag, "--out", tc.flag))
		readJSON(t, filepath.Join(dir, tc.flag, "summary.json"), tc.into)
	}
	if std.KMeans == nil || std.KMeansRaw == nil || std.KMeansStd != nil {
		t.Fatalf("standardized run: k-means %+v, raw %+v, standardized %+v; want the first two", std.KMeans, std.KMeansRaw, std.KMeansStd)
	}
	if raw.KMeans == nil || raw.KMeansRaw != nil || raw.KMeansStd == nil {
		t.Fatalf("raw run: k-means %+v, raw %+v, standardized %+v; want the first and the last", raw.KMeans, raw.KMeansRaw, raw.KMeansStd)
	}
	// The same z-scores, seed and restarts: the same clustering.
	if *raw.KMeansStd != *std.KMeans {
		t.Errorf("k-means on the raw run's standardized features %+v, on the standardized run's %+v; want the same", *raw.KMeansStd, *std.KMeans)
	}
}

func TestTrainJSON(t *testing.T) {
	dir := t.TempDir()
	r := run(t, dir, "train", "--quiet", "--json", "--epochs", "1", "--out", "run")
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("exit status %d: %s", r.code, r.stderr)
	}
	if strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("want one line of JSON, got %q", r.stdout)
	}
	var s struct {
		Run    string `json:"run"`
		Epochs int    `json:"epochs"`
		Scores *struct{ ACC, NMI, ARI float64 }
		KMeans *struct{ ACC, NMI, ARI float64 }
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q", err, r.stdout)
	}
	if s.Run != "run" || s.Epochs != 1 || s.Scores == nil || s.KMeans == nil {
		t.Errorf("JSON summary %+v", s)
	}
}

// A run with heads says which head it predicts with, and predict uses that head.
func TestTrainHeads(t *testing.T) {
	dir := t.TempDir()
	r := run(t, dir, "train", "--quiet", "--json", "--epochs", "2", "--heads", "3", "--restarts", "1", "--kmeans=false", "--out", "run")
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("exit status %d: %s", r.code, r.stderr)
	}
	var s struct {
		Scores *struct{ ACC float64 }
		Head   *struct{ Head int }
		Heads  int
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("stdout is not JSON: %v: %q", err, r.stdout)
	}
	if s.Heads != 3 || s.Head == nil || s.Head.Head < 0 || s.Head.Head > 2 || s.Scores == nil {
		t.Fatalf("JSON summary %q: want the head chosen of 3 and the scores", r.stdout)
	}
	p := run(t, dir, "eval", "--model", "run")
	noCrash(t, p)
	if p.code != 0 || !strings.Contains(p.stdout, fmt.Sprintf("ACC %.4f", s.Scores.ACC)) {
		t.Fatalf("eval of the run: exit %d, %q; want the training summary's ACC %.4f", p.code, p.stdout, s.Scores.ACC)
	}
}

// --hidden none trains a linear map from features to scores (breast cancer: 30
// features, 2 clusters), and the run folder reloads it as one.
func TestTrainLinear(t *testing.T) {
	dir := t.TempDir()
	r := run(t, dir, "train", "--dataset", "breast-cancer", "--hidden", "none", "--epochs", "1", "--restarts", "1",
		"--kmeans=false", "--out", "run")
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("exit status %d: %s", r.code, r.stderr)
	}
	if want := fmt.Sprintf("linear 30→2 net, %d params, K=2", 30*2+2); !strings.Contains(r.stderr, want) {
		t.Errorf("train's log %q: want %q", r.stderr, want)
	}
	line := wantScoreLine(t, run(t, dir, "eval", "--model", "run"))
	if !strings.Contains(r.stdout+r.stderr, line) {
		t.Errorf("eval of the linear run says %q; training said %q", line, r.stdout+r.stderr)
	}
}

// Which networks a vector run's restarts train: both unless --hidden names one, or
// --heads asks for several heads on one network.
func TestHiddenFlag(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args     []string
		auto     bool
		restarts int
	}{
		{nil, true, 6},
		{[]string{"--hidden", "auto"}, true, 6},
		{[]string{"--hidden", "16"}, false, 3},
		{[]string{"--heads", "2"}, false, 3},
	} {
		out := "run" + strings.Join(tc.args, "")
		args := append([]string{"train", "--quiet", "--data", filepath.Join(fixtures, "four.csv"), "--label-col", "label", "--epochs", "1", "--restarts", "3", "--kmeans=false", "--out", out}, tc.args...)
		if r := run(t, dir, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, r.code, r.stderr)
		}
		var cfg struct {
			HiddenAuto bool `json:"hidden_auto"`
		}
		var sum struct {
			Restarts []struct{ Network string }
		}
		readJSON(t, filepath.Join(dir, out, "config.json"), &cfg)
		readJSON(t, filepath.Join(dir, out, "summary.json"), &sum)
		if cfg.HiddenAuto != tc.auto || len(sum.Restarts) != tc.restarts || (sum.Restarts[0].Network != "") != tc.auto {
			t.Errorf("%v: hidden_auto %v, %d restarts (the first's network %q); want %v and %d", tc.args, cfg.HiddenAuto, len(sum.Restarts), sum.Restarts[0].Network, tc.auto, tc.restarts)
		}
	}
}

func TestPredictEvalCSV(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(fixtures, "r4")
	data := filepath.Join(fixtures, "four.csv")

	// Labelled: the assignments carry the label and stdout the scores.
	r := run(t, dir, "predict", "--model", model, "--data", data, "--label-col", "label", "--out", "a.csv")
	line := wantScoreLine(t, r)
	rows := readLines(t, filepath.Join(dir, "a.csv"))
	if len(rows) != 201 || rows[0] != "index,cluster,posterior,label" {
		t.Errorf("a.csv: %d lines starting %q, want 200 rows + header", len(rows), rows[0])
	}

	// eval on the same data agrees, from the run folder or the checkpoint file.
	for _, m := range []string{model, filepath.Join(model, "checkpoint.safetensors")} {
		r = run(t, dir, "eval", "--model", m, "--data", data, "--label-col", "label")
		if got := wantScoreLine(t, r); got != line {
			t.Errorf("eval --model %s: %q, predict said %q", m, got, line)
		}
	}
	r = run(t, dir, "eval", "--model", model, "--data", data, "--label-col", "label", "--json")
	var js map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &js); r.code != 0 || err != nil || js["n"] != 200.0 {
		t.Errorf("eval --json: exit %d, %v: %q", r.code, err, r.stdout)
	}

	// Unlabelled: no scores, but the sizes line train prints; every posterior with
	// --all-posteriors.
	r = run(t, dir, "predict", "--model", model, "--data", filepath.Join(fixtures, "four-unlabelled.csv"),
		"--all-posteriors", "--out", "b.csv")
	noCrash(t, r)
	if r.code != 0 || !regexp.MustCompile(`^clusters 2 sizes \d+ \d+\n$`).MatchString(r.stdout) {
		t.Fatalf("predict unlabelled: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	rows = readLines(t, filepath.Join(dir, "b.csv"))
	if len(rows) != 51 || rows[0] != "index,cluster,p0,p1" {
		t.Errorf("b.csv: %d lines starting %q", len(rows), rows[0])
	}
	for _, row := range rows[1:] {
		f := strings.Split(row, ",")
		p0, _ := strconv.ParseFloat(f[2], 64)
		p1, _ := strconv.ParseFloat(f[3], 64)
		if d := p0 + p1 - 1; d > 1e-5 || d < -1e-5 {
			t.Fatalf("b.csv row %q: posteriors do not sum to 1", row)
		}
	}
}

func TestScore(t *testing.T) {
	// truth 000111, pred 001111. ACC: clusters 0→0, 1→1 get 5 of 6 right = 0.8333.
	// NMI: MI = (1/3)ln2 + (1/6)ln(1/2) + (1/2)ln(3/2) = 0.318257, H(truth) = ln 2,
	// H(pred) = 0.636514, MI/mean(H) = 0.4787. ARI: index 4 (pairs 1+0+3), expected
	// 6·7/15 = 2.8, max (6+7)/2: (4−2.8)/(6.5−2.8) = 0.3243.
	r := run(t, fixtures, "score", "--truth", "truth.txt", "--pred", "pred.txt")
	if got := wantScoreLine(t, r); got != "ACC 0.8333 NMI 0.4787 ARI 0.3243" {
		t.Errorf("score: %q, want ACC 0.8333 NMI 0.4787 ARI 0.3243", got)
	}
	r = run(t, fixtures, "score", "--truth", "truth.txt", "--pred", "truth.txt", "--json")
	var js map[string]float64
	near1 := func(v float64) bool { return v > 1-1e-9 && v < 1+1e-9 }
	if err := json.Unmarshal([]byte(r.stdout), &js); r.code != 0 || err != nil || !near1(js["acc"]) || !near1(js["nmi"]) || !near1(js["ari"]) {
		t.Errorf("score --json of identical labels: exit %d, %v: %q", r.code, err, r.stdout)
	}

	// predict's assignments are scored by their cluster column, and as the truth by
	// their label column; an ID in place of the index, or a class name, may be quoted.
	dir := t.TempDir()
	files := map[string]string{
		"a.csv":     "index,cluster,posterior,label\n0,0,0.9,x\n1,0,0.8,x\n2,1,0.7,x\n3,1,0.9,y\n4,1,1.0,y\n5,1,0.6,y\n",
		"comma.csv": "path,cluster,posterior,label\na.png,0,0.9,\"t, shirt\"\nb.png,0,0.8,\"t, shirt\"\nc.png,1,0.7,\"t, shirt\"\nd.png,1,0.9,y\ne.png,1,1.0,y\nf.png,1,0.6,y\n",
		"ids.csv":   "customer,cluster,p0,p1\n\"a, 1\",0,0.5,0.5\nb,0,0.5,0.5\nc,1,0.5,0.5\nd,1,0.5,0.5\ne,1,0.5,0.5\nf,1,0.5,0.5\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"--truth", filepath.Join(fixtures, "truth.txt"), "--pred", "a.csv"},
		{"--truth", filepath.Join(fixtures, "truth.txt"), "--pred", "ids.csv"},
		{"--truth", "a.csv", "--pred", filepath.Join(fixtures, "pred.txt")},
		{"--truth", "comma.csv", "--pred", filepath.Join(fixtures, "pred.txt")},
	} {
		if got := wantScoreLine(t, run(t, dir, append([]string{"score"}, args...)...)); got != "ACC 0.8333 NMI 0.4787 ARI 0.3243" {
			t.Errorf("score %v: %q, want ACC 0.8333 NMI 0.4787 ARI 0.3243", args, got)
		}
	}
	wantError(t, run(t, dir, "score", "--truth", "ids.csv", "--pred", "a.csv"), 1, "ids.csv: emclust's assignments without a label column (columns customer,cluster,p0,p1)")
	// Assignments that name their rows alike are paired by name, not by line: the
	// shuffled rows were scored as ACC 0.6667 NMI 0.0817 ARI -0.0645.
	for name, body := range map[string]string{
		"shuffled.csv": "path,cluster,posterior\nf.png,1,0.6\nd.png,1,0.9\na.png,0,0.9\ne.png,1,1.0\nc.png,1,0.7\nb.png,0,0.8\n",
		"other.csv":    "path,cluster,posterior\nf.png,1,0.6\nd.png,1,0.9\na.png,0,0.9\ne.png,1,1.0\ng.png,1,0.7\nb.png,0,0.8\n",
		"twice.csv":    "path,cluster,posterior\nf.png,1,0.6\nd.png,1,0.9\na.png,0,0.9\ne.png,1,1.0\nf.png,1,0.7\nb.png,0,0.8\n",
		"header.txt":   "label\n0\n0\n0\n1\n1\n1\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := wantScoreLine(t, run(t, dir, "score", "--truth", "comma.csv", "--pred", "shuffled.csv")); got != "ACC 0.8333 NMI 0.4787 ARI 0.3243" {
		t.Errorf("score of shuffled assignments: %q, want ACC 0.8333 NMI 0.4787 ARI 0.3243", got)
	}
	wantError(t, run(t, dir, "score", "--truth", "comma.csv", "--pred", "other.csv"), 1, `other.csv: path "c.png" of comma.csv (row 3) is not among its rows`)
	wantError(t, run(t, dir, "score", "--truth", "comma.csv", "--pred", "twice.csv"), 1, `twice.csv: path "f.png" names two rows`)
	wantError(t, run(t, dir, "score", "--truth", "header.txt", "--pred", "a.csv"), 1, "header.txt has 7 labels but a.csv has 6 (a plain list's every line is a label: has one a header line?)")
	// NumPy arrays of labels, as a script saves them (were "UTF-16 text or a binary file").
	for name, b := range map[string][]byte{
		"truth.npy": datatest.NPY(6, 1, func(i, _ int) float32 { return float32(7 * (i / 3)) }),
		"wide.npy":  datatest.NPY(6, 2, func(i, _ int) float32 { return float32(i / 3) }),
		"half.npy":  datatest.NPY(6, 1, func(i, _ int) float32 { return float32(i) / 2 }),
		"big.npy":   datatest.NPY(6, 1, func(i, _ int) float32 { return 1 << 24 }),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := wantScoreLine(t, run(t, dir, "score", "--truth", "truth.npy", "--pred", filepath.Join(fixtures, "pred.txt"))); got != "ACC 0.8333 NMI 0.4787 ARI 0.3243" {
		t.Errorf("score --truth truth.npy: %q, want ACC 0.8333 NMI 0.4787 ARI 0.3243", got)
	}
	wantError(t, run(t, dir, "score", "--truth", "wide.npy", "--pred", "a.csv"), 1, "wide.npy: an array of 2 values a row; want one label a row")
	wantError(t, run(t, dir, "score", "--truth", "a.csv", "--pred", "half.npy"), 1, "half.npy: row 1: 0.5 is not a whole number")
	wantError(t, run(t, dir, "score", "--truth", "big.npy", "--pred", "a.csv"), 1, "big.npy: row 0: 16777216 is too large a label to read exactly from an array")
	// A truth of NA has no class, and is left out; a prediction of NA is refused.
	if err := os.WriteFile(filepath.Join(dir, "na.txt"), []byte("0\n0\nNA\n1\n1\n1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, dir, "score", "--truth", "na.txt", "--pred", filepath.Join(fixtures, "pred.txt")); r.code != 0 || !strings.Contains(r.stdout, "ACC 1.0000 NMI 1.0000 ARI 1.0000 on 5 labelled rows") {
		t.Errorf("score of a truth with NA: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	wantError(t, run(t, dir, "score", "--truth", filepath.Join(fixtures, "truth.txt"), "--pred", "na.txt"), 1, "na.txt: label 3 of the predictions is missing (NA or the like)")
	// A pipe is read once, whatever it holds.
	for _, file := range []string{filepath.Join(fixtures, "pred.txt"), filepath.Join(dir, "a.csv")} {
		r := runProgram("bash", dir, nil, slowWait, "-c", fmt.Sprintf("%q score --truth %q --pred <(cat %q)", bin, filepath.Join(fixtures, "truth.txt"), file))
		if got := wantScoreLine(t, r); got != "ACC 0.8333 NMI 0.4787 ARI 0.3243" {
			t.Errorf("score --pred <(cat %s): %q", file, got)
		}
	}
}

func TestDevices(t *testing.T) {
	r := devices()
	noCrash(t, r)
	if r.code != 0 || !regexp.MustCompile(`(?m)^cpu$`).MatchString(r.stdout) {
		t.Errorf("devices: exit %d, stdout %q", r.code, r.stdout)
	}
	// The shim make builds has Gloo (libgloo-dev), and says so.
	if !strings.Contains(r.stdout, "process groups: gloo") {
		t.Errorf("devices: stdout %q does not name Gloo among the process-group backends", r.stdout)
	}
}

func TestHelp(t *testing.T) {
	r := runProc(t, t.TempDir(), "train", "--help")
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("train --help: exit %d: %s", r.code, r.stderr)
	}
	for _, f := range trainCommand().Flags {
		name := f.Names()[0]
		dashes := "--"
		if len(name) == 1 {
			dashes = "-"
		}
		// A flag's entry runs from its line to the next flag's (--objective's spans
		// one line per objective).
		var line string
		in := false
		for _, l := range strings.Split(r.stdout, "\n") {
			tl := strings.TrimSpace(l)
			if strings.HasPrefix(tl, dashes+name+" ") || strings.HasPrefix(tl, dashes+name+",") {
				in, line = true, l
				continue
			}
			if in && tl != "" && !strings.HasPrefix(tl, "-") {
				line += " " + tl
				continue
			}
			in = false
		}
		if line == "" {
			t.Errorf("train --help does not list --%s", name)
			continue
		}
		if name != "help" && !strings.Contains(line, "(default: ") {
			t.Errorf("train --help gives no default for --%s: %q", name, line)
		}
	}
	for _, want := range []string{"--batch-size value", "(default: 128)", "--epochs value", "(default: 30 for vectors, raised to make at least 1000 steps or lowered to the fewest that make 5000; 250 for images)",
		`--gamma value`, `(default: 5)`, "--seed value", "(default: 1)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("train --help lacks %q", want)
		}
	}
	r = runProc(t, t.TempDir(), "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "train") || !strings.Contains(r.stdout, "predict") {
		t.Errorf("--help: exit %d: %q", r.code, r.stdout)
	}
}

// metricsWithoutTime reads metrics.jsonl with the wall-clock field dropped.
func metricsWithoutTime(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for _, l := range readLines(t, path) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		delete(m, "seconds")
		b, _ := json.Marshal(m)
		out = append(out, string(b))
	}
	return out
}

// A resumed run is bit for bit the straight one. On the CPU: CUDA kernels need not be
// deterministic, and this checks the resume, not them.
func TestResumeMatchesStraightRun(t *testing.T) {
	dir := t.TempDir()
	common := []string{"--quiet", "--kmeans=false", "--seed", "7", "--device", "cpu", "--restarts", "1"}
	r := runProc(t, dir, append([]string{"train", "--epochs", "2", "--out", "a"}, common...)...)
	wantScoreLine(t, r)
	resumedRun := runProc(t, dir, "train", "--resume", "a", "--epochs", "4", "--device", "cpu")
	resumed := wantScoreLine(t, resumedRun)
	r = runProc(t, dir, append([]string{"train", "--epochs", "4", "--out", "b"}, common...)...)
	straight := wantScoreLine(t, r)
	if resumed != straight {
		t.Errorf("resumed run ends %q, straight run %q", resumed, straight)
	}
	// Its seconds are this sitting's, and it says so (was "4 epochs in 0.1s").
	var sum struct {
		Epochs       int
		ResumedAfter int `json:"resumed_after"`
	}
	readJSON(t, filepath.Join(dir, "a", "summary.json"), &sum)
	if sum.Epochs != 4 || sum.ResumedAfter != 2 || !strings.Contains(resumedRun.stderr, "emclust: 4 epochs, the last 2 in ") {
		t.Errorf("summary.json says %d epochs resumed after %d, want 4 after 2; log:\n%s", sum.Epochs, sum.ResumedAfter, resumedRun.stderr)
	}
	ma, mb := metricsWithoutTime(t, filepath.Join(dir, "a", "metrics.jsonl")), metricsWithoutTime(t, filepath.Join(dir, "b", "metrics.jsonl"))
	if len(ma) != 4 {
		t.Fatalf("resumed metrics.jsonl has %d lines, want 4", len(ma))
	}
	for i := range ma {
		if ma[i] != mb[i] {
			t.Errorf("epoch %d: resumed %s\nstraight %s", i+1, ma[i], mb[i])
		}
	}
	a, _ := os.ReadFile(filepath.Join(dir, "a", "assignments.csv"))
	b, _ := os.ReadFile(filepath.Join(dir, "b", "assignments.csv"))
	if !bytes.Equal(a, b) {
		t.Errorf("assignments.csv of the resumed and the straight run differ")
	}

	// A finished run says how to train it longer.
	r = runProc(t, dir, "train", "--resume", "a")
	wantError(t, r, 2, "a", "4 of 4 epochs", "--epochs")

	// A run killed, or out of disk, after its last checkpoint but before its summary
	// (say, during the k-means baseline) is finished by resuming it, without training.
	assignments := filepath.Join(dir, "a", "assignments.csv")
	want, err := os.ReadFile(assignments)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(assignments)
	os.Remove(filepath.Join(dir, "a", "summary.json"))
	// Stopped between the checkpoint's rename and metrics.jsonl's: the file lags.
	metrics := filepath.Join(dir, "a", "metrics.jsonl")
	os.WriteFile(metrics, []byte(strings.Join(readLines(t, metrics)[:2], "\n")+"\n"), 0o644)
	if got := wantScoreLine(t, runProc(t, dir, "train", "--quiet", "--resume", "a", "--device", "cpu")); got != resumed {
		t.Errorf("finishing the run printed %q, the run said %q", got, resumed)
	}
	if got, _ := os.ReadFile(assignments); string(got) != string(want) {
		t.Error("assignments.csv written on finishing differs from the run's own")
	}
	if n := len(readLines(t, metrics)); n != 4 {
		t.Errorf("finishing the run left %d epochs in metrics.jsonl, want 4", n)
	}
	// Finished now: the summary says 4 epochs, and a further resume is refused.
	wantError(t, runProc(t, dir, "train", "--resume", "a"), 2, "4 of 4 epochs")

	// Was data loss: a refused resume had already rewritten config.json to the
	// refused epoch count.
	before, err := os.ReadFile(filepath.Join(dir, "a", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	r = runProc(t, dir, "train", "--resume", "a", "--epochs", "2")
	wantError(t, r, 2, "--epochs 2", "already finished 4 epochs")
	if after, _ := os.ReadFile(filepath.Join(dir, "a", "config.json")); string(after) != string(before) {
		t.Errorf("a refused resume changed config.json:\n%s\nwas\n%s", after, before)
	}
}

// A run moved to another machine, or into a container, finds its data at a new place:
// --data-dir (or --data) on resume names it, and the saved config then records it.
// The data may move but not change kind.
func TestResumeWithMovedData(t *testing.T) {
	dir := t.TempDir()
	old, moved := filepath.Join(dir, "old"), filepath.Join(dir, "moved")
	if err := os.Mkdir(old, 0o755); err != nil {
		t.Fatal(err)
	}
	writeIDXSet(t, old, 48, 16)
	r := run(t, dir, "train", "--quiet", "--dataset", "mnist", "--data-dir", old, "--device", "cpu",
		"--epochs", "1", "--batch-size", "32", "--out", "run")
	if r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	if err := os.Rename(old, moved); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"data gone", nil, 1, []string{"run trained on " + old, "not there now", "--data-dir D"}},
		{"a file for an image set", []string{"--data", filepath.Join(fixtures, "four.csv")}, 2, []string{"--data with --resume", "not on a file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, dir, append([]string{"train", "--quiet", "--resume", "run", "--epochs", "2", "--device", "cpu"}, tc.args...)...)
			wantError(t, r, tc.code, tc.want...)
		})
	}
	// predict says the same (was "lstat DIR: no such file or directory"); of a table,
	// with the label column, which new data must name again.
	wantError(t, run(t, dir, "predict", "--model", "run", "--out", "p.csv"), 1, "run trained on "+old, "--data-dir D")
	table := filepath.Join(dir, "t.csv")
	os.WriteFile(table, []byte(randomCSV(40, 3, 2, 9, true)), 0o644)
	if r := run(t, dir, "train", "--quiet", "--data", table, "--label-col", "label", "--epochs", "1", "--restarts", "1", "--kmeans=false", "--out", "tab"); r.code != 0 {
		t.Fatalf("train on t.csv: exit %d: %s", r.code, r.stderr)
	}
	os.Rename(table, table+".moved")
	wantError(t, run(t, dir, "predict", "--model", "tab", "--out", "p.csv"), 1, "tab trained on "+table, "give --data FILE --label-col label")
	wantError(t, run(t, dir, "train", "--resume", "tab", "--epochs", "2"), 1, "tab trained on "+table, "give --data FILE")
	r = run(t, dir, "train", "--quiet", "--resume", "run", "--epochs", "2", "--device", "cpu", "--data-dir", moved)
	if r.code != 0 {
		t.Fatalf("resume with --data-dir: exit %d: %s", r.code, r.stderr)
	}
	if n := len(readLines(t, filepath.Join(dir, "run", "metrics.jsonl"))); n != 2 {
		t.Errorf("metrics.jsonl has %d epochs after the resume, want 2", n)
	}
	b, err := os.ReadFile(filepath.Join(dir, "run", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		DataDir string `json:"data_dir"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != moved {
		t.Errorf("config.json has data_dir %q after the resume, want %q", cfg.DataDir, moved)
	}

	// A table run has no folder to move.
	r = run(t, dir, "train", "--quiet", "--epochs", "1", "--restarts", "1", "--kmeans=false", "--device", "cpu", "--out", "table")
	if r.code != 0 {
		t.Fatalf("train on the digits: exit %d: %s", r.code, r.stderr)
	}
	wantError(t, run(t, dir, "train", "--resume", "table", "--epochs", "2", "--data-dir", moved), 2, "--data-dir with --resume", "not an image set")
}

// predict and embed never write over their input, --force or not: without --data,
// the data the model trained on (was replaced, and the run could not be resumed).
func TestPredictKeepsTrainingData(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "four.csv")
	orig, err := os.ReadFile(filepath.Join(fixtures, "four.csv"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(data, orig, 0o644)
	if r := run(t, dir, "train", "--data", data, "--label-col", "label", "--epochs", "1", "--restarts", "1", "--kmeans=false", "--quiet", "--out", "run"); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	wantError(t, run(t, dir, "predict", "--model", "run", "--out", "four.csv", "--force"), 2, "--out four.csv", "this command's input")
	if b, _ := os.ReadFile(data); !bytes.Equal(b, orig) {
		t.Error("predict wrote over the data its model trained on")
	}
	// Through a link: the write replaced the run's config.json, exit 0.
	conf := filepath.Join(dir, "run", "config.json")
	before, _ := os.ReadFile(conf)
	os.Symlink(conf, filepath.Join(dir, "link.csv"))
	wantError(t, run(t, dir, "predict", "--model", "run", "--out", "link.csv", "--force"), 2, "--out link.csv", "belongs to the run")
	if b, _ := os.ReadFile(conf); !bytes.Equal(b, before) {
		t.Error("predict wrote over the run's config.json through a link")
	}

	// An image set's folder, --force or not: a PNG there was replaced by CSV text.
	images := filepath.Join(dir, "images")
	writeIDXSet(t, images, 48, 16)
	if r := run(t, dir, "train", "--dataset", "mnist", "--data-dir", images, "--device", "cpu", "--epochs", "1", "--restarts", "1", "--batch-size", "32", "--quiet", "--out", "cnn"); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	files, _ := os.ReadDir(images)
	first := filepath.Join(images, files[0].Name())
	orig, _ = os.ReadFile(first)
	for _, out := range []string{first, filepath.Join(images, "p.png")} {
		wantError(t, run(t, dir, "predict", "--model", "cnn", "--out", out, "--force"), 2, "is a file of the data's folder")
	}
	if b, _ := os.ReadFile(first); !bytes.Equal(b, orig) {
		t.Errorf("predict wrote over %s", first)
	}
	// A new CSV there is no file of the set.
	if r := run(t, dir, "predict", "--model", "cnn", "--out", filepath.Join(images, "p.csv")); r.code != 0 {
		t.Errorf("predict to a new CSV in the data's folder: exit %d: %s", r.code, r.stderr)
	}
}

// compare keeps an earlier comparison's files unless told --force; before, a second
// compare --out D retrained its neural runs in place over the first's.
func TestCompareGuardsOutputs(t *testing.T) {
	dir := t.TempDir()
	args := []string{"compare", "--data", filepath.Join(fixtures, "four.csv"), "--label-col", "label",
		"--methods", "em,kmeans", "--seeds", "1", "--epochs", "1", "--out", "cmp", "--markdown", "cmp.md", "--device", "cpu"}
	r := run(t, dir, args...)
	if r.code != 0 {
		t.Fatalf("compare: exit %d: %s", r.code, r.stderr)
	}
	for _, f := range []string{"cmp/compare.json", "cmp.md", "cmp/em-s1/checkpoint.safetensors"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("compare wrote no %s: %v", f, err)
		}
	}
	wantError(t, run(t, dir, args...), 2, "exists from an earlier comparison", "--force")
	r = run(t, dir, append(args, "--force")...)
	if r.code != 0 {
		t.Fatalf("compare --force: exit %d: %s", r.code, r.stderr)
	}

	// --force replaces an earlier table, never the data or a run's own file.
	data := filepath.Join(dir, "four.csv")
	orig, err := os.ReadFile(filepath.Join(fixtures, "four.csv"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(data, orig, 0o644)
	config, _ := os.ReadFile(filepath.Join(dir, "cmp/em-s1/config.json"))
	base := []string{"compare", "--data", data, "--label-col", "label", "--methods", "kmeans", "--seeds", "1", "--quiet", "--force"}
	for _, tc := range []struct{ markdown, want string }{
		{data, "is this command's input"},
		{filepath.Join(dir, "cmp/em-s1/config.json"), "belongs to the run"},
		{filepath.Join(dir, "cmp"), "is a folder"},
		{filepath.Join(dir, "nowhere/t.md"), "does not exist"},
	} {
		wantError(t, run(t, dir, append(base, "--markdown", tc.markdown)...), 2, "--markdown "+tc.markdown, tc.want)
	}
	wantError(t, run(t, dir, append(base, "--out", "cmp2", "--markdown", "cmp2/compare.json")...), 2, "cmp2/compare.json", "own compare.json")
	// The same places spelt through a link, and a run folder made by the comparison.
	os.Symlink("cmp", filepath.Join(dir, "link"))
	wantError(t, run(t, dir, append(base, "--out", "cmp", "--markdown", "link/compare.json")...), 2, "link/compare.json", "own compare.json")
	os.MkdirAll(filepath.Join(dir, "cmp4", "em-s1"), 0o755)
	wantError(t, run(t, dir, append(base, "--out", "cmp4", "--markdown", "cmp4/em-s1/config.json")...), 2, "inside a run folder of --out cmp4")
	os.Symlink(filepath.Join(fixtures, "mnist"), filepath.Join(dir, "images"))
	images := []string{"compare", "--dataset", "mnist", "--methods", "kmeans", "--seeds", "1", "--quiet", "--force", "--data-dir", "images"}
	wantError(t, run(t, dir, append(images, "--markdown", filepath.Join(fixtures, "mnist", "t.md"))...), 2, "inside the data's folder", "images")
	// A table in the --out folder the comparison makes.
	if r := run(t, dir, append(base, "--out", "cmp3", "--markdown", "cmp3/table.md")...); r.code != 0 {
		t.Errorf("compare --out cmp3 --markdown cmp3/table.md: exit %d: %s", r.code, r.stderr)
	} else if _, err := os.Stat(filepath.Join(dir, "cmp3", "table.md")); err != nil {
		t.Error(err)
	}
	// A run folder of the user's files, even with --force: was written over in place.
	notes := filepath.Join(dir, "cmp5", "em-s1", "config.json")
	os.MkdirAll(filepath.Dir(notes), 0o755)
	os.WriteFile(notes, []byte("my notes\n"), 0o644)
	neural := []string{"compare", "--data", data, "--label-col", "label", "--methods", "em", "--seeds", "1", "--epochs", "1", "--quiet", "--out", "cmp5"}
	for _, force := range []bool{false, true} {
		wantError(t, run(t, dir, append(neural, fmt.Sprintf("--force=%v", force))...), 2, "cmp5/em-s1", "no emclust run wrote", "config.json")
	}
	if b, _ := os.ReadFile(notes); string(b) != "my notes\n" {
		t.Errorf("compare wrote over the user's %s: %q", notes, b)
	}
	if b, _ := os.ReadFile(data); !bytes.Equal(b, orig) {
		t.Error("compare --markdown wrote over its own data")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "cmp/em-s1/config.json")); !bytes.Equal(b, config) {
		t.Error("compare --markdown wrote over a run's config.json")
	}
}

// A run killed while writing its first checkpoint leaves a partial file (42 MB for
// the CIFAR net); --resume removes it as it explains there is nothing to resume.
func TestResumeRemovesPartialCheckpoint(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "killed")
	partial := filepath.Join(runDir, ".checkpoint.safetensors.tmp123")
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(runDir, "config.json"), []byte("{}\n"), 0o644)
	os.WriteFile(partial, make([]byte, 1<<20), 0o644)
	wantError(t, runProc(t, dir, "train", "--resume", "killed"), 1, "killed", "no checkpoint")
	if _, err := os.Stat(partial); err == nil {
		t.Error("the partial checkpoint is still there")
	}
}

// A checkpoint that Restore refuses after the command's own checks passed (here,
// a spec edited to another width) leaves config.json as it was.
func TestResumeRefusedByRestoreKeepsConfig(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.csv"), []byte(randomCSV(10, 4, 2, 1, true)), 0o644)
	if r := run(t, dir, "train", "--data", "a.csv", "--label-col", "label", "--restarts", "1", "--epochs", "2", "--kmeans=false", "--quiet", "--device", "cpu", "--out", "run"); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	// Inside the header's JSON string.
	rewriteCheckpointHeader(t, filepath.Join(dir, "run", "checkpoint.safetensors"), `\"in\":4,\"hidden\":[32,32]`, `\"in\":4,\"hidden\":[32,31]`, true)
	config, _ := os.ReadFile(filepath.Join(dir, "run", "config.json"))
	wantError(t, run(t, dir, "train", "--resume", "run", "--epochs", "5"), 1, "checkpoint.safetensors", "does not match this run's")
	if b, _ := os.ReadFile(filepath.Join(dir, "run", "config.json")); !bytes.Equal(b, config) {
		t.Errorf("a resume that Restore refused rewrote config.json:\n%s", b)
	}
	// A folder without config.json (the checkpoint holds the config) is left without.
	os.Remove(filepath.Join(dir, "run", "config.json"))
	wantError(t, run(t, dir, "train", "--resume", "run", "--epochs", "5"), 1, "checkpoint.safetensors", "does not match this run's")
	if _, err := os.Stat(filepath.Join(dir, "run", "config.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused resume left a config.json it wrote: %v", err)
	}

	// An optimiser moment of another shape (of as many values) is refused, as the
	// file's fault.
	if r := run(t, dir, "train", "--data", "a.csv", "--label-col", "label", "--restarts", "1", "--epochs", "2", "--kmeans=false", "--quiet", "--device", "cpu", "--out", "moment"); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	rewriteCheckpointHeader(t, filepath.Join(dir, "moment", "checkpoint.safetensors"), `"optA.0.exp_avg":{"dtype":"F32","shape":[32,4]`, `"optA.0.exp_avg":{"dtype":"F32","shape":[4,32]`, true)
	wantError(t, run(t, dir, "train", "--resume", "moment", "--epochs", "5"), 1, "optA.0.exp_avg", "(the file is damaged, or not emclust's)")
}

// rewriteCheckpointHeader replaces old with new in a checkpoint's JSON header, with
// the header's length updated (tensor offsets count from the header's end) and, when
// reseal is set, its checksum too: a setting as another emclust might have written it.
// The checksum is computed here from the canonical form torch documents.
func rewriteCheckpointHeader(t *testing.T, path, old, new string, reseal bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b[:8])
	header := string(b[8 : 8+n])
	if strings.Count(header, old) != 1 {
		t.Fatalf("want %s once in %s's header", old, path)
	}
	header = strings.Replace(header, old, new, 1)
	if reseal {
		dec := json.NewDecoder(strings.NewReader(header))
		dec.UseNumber()
		var h map[string]any
		if err := dec.Decode(&h); err != nil {
			t.Fatal(err)
		}
		meta := h["__metadata__"].(map[string]any)
		delete(meta, torch.HeaderChecksumKey)
		var canonical bytes.Buffer
		enc := json.NewEncoder(&canonical)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(h); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(bytes.TrimSuffix(canonical.Bytes(), []byte("\n")))
		meta[torch.HeaderChecksumKey] = hex.EncodeToString(sum[:])
		hj, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		header = string(hj)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	out = append(append(out, header...), b[8+n:]...)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A first sitting's --threads beyond this machine's CPUs gives way on resume (it was
// refused as a flag never given, and a huge count hung the process); a damaged
// setting in the checkpoint's config is refused naming the checkpoint.
func TestResumeSavedSettings(t *testing.T) {
	dir := t.TempDir()
	args := []string{"train", "--quiet", "--dataset", "iris", "--restarts", "1", "--epochs", "2", "--kmeans=false", "--device", "cpu"}
	for _, out := range []string{"threads", "objective"} {
		if r := run(t, dir, append(args, "--out", out)...); r.code != 0 {
			t.Fatalf("train: exit %d: %s", r.code, r.stderr)
		}
	}
	rewriteCheckpointHeader(t, filepath.Join(dir, "threads", "checkpoint.safetensors"), `\"threads\":0`, `\"threads\":100000`, true)
	// --no-memory-check applies to a resume, and is not saved: it is the machine's.
	wantScoreLine(t, run(t, dir, "train", "--quiet", "--resume", "threads", "--epochs", "3", "--no-memory-check"))
	if b, err := os.ReadFile(filepath.Join(dir, "threads", "config.json")); err != nil || strings.Contains(string(b), "memory") {
		t.Errorf("config.json after a resume with --no-memory-check: %v\n%s", err, b)
	}
	rewriteCheckpointHeader(t, filepath.Join(dir, "objective", "checkpoint.safetensors"), `\"objective\":\"em\"`, `\"objective\":\"bogus\"`, true)
	wantError(t, run(t, dir, "train", "--quiet", "--resume", "objective", "--epochs", "3"), 1, "checkpoint.safetensors", "bogus")
	// The same edit without the header's checksum redone: the checkpoint is damaged.
	// predict used whatever settings it found (the saved standardisation among them).
	rewriteCheckpointHeader(t, filepath.Join(dir, "threads", "checkpoint.safetensors"), `\"epochs\":3`, `\"epochs\":30`, false)
	wantError(t, run(t, dir, "predict", "--model", "threads", "--out", "p.csv"), 1, "checkpoint.safetensors", "header", "damaged")
	// A checksum whose key was damaged is missed, not skipped.
	rewriteCheckpointHeader(t, filepath.Join(dir, "threads", "checkpoint.safetensors"), `"emclust.data_sha256"`, `"emclust.data_sha257"`, true)
	wantError(t, run(t, dir, "predict", "--model", "threads", "--out", "p.csv"), 1, "checkpoint.safetensors", "no checksum")
	rewriteCheckpointHeader(t, filepath.Join(dir, "objective", "checkpoint.safetensors"), `"emclust.header_sha256"`, `"emclust.header_sha257"`, false)
	wantError(t, run(t, dir, "predict", "--model", "objective", "--out", "p.csv"), 1, "checkpoint.safetensors", "no checksum of its header")
}

// report replaces an earlier report only when told to.
func TestReportGuardsOutput(t *testing.T) {
	dir := t.TempDir()
	args := []string{"report", filepath.Join(fixtures, "r4"), "--no-tsne", "--quiet", "--out", "rep", "--device", "cpu"}
	if r := run(t, dir, args...); r.code != 0 {
		t.Fatalf("report: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "rep", "index.html")); err != nil {
		t.Fatal(err)
	}
	wantError(t, run(t, dir, args...), 2, "rep holds a report already", "--force")
	if r := run(t, dir, append(args, "--force")...); r.code != 0 {
		t.Fatalf("report --force: exit %d: %s", r.code, r.stderr)
	}

	// A report writing the folder holds its lock: a second one, --force or not, was
	// let in, and took the first one's temporary files for a killed report's.
	f, err := os.OpenFile(filepath.Join(dir, "rep", train.LockName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	writing := filepath.Join(dir, "rep", ".index.html.tmp123456789")
	os.WriteFile(writing, []byte("<html"), 0o644)
	wantError(t, runProc(t, dir, append(args, "--force")...), 1, "rep is in use")
	if _, err := os.Stat(writing); err != nil {
		t.Errorf("the refused report removed the writer's file: %v", err)
	}
	f.Close()
	if r := run(t, dir, append(args, "--force")...); r.code != 0 {
		t.Fatalf("report --force after the lock: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(writing); err == nil {
		t.Error("a killed report's file outlived the next report")
	}

	// A report replaced without its t-SNE map took the old map away: it stayed
	// beside the new index.html, which no longer showed it.
	stale := []string{"report", filepath.Join(fixtures, "r4"), "--quiet", "--out", "stale", "--device", "cpu"}
	if r := run(t, dir, append(stale, "--tsne-points", "50")...); r.code != 0 {
		t.Fatalf("report with a map: exit %d: %s", r.code, r.stderr)
	}
	// An image of the user's there is not a report's figure: refused even with
	// --force (a class folder of images took a report's figures as its own).
	image := filepath.Join(dir, "stale", "0.png")
	os.WriteFile(image, []byte("mine"), 0o644)
	wantError(t, run(t, dir, append(stale, "--no-tsne", "--force")...), 2, "holds files a report does not write (0.png)")
	if b, _ := os.ReadFile(image); string(b) != "mine" {
		t.Errorf("0.png: %q", b)
	}
	os.Remove(image)
	before, _ := filepath.Glob(filepath.Join(dir, "stale", "*"))
	if r := run(t, dir, append(stale, "--no-tsne", "--force")...); r.code != 0 {
		t.Fatalf("report --no-tsne --force: exit %d: %s", r.code, r.stderr)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "stale", "*"))
	if !slices.Contains(before, filepath.Join(dir, "stale", "tsne.png")) || slices.Contains(after, filepath.Join(dir, "stale", "tsne.png")) || len(after) != len(before)-1 {
		t.Errorf("files before the --no-tsne report %v, after %v; want tsne.png alone gone", before, after)
	}

	// A report that passed the folder's check while another was writing there was
	// let in after it, and rewrote its index.html without --force: the check is made
	// again under the lock. The late one reads its rows from a FIFO, so it waits,
	// past its first check, while the other writes.
	rows := filepath.Join(dir, "rows")
	if err := syscall.Mkfifo(rows, 0o644); err != nil {
		t.Fatal(err)
	}
	late := emclustCmd("report", filepath.Join(fixtures, "r4"), "--no-tsne", "--quiet", "--out", "race", "--device", "cpu", "--data", rows, "--label-col", "label")
	late.Dir = dir
	var lateErr bytes.Buffer
	late.Stderr = &lateErr
	if err := late.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { late.Process.Kill() })
	var w *os.File
	for deadline := time.Now().Add(time.Minute); w == nil; { // opens once the late report reads
		var err error
		if w, err = os.OpenFile(rows, os.O_WRONLY|syscall.O_NONBLOCK, 0); err != nil {
			if time.Now().After(deadline) {
				t.Fatalf("the late report never opened its rows: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if r := run(t, dir, "report", filepath.Join(fixtures, "r4"), "--no-tsne", "--quiet", "--out", "race", "--device", "cpu"); r.code != 0 {
		t.Fatalf("the first report: exit %d: %s", r.code, r.stderr)
	}
	first, _ := os.ReadFile(filepath.Join(dir, "race", "index.html"))
	body, _ := os.ReadFile(filepath.Join(fixtures, "four.csv"))
	syscall.SetNonblock(int(w.Fd()), false)
	w.Write(body)
	w.Close()
	err = late.Wait()
	if code := late.ProcessState.ExitCode(); code != 2 || !strings.Contains(lateErr.String(), "holds a report already") {
		t.Errorf("the late report: exit %d (%v): %s", code, err, lateErr.String())
	}
	if now, _ := os.ReadFile(filepath.Join(dir, "race", "index.html")); !bytes.Equal(now, first) {
		t.Error("the late report rewrote the first one's index.html")
	}

	// What a report killed while writing leaves is its own: was refused as foreign,
	// --force or not, for ever.
	killed := filepath.Join(dir, "killed")
	os.MkdirAll(killed, 0o755)
	os.WriteFile(filepath.Join(killed, ".scores.svg.tmp418026605"), []byte("<svg"), 0o644)
	if r := run(t, dir, append(slices.Clone(args[:len(args)-3]), killed, "--device", "cpu")...); r.code != 0 {
		t.Fatalf("report into a killed report's folder: exit %d: %s", r.code, r.stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(killed, ".*.tmp*")); len(left) > 0 {
		t.Errorf("partial files left: %v", left)
	}

	// A folder of the user's files: its loss.svg was replaced without a word.
	mine := filepath.Join(dir, "mine")
	os.MkdirAll(mine, 0o755)
	os.WriteFile(filepath.Join(mine, "loss.svg"), []byte("mine"), 0o644)
	args[len(args)-3] = mine
	wantError(t, run(t, dir, args...), 2, "--out "+mine, "loss.svg", "--force")
	if b, _ := os.ReadFile(filepath.Join(mine, "loss.svg")); string(b) != "mine" {
		t.Errorf("report wrote over the user's loss.svg")
	}

	// Files a report never writes, and an index.html no report wrote, are refused
	// with --force too: --force replaced the user's index.html.
	for _, f := range []struct{ name, want string }{
		{"index.html", "an index.html that no emclust report wrote"},
		{"notes.txt", "files a report does not write (notes.txt)"},
	} {
		site := filepath.Join(dir, "site-"+f.name)
		os.MkdirAll(site, 0o755)
		os.WriteFile(filepath.Join(site, f.name), []byte("<title>mine</title>"), 0o644)
		args[len(args)-3] = site
		wantError(t, run(t, dir, append(args, "--force")...), 2, "--out "+site, f.want)
		if b, _ := os.ReadFile(filepath.Join(site, f.name)); string(b) != "<title>mine</title>" {
			t.Errorf("report --force wrote over the user's %s", f.name)
		}
	}

	// Figures among the images read would join the data set on its next read.
	os.Symlink(filepath.Join(fixtures, "mnist"), filepath.Join(dir, "images"))
	args[len(args)-3] = filepath.Join(dir, "images", "rep")
	wantError(t, run(t, dir, append(args, "--dataset", "mnist", "--data-dir", filepath.Join(dir, "images"))...), 2, "inside the data's folder")
	if _, err := os.Stat(filepath.Join(fixtures, "mnist", "rep")); err == nil {
		t.Error("report wrote into the data's folder")
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{errors.New("disk full"), 1},
		{usageError{errors.New("--k x")}, 2},
		{fmt.Errorf("train: %w", usageError{errors.New("--k x")}), 2},
		{interruptedError{errors.New("interrupted after 1 epoch")}, 130},
		{fmt.Errorf("compare: %w", interruptedError{context.Canceled}), 130},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// Was data loss: two runs with one --out both exited 0 and one lost its checkpoint,
// metrics and assignments. A run holds an advisory lock on RUN/.lock while it writes.
func TestRunFolderLocked(t *testing.T) {
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(runDir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	f.WriteString("4242\n")
	r := runProc(t, dir, "train", "--quiet", "--epochs", "1", "--out", "run")
	wantError(t, r, 1, "folder run is in use", "in use", "pid 4242")
	if _, err := os.Stat(filepath.Join(runDir, "config.json")); err == nil {
		t.Error("the refused run wrote config.json into the locked folder")
	}
	// Released, the same folder trains.
	f.Close()
	wantScoreLine(t, runProc(t, dir, "train", "--quiet", "--epochs", "1", "--out", "run"))
}

// bigCSV writes rows×16 random features with a label column: a couple of seconds of
// training at a small batch size.
func bigCSV(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "big.csv")
	if err := os.WriteFile(path, []byte(randomCSV(20000, 16, 3, 11, true)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// slowWait bounds a wait for a child process to get somewhere (its first checkpoint,
// its store): a bound on a hang, not on speed, which a loaded 2-core CI machine may
// need many times the seconds a desktop does. A wait that succeeds returns at once.
const slowWait = 5 * time.Minute

// waitFor polls for path until the deadline.
func waitFor(t *testing.T, path string, d time.Duration, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-done:
			t.Fatalf("training ended before %s appeared", path)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not appear in %v", path, d)
}

// checkpointEpoch reads the epoch from a checkpoint's safetensors header, checking
// that the header is whole and the data section as long as it says.
func checkpointEpoch(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 8 {
		t.Fatalf("%s: %d bytes", path, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(b)-8) {
		t.Fatalf("%s: header of %d bytes in a %d-byte file", path, n, len(b))
	}
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatalf("%s: header: %v", path, err)
	}
	end := 0
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var tm struct {
			Offsets [2]int `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &tm); err != nil {
			t.Fatalf("%s: tensor %s: %v", path, name, err)
		}
		end = max(end, tm.Offsets[1])
	}
	if data := len(b) - 8 - int(n); data != end {
		t.Fatalf("%s: %d data bytes, the header describes %d", path, data, end)
	}
	var meta map[string]string
	if err := json.Unmarshal(hdr["__metadata__"], &meta); err != nil {
		t.Fatalf("%s: metadata: %v", path, err)
	}
	epoch, err := strconv.Atoi(meta["epoch"])
	if err != nil {
		t.Fatalf("%s: epoch %q", path, meta["epoch"])
	}
	return epoch
}

// startTrain starts a long training run on big.csv; done closes when it exits.
func startTrain(t *testing.T, dir string, stderr io.Writer, args ...string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	cmd := emclustCmd(append([]string{"train", "--data", "big.csv", "--label-col", "label",
		"--epochs", "1000", "--restarts", "1", "--kmeans=false", "--out", "run"}, args...)...)
	cmd.Dir = dir
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd, done
}

// checkRunUsable checks that a stopped run's checkpoint loads (eval) and that
// --resume carries it on for one more epoch.
func checkRunUsable(t *testing.T, dir string) {
	t.Helper()
	ckpt := filepath.Join(dir, "run", "checkpoint.safetensors")
	epoch := checkpointEpoch(t, ckpt)
	if epoch < 1 {
		t.Fatalf("checkpoint of epoch %d", epoch)
	}
	// The other files are whole too: metrics.jsonl is written just after the
	// checkpoint, so it may lag it by one epoch, and be missing beside the first (a
	// resume writes it again from the checkpoint's history).
	var cfg map[string]any
	readJSON(t, filepath.Join(dir, "run", "config.json"), &cfg)
	metrics := filepath.Join(dir, "run", "metrics.jsonl")
	n := 0
	if _, err := os.Stat(metrics); err == nil {
		n = len(metricsWithoutTime(t, metrics))
	} else if !errors.Is(err, os.ErrNotExist) || epoch != 1 {
		t.Fatalf("beside a checkpoint of epoch %d: %v", epoch, err)
	}
	if n != epoch && n != epoch-1 {
		t.Errorf("metrics.jsonl has %d lines beside a checkpoint of epoch %d", n, epoch)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "run"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Logf("left behind: %s", e.Name()) // an atomic write's temporary file
		}
	}
	wantScoreLine(t, runProc(t, dir, "eval", "--model", "run", "--data", "big.csv", "--label-col", "label"))
	wantScoreLine(t, runProc(t, dir, "train", "--quiet", "--resume", "run", "--epochs", strconv.Itoa(epoch+1)))
	if n := len(readLines(t, filepath.Join(dir, "run", "metrics.jsonl"))); n != epoch+1 {
		t.Errorf("after resuming to epoch %d, metrics.jsonl has %d lines", epoch+1, n)
	}
	if got := checkpointEpoch(t, ckpt); got != epoch+1 {
		t.Errorf("after resuming, checkpoint of epoch %d, want %d", got, epoch+1)
	}
}

func TestKilledRunLeavesValidCheckpoint(t *testing.T) {
	dir := t.TempDir()
	bigCSV(t, dir)
	cmd, done := startTrain(t, dir, io.Discard, "--quiet", "--batch-size", "32")
	waitFor(t, filepath.Join(dir, "run", "checkpoint.safetensors"), slowWait, done)
	// Let it get into the next epoch, or the next checkpoint write.
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	checkRunUsable(t, dir)
}

func TestInterrupt(t *testing.T) {
	dir := t.TempDir()
	bigCSV(t, dir)

	// After the first checkpoint: a one-line message saying how to resume.
	var stderr bytes.Buffer
	cmd, done := startTrain(t, dir, &stderr, "--quiet", "--batch-size", "32")
	waitFor(t, filepath.Join(dir, "run", "checkpoint.safetensors"), slowWait, done)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("training did not stop within 20s of SIGINT")
	}
	r := result{code: cmd.ProcessState.ExitCode(), stderr: stderr.String()}
	wantError(t, r, 130, "interrupted", "--resume run")
	checkRunUsable(t, dir)

	// Before the first epoch ends: nothing to resume, and the message says so.
	pr, pw := io.Pipe()
	cmd, done = startTrain(t, dir, pw, "--batch-size", "2", "--out", "early")
	go func() { <-done; pw.Close() }()
	lines := bufio.NewScanner(pr)
	var all []string
	for lines.Scan() {
		all = append(all, lines.Text())
		if strings.Contains(lines.Text(), "net,") { // the line before training starts
			break
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		all = append(all, lines.Text())
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit status %d after SIGINT, want 130", code)
	}
	if len(all) == 0 {
		t.Fatal("no output on stderr")
	}
	last := all[len(all)-1]
	if _, err := os.Stat(filepath.Join(dir, "early", "checkpoint.safetensors")); err == nil {
		t.Skip("the first epoch ended before SIGINT arrived")
	}
	if !strings.Contains(last, "interrupted") || !strings.Contains(last, "no checkpoint") || strings.Contains(last, "--resume") {
		t.Errorf("SIGINT in epoch 1: last stderr line %q", last)
	}
	noCrash(t, result{stderr: strings.Join(all, "\n")})
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// scripts/parity.sh trains each mode on the same seeds: its fp32 row must be the plain
// run's score, and a tolerance no mode can meet must fail the check.
func TestParityScript(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed (make deps installs it)")
	}
	dir := t.TempDir()
	// On the CPU, where two runs of one seed are bit for bit the same: in a process
	// like the script's, whose libtorch calls run on one OS thread with its thread count.
	plain := runProc(t, dir, "train", "--quiet", "--json", "--seed", "2", "--restarts", "1", "--epochs", "3", "--kmeans=false", "--device", "cpu", "--out", "plain")
	if plain.code != 0 {
		t.Fatalf("train: %s", plain.stderr)
	}
	var s struct{ Scores struct{ ACC float64 } }
	if err := json.Unmarshal([]byte(plain.stdout), &s); err != nil {
		t.Fatal(err)
	}
	parity := func(tol string) (string, error) {
		cmd := exec.Command(filepath.Join(repo, "scripts/parity.sh"), "--seeds", "2", "--modes", "fp32,bf16", "--tol", tol,
			"--emclust", bin, "--out", filepath.Join(dir, "parity"+tol), "--", "--epochs", "3", "--kmeans=false", "--device", "cpu")
		out, err := cmd.Output()
		return string(out), err
	}
	out, err := parity("0.5")
	if err != nil {
		t.Fatalf("parity.sh: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("| fp32 | 1 | %.4f ± 0.0000 |", s.Scores.ACC); !strings.Contains(out, want) {
		t.Errorf("parity table lacks the plain run's fp32 row %q:\n%s", want, out)
	}
	if !strings.Contains(out, "| bf16 | 1 |") {
		t.Errorf("parity table lacks a bf16 row:\n%s", out)
	}
	out, err = parity("-1")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out, "lose more than") {
		t.Errorf("an impossible tolerance: err %v, output:\n%s", err, out)
	}
}

// writeIDXSet writes a tiny MNIST-like set (train and t10k splits) of noise images.
func writeIDXSet(t *testing.T, dir string, nTrain, nTest int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 6))
	im := datatest.Images{N: nTrain + nTest, C: 1, H: 28, W: 28, Pix: make([]byte, (nTrain+nTest)*28*28), Labels: make([]int, nTrain+nTest)}
	for i := range im.Pix {
		im.Pix[i] = byte(rng.IntN(256))
	}
	for i := range im.Labels {
		im.Labels[i] = i % 10
	}
	if err := datatest.WriteMNISTLike(dir, im, nTrain); err != nil {
		t.Fatal(err)
	}
}

// A CNN run on the CPU lays its images out channels-last unless told not to, and the
// run's config.json records what it computed with.
func TestImageComputeDefaults(t *testing.T) {
	dir := t.TempDir()
	writeIDXSet(t, dir, 48, 16)
	for _, tc := range []struct {
		flags         []string
		wantCL        bool
		wantPrecision string
	}{
		{nil, true, "fp32"},
		{[]string{"--channels-last=false", "--precision", "bf16"}, false, "bf16"},
	} {
		args := append([]string{"train", "--quiet", "--dataset", "mnist", "--data-dir", dir, "--device", "cpu",
			"--epochs", "1", "--batch-size", "32", "--out", "run"}, tc.flags...)
		os.RemoveAll(filepath.Join(dir, "run"))
		r := run(t, dir, args...)
		noCrash(t, r)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.flags, r.code, r.stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, "run", "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Precision    string `json:"precision"`
			ChannelsLast bool   `json:"channels_last"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.ChannelsLast != tc.wantCL || cfg.Precision != tc.wantPrecision {
			t.Errorf("%v: config has precision %q channels_last %v, want %q %v", tc.flags, cfg.Precision, cfg.ChannelsLast, tc.wantPrecision, tc.wantCL)
		}
	}
}

// Image restarts as trials: each trains --trial-epochs, the kept one goes on to
// --epochs in the run folder, and the summary lists every trial.
func TestTrainTrials(t *testing.T) {
	dir := t.TempDir()
	writeIDXSet(t, dir, 48, 16)
	r := run(t, dir, "train", "--dataset", "mnist", "--data-dir", dir, "--device", "cpu", "--objective", "em",
		"--epochs", "3", "--batch-size", "32", "--restarts", "2", "--trial-epochs", "2", "--out", "run")
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"2 trials of 2 epochs (seeds 1–2)", "trial 1/2, seed 1: agreement", "trial 2/2, seed 2", "on to 3 epochs"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("log lacks %q:\n%s", want, r.stderr)
		}
	}
	var cfg struct {
		Seed        uint64 `json:"seed"`
		Epochs      int    `json:"epochs"`
		Restarts    int    `json:"restarts"`
		TrialEpochs int    `json:"trial_epochs"`
	}
	readJSON(t, filepath.Join(dir, "run", "config.json"), &cfg)
	if cfg.Epochs != 3 || cfg.Restarts != 2 || cfg.TrialEpochs != 2 || (cfg.Seed != 1 && cfg.Seed != 2) {
		t.Errorf("config.json: %+v, want 3 epochs, 2 restarts, trial epochs 2, seed 1 or 2", cfg)
	}
	var sum struct {
		Epochs   int `json:"epochs"`
		Restarts []struct {
			Seed          uint64   `json:"seed"`
			SelfAgreement *float64 `json:"self_agreement"`
			ChosenEpoch   int      `json:"chosen_epoch"`
		} `json:"restarts"`
	}
	readJSON(t, filepath.Join(dir, "run", "summary.json"), &sum)
	if sum.Epochs != 3 || len(sum.Restarts) != 2 || sum.Restarts[0].SelfAgreement == nil || sum.Restarts[1].ChosenEpoch != 2 {
		t.Errorf("summary: %d epochs, trials %+v; want 3, and two trials, each chosen at epoch 2 with an agreement", sum.Epochs, sum.Restarts)
	}
	if n := len(readLines(t, filepath.Join(dir, "run", "metrics.jsonl"))); n != 3 {
		t.Errorf("metrics.jsonl has %d epochs, want 3: the kept trial's 2 and 1 more", n)
	}
	chosenModelExists(t, dir, "run")
	// compare trains trials as train does, and says so.
	c := run(t, dir, "compare", "--dataset", "mnist", "--data-dir", dir, "--device", "cpu", "--methods", "em", "--seeds", "1",
		"--epochs", "3", "--batch-size", "32", "--restarts", "2", "--trial-epochs", "2", "--out", "cmp")
	noCrash(t, c)
	if c.code != 0 || !strings.Contains(c.stdout, "2 trials of 2 epochs per seed") {
		t.Fatalf("compare with trials: exit %d, stdout %q, stderr %q", c.code, c.stdout, c.stderr)
	}
	if n := len(readLines(t, filepath.Join(dir, "cmp", "em-s1", "metrics.jsonl"))); n != 3 {
		t.Errorf("compare's kept trial has %d epochs in metrics.jsonl, want 3", n)
	}

	// A resumed run's summary still lists the trials it was kept from.
	r = run(t, dir, "train", "--quiet", "--resume", "run", "--epochs", "4", "--device", "cpu")
	if r.code != 0 {
		t.Fatalf("resume: exit %d: %s", r.code, r.stderr)
	}
	sum.Restarts = nil
	readJSON(t, filepath.Join(dir, "run", "summary.json"), &sum)
	if sum.Epochs != 4 || len(sum.Restarts) != 2 || sum.Restarts[1].SelfAgreement == nil {
		t.Errorf("resumed summary: %d epochs, trials %+v; want 4 and the two trials", sum.Epochs, sum.Restarts)
	}
}

// killWhenSaved runs emclust with args in dir and kills it (SIGKILL: nothing of it
// runs after) once path, a checkpoint it writes, exists.
func killWhenSaved(t *testing.T, dir, path string, args ...string) {
	t.Helper()
	cmd := emclustCmd(args...)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	waitFor(t, path, slowWait, done)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
}

// straightAndKilled trains args in dir/straight to the end, which leaves no trials
// folder, and in dir/killed, killed once its first trial or restart has saved.
func straightAndKilled(t *testing.T, dir string, args []string) {
	t.Helper()
	straight := run(t, dir, append(args, "--out", "straight")...)
	if straight.code != 0 {
		t.Fatalf("exit %d: %s", straight.code, straight.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "straight", "trials")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a finished run left its trials folder: %v", err)
	}
	killWhenSaved(t, dir, filepath.Join(dir, "killed", "trials", "seed-1", "checkpoint.safetensors"), append(args, "--out", "killed")...)
}

// A run killed among its trials (kill -9: nothing of it runs) goes on with --resume
// from the trial it was in, and keeps the trial an unkilled run keeps; a run that
// finished its trials leaves no trials folder. Before, the trials lived in memory
// and a kill lost them all: hours of a CPU's work at the image defaults.
func TestTrainTrialsKilled(t *testing.T) {
	dir := t.TempDir()
	writeIDXSet(t, dir, 480, 32) // epochs of a few tenths of a second: the kill lands among the trials
	args := []string{"train", "--quiet", "--dataset", "mnist", "--data-dir", dir, "--device", "cpu", "--objective", "em",
		"--epochs", "3", "--batch-size", "32", "--restarts", "3", "--trial-epochs", "2"}
	straightAndKilled(t, dir, args)

	// The folder is the stopped run's: a new run, and predict, are sent to --resume.
	wantError(t, run(t, dir, append(args, "--out", "killed")...), 2, "holds the trials or restarts of a run", "--resume")
	wantError(t, run(t, dir, "predict", "--model", "killed", "--out", "p.csv"), 1, "stopped among its trials", "--resume killed")
	// Refused resumes change nothing: the trials' plan stays as it was.
	plan, err := os.ReadFile(filepath.Join(dir, "killed", "trials", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, run(t, dir, "train", "--resume", "killed", "--device", "cpu", "--epochs", "1"), 2, "--epochs 1 with --resume", "2 epochs each")
	wantError(t, run(t, dir, "train", "--resume", "killed", "--device", "cpu", "--nproc", "2"), 2, "stopped among its trials", "in one")
	// Was written into the trials' config.json, which no resume could read after.
	wantError(t, run(t, dir, "train", "--resume", "killed", "--device", "cpu", "--precision", "bf32"), 2, `--precision "bf32"`)
	// A trial alone went past --trial-epochs, and the run scored it there.
	wantError(t, run(t, dir, "train", "--resume", filepath.Join("killed", "trials", "seed-1"), "--device", "cpu", "--epochs", "3"), 2,
		"is a trial or restart of the run in", "resume that run")
	if now, _ := os.ReadFile(filepath.Join(dir, "killed", "trials", "config.json")); !bytes.Equal(now, plan) {
		t.Errorf("a refused resume rewrote the trials' config.json")
	}
	// A kill after the kept trial's config.json, before its checkpoint, leaves the
	// kept seed in RUN/config.json: the trials' own config still says which they are.
	cfgJSON, err := os.ReadFile(filepath.Join(dir, "straight", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "killed", "config.json"), cfgJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, dir, "train", "--resume", "killed", "--device", "cpu")
	noCrash(t, r)
	if r.code != 0 || !strings.Contains(r.stderr, "resuming 3 trials of 2 epochs") {
		t.Fatalf("resume: exit %d: %s", r.code, r.stderr)
	}
	type trial struct {
		Seed        uint64 `json:"seed"`
		ChosenEpoch int    `json:"chosen_epoch"`
	}
	var want, got struct {
		Epochs   int     `json:"epochs"`
		Restarts []trial `json:"restarts"`
	}
	readJSON(t, filepath.Join(dir, "straight", "summary.json"), &want)
	readJSON(t, filepath.Join(dir, "killed", "summary.json"), &got)
	if got.Epochs != 3 || fmt.Sprint(got.Restarts) != fmt.Sprint(want.Restarts) {
		t.Errorf("resumed: %d epochs, trials %v; unkilled: %d, %v", got.Epochs, got.Restarts, want.Epochs, want.Restarts)
	}
	var ws, gs struct {
		Seed uint64 `json:"seed"`
	}
	readJSON(t, filepath.Join(dir, "straight", "config.json"), &ws)
	readJSON(t, filepath.Join(dir, "killed", "config.json"), &gs)
	if ws.Seed != gs.Seed {
		t.Errorf("resumed run kept seed %d, the unkilled one seed %d", gs.Seed, ws.Seed)
	}
	if _, err := os.Stat(filepath.Join(dir, "killed", "trials")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the resumed run left its trials folder: %v", err)
	}
	chosenModelExists(t, dir, "straight")
	chosenModelExists(t, dir, "killed")

	// A kill after the run's first checkpoint, before the trials' folder went, left
	// it: the next resume removes it.
	if err := os.MkdirAll(filepath.Join(dir, "killed", "trials", "seed-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	wantScoreLine(t, run(t, dir, "train", "--quiet", "--resume", "killed", "--device", "cpu", "--epochs", "4"))
	if _, err := os.Stat(filepath.Join(dir, "killed", "trials")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a resume from the run's checkpoint left the trials folder: %v", err)
	}
}

// A run killed among its whole-run image restarts (--trial-epochs 0) goes on with
// --resume from the restart it was in, and keeps the seed an unkilled run keeps.
// Before, they lived in memory and a kill lost them all.
func TestTrainRestartsKilled(t *testing.T) {
	dir := t.TempDir()
	writeIDXSet(t, dir, 480, 32)
	args := []string{"train", "--quiet", "--dataset", "mnist", "--data-dir", dir, "--device", "cpu", "--objective", "em",
		"--epochs", "2", "--batch-size", "32", "--restarts", "3", "--trial-epochs", "0"}
	straightAndKilled(t, dir, args)

	wantError(t, run(t, dir, append(args, "--out", "killed")...), 2, "holds the trials or restarts of a run", "--resume")
	// Restarts of other lengths would not be kept by the same measure.
	wantError(t, run(t, dir, "train", "--resume", "killed", "--device", "cpu", "--epochs", "3"), 2, "--epochs 3 with --resume", "2 epochs each")
	wantError(t, run(t, dir, "train", "--resume", "killed", "--device", "cpu", "--precision", "bf16"), 2, "--precision bf16 with --resume", "in fp32")
	r := run(t, dir, "train", "--resume", "killed", "--device", "cpu")
	noCrash(t, r)
	if r.code != 0 || !strings.Contains(r.stderr, "resuming 3 restarts") {
		t.Fatalf("resume: exit %d: %s", r.code, r.stderr)
	}
	type restart struct {
		Seed      uint64   `json:"seed"`
		Agreement *float64 `json:"agreement"`
	}
	var want, got struct {
		Epochs   int       `json:"epochs"`
		Restarts []restart `json:"restarts"`
	}
	readJSON(t, filepath.Join(dir, "straight", "summary.json"), &want)
	readJSON(t, filepath.Join(dir, "killed", "summary.json"), &got)
	if len(got.Restarts) != 3 || len(want.Restarts) != 3 || got.Epochs != 2 {
		t.Fatalf("resumed: %d epochs, %d restarts; unkilled: %d restarts; want 2 epochs and 3 restarts each", got.Epochs, len(got.Restarts), len(want.Restarts))
	}
	for i := range want.Restarts {
		w, g := want.Restarts[i], got.Restarts[i]
		if w.Seed != g.Seed || w.Agreement == nil || g.Agreement == nil || *w.Agreement != *g.Agreement {
			t.Errorf("restart %d: resumed %+v, unkilled %+v", i+1, g, w)
		}
	}
	var ws, gs struct {
		Seed     uint64 `json:"seed"`
		Restarts int    `json:"restarts"`
	}
	readJSON(t, filepath.Join(dir, "straight", "config.json"), &ws)
	readJSON(t, filepath.Join(dir, "killed", "config.json"), &gs)
	if ws != gs {
		t.Errorf("resumed run kept %+v, the unkilled one %+v", gs, ws)
	}
	if _, err := os.Stat(filepath.Join(dir, "killed", "trials")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the resumed run left its restarts' folder: %v", err)
	}
}

// A run whose first trial or restart fails before it saves (here a setting New
// refuses) leaves no trials folder: the same --out takes the run again, fixed. One
// that fails after a restart saved keeps it, and says how to go on.
func TestTrainRestartsFailedBeforeSaving(t *testing.T) {
	dir := t.TempDir()
	writeIDXSet(t, dir, 96, 32)
	for _, trials := range []string{"0", "2"} {
		args := []string{"train", "--quiet", "--dataset", "mnist", "--data-dir", dir, "--device", "cpu", "--epochs", "3",
			"--batch-size", "32", "--restarts", "3", "--trial-epochs", trials, "--out", "bad" + trials}
		r := run(t, dir, append(args, "--objective", "supervised", "--k", "5")...)
		if r.code == 0 || strings.Contains(r.stderr, "--resume") {
			t.Fatalf("--trial-epochs %s, a refused k: exit %d, %s", trials, r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "bad"+trials)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("--trial-epochs %s: the failed run left its folder: %v", trials, err)
		}
		if r := run(t, dir, append(args, "--objective", "em")...); r.code != 0 {
			t.Errorf("--trial-epochs %s: the same --out, fixed: exit %d, %s", trials, r.code, r.stderr)
		}
	}
}

// A comparison killed among an image seed's trials goes on with --resume: seeds
// that finished are taken from their folders, the stopped one goes on with its
// trials, and the table equals an unkilled comparison's. A finished run whose result
// was not yet kept is scored from its checkpoint; another command line, or --resume
// where no comparison began, is refused.
func TestCompareResume(t *testing.T) {
	dir := t.TempDir()
	writeIDXSet(t, dir, 480, 32)
	args := []string{"compare", "--quiet", "--json", "--dataset", "mnist", "--data-dir", dir, "--device", "cpu", "--methods", "em",
		"--seeds", "2", "--epochs", "3", "--batch-size", "32", "--restarts", "2", "--trial-epochs", "2"}
	type runs struct {
		Runs []struct {
			Seed          uint64
			ACC, NMI, ARI float64
			Resumed       bool
		}
	}
	var straight, resumed runs
	r := run(t, dir, append(args, "--out", "straight")...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &straight); err != nil || len(straight.Runs) != 2 {
		t.Fatalf("compare --json: %v, %d runs: %s", err, len(straight.Runs), r.stdout)
	}

	// Seed 1 trains trials of seeds 2 and 3; the kill lands in the first.
	killWhenSaved(t, dir, filepath.Join(dir, "killed", "em-s1", "trials", "seed-2", "checkpoint.safetensors"), append(args, "--out", "killed")...)

	wantError(t, run(t, dir, append(args, "--out", "killed")...), 2, "stopped among them", "--resume", "--force")
	wantError(t, run(t, dir, append(args, "--out", "killed", "--resume", "--epochs", "4")...), 2, "differs in --epochs", "compare-plan.json")
	// What cannot change a result is not refused: the device as resolved, threads.
	if err := keepPlanOf(t, dir, append(args, "--out", "killed", "--resume", "--device", "auto", "--threads", "1")); err != nil {
		t.Errorf("resume with --device auto --threads 1 on a CPU machine: %v", err)
	}
	wantError(t, run(t, dir, append(args, "--out", "elsewhere", "--resume")...), 2, "holds no comparison")
	r = run(t, dir, append(args, "--out", "killed", "--resume")...)
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("resume: exit %d: %s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), &resumed); err != nil || len(resumed.Runs) != 2 {
		t.Fatalf("resumed compare --json: %v: %s", err, r.stdout)
	}
	for i, got := range resumed.Runs {
		want := straight.Runs[i]
		if got.Seed != want.Seed || got.ACC != want.ACC || got.NMI != want.NMI || got.ARI != want.ARI {
			t.Errorf("seed %d resumed: ACC %v NMI %v ARI %v; unkilled: seed %d, %v %v %v", got.Seed, got.ACC, got.NMI, got.ARI, want.Seed, want.ACC, want.NMI, want.ARI)
		}
	}
	if !resumed.Runs[0].Resumed || resumed.Runs[1].Resumed {
		t.Errorf("resumed flags %v, %v; want the first run only", resumed.Runs[0].Resumed, resumed.Runs[1].Resumed)
	}
	if _, err := os.Stat(filepath.Join(dir, "killed", "em-s1", "trials")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the resumed comparison left seed 1's trials: %v", err)
	}

	// Killed after a run's last checkpoint, before its result: scored from the checkpoint.
	if err := os.Remove(filepath.Join(dir, "straight", "em-s2", compare.ResultName)); err != nil {
		t.Fatal(err)
	}
	r = run(t, dir, append(args, "--out", "straight", "--resume")...)
	if r.code != 0 {
		t.Fatalf("resume of a finished run: exit %d: %s", r.code, r.stderr)
	}
	resumed.Runs = nil
	if err := json.Unmarshal([]byte(r.stdout), &resumed); err != nil || len(resumed.Runs) != 2 {
		t.Fatalf("compare --json: %v: %s", err, r.stdout)
	}
	if got, want := resumed.Runs[1], straight.Runs[1]; got.ACC != want.ACC || got.ARI != want.ARI || !got.Resumed {
		t.Errorf("seed 2 scored from its checkpoint: ACC %v ARI %v resumed %v; want %v %v true", got.ACC, got.ARI, got.Resumed, want.ACC, want.ARI)
	}

	// A run trained on by another command since is refused, not scored as this
	// comparison's.
	if r := run(t, dir, "train", "--quiet", "--resume", filepath.Join("straight", "em-s2"), "--epochs", "4", "--device", "cpu"); r.code != 0 {
		t.Fatalf("train --resume of a compared run: exit %d: %s", r.code, r.stderr)
	}
	os.Remove(filepath.Join(dir, "straight", "em-s2", compare.ResultName))
	wantError(t, run(t, dir, append(args, "--out", "straight", "--resume")...), 1, "em-s2", "trained with another number of epochs (4, where the comparison trains 3)", "--force")

	// A comparison begun again clears the runs it plans at once: stopped before it
	// reaches them (here before its first run), it leaves no earlier result or
	// checkpoint to a resume.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	app := &cli.App{Commands: []*cli.Command{compareCommand()}, Writer: io.Discard, ErrWriter: io.Discard, ExitErrHandler: func(*cli.Context, error) {}}
	t.Chdir(dir)
	var ie interruptedError
	if err := app.RunContext(ctx, append([]string{"emclust"}, append(args, "--out", "straight", "--force", "--epochs", "4")...)); !errors.As(err, &ie) {
		t.Fatalf("compare --force under a cancelled context: %v, want interrupted", err)
	}
	for _, seed := range []string{"em-s1", "em-s2"} {
		for _, f := range []string{compare.ResultName, "checkpoint.safetensors"} {
			if _, err := os.Stat(filepath.Join(dir, "straight", seed, f)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s/%s after a comparison began again: %v", seed, f, err)
			}
		}
	}
}

// keepPlanOf parses a compare command line and writes or checks its plan in --out, as
// a comparison does before its first run.
func keepPlanOf(t *testing.T, dir string, args []string) error {
	t.Helper()
	t.Chdir(dir)
	var plan error
	cmd := compareCommand()
	cmd.Action = func(c *cli.Context) error {
		opts, err := compareOptionsFrom(c)
		if err != nil {
			return err
		}
		cfg := opts.Run.Config
		src, err := train.OpenSource(&cfg, torch.CPU)
		if err != nil {
			return err
		}
		defer src.Close()
		if err := opts.Run.resolve(&cfg, torch.CPU, src); err != nil {
			return err
		}
		_, plan = keepPlan(opts, cfg, src.Len(), torch.CPU)
		return nil
	}
	app := &cli.App{Commands: []*cli.Command{cmd}, Writer: io.Discard, ErrWriter: io.Discard, ExitErrHandler: func(*cli.Context, error) {}}
	if err := app.Run(append([]string{"emclust"}, args...)); err != nil {
		return err
	}
	return plan
}

// A resumed comparison whose run's checkpoint the network refuses fails, naming it,
// and keeps no result for that run.
func TestCompareResumeRefused(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.csv"), []byte(randomCSV(10, 4, 2, 1, true)), 0o644)
	args := []string{"compare", "--quiet", "--data", "a.csv", "--label-col", "label", "--methods", "em", "--seeds", "1",
		"--restarts", "1", "--epochs", "2", "--device", "cpu", "--out", "cmp"}
	if r := run(t, dir, args...); r.code != 0 {
		t.Fatalf("compare: exit %d: %s", r.code, r.stderr)
	}
	result := filepath.Join(dir, "cmp", "em-s1", compare.ResultName)
	if err := os.Remove(result); err != nil {
		t.Fatal(err)
	}
	// Inside the header's JSON string.
	rewriteCheckpointHeader(t, filepath.Join(dir, "cmp", "em-s1", "checkpoint.safetensors"), `\"in\":4,\"hidden\":[32,32]`, `\"in\":4,\"hidden\":[32,31]`, true)
	wantError(t, run(t, dir, append(args, "--resume")...), 1, "checkpoint.safetensors", "does not match this run's")
	if _, err := os.Stat(result); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused resume kept a result: %v", err)
	}
}

// predict --out - writes the rows to stdout, as the file would hold them, and its
// summary line to stderr (was a file named "-").
func TestPredictToStdout(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(fixtures, "r4")
	data := filepath.Join(fixtures, "four.csv")
	file := run(t, dir, "predict", "--model", model, "--data", data, "--label-col", "label", "--out", "a.csv")
	if file.code != 0 {
		t.Fatalf("predict: exit %d: %s", file.code, file.stderr)
	}
	piped := run(t, dir, "predict", "--model", model, "--data", data, "--label-col", "label", "--out", "-")
	if piped.code != 0 {
		t.Fatalf("predict --out -: exit %d: %s", piped.code, piped.stderr)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "a.csv"))
	if piped.stdout != string(want) {
		t.Errorf("stdout is not the file's rows: %d bytes against %d", len(piped.stdout), len(want))
	}
	if !strings.Contains(piped.stderr, "200 rows → stdout") || !strings.Contains(piped.stderr, strings.TrimSpace(file.stdout)) {
		t.Errorf("stderr %q lacks the summary %q", piped.stderr, file.stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "-")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file named -: %v", err)
	}
}

// embed writes the bottleneck of a supervised mnist2d run, to a file or to stdout
// with the same rows; the log names where they went (was "→ -").
func TestEmbedToStdout(t *testing.T) {
	dir := t.TempDir()
	writeIDXSet(t, dir, 48, 16)
	tr := run(t, dir, "train", "--quiet", "--dataset", "mnist", "--data-dir", dir, "--device", "cpu", "--arch", "mnist2d",
		"--objective", "supervised", "--epochs", "1", "--batch-size", "16", "--out", "sup")
	if tr.code != 0 {
		t.Fatalf("train: exit %d: %s", tr.code, tr.stderr)
	}
	file := run(t, dir, "embed", "--model", "sup", "--data-dir", dir, "--out", "points.csv")
	if file.code != 0 {
		t.Fatalf("embed: exit %d: %s", file.code, file.stderr)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "points.csv"))
	lines := strings.Split(strings.TrimSpace(string(want)), "\n")
	if len(lines) != 65 || lines[0] != "x,y,label" { // both splits, as training reads them
		t.Fatalf("points.csv: %d lines, header %q", len(lines), lines[0])
	}
	piped := run(t, dir, "embed", "--model", "sup", "--data-dir", dir, "--out", "-")
	if piped.code != 0 {
		t.Fatalf("embed --out -: exit %d: %s", piped.code, piped.stderr)
	}
	if piped.stdout != string(want) {
		t.Errorf("stdout is not the file's rows: %d bytes against %d", len(piped.stdout), len(want))
	}
	if !strings.Contains(piped.stderr, "64 2-d points → stdout") {
		t.Errorf("stderr %q does not name stdout", piped.stderr)
	}
}

// embed of an image folder names each point's class as the folder does, as the
// assignments do (was its number).
func TestEmbedNamesFolderClasses(t *testing.T) {
	dir := t.TempDir()
	writeGrayImages(t, filepath.Join(dir, "imgs"), 28, 8, "cats", "dogs")
	tr := run(t, dir, "train", "--quiet", "--dataset", "folder", "--data-dir", "imgs", "--gray", "--device", "cpu", "--arch", "mnist2d",
		"--objective", "supervised", "--epochs", "1", "--batch-size", "4", "--out", "sup")
	if tr.code != 0 {
		t.Fatalf("train: exit %d: %s", tr.code, tr.stderr)
	}
	r := run(t, dir, "embed", "--model", "sup", "--out", "-")
	if noCrash(t, r); r.code != 0 {
		t.Fatalf("embed: exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 9 || lines[0] != "x,y,label" {
		t.Fatalf("embed: %d lines, header %q", len(lines), lines[0])
	}
	var got []string
	for _, line := range lines[1:] {
		got = append(got, line[strings.LastIndexByte(line, ',')+1:])
	}
	// The folder's order: cats/0, cats/2, cats/4, cats/6, then the dogs.
	if want := []string{"cats", "cats", "cats", "cats", "dogs", "dogs", "dogs", "dogs"}; !slices.Equal(got, want) {
		t.Errorf("labels %q, want %q", got, want)
	}
}

// An interrupted comparison's JSON says so: it was valid JSON of the runs done,
// which a script could take for the whole.
func TestPrintPartialJSON(t *testing.T) {
	rep := &compare.Report{Data: "iris", N: 150, K: 3, Seeds: []uint64{1, 2}, Device: "cpu"}
	for _, partial := range []bool{false, true} {
		var b bytes.Buffer
		if err := printReport(rep, true, partial, &b); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("%s: %v", b.String(), err)
		}
		if _, marked := got["interrupted"]; marked != partial || got["data"] != "iris" || got["n"] != 150.0 {
			t.Errorf("interrupted %v: %s", partial, b.String())
		}
	}
}

// A --markdown file that cannot be written costs the error, not the table printed
// before it (a suite takes most of an hour).
func TestCompareTableBeforeFiles(t *testing.T) {
	rep := &compare.Report{Data: "iris", N: 150, K: 3, Seeds: []uint64{1}, Device: "cpu"}
	md := filepath.Join(t.TempDir(), "missing", "t.md")
	for name, write := range map[string]func(io.Writer) error{
		"one table": func(w io.Writer) error { return writeCompare(rep, compareOptions{Markdown: md}, w) },
		"suite":     func(w io.Writer) error { return writeSuite([]*compare.Report{rep}, compareOptions{Markdown: md}, w) },
	} {
		var b bytes.Buffer
		if err := write(&b); err == nil || !strings.Contains(err.Error(), "t.md") {
			t.Errorf("%s: err %v, want the file's", name, err)
		}
		if !strings.Contains(b.String(), "iris") {
			t.Errorf("%s: printed %q, want the table", name, b.String())
		}
	}
}

// failingWriter is stdout on a full disk.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// A result line lost to a full disk exits 1, not 0 with nothing said.
func TestStdoutLost(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "t.txt"), []byte("0\n1\n"), 0o644)
	var errb bytes.Buffer
	code := Main([]string{"emclust", "score", "--truth", filepath.Join(dir, "t.txt"), "--pred", filepath.Join(dir, "t.txt")}, failingWriter{}, &errb)
	if code != 1 || errb.String() != "emclust: write stdout: no space left on device\n" {
		t.Errorf("exit %d, stderr %q; want 1 and the write's error", code, errb.String())
	}
}

// A damaged result.json names the way out, which works: its folder removed, the
// resume trains that run again.
func TestCompareResumeDamagedResult(t *testing.T) {
	dir := t.TempDir()
	args := []string{"compare", "--quiet", "--dataset", "iris", "--methods", "em", "--seeds", "1", "--restarts", "1", "--epochs", "2", "--device", "cpu", "--out", "cmp"}
	if r := run(t, dir, args...); r.code != 0 {
		t.Fatalf("compare: exit %d: %s", r.code, r.stderr)
	}
	run1 := filepath.Join("cmp", "em-s1")
	os.WriteFile(filepath.Join(dir, run1, "result.json"), []byte("{garbage"), 0o644)
	wantError(t, run(t, dir, append(args, "--resume")...), 1, "result.json", "remove "+run1+" to train that run again")
	os.RemoveAll(filepath.Join(dir, run1))
	if r := run(t, dir, append(args, "--resume")...); r.code != 0 {
		t.Errorf("resume after removing %s: exit %d: %s", run1, r.code, r.stderr)
	}
}

// compare --force replaces its runs, never a user's file in their folders, and takes
// with a run its report (which described the model replaced).
func TestCompareForceKeepsUserFiles(t *testing.T) {
	dir := t.TempDir()
	args := []string{"compare", "--quiet", "--dataset", "iris", "--methods", "em", "--seeds", "1", "--restarts", "1", "--epochs", "2", "--device", "cpu", "--out", "cmp"}
	if r := run(t, dir, args...); r.code != 0 {
		t.Fatalf("compare: exit %d: %s", r.code, r.stderr)
	}
	if r := run(t, dir, "report", filepath.Join("cmp", "em-s1"), "--no-tsne", "--quiet", "--device", "cpu"); r.code != 0 {
		t.Fatalf("report: exit %d: %s", r.code, r.stderr)
	}
	page := filepath.Join("cmp", "em-s1", "report", "index.html")
	wantError(t, run(t, dir, "predict", "--model", filepath.Join("cmp", "em-s1"), "--out", page, "--force", "--quiet"), 2, "is the page of the report in")
	mine := filepath.Join(dir, "cmp", "em-s1", "mine.txt")
	os.WriteFile(mine, []byte("precious"), 0o644)
	wantError(t, run(t, dir, append(args, "--force")...), 2, "em-s1 holds files no emclust command wrote (mine.txt)")
	if b, _ := os.ReadFile(mine); string(b) != "precious" {
		t.Errorf("mine.txt: %q", b)
	}
	os.Remove(mine)
	if r := run(t, dir, append(args, "--force")...); r.code != 0 {
		t.Fatalf("compare --force: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "cmp", "em-s1", "report")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the replaced run's report is left: %v", err)
	}
}

// compare --force of fewer seeds removes the replaced comparison's other run folders,
// which compare.json no longer described; one holding a user's file stays.
func TestCompareForceRemovesEarlierRuns(t *testing.T) {
	dir := t.TempDir()
	args := []string{"compare", "--dataset", "iris", "--methods", "em", "--restarts", "1", "--epochs", "1", "--device", "cpu", "--out", "cmp"}
	if r := run(t, dir, append(args, "--seeds", "3", "--quiet")...); r.code != 0 {
		t.Fatalf("compare: exit %d: %s", r.code, r.stderr)
	}
	mine := filepath.Join(dir, "cmp", "em-s3", "notes.txt")
	os.WriteFile(mine, []byte("mine"), 0o644)
	r := run(t, dir, append(args, "--seeds", "1", "--force")...)
	if r.code != 0 {
		t.Fatalf("compare --force: exit %d: %s", r.code, r.stderr)
	}
	if want := "emclust: removed 1 run folder of the replaced comparison, which this one did not train: em-s2\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
	}
	var got []string
	entries, _ := os.ReadDir(filepath.Join(dir, "cmp"))
	for _, e := range entries {
		if e.IsDir() {
			got = append(got, e.Name())
		}
	}
	if want := []string{"em-s1", "em-s3"}; !slices.Equal(got, want) {
		t.Errorf("run folders after compare --force --seeds 1: %v, want %v (em-s2 removed, em-s3 kept for notes.txt)", got, want)
	}
	if b, _ := os.ReadFile(mine); string(b) != "mine" {
		t.Errorf("notes.txt: %q", b)
	}
	// Even with --force, another command's --out does not replace a comparison's
	// files: a predictions CSV over the plan made --resume fail on a damaged plan.
	for _, name := range []string{"compare.json", comparePlanName} {
		wantError(t, run(t, dir, "predict", "--model", filepath.Join("cmp", "em-s1"), "--out", filepath.Join("cmp", name), "--force", "--quiet"), 2,
			"belongs to the comparison in cmp")
	}
	// A folder of train runs named as a comparison's holds no comparison: --force
	// there removes none of them.
	if r := run(t, dir, "train", "--quiet", "--dataset", "iris", "--restarts", "1", "--epochs", "1", "--device", "cpu", "--out", filepath.Join("runs", "em-s7")); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	r = run(t, dir, "compare", "--dataset", "iris", "--methods", "em", "--restarts", "1", "--epochs", "1", "--device", "cpu", "--seeds", "1", "--out", "runs", "--force")
	if r.code != 0 {
		t.Fatalf("compare --force --out runs: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs", "em-s7", "checkpoint.safetensors")); err != nil || strings.Contains(r.stderr, "removed") {
		t.Errorf("compare --force removed a train run: %v\n%s", err, r.stderr)
	}
}

// A comparison killed while writing its tables leaves partial files, which the next
// one in the folder removes (they outlived a finished --resume or --force).
func TestCompareRemovesPartialFiles(t *testing.T) {
	dir := t.TempDir()
	args := []string{"compare", "--quiet", "--dataset", "iris", "--methods", "kmeans", "--seeds", "1", "--device", "cpu", "--out", "cmp"}
	if r := run(t, dir, args...); r.code != 0 {
		t.Fatalf("compare: exit %d: %s", r.code, r.stderr)
	}
	for _, name := range []string{".compare.json.tmp3152235370", "." + comparePlanName + ".tmp12"} {
		os.WriteFile(filepath.Join(dir, "cmp", name), []byte("{"), 0o644)
	}
	if r := run(t, dir, append(args, "--force")...); r.code != 0 {
		t.Fatalf("compare --force: exit %d: %s", r.code, r.stderr)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "cmp", ".*.tmp*")); len(left) > 0 {
		t.Errorf("partial files left: %v", left)
	}
}

// Values far beyond the training data's range end predict and eval with a line that
// names the data and the row: a standardized model's z-score that passes float32
// (was a nil-pointer panic), and a raw model whose network overflows (was cluster 0
// with a NaN posterior, exit 0).
func TestPredictBeyondRange(t *testing.T) {
	dir := t.TempDir()
	// Columns of a spread well under 1, which z-scores scale up.
	a := "f0,f1,f2,f3,label\n"
	for i := range 30 {
		a += fmt.Sprintf("%g,%g,%g,%g,%d\n", 0.01*float64(i%7), 0.02*float64(i%5), 0.01*float64(i%3), 0.03*float64(i%2), i%2)
	}
	os.WriteFile(filepath.Join(dir, "a.csv"), []byte(a), 0o644)
	os.WriteFile(filepath.Join(dir, "big.csv"), []byte("f0,f1,f2,f3,label\n0.05,0.02,0.01,0.03,0\n3.4e38,3.4e38,3.4e38,3.4e38,1\n"), 0o644)
	for _, tc := range []struct {
		name, flag string
		want       string
	}{
		{"standardized", "--standardize", "passes float32's range"},
		{"raw", "--standardize=false", "not finite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := run(t, dir, "train", "--quiet", "--data", "a.csv", "--label-col", "label", tc.flag, "--restarts", "1", "--epochs", "2",
				"--kmeans=false", "--device", "cpu", "--out", tc.name); r.code != 0 {
				t.Fatalf("train: exit %d: %s", r.code, r.stderr)
			}
			wantError(t, run(t, dir, "predict", "--model", tc.name, "--data", "big.csv", "--label-col", "label", "--out", tc.name+".csv", "--device", "cpu"),
				1, "big.csv", "row", tc.want)
			wantError(t, run(t, dir, "eval", "--model", tc.name, "--data", "big.csv", "--label-col", "label", "--device", "cpu"), 1, "big.csv", "row", tc.want)
		})
	}
}

// A model whose weights are not finite is named for the outputs it gives, not the
// data, which were blamed before ("is a value far outside the range of the training
// data?") for a checkpoint of NaN weights.
func TestPredictNaNModel(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.csv"), []byte(randomCSV(30, 4, 2, 1, true)), 0o644)
	if r := run(t, dir, "train", "--quiet", "--data", "a.csv", "--label-col", "label", "--restarts", "1", "--epochs", "2", "--kmeans=false", "--device", "cpu", "--out", "run"); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	// The checkpoint saved again, as a run would, with one weight NaN.
	var w torch.Named
	saveRunAs(t, filepath.Join(dir, "run"), filepath.Join(dir, "run"), nil, func(r *train.Run) {
		s := torch.NoGrad()
		w = r.Net.Params()[0]
		s.CopyInto(s.Narrow(s.Flatten(w.Tensor, 0), 0, 0, 1), s.Full([]int{1}, math.NaN(), torch.Float32, torch.CPU))
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
	for _, verb := range [][]string{{"predict", "--out", "p.csv"}, {"eval"}} {
		wantError(t, run(t, dir, append(verb, "--model", "run", "--data", "a.csv", "--label-col", "label", "--device", "cpu")...), 1,
			"run: ", "its "+w.Name+" holds values that are not finite", "train the model again")
	}
}

// predict without --data clusters the training file as it is now, and says so where
// it changed since training.
func TestPredictChangedTrainingData(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.csv")
	os.WriteFile(path, []byte(randomCSV(30, 4, 2, 1, true)), 0o644)
	if r := run(t, dir, "train", "--quiet", "--data", "a.csv", "--label-col", "label", "--restarts", "1", "--epochs", "2", "--kmeans=false", "--device", "cpu", "--out", "run"); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	if r := run(t, dir, "predict", "--model", "run", "--out", "same.csv"); r.code != 0 || strings.Contains(r.stderr, "changed") {
		t.Fatalf("predict on the unchanged file: exit %d: %s", r.code, r.stderr)
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("9,9,9,9,1\n")
	f.Close()
	r := run(t, dir, "predict", "--model", "run", "--out", "changed.csv")
	if r.code != 0 || !strings.Contains(r.stderr, "a.csv changed since run trained on it") {
		t.Errorf("predict on the changed file: exit %d: %s", r.code, r.stderr)
	}
}

// compare --out takes only a new or empty folder, or one of comparisons: a run's
// folder, or /, got compare.json and run folders among their files. An empty --out
// of predict is refused before any work.
func TestOutputFoldersRefused(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "mine"), 0o755)
	os.WriteFile(filepath.Join(dir, "mine", "notes.txt"), []byte("x"), 0o644)
	for _, out := range []string{filepath.Join(fixtures, "r4"), "mine"} {
		wantError(t, run(t, dir, "compare", "--dataset", "iris", "--methods", "kmeans", "--seeds", "1", "--device", "cpu", "--out", out), 2, "holds files no comparison wrote")
	}
	if _, err := os.Stat(filepath.Join(dir, "mine", "compare.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("compare wrote into a folder of the user's: %v", err)
	}
	wantError(t, run(t, dir, "predict", "--model", filepath.Join(fixtures, "r4"), "--out", ""), 2, `--out ""`)

	// A comparison's run folders alone (one stopped before it wrote anything else)
	// are a comparison's: --force replaces them.
	os.MkdirAll(filepath.Join(dir, "old", "em-s1"), 0o755)
	args := []string{"compare", "--quiet", "--dataset", "iris", "--methods", "kmeans", "--seeds", "1", "--device", "cpu", "--out", "old"}
	if r := run(t, dir, append(args, "--force")...); r.code != 0 {
		t.Errorf("compare --force over an earlier comparison's run folders: exit %d: %s", r.code, r.stderr)
	}

	// --resume writes the --markdown file its comparison planned, and no other.
	md := append(slices.Clip(args), "--markdown", "t.md", "--out", "md")
	if r := run(t, dir, md...); r.code != 0 {
		t.Fatalf("compare --markdown: exit %d: %s", r.code, r.stderr)
	}
	if r := run(t, dir, append(md, "--resume")...); r.code != 0 {
		t.Errorf("compare --resume with its own --markdown: exit %d: %s", r.code, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "other.md"), []byte("mine\n"), 0o644)
	wantError(t, run(t, dir, append(slices.Clip(args), "--markdown", "other.md", "--out", "md", "--resume")...), 2, "other.md")
}

// Ctrl-C before the first trial begins (here, before the command starts): nothing to
// resume, the message says so, and the folder the command made is gone again.
func TestTrainTrialsInterruptedBeforeFirst(t *testing.T) {
	dir := t.TempDir()
	writeIDXSet(t, dir, 48, 16)
	t.Chdir(dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	app := &cli.App{Commands: []*cli.Command{trainCommand()}, Writer: &stdout, ErrWriter: &stderr, ExitErrHandler: func(*cli.Context, error) {}}
	err := app.RunContext(ctx, []string{"emclust", "train", "--dataset", "mnist", "--data-dir", dir,
		"--device", "cpu", "--epochs", "3", "--restarts", "2", "--trial-epochs", "2", "--out", filepath.Join("runs", "run")})
	var ie interruptedError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "before the first trial began") || strings.Contains(err.Error(), "--resume") {
		t.Fatalf("train under a cancelled context: %v; want the interruption before the first trial, without --resume", err)
	}
	if _, err := os.Stat("runs"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the folders the command made are still there (stat runs: %v)", err)
	}
}

// chosenModelExists checks that the chosen epoch's model that summary.json names, if
// any, is there: after trials it was written in the kept trial's folder only, which
// the run then removed.
func chosenModelExists(t *testing.T, cwd, run string) {
	t.Helper()
	runDir := filepath.Join(cwd, run)
	var sum struct {
		Chosen *struct {
			Epoch int    `json:"epoch"`
			Model string `json:"model"`
		} `json:"chosen"`
	}
	readJSON(t, filepath.Join(runDir, "summary.json"), &sum)
	if sum.Chosen == nil {
		return
	}
	model := sum.Chosen.Model
	if !filepath.IsAbs(model) {
		model = filepath.Join(cwd, model)
	}
	if _, err := os.Stat(model); err != nil {
		t.Errorf("summary.json names epoch %d's model %s: %v", sum.Chosen.Epoch, sum.Chosen.Model, err)
	}
}

// scripts/gloo-config.sh writes Gloo's config.h as CMake would, with PyTorch's switches
// (Dockerfile.cuda), and refuses a config.h.in with an entry it does not know, rather
// than leave it unset.
func TestGlooConfigScript(t *testing.T) {
	const in = "#pragma once\n#define GLOO_VERSION_MAJOR @GLOO_VERSION_MAJOR@\n#define GLOO_VERSION_MINOR @GLOO_VERSION_MINOR@\n" +
		"#define GLOO_VERSION_PATCH @GLOO_VERSION_PATCH@\n#cmakedefine01 GLOO_USE_CUDA\n#cmakedefine01 GLOO_USE_REDIS\n" +
		"#cmakedefine01 GLOO_HAVE_TRANSPORT_TCP\n#cmakedefine01 GLOO_HAVE_TRANSPORT_UV\n"
	for _, tc := range []struct {
		name, in string
		code     int
		want     []string
	}{
		{"pytorch's switches", in, 0, []string{"#define GLOO_VERSION_MAJOR 0\n", "#define GLOO_VERSION_MINOR 5\n", "#define GLOO_VERSION_PATCH 2\n",
			"#define GLOO_USE_CUDA 1\n", "#define GLOO_USE_REDIS 0\n", "#define GLOO_HAVE_TRANSPORT_TCP 1\n", "#define GLOO_HAVE_TRANSPORT_UV 0\n"}},
		{"an unknown entry", in + "#define GLOO_NEW @GLOO_NEW@\n", 1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := t.TempDir()
			os.MkdirAll(filepath.Join(src, "gloo"), 0o755)
			os.WriteFile(filepath.Join(src, "CMakeLists.txt"), []byte("project(gloo CXX C)\nset(GLOO_VERSION_MAJOR 0)\nset(GLOO_VERSION_MINOR 5)\nset(GLOO_VERSION_PATCH 2)\n"), 0o644)
			os.WriteFile(filepath.Join(src, "gloo", "config.h.in"), []byte(tc.in), 0o644)
			out, err := exec.Command(filepath.Join(repo, "scripts/gloo-config.sh"), src).CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(filepath.Join(src, "gloo", "config.h"))
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, out)
			}
			if tc.code != 0 && got != nil {
				t.Errorf("a refused config.h.in left a config.h:\n%s", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(got), w) {
					t.Errorf("config.h lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

// scripts/build-shim.sh builds the shim against a libtorch folder (here Debian's CPU
// libtorch, arranged as the include/ and lib/ folder the script takes), and the same
// binary loads it when LD_LIBRARY_PATH names its folder: the way a CUDA shim replaces
// the CPU one on a GPU machine.
//
// EMCLUST_TEST_LIBTORCH names another libtorch folder: a GPU machine has PyTorch's
// (scripts/gpu-acceptance.sh passes it) and no Debian libtorch.
func TestBuildShimScript(t *testing.T) {
	dir := t.TempDir()
	lt := os.Getenv("EMCLUST_TEST_LIBTORCH")
	if lt == "" {
		libs, _ := filepath.Glob("/usr/lib/*/libtorch.so")
		if len(libs) == 0 {
			t.Fatal("no libtorch.so under /usr/lib (make deps installs libtorch-dev), and no EMCLUST_TEST_LIBTORCH")
		}
		lt = filepath.Join(dir, "libtorch")
		if err := os.MkdirAll(lt, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, target := range map[string]string{"include": "/usr/include", "lib": filepath.Dir(libs[0])} {
			if err := os.Symlink(target, filepath.Join(lt, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := filepath.Join(dir, "shim")
	build := exec.Command(filepath.Join(repo, "scripts/build-shim.sh"), lt, out)
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build-shim.sh: %v\n%s", err, b)
	}
	// The shim exports its C API alone (torch/csrc/emtorch.map): a C++ symbol it
	// exported could stand in for libtorch's own copy.
	nm, err := exec.Command("nm", "-D", "--defined-only", filepath.Join(out, "libemtorch.so")).Output()
	if err != nil {
		t.Fatalf("nm: %v", err)
	}
	exported := 0
	for _, line := range strings.Split(strings.TrimSpace(string(nm)), "\n") {
		f := strings.Fields(line)
		if name := f[len(f)-1]; !strings.HasPrefix(name, "et_") {
			t.Errorf("the shim exports %s", name)
		} else {
			exported++
		}
	}
	if exported < 50 {
		t.Errorf("the shim exports %d et_ functions; want its whole C API", exported)
	}
	devices := emclustCmd("devices")
	devices.Env = append(os.Environ(), "LD_LIBRARY_PATH="+out, "LD_DEBUG=libs")
	var stdout, stderr bytes.Buffer
	devices.Stdout, devices.Stderr = &stdout, &stderr
	if err := devices.Run(); err != nil {
		t.Fatalf("devices with the script's shim: %v\n%s", err, stderr.String())
	}
	if want := "init: " + filepath.Join(out, "libemtorch.so"); !strings.Contains(stderr.String(), want) {
		t.Errorf("the binary did not load the shim from LD_LIBRARY_PATH (no %q in the loader's log)", want)
	}
	if !strings.Contains(stdout.String(), "libtorch") {
		t.Errorf("devices printed %q", stdout.String())
	}
}

func TestDefaultChannelsLast(t *testing.T) {
	for _, tc := range []struct{ cnn, want bool }{
		{true, true},   // measured on the CPU and an H100: faster or within noise
		{false, false}, // an MLP has no convolutions
	} {
		if got := defaultChannelsLast(tc.cnn); got != tc.want {
			t.Errorf("defaultChannelsLast(cnn %v) = %v, want %v", tc.cnn, got, tc.want)
		}
	}
}

// A shim from another commit is refused before any work, in one line that names both
// ABI versions: one from before the handshake (no et_abi_version, like e8a4a22's) and
// one from a later ABI. Stand-ins with only the looked-up symbols do: the binary binds
// every other shim function lazily, so none of them may be called first.
func TestMismatchedShimRefused(t *testing.T) {
	abi := torch.ABIVersion
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"unversioned", `const char *et_version(void) { return "1.13.1"; }`,
			[]string{"has no emtorch ABI version", fmt.Sprintf("needs ABI %d", abi), "libtorch 1.13.1"}},
		{"later", fmt.Sprintf(`const char *et_version(void) { return "2.6.0"; }
int et_abi_version(void) { return %d; }`, abi+1),
			[]string{fmt.Sprintf("is emtorch ABI %d", abi+1), fmt.Sprintf("needs ABI %d", abi), "libtorch 2.6.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "shim.c")
			if err := os.WriteFile(src, []byte(tc.src+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			lib := filepath.Join(dir, "libemtorch.so")
			if b, err := exec.Command("cc", "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
				t.Fatalf("cc: %v\n%s", err, b)
			}
			for _, args := range [][]string{{"devices"}, {"train", "--epochs", "1", "--out", "run"}} {
				cmd := emclustCmd(args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir)
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				err := cmd.Run()
				r := result{stdout: out.String(), stderr: errb.String()}
				if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
					r.code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				wantError(t, r, 1, append(tc.want, lib)...)
				if _, err := os.Stat(filepath.Join(dir, "run")); !os.IsNotExist(err) {
					t.Errorf("%v: the refused run made its folder (%v)", args, err)
				}
			}
		})
	}
}

// --restarts keeps, of each network's restarts, the one that agrees best with the
// others, or with --keep-by silhouette the one of the highest silhouette, and of the
// two networks the one whose kept clustering has the higher silhouette on the
// features: summary.json lists every network and seed with its criteria, agreement
// and silhouettes, config.json says what kept it, and the run folder holds the kept
// seed's run.
func TestTrainRestarts(t *testing.T) {
	for _, keepBy := range []string{"", train.KeepBySilhouette} {
		t.Run("keep-by="+keepBy, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"train", "--quiet", "--restarts", "3", "--seed", "5", "--epochs", "2", "--kmeans=false", "--out", "run"}
			if keepBy != "" {
				args = append(args, "--keep-by", keepBy)
			}
			wantScoreLine(t, run(t, dir, args...))
			type criteria struct {
				MaxPosterior float64 `json:"max_posterior"`
			}
			var sum struct {
				Criteria criteria
				Restarts []struct {
					Seed              uint64
					Criteria          criteria
					Agreement         *float64
					Silhouette        *float64
					Network           string
					NetworkSilhouette *float64 `json:"network_silhouette"`
					NetworkClusters   int      `json:"network_clusters"`
				}
			}
			readJSON(t, filepath.Join(dir, "run", "summary.json"), &sum)
			if len(sum.Restarts) != 6 {
				t.Fatalf("summary lists %d restarts, want 3 of each network", len(sum.Restarts))
			}
			bySilhouette := keepBy == train.KeepBySilhouette
			score := func(i int) float64 {
				if bySilhouette {
					return *sum.Restarts[i].Silhouette
				}
				return *sum.Restarts[i].Agreement
			}
			best := map[string]int{}    // each network's kept restart
			network := map[string]int{} // the restart of each that the network choice scored
			for i, rs := range sum.Restarts {
				net := []string{"mlp", "linear"}[i/3]
				if rs.Seed != uint64(5+i%3) || rs.Network != net || rs.Agreement == nil || (rs.Silhouette != nil) != bySilhouette {
					t.Fatalf("restart %d: %s seed %d, agreement %v, silhouette %v; want %s seed %d, an agreement, and a silhouette only when kept by it",
						i, rs.Network, rs.Seed, rs.Agreement, rs.Silhouette, net, 5+i%3)
				}
				b, ok := best[net]
				// Ties (the same partition twice) go to the max posterior, as train's.
				if !ok || score(i) > score(b) || (score(i) == score(b) && rs.Criteria.MaxPosterior > sum.Restarts[b].Criteria.MaxPosterior) {
					best[net] = i
				}
				if rs.NetworkSilhouette != nil {
					network[net] = i
				}
			}
			if len(network) != 2 || network["mlp"] != best["mlp"] || network["linear"] != best["linear"] {
				t.Fatalf("the network choice scored restarts %v, want each network's kept one %v", network, best)
			}
			// The MLP, unless the linear map uses 7 or more of the digits' 10 clusters
			// (70% of K) with a higher silhouette or the MLP does not, or neither does
			// and the linear map uses more, or as many with a higher silhouette.
			kept := "mlp"
			m, l := sum.Restarts[best["mlp"]], sum.Restarts[best["linear"]]
			mWhole, lWhole := m.NetworkClusters >= 7, l.NetworkClusters >= 7
			higher := *l.NetworkSilhouette > *m.NetworkSilhouette
			switch {
			case lWhole && (higher || !mWhole),
				!lWhole && !mWhole && (l.NetworkClusters > m.NetworkClusters || (l.NetworkClusters == m.NetworkClusters && higher)):
				kept = "linear"
			}
			var cfg struct {
				Seed     uint64
				Restarts int
				KeepBy   string `json:"keep_by"`
				Hidden   []int
				Prior    string
			}
			readJSON(t, filepath.Join(dir, "run", "config.json"), &cfg)
			want := sum.Restarts[best[kept]]
			// The restart was scored on one thread, the summary on every one: the
			// sums may differ in their last bits.
			if cfg.Seed != want.Seed || cfg.Restarts != 3 || math.Abs(sum.Criteria.MaxPosterior-want.Criteria.MaxPosterior) > 1e-6 {
				t.Errorf("kept seed %d (restarts %d, max posterior %v), want %s seed %d of 3 (score %v, max posterior %v)", cfg.Seed, cfg.Restarts,
					sum.Criteria.MaxPosterior, kept, want.Seed, score(best[kept]), want.Criteria.MaxPosterior)
			}
			if (kept == "linear") != (len(cfg.Hidden) == 0) || (kept == "linear") != (cfg.Prior == "learned") {
				t.Errorf("kept the %s, config.json has hidden %v and a %s prior", kept, cfg.Hidden, cfg.Prior)
			}
			if wantKeepBy := map[bool]string{true: train.KeepBySilhouette, false: train.KeepByAgreement}[bySilhouette]; cfg.KeepBy != wantKeepBy {
				t.Errorf("config.json keep_by %q, want %q", cfg.KeepBy, wantKeepBy)
			}
			if epoch := checkpointEpoch(t, filepath.Join(dir, "run", "checkpoint.safetensors")); epoch != 2 {
				t.Errorf("checkpoint of epoch %d, want 2", epoch)
			}
		})
	}
	dir := t.TempDir()
	wantError(t, run(t, dir, "train", "--restarts", "-1", "--out", "neg"), 2, "restarts -1")
	wantError(t, run(t, dir, "train", "--keep-by", "medoid", "--out", "bad"), 2, `keep-by "medoid"`)
}

// Vectors train ten restarts unless told.
func TestTrainDefaultRestarts(t *testing.T) {
	dir := t.TempDir()
	wantScoreLine(t, run(t, dir, "train", "--quiet", "--epochs", "1", "--kmeans=false", "--out", "run"))
	var sum struct{ Restarts []json.RawMessage }
	readJSON(t, filepath.Join(dir, "run", "summary.json"), &sum)
	if len(sum.Restarts) != 2*train.DefaultVectorRestarts {
		t.Errorf("summary lists %d restarts, want %d of each network", len(sum.Restarts), train.DefaultVectorRestarts)
	}
}

// A run evaluated at every epoch keeps, beside the last, the epoch whose clustering
// agrees best with the evaluations before it; summary.json names it, with scores that
// eval of its model gives. (Seed 2 of the digits chose an epoch before the last on an
// AMD EPYC.)
func TestTrainChosenEpoch(t *testing.T) {
	dir := t.TempDir()
	wantScoreLine(t, run(t, dir, "train", "--quiet", "--restarts", "1", "--kmeans=false", "--seed", "2", "--out", "run"))
	best, last, evaluations := -1, 0, 0
	var agree []float64
	var empty []int
	for i, l := range readLines(t, filepath.Join(dir, "run", "metrics.jsonl")) {
		var m struct {
			Criteria  *json.RawMessage
			Agreement *float64
			Empty     int `json:"empty_clusters"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		agree, empty = append(agree, math.NaN()), append(empty, m.Empty)
		last = i
		if m.Criteria == nil { // not evaluated (--eval-every)
			continue
		}
		evaluations++
		if (evaluations == 1) != (m.Agreement == nil) {
			t.Fatalf("epoch %d, evaluation %d: agreement %v; want one from the second evaluation on", i+1, evaluations, m.Agreement)
		}
		if m.Agreement != nil {
			// Fewer empty clusters first, then the agreement (train.Chosen.AgreesMore).
			agree[i] = *m.Agreement
			if best < 0 || m.Empty < empty[best] || (m.Empty == empty[best] && *m.Agreement > agree[best]) {
				best = i
			}
		}
	}
	var sum struct {
		Chosen *struct {
			Epoch  int
			Model  string
			Scores *struct{ ACC, NMI, ARI float64 }
		}
	}
	readJSON(t, filepath.Join(dir, "run", "summary.json"), &sum)
	_, err := os.Stat(filepath.Join(dir, "run", "chosen.safetensors"))
	if best == last {
		if sum.Chosen != nil || err == nil {
			t.Errorf("the last epoch agreed best (%v), yet summary names epoch %+v (chosen.safetensors: %v)", agree, sum.Chosen, err)
		}
		return
	}
	if sum.Chosen == nil || sum.Chosen.Epoch != best+1 || sum.Chosen.Scores == nil || err != nil {
		t.Fatalf("agreements %v: summary's chosen epoch %+v, want epoch %d with scores (chosen.safetensors: %v)", agree, sum.Chosen, best+1, err)
	}
	want := fmt.Sprintf("ACC %.4f NMI %.4f ARI %.4f", sum.Chosen.Scores.ACC, sum.Chosen.Scores.NMI, sum.Chosen.Scores.ARI)
	if got := wantScoreLine(t, run(t, dir, "eval", "--model", sum.Chosen.Model)); got != want {
		t.Errorf("eval of the chosen model: %q, summary says %q", got, want)
	}
}

// SIGINT during the restarts keeps the choice among those that finished, which a
// resume finishes; during the first, nothing is kept and the message says so.
func TestInterruptRestarts(t *testing.T) {
	dir := t.TempDir()
	bigCSV(t, dir)
	interrupt := func(out, after string, during func()) (code int, last string) {
		pr, pw := io.Pipe()
		// Restarts of about 6 s each: 30 epochs of 625 steps.
		cmd, done := startTrain(t, dir, pw, "--restarts", "3", "--hidden", "32,32", "--epochs", "30", "--batch-size", "32", "--out", out)
		go func() { <-done; pw.Close() }()
		lines := bufio.NewScanner(pr)
		var all []string
		for lines.Scan() {
			all = append(all, lines.Text())
			if strings.Contains(lines.Text(), after) {
				if during != nil {
					during()
				}
				if err := cmd.Process.Signal(os.Interrupt); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		for lines.Scan() {
			all = append(all, lines.Text())
		}
		noCrash(t, result{stderr: strings.Join(all, "\n")})
		if len(all) == 0 {
			t.Fatal("no output on stderr")
		}
		return cmd.ProcessState.ExitCode(), all[len(all)-1]
	}

	code, last := interrupt("first", "kept by", nil)
	if _, err := os.Stat(filepath.Join(dir, "first", "checkpoint.safetensors")); code != 130 || !strings.Contains(last, "no run was kept") || err == nil {
		t.Errorf("SIGINT in the first restart: exit %d, checkpoint %v, last line %q; want 130, none, no run kept", code, err == nil, last)
	}

	// The folder is the restarts' while they train: a second run there is refused.
	code, last = interrupt("run", "restart 1/3", func() {
		wantError(t, run(t, dir, "train", "--restarts", "1", "--epochs", "1", "--kmeans=false", "--out", "run"), 1, "in use")
	})
	if code != 130 || !regexp.MustCompile(`interrupted after [12] of 3 restarts; kept seed [0-9]+ .*--resume run`).MatchString(last) {
		t.Fatalf("SIGINT in a later restart: exit %d, last line %q", code, last)
	}
	var cfg struct{ Restarts int }
	readJSON(t, filepath.Join(dir, "run", "config.json"), &cfg)
	if cfg.Restarts != 1 && cfg.Restarts != 2 {
		t.Errorf("config.json says %d restarts, want those that finished", cfg.Restarts)
	}
	wantScoreLine(t, runProc(t, dir, "train", "--quiet", "--resume", "run"))
	if _, err := os.Stat(filepath.Join(dir, "run", "summary.json")); err != nil {
		t.Errorf("the resume wrote no summary: %v", err)
	}
}

// compare takes train's model flags: a run it keeps was trained with them.
func TestCompareModelFlags(t *testing.T) {
	dir := t.TempDir()
	r := run(t, dir, "compare", "--data", filepath.Join(fixtures, "four.csv"), "--label-col", "label", "--methods", "em",
		"--seeds", "1", "--epochs", "1", "--no-norm", "--precision", "bf16", "--hidden", "8", "--heads", "2", "--out", "cmp", "--device", "cpu", "--quiet")
	if r.code != 0 {
		t.Fatalf("compare: exit %d: %s", r.code, r.stderr)
	}
	var cfg struct {
		Norm      bool
		Precision string
		Hidden    []int
		KMeans    bool
		Heads     int
	}
	readJSON(t, filepath.Join(dir, "cmp", "em-s1", "config.json"), &cfg)
	if cfg.Norm || cfg.Precision != "bf16" || len(cfg.Hidden) != 1 || cfg.Hidden[0] != 8 || cfg.KMeans || cfg.Heads != 2 {
		t.Errorf("compare's em run trained with norm %v, precision %q, hidden %v, kmeans %v, heads %d; want false, bf16, [8], false, 2",
			cfg.Norm, cfg.Precision, cfg.Hidden, cfg.KMeans, cfg.Heads)
	}
}

// compare on one table also runs its baselines on the other choice of standardisation
// when the rule chose, shows the better and keeps both in compare.json; a choice the
// user made is left alone.
func TestCompareBaselinesBothFeatures(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		flags []string
		other bool
	}{{nil, true}, {[]string{"--standardize=false"}, false}} {
		out := fmt.Sprint("cmp-", len(tc.flags))
		args := append([]string{"compare", "--dataset", "wine", "--methods", "kmeans", "--seeds", "1", "--quiet", "--out", out}, tc.flags...)
		r := run(t, dir, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.flags, r.code, r.stderr)
		}
		if got := strings.Contains(r.stdout, "Each baseline ran on the raw and on the standardized features"); got != tc.other {
			t.Errorf("%v: the table's note of both features is there: %v, want %v:\n%s", tc.flags, got, tc.other, r.stdout)
		}
		var rep bothFeatures
		readJSON(t, filepath.Join(dir, out, "compare.json"), &rep)
		if rep.oneRunEach() != tc.other || len(rep.Runs) != 1 {
			t.Errorf("%v: standardized %v, %d runs, other features %+v; want one k-means run on each choice: %v",
				tc.flags, rep.Standardized, len(rep.Runs), rep.OtherFeatures, tc.other)
		}
	}
}

// bothFeatures is what the tests read of a compare report: its runs, and the
// baselines' runs on the other choice of standardisation.
type bothFeatures struct {
	Standardized  bool
	Runs          []json.RawMessage
	OtherFeatures *struct {
		Standardized bool
		Runs         []json.RawMessage
	} `json:"other_features"`
}

// oneRunEach says whether the report holds one run on its features and one on the
// other choice.
func (b bothFeatures) oneRunEach() bool {
	o := b.OtherFeatures
	return o != nil && o.Standardized != b.Standardized && len(o.Runs) == 1 && len(b.Runs) == 1
}

// Columns in different units are standardized unless --standardize says otherwise; the
// choice and its measure are in config.json.
func TestStandardizeAuto(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("a,b,c,label\n")
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 200 {
		c := i % 2
		fmt.Fprintf(&b, "%.4f,%.2f,%.4f,%d\n", float64(c)+rng.NormFloat64(), 1000*(float64(c)+rng.NormFloat64()), rng.NormFloat64(), c)
	}
	if err := os.WriteFile(filepath.Join(dir, "units.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag       []string
		want, auto bool
	}{{nil, true, true}, {[]string{"--standardize=false"}, false, false}} {
		out := fmt.Sprint("run-", len(tc.flag))
		r := run(t, dir, append([]string{"train", "--epochs", "1", "--kmeans=false", "--data", "units.csv",
			"--label-col", "label", "--out", out}, tc.flag...)...)
		wantScoreLine(t, r)
		// A rule the user did not invoke says when it acted.
		if said := strings.Contains(r.stderr, "3 features, standardized as their spreads differ by "); said != tc.auto {
			t.Errorf("flags %v: the standardisation said %v, want %v:\n%s", tc.flag, said, tc.auto, r.stderr)
		}
		var saved struct {
			Standardize     bool    `json:"standardize"`
			StandardizeAuto bool    `json:"standardize_auto"`
			FeatureSpread   float64 `json:"feature_spread"`
		}
		readJSON(t, filepath.Join(dir, out, "config.json"), &saved)
		if saved.Standardize != tc.want || saved.StandardizeAuto != tc.auto || (tc.auto && !(saved.FeatureSpread > data.SpreadToStandardize)) {
			t.Errorf("flags %v: config.json %+v, want standardize %v, auto %v", tc.flag, saved, tc.want, tc.auto)
		}
	}
}

// Columns far from 0 against their spread (coordinates in metres) are standardized
// by default: raw, two columns near 1e7 of unit spread trained to one cluster.
func TestStandardizeAutoOffset(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("east,north,label\n")
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 200 {
		c := float64(i % 2)
		fmt.Fprintf(&b, "%.3f,%.3f,%d\n", 1e7+3*c+0.5*rng.NormFloat64(), 2e7+3*c+0.5*rng.NormFloat64(), i%2)
	}
	if err := os.WriteFile(filepath.Join(dir, "utm.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, dir, "train", "--epochs", "1", "--restarts", "1", "--kmeans=false", "--data", "utm.csv", "--label-col", "label", "--out", "utm")
	wantScoreLine(t, r)
	if !strings.Contains(r.stderr, "2 features, standardized as a column's mean lies ") {
		t.Errorf("the standardisation by the offset is not said:\n%s", r.stderr)
	}
	var saved struct {
		Standardize   bool    `json:"standardize"`
		FeatureSpread float64 `json:"feature_spread"`
		FeatureOffset float64 `json:"feature_offset"`
	}
	readJSON(t, filepath.Join(dir, "utm", "config.json"), &saved)
	if !saved.Standardize || saved.FeatureSpread > data.SpreadToStandardize || saved.FeatureOffset < data.OffsetToStandardize {
		t.Errorf("config.json %+v: want standardized by the offset alone", saved)
	}
}

// compare --k with several values sweeps K without labels: a row per K, no NMI
// column, and --markdown holds what was printed.
func TestCompareSweepK(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "blobs.csv"), []byte(randomCSV(120, 4, 3, 5, false)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, dir, "compare", "--data", "blobs.csv", "--k", "2,3,4", "--seeds", "2", "--epochs", "3", "--quiet", "--markdown", "k.md")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, k := range []string{"| 2 ", "| 3 ", "| 4 "} {
		if !strings.Contains(r.stdout, k) {
			t.Errorf("no row %q:\n%s", k, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "NMI") || !strings.Contains(r.stdout, "agreement") {
		t.Errorf("want the label-free columns alone:\n%s", r.stdout)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "k.md")); err != nil || string(b) != r.stdout {
		t.Errorf("k.md differs from what was printed (%v)", err)
	}
}

// compare --suite --tables runs on a folder's CSV tables (other files ignored) or on
// the files listed, a row each, in the folder's name order.
func TestCompareSuiteTables(t *testing.T) {
	heldout, err := filepath.Abs(filepath.Join("..", "data", "heldout"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tables := filepath.Join(dir, "tables")
	if err := os.Mkdir(tables, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sonar.csv.gz", "glass.csv.gz", "README.md"} {
		b, err := os.ReadFile(filepath.Join(heldout, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tables, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, arg := range []string{"tables", "tables/glass.csv.gz,tables/sonar.csv.gz"} {
		r := run(t, dir, "compare", "--suite", "--tables", arg, "--label-col", "label", "--methods", "kmeans", "--seeds", "1", "--quiet")
		if r.code != 0 {
			t.Fatalf("--tables %s: exit %d: %s", arg, r.code, r.stderr)
		}
		var rows []string
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(strings.ReplaceAll(line, "|", " ")); len(f) == 4 && f[0] != "data" && !strings.HasPrefix(f[0], ":") {
				rows = append(rows, strings.Join(f[:3], " "))
			}
		}
		if want := []string{"glass.csv 214 6", "sonar.csv 208 2"}; !slices.Equal(rows, want) {
			t.Errorf("--tables %s: rows %q, want %q:\n%s", arg, rows, want, r.stdout)
		}
	}
	// Each table's baselines also ran on the other choice of standardisation.
	r := run(t, dir, "compare", "--suite", "--tables", "tables/glass.csv.gz", "--label-col", "label", "--methods", "kmeans", "--seeds", "1", "--json", "--quiet")
	var reps []bothFeatures
	if err := json.Unmarshal([]byte(r.stdout), &reps); err != nil || len(reps) != 1 {
		t.Fatalf("--json: %v, %d reports: %s", err, len(reps), r.stdout)
	}
	if !reps[0].oneRunEach() {
		t.Errorf("glass: standardized %v, other features %+v; want one k-means run on each choice", reps[0].Standardized, reps[0].OtherFeatures)
	}
	if err := os.Mkdir(filepath.Join(dir, "none"), 0o755); err != nil {
		t.Fatal(err)
	}
	wantError(t, run(t, dir, "compare", "--suite", "--tables", "none", "--label-col", "label"), 2, "--tables none: the folder holds no .csv")
	// A table without the label column is found before any table trains: it ended
	// the suite after the tables before it, whose results the suite then dropped.
	if err := os.WriteFile(filepath.Join(tables, "zz.csv"), []byte("a,b\n1,2\n3,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, dir, "compare", "--suite", "--tables", "tables", "--label-col", "label", "--methods", "kmeans", "--seeds", "1")
	wantError(t, r, 1, "zz: ", `no column "label"`)
	if strings.Contains(r.stderr, "ACC") {
		t.Errorf("a run trained before the table without labels was found:\n%s", r.stderr)
	}
}

// compare --suite runs on every embedded table and prints one table, a row each.
func TestCompareSuite(t *testing.T) {
	dir := t.TempDir()
	r := run(t, dir, "compare", "--suite", "--methods", "kmeans,gmm-diag", "--seeds", "1", "--quiet", "--markdown", "suite.md")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, name := range data.TableNames() {
		if !strings.Contains(r.stdout, "| "+name) {
			t.Errorf("no row for %s:\n%s", name, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "each baseline on the features, raw or standardized, it scored higher on") {
		t.Errorf("the suite does not say the baselines ran on both features:\n%s", r.stdout)
	}
	if n := strings.Count(r.stdout, "**"); n < 2*len(data.TableNames()) {
		t.Errorf("%d bold marks, want a best method in each of %d rows:\n%s", n, len(data.TableNames()), r.stdout)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "suite.md")); err != nil || string(b) != r.stdout {
		t.Errorf("suite.md differs from what was printed (%v)", err)
	}
}

// A baseline that fails after training (squared distances past float32's range on a
// column in units of 1e30) is named and left out, and the run finishes; it used to
// fail the command after training, and every --resume again the same way.
func TestTrainFinishesWhenABaselineFails(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("a,b,c,label\n")
	for i := range 60 {
		c := i % 3
		fmt.Fprintf(&b, "%g,%g,%g,%d\n", float64(c)+float64(i%7)/10, float64(c*2)-float64(i%5)/10, (float64(c)+float64(i%4)/10)*1e30, c)
	}
	os.WriteFile(filepath.Join(dir, "huge.csv"), []byte(b.String()), 0o644)
	r := run(t, dir, "train", "--data", "huge.csv", "--label-col", "label", "--restarts", "1", "--epochs", "3", "--device", "cpu", "--out", "run")
	noCrash(t, r)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "ACC ") {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "k-means baseline on the raw features: ") || !strings.Contains(r.stderr, "; left out") {
		t.Errorf("stderr does not say which baseline was left out:\n%s", r.stderr)
	}
	var sum struct {
		Scores  *eval.Scores `json:"scores"`
		KMeans  *eval.Scores `json:"kmeans"`
		Skipped []string     `json:"baselines_skipped"`
	}
	b2, err := os.ReadFile(filepath.Join(dir, "run", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b2, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Scores == nil || sum.KMeans == nil || len(sum.Skipped) != 1 {
		t.Errorf("summary.json: scores %v, k-means on the standardized features %v, skipped %q; want both scores and one skipped", sum.Scores, sum.KMeans, sum.Skipped)
	}
}

// train --out takes a new or empty folder, or one a run left before its first
// checkpoint; never a folder of the user's files, which a run would write over.
func TestTrainOutKeepsUsersFiles(t *testing.T) {
	dir := t.TempDir()
	train := []string{"train", "--dataset", "iris", "--restarts", "1", "--epochs", "1", "--kmeans=false", "--quiet", "--device", "cpu", "--out"}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // "" when the run may take the folder
	}{
		{"notes", map[string]string{"config.json": `{"k": 3, "objective": "em"}`, "assignments.csv": "mine\n", "notes.txt": "mine\n"}, "notes.txt"},
		{"own-config", map[string]string{"config.json": `{"learning": "mine"}`}, "config.json"},
		{"own-assignments", map[string]string{"assignments.csv": "mine\n"}, "assignments.csv"},
		{"own-lock", map[string]string{".lock": "my lock notes\n"}, ".lock"},
		{"empty", map[string]string{}, ""},
		{"killed", map[string]string{"config.json": `{"k": 3, "objective": "em"}`, ".lock": "123\n", ".checkpoint.safetensors.tmp77": "partial"}, ""},
	} {
		out := filepath.Join(dir, tc.name)
		os.MkdirAll(out, 0o755)
		for f, content := range tc.files {
			os.WriteFile(filepath.Join(out, f), []byte(content), 0o644)
		}
		r := run(t, dir, append(train, out)...)
		if tc.want == "" {
			if r.code != 0 {
				t.Errorf("%s: exit %d: %s", tc.name, r.code, r.stderr)
			}
			continue
		}
		wantError(t, r, 2, "--out "+out, tc.want, "new or empty folder")
		for f, content := range tc.files {
			if b, _ := os.ReadFile(filepath.Join(out, f)); string(b) != content {
				t.Errorf("%s: %s is now %q, want the user's %q", tc.name, f, b, content)
			}
		}
	}
	wantError(t, run(t, dir, append(train, filepath.Join(dir, "killed"))...), 2, "already holds a run", "--resume")
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	wantError(t, run(t, dir, append(train, filepath.Join(dir, "file"))...), 2, "is a file")
}

// A run that fails before training leaves none of the folders it made: runs/, or
// --out and its parents.
func TestFailedRunLeavesNoFolder(t *testing.T) {
	dir := t.TempDir()
	wantError(t, run(t, dir, "train", "--data", filepath.Join(fixtures, "ten.csv"), "--label-col", "label", "--k", "500", "--quiet"), 2, "--k 500")
	wantError(t, run(t, dir, "train", "--data", "missing.csv", "--quiet"), 1, "missing.csv")
	wantError(t, run(t, dir, "train", "--data", "missing.csv", "--quiet", "--out", "a/b/c"), 1, "missing.csv")
	for _, d := range []string{"runs", "a"} {
		if _, err := os.Stat(filepath.Join(dir, d)); err == nil {
			t.Errorf("%s is left after runs that failed before training", d)
		}
	}
	// A dangling link named as --out is the user's: refused, and kept.
	os.Symlink("nowhere", filepath.Join(dir, "dangling"))
	wantError(t, run(t, dir, "train", "--dataset", "iris", "--quiet", "--out", "dangling"), 1, "dangling")
	if _, err := os.Lstat(filepath.Join(dir, "dangling")); err != nil {
		t.Errorf("the dangling link is gone: %v", err)
	}
}

// Runs given no --out that start in the same second get folders of their own.
func TestNewRunDirName(t *testing.T) {
	t.Chdir(t.TempDir())
	now := time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC)
	var got []string
	for range 3 {
		d, err := newRunDirName("iris", now)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	want := []string{"runs/iris-20261125-070000", "runs/iris-20261125-070000-2", "runs/iris-20261125-070000-3"}
	if !slices.Equal(got, want) {
		t.Errorf("folders %q, want %q", got, want)
	}
}

// predict, eval and report say when the model is a run's checkpoint before its last
// epoch.
func TestInferenceWarnsOfUnfinishedRuns(t *testing.T) {
	dir := t.TempDir()
	if r := run(t, dir, "train", "--dataset", "iris", "--restarts", "1", "--epochs", "3", "--kmeans=false", "--quiet", "--device", "cpu", "--out", "done"); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	// The same run as if stopped after 3 of 10 epochs.
	saveRunAs(t, filepath.Join(dir, "done"), filepath.Join(dir, "stopped"), func(cfg *train.Config) { cfg.Epochs = 10 }, nil)
	for _, tc := range []struct {
		args []string
		warn bool
	}{
		{[]string{"predict", "--model", "done", "--out", "a.csv"}, false},
		{[]string{"predict", "--model", "stopped", "--out", "b.csv"}, true},
		{[]string{"eval", "--model", "stopped"}, true},
		{[]string{"report", "done", "--out", "rd", "--no-tsne"}, false},
		{[]string{"report", "stopped", "--out", "rs", "--no-tsne"}, true},
	} {
		r := run(t, dir, tc.args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, r.code, r.stderr)
		}
		if warned := strings.Contains(r.stderr, "holds epoch 3 of 10") && strings.Contains(r.stderr, "--resume"); warned != tc.warn {
			t.Errorf("%v: warned %v, want %v; stderr:\n%s", tc.args, warned, tc.warn, r.stderr)
		}
	}
}

// A run's warnings reach stderr with --quiet and --json too: empty clusters and
// baselines left out.
func TestPrintSummaryWarns(t *testing.T) {
	sc := &eval.Scores{ACC: 0.5, NMI: 0.4, ARI: 0.3}
	for _, tc := range []struct {
		name string
		sum  summary
		want []string
	}{
		{"all used", summary{K: 3, Sizes: []int{60, 60, 60}, Scores: sc}, nil},
		{"two empty", summary{K: 3, Sizes: []int{180, 0, 0}, Scores: sc, emptyHint: emptyClustersHint(train.VectorDefaults())},
			[]string{"uses 1 of its 3 clusters; fewer may fit these data, or another --seed, a lower --lr or the other choice of --standardize may help"}},
		// Images refuse --standardize, and --no-norm collapses by design.
		{"two empty of images", summary{K: 3, Sizes: []int{180, 0, 0}, emptyHint: emptyClustersHint(func() train.Config { c := train.ImageDefaults(); c.Dataset = "fashion-mnist"; return c }())},
			[]string{"uses 1 of its 3 clusters; fewer may fit these data, or another --seed or a lower --lr may help"}},
		{"two empty without norm", summary{K: 3, Sizes: []int{180, 0, 0}, emptyHint: emptyClustersHint(train.Config{Norm: false})},
			[]string{"uses 1 of its 3 clusters; as the relevance normalisation is off (--no-norm)"}},
		{"baseline left out", summary{K: 2, Sizes: []int{1, 1}, BaselinesSkipped: []string{"k-means baseline: overflow"}},
			[]string{"k-means baseline: overflow; left out"}},
	} {
		for _, asJSON := range []bool{false, true} {
			var stdout, warn strings.Builder
			if err := printSummary(tc.sum, asJSON, &stdout, io.Discard, &warn); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(warn.String(), "\n"), "\n")
			if warn.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(tc.want) {
				t.Errorf("%s (json %v): warnings %q, want %d", tc.name, asJSON, lines, len(tc.want))
				continue
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], "emclust: warning: ") || !strings.Contains(lines[i], w) {
					t.Errorf("%s (json %v): warning %q, want one mentioning %q", tc.name, asJSON, lines[i], w)
				}
			}
		}
	}
	// Supervised runs have no normalisation, and were told of a --no-norm not given.
	if h := emptyClustersHint(train.Config{Norm: false, Objective: "supervised"}); h != "" {
		t.Errorf("a supervised run's hint %q", h)
	}
}

// --resume refuses data other than those the run began on, before it writes the run
// folder: they were taken (same shape, other values), or named by a checkpoint
// tensor ("recent.0 has 10 rows, the data 20") after config.json had been rewritten.
func TestResumeWithOtherData(t *testing.T) {
	dir := t.TempDir()
	a := randomCSV(10, 4, 2, 1, true)
	os.WriteFile(filepath.Join(dir, "a.csv"), []byte(a), 0o644)
	os.WriteFile(filepath.Join(dir, "moved.csv"), []byte(a), 0o644)
	os.WriteFile(filepath.Join(dir, "b.csv"), []byte(randomCSV(20, 4, 2, 2, true)), 0o644)
	os.WriteFile(filepath.Join(dir, "c.csv"), []byte(randomCSV(10, 4, 2, 3, true)), 0o644)
	first := []string{"train", "--data", "a.csv", "--label-col", "label", "--restarts", "1", "--epochs", "2", "--eval-every", "1", "--kmeans=false", "--quiet", "--device", "cpu", "--out"}
	if r := run(t, dir, append(first, "run")...); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	config, _ := os.ReadFile(filepath.Join(dir, "run", "config.json"))
	for _, other := range []string{"b.csv", "c.csv"} {
		wantError(t, run(t, dir, "train", "--resume", "run", "--epochs", "4", "--data", other), 2, other, "not the data the run in run began on", "data_digest")
		if b, _ := os.ReadFile(filepath.Join(dir, "run", "config.json")); !bytes.Equal(b, config) {
			t.Errorf("a resume refused on %s rewrote config.json", other)
		}
	}
	// The same rows with other labels: the epochs' scores would not compare.
	var relabelled strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(a, "\n"), "\n") {
		if i == 1 { // one row's class, of the two
			cut := strings.LastIndexByte(line, ',')
			flipped := map[string]string{"0": "1", "1": "0"}[line[cut+1:]]
			if flipped == "" {
				t.Fatalf("row %q: want a class of 0 or 1 last", line)
			}
			line = line[:cut+1] + flipped
		}
		relabelled.WriteString(line + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "relabelled.csv"), []byte(relabelled.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	wantError(t, run(t, dir, "train", "--resume", "run", "--epochs", "4", "--data", "relabelled.csv"), 2, "relabelled.csv", "labels_digest")
	// The same data in a new place go on.
	if r := run(t, dir, "train", "--resume", "run", "--epochs", "3", "--data", "moved.csv", "--quiet"); r.code != 0 {
		t.Errorf("resume on the same data moved: exit %d: %s", r.code, r.stderr)
	}

	// A run saved before config.json had a digest is checked by its rows.
	saveRunAs(t, filepath.Join(dir, "run"), filepath.Join(dir, "old"), func(cfg *train.Config) { cfg.DataDigest, cfg.LabelsDigest, cfg.Epochs = "", "", 10 }, nil)
	wantError(t, run(t, dir, "train", "--resume", "old", "--data", "b.csv"), 2, "trained on 10 rows", "b.csv hold 20", "needs the data it trained on")
}

// --version names the build and the shim ABI it pairs with.
func TestVersion(t *testing.T) {
	for _, flag := range []string{"--version", "-v"} {
		r := run(t, t.TempDir(), flag)
		want := fmt.Sprintf("(shim ABI %d)\n", torch.ABIVersion)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "emclust version ") || !strings.HasSuffix(r.stdout, want) {
			t.Errorf("%s: exit %d, stdout %q, want \"emclust version … %s\"", flag, r.code, r.stdout, want)
		}
	}
}

// assignments.csv names each row's class as the data wrote it (quoted where CSV
// needs it), not by the id emclust numbered it with.
func TestAssignmentsNameClasses(t *testing.T) {
	dir := t.TempDir()
	names := []string{"setosa", "big, round", `the "odd" one`}
	var b strings.Builder
	b.WriteString("x,y,label\n")
	for i := range 30 {
		c := i % 3
		fmt.Fprintf(&b, "%d.%d,%d.%d,%s\n", c*5, i%7, c*3, i%5, string(appendCSVField(nil, names[c])))
	}
	os.WriteFile(filepath.Join(dir, "t.csv"), []byte(b.String()), 0o644)
	r := run(t, dir, "train", "--data", "t.csv", "--label-col", "label", "--restarts", "1", "--epochs", "2", "--kmeans=false", "--quiet", "--device", "cpu", "--out", "run")
	if r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	f, err := os.Open(filepath.Join(dir, "run", "assignments.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 31 || !slices.Equal(rows[0], []string{"index", "cluster", "posterior", "label"}) {
		t.Fatalf("assignments.csv: %d rows, header %q", len(rows), rows[0])
	}
	for i, row := range rows[1:] {
		if want := names[i%3]; row[3] != want {
			t.Errorf("row %d: label %q, want %q", i, row[3], want)
		}
	}
}

// saveRunAs saves the run in from again in to, its config changed by edit (after the
// data are opened, which records their digest) and then the run by editRun (either
// may be nil): a run as an older build, or an interrupt, would have left it.
func saveRunAs(t *testing.T, from, to string, edit func(*train.Config), editRun func(*train.Run)) {
	t.Helper()
	r, _, closeRun := openRunAs(t, from, to, edit)
	if editRun != nil {
		editRun(r)
	}
	err := r.Save()
	closeRun()
	if err != nil {
		t.Fatal(err)
	}
}

// openRunAs opens the run saved in from, on its data, as a run in to, its config
// changed by edit (nil: none) after the data are opened, and restores it from from's
// checkpoint; closeRun closes the run and then its data.
func openRunAs(t *testing.T, from, to string, edit func(*train.Config)) (r *train.Run, src train.Source, closeRun func()) {
	t.Helper()
	f, cfg, _, err := train.ReadCheckpoint(from)
	if err != nil {
		t.Fatal(err)
	}
	if src, err = train.OpenSource(cfg, torch.CPU); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg)
	}
	if r, err = train.New(*cfg, src, torch.CPU, to); err != nil {
		src.Close()
		t.Fatal(err)
	}
	closeRun = func() { r.Close(); src.Close() }
	if err := r.Restore(f); err != nil {
		closeRun()
		t.Fatal(err)
	}
	return r, src, closeRun
}

// interruptAt runs emclust in dir and sends it SIGINT once a line of its stderr
// holds trigger; it returns the stdout, the stderr's lines (at least one) and the
// exit code.
func interruptAt(t *testing.T, dir, trigger string, args ...string) (string, []string, int) {
	t.Helper()
	cmd := emclustCmd(args...)
	cmd.Dir = dir
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); pw.Close() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := bufio.NewScanner(pr)
	all := []string{""}
	for lines.Scan() {
		all = append(all, lines.Text())
		if strings.Contains(lines.Text(), trigger) {
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(all) > 1 {
		all = all[1:]
	}
	return stdout.String(), all, cmd.ProcessState.ExitCode()
}

// An interrupt ends report (and predict, eval, bench, embed) with README's 130 and
// a line, where the signal ended them with nothing said (SIGTERM: 143).
func TestInterruptReport(t *testing.T) {
	dir := t.TempDir()
	wantScoreLine(t, run(t, dir, "train", "--quiet", "--epochs", "2", "--restarts", "1", "--out", "run"))
	_, all, code := interruptAt(t, dir, "t-SNE of", "report", "run", "--out", "rep", "--device", "cpu") // seconds of t-SNE follow
	if last := all[len(all)-1]; code != 130 || last != "emclust: report interrupted by SIGINT" {
		t.Errorf("exit %d, last line %q; want 130 and the interrupt said", code, last)
	}
	// The same command draws the stopped report's figures again: its lock says they
	// are its own (was "holds figures but no finished report; … pass --force").
	r := run(t, dir, "report", "run", "--out", "rep", "--device", "cpu")
	if noCrash(t, r); r.code != 0 || !isReportPage(filepath.Join(dir, "rep", "index.html")) {
		t.Errorf("report again after the interrupt: exit %d: %s", r.code, r.stderr)
	}
}

// SIGINT while a k-means baseline runs stops it where it is: compare ends with the
// runs that finished (none here), and train, whose run is whole by then, leaves the
// baselines out and says so. Both waited for the whole baseline before.
func TestInterruptBaselines(t *testing.T) {
	dir := t.TempDir()
	bigCSV(t, dir)
	data := []string{"--data", "big.csv", "--label-col", "label", "--k", "40", "--device", "cpu"} // seconds a baseline there

	_, all, code := interruptAt(t, dir, "kmeans × 2 seeds", append([]string{"compare", "--methods", "kmeans", "--seeds", "2"}, data...)...) // the line before the first run
	if last := all[len(all)-1]; code != 130 || !strings.Contains(last, "interrupted before the first of 2 runs finished") {
		t.Errorf("compare, SIGINT in the first k-means: exit %d, last line %q; want 130 and no run finished", code, last)
	}
	noCrash(t, result{stderr: strings.Join(all, "\n")})

	// After a run, the table of the runs done: its heading named both seeds, and the
	// last line said "no table was written" below the table.
	out, all, code := interruptAt(t, dir, "[1/2] kmeans", append([]string{"compare", "--methods", "kmeans", "--seeds", "2", "--markdown", "m.md"}, data...)...)
	if last := all[len(all)-1]; code != 130 || !strings.Contains(last, "interrupted after 1 of 2 runs; the table above covers those, and m.md was not written") {
		t.Errorf("compare, SIGINT after a run: exit %d, last line %q", code, last)
	}
	if !strings.HasPrefix(out, "Interrupted: kmeans: 1 of 2 seeds;") || !strings.Contains(out, "| kmeans") {
		t.Errorf("compare, SIGINT after a run printed:\n%s", out)
	}

	// The suite names the table it stopped on; it printed "context canceled" alone.
	_, all, code = interruptAt(t, dir, "kmeans × 2 seeds", "compare", "--suite", "--tables", "big.csv", "--label-col", "label", "--k", "40", "--methods", "kmeans", "--seeds", "2", "--device", "cpu")
	if last := all[len(all)-1]; code != 130 || !strings.Contains(last, "interrupted on big, after 0 of 1 tables") {
		t.Errorf("compare --suite, SIGINT in the first k-means: exit %d, last line %q; want 130 and the table named", code, last)
	}

	var stderr bytes.Buffer
	train := emclustCmd(append([]string{"train", "--epochs", "1", "--restarts", "1", "--out", "run"}, data...)...)
	train.Dir = dir
	train.Stderr = &stderr
	if err := train.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { train.Wait(); close(done) }()
	t.Cleanup(func() { train.Process.Kill(); <-done })
	waitFor(t, filepath.Join(dir, "run", "assignments.csv"), slowWait, done) // written before the baselines
	if err := train.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-done
	var sum struct {
		Skipped []string `json:"baselines_skipped"`
	}
	readJSON(t, filepath.Join(dir, "run", "summary.json"), &sum)
	if code := train.ProcessState.ExitCode(); code != 130 || len(sum.Skipped) == 0 || !strings.Contains(sum.Skipped[0], "interrupted") ||
		!strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("train, SIGINT in its k-means baseline: exit %d, baselines_skipped %q, stderr %q; want 130 and the baselines left out as interrupted", code, sum.Skipped, stderr.String())
	}
	noCrash(t, result{stderr: stderr.String()})
}

// An interrupt that comes after training and before the k-means beside an unlabelled
// run ends the command as interrupted, the summary naming the k-means left out (it
// was skipped without a word, exit 0).
func TestInterruptBeforeUnlabelledBaseline(t *testing.T) {
	dir := t.TempDir()
	writeBlobTables(t, dir, "a,b", 40, func(_ int, a, b float64) string { return fmt.Sprintf("%g,%g", a, b) })
	if r := run(t, dir, "train", "--quiet", "--data", "ab.csv", "--k", "2", "--restarts", "1", "--epochs", "1", "--device", "cpu", "--out", "r"); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	r, src, closeRun := openRunAs(t, filepath.Join(dir, "r"), filepath.Join(dir, "r"), nil)
	defer closeRun()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, log bytes.Buffer
	err := finishRun(ctx, r, src, torch.CPU, 0, false, &stdout, &log, &log)
	if ie := (interruptedError{}); !errors.As(err, &ie) {
		t.Errorf("finishRun after an interrupt: %v, want it interrupted", err)
	}
	var sum struct {
		Skipped []string `json:"baselines_skipped"`
	}
	readJSON(t, filepath.Join(dir, "r", "summary.json"), &sum)
	if !slices.Equal(sum.Skipped, []string{"k-means beside the run: interrupted"}) {
		t.Errorf("baselines_skipped %q, want the k-means beside the run interrupted", sum.Skipped)
	}
}

// bench times every configuration asked for, each once: the MLP, which has no
// layout, once whatever --channels-last lists (left out for "true" alone, it was
// missing from compare.sh's table without a word).
func TestBenchTimesEachConfiguration(t *testing.T) {
	r := runIn(t.TempDir(), 3*time.Minute, "bench", "--model", "mlp,mnist", "--channels-last", "true", "--precision", "fp32", "--device", "cpu",
		"--steps", "1", "--warmup", "0", "--batch-size", "8", "--json")
	noCrash(t, r)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var b struct {
			Arch         string  `json:"arch"`
			ChannelsLast bool    `json:"channels_last"`
			MS           float64 `json:"ms_per_step"`
		}
		if err := json.Unmarshal([]byte(line), &b); err != nil || !(b.MS > 0) {
			t.Fatalf("line %q: %v, ms_per_step %v", line, err, b.MS)
		}
		got = append(got, fmt.Sprintf("%s/%v", b.Arch, b.ChannelsLast))
	}
	if want := []string{"mlp/false", "mnist/true"}; !slices.Equal(got, want) {
		t.Errorf("timed %v, want %v", got, want)
	}
}

// bench prints each row as it finishes: stopped by Ctrl-C in the second model, it
// has printed the first's row under the header (it printed nothing before).
func TestBenchInterruptedKeepsRows(t *testing.T) {
	cmd := emclustCmd("bench", "--model", "mlp,mnist", "--device", "cpu", "--steps", "2000", "--batch-size", "8")
	cmd.Dir = t.TempDir()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	hang := time.AfterFunc(slowWait, func() { cmd.Process.Kill() }) // no row ever came
	defer hang.Stop()
	var got []string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		got = append(got, lines.Text())
		if f := strings.Fields(lines.Text()); len(f) > 0 && f[0] == "mlp" {
			if err := cmd.Process.Signal(os.Interrupt); err != nil {
				t.Fatal(err)
			}
		}
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || len(got) != 2 ||
		!strings.HasPrefix(strings.Fields(got[0])[0], "model") || strings.Fields(got[1])[0] != "mlp" {
		t.Errorf("exit %d, stdout %q; want 130, the header and the mlp row", code, got)
	}
}

// A shell's <(zcat t.csv.gz) is /dev/fd/63: train reads it by what it starts with, and
// names the run for a pipe. compare, which reads its data more than once, refuses it.
func TestTrainFromPipe(t *testing.T) {
	dir := t.TempDir()
	body, err := os.ReadFile(filepath.Join(fixtures, "ten.csv"))
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		w.Write(body)
		w.Close()
	}()
	// A high number, which no file opened later takes once it is closed.
	if err := syscall.Dup3(int(r.Fd()), 900, syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(900) })
	r.Close()
	pipe := "/dev/fd/900"
	res := run(t, dir, "train", "--quiet", "--data", pipe, "--label-col", "label", "--epochs", "1", "--restarts", "1", "--kmeans=false")
	wantScoreLine(t, res)
	runs, _ := filepath.Glob(filepath.Join(dir, "runs", "pipe-*"))
	if len(runs) != 1 {
		t.Fatalf("run folders %v, want one runs/pipe-*", runs)
	}
	// The pipe gone, predict says a pipe is read once, not that the data moved.
	syscall.Close(900)
	wantError(t, run(t, dir, "predict", "--model", runs[0], "--out", "p.csv"), 1, pipe+": no such pipe or device", "needs its data again")

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	wantError(t, run(t, dir, "compare", "--data", fifo, "--label-col", "label", "--seeds", "1", "--epochs", "1"), 2,
		fifo+" is a pipe or device", "save it to a file")
	// Each process would read the data: they shared one stream.
	wantError(t, run(t, dir, "train", "--data", fifo, "--label-col", "label", "--epochs", "1", "--nproc", "2"), 2,
		fifo+" is a pipe, which 2 processes cannot each read")
}

// A table of fewer rows than a batch, with restarts: compare's config left the
// processes unset, and the batch's clamp divided by them (a Go panic).
func TestCompareFewerRowsThanABatch(t *testing.T) {
	r := run(t, t.TempDir(), "compare", "--data", filepath.Join(fixtures, "ten.csv"), "--label-col", "label",
		"--methods", "em", "--seeds", "1", "--epochs", "1", "--restarts", "2", "--device", "cpu")
	noCrash(t, r)
	if r.code != 0 || !strings.Contains(r.stdout, "| em ") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// A comparison holds its --out folder: a second one there, begun before the first
// wrote anything its checks would find, is refused rather than train the same runs.
func TestCompareLocksOut(t *testing.T) {
	dir := t.TempDir()
	lock, err := train.LockDir(filepath.Join(dir, "cmp"))
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	r := run(t, dir, "compare", "--data", filepath.Join(fixtures, "four.csv"), "--label-col", "label",
		"--methods", "em", "--seeds", "1", "--epochs", "1", "--out", "cmp", "--device", "cpu")
	wantError(t, r, 1, "cmp is in use", "another emclust process")
	if m, _ := filepath.Glob(filepath.Join(dir, "cmp", "*")); len(m) != 1 {
		t.Errorf("the refused comparison wrote beside the lock: %v", m)
	}
	// Nor is the lock a file to write the table over.
	wantError(t, run(t, dir, "compare", "--data", filepath.Join(fixtures, "four.csv"), "--label-col", "label",
		"--methods", "kmeans", "--seeds", "1", "--out", "cmp2", "--markdown", "cmp2/.lock"), 2, "the comparison's own .lock")
	// A comparison that fails before it writes anything leaves no folder for it.
	wantError(t, run(t, dir, "compare", "--data", "missing.csv", "--label-col", "label", "--methods", "kmeans", "--seeds", "1", "--out", "new/cmp3"), 1, "missing.csv")
	if _, err := os.Stat(filepath.Join(dir, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a failed comparison left its folder: %v", err)
	}
}

// Settings that only the images show to be wrong are command-line mistakes, named
// as given (were exit 1, and "--image-size 28 ... resizes them" after --image-size 16).
func TestImageSettingsRefused(t *testing.T) {
	dir := t.TempDir()
	imgs := filepath.Join(dir, "imgs")
	writeGrayImages(t, imgs, 16, 4)
	train := []string{"train", "--quiet", "--dataset", "folder", "--data-dir", imgs, "--epochs", "1", "--restarts", "1", "--k", "2", "--device", "cpu"}
	for _, tc := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"no network for the size", nil, []string{"16x16", "--image-size 28, 32 or 96 resizes them"}},
		{"a size given", []string{"--image-size", "16"}, []string{"--image-size 16:", "give --image-size 28, 32 or 96, or name a network that takes them at 16 with --arch (mnist, cifar, stl10)"}},
		{"a size no network takes", []string{"--image-size", "30"}, []string{"--image-size 30:", "give --image-size 28, 32 or 96"}},
		{"the vectors' network", []string{"--image-size", "28", "--arch", "mlp"}, []string{"--arch mlp takes vectors"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, dir, append(slices.Clone(train), tc.extra...)...)
			wantError(t, r, 2, tc.want...)
			if tc.name == "a size no network takes" && strings.Contains(r.stderr, "--arch") {
				t.Errorf("a network offered that cannot take 30x30: %s", r.stderr)
			}
		})
	}
}

// predict reads new data as the model's were read unless told otherwise: a header of
// numbers given with --header yes was clustered as a row. A Latin-1 header trains a
// run that predict can use again (its names were recorded with U+FFFD, and compared
// with the file's bytes). --quiet is taken.
func TestPredictReadsAsTrained(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"numh.csv":   "1,2,3\n1,2,3\n4,5,6\n7,8,9\n10,11,12\n",
		"latin1.csv": "Gr\xf6\xdfe,Temp \xb0C,Klasse\n",
	}
	for i := range 30 {
		files["latin1.csv"] += fmt.Sprintf("%d.%d,%d.%d,%c\n", i%3, i, 2*(i%3), i, 'A'+i%3)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	train := []string{"train", "--quiet", "--kmeans=false", "--restarts", "1", "--epochs", "1", "--k", "2"}
	wantOK := func(r result) {
		t.Helper()
		noCrash(t, r)
		if r.code != 0 {
			t.Fatalf("exit %d: %s", r.code, r.stderr)
		}
	}
	wantOK(runProc(t, dir, append(train, "--data", "numh.csv", "--header", "yes", "--out", "numh")...))
	for _, tc := range []struct {
		out  string
		args []string
	}{
		{"a.csv", nil},
		{"b.csv", []string{"--data", "numh.csv", "--quiet"}},
	} {
		args := append([]string{"predict", "--model", "numh", "--out", tc.out}, tc.args...)
		r := runProc(t, dir, args...)
		wantOK(r)
		quiet := slices.Contains(args, "--quiet")
		if rows := readLines(t, filepath.Join(dir, tc.out)); len(rows) != 5 || strings.Contains(r.stderr, "4 rows → ") == quiet {
			t.Errorf("%v: %d lines, stderr %q; want the 4 rows under the header, said unless --quiet", args, len(rows), r.stderr)
		}
	}
	wantOK(runProc(t, dir, append(train, "--data", "latin1.csv", "--label-col", "Klasse", "--out", "latin1")...))
	wantOK(runProc(t, dir, "predict", "--model", "latin1", "--out", "c.csv", "-q"))
	wantOK(runProc(t, dir, "eval", "--model", "latin1", "--quiet"))
	// The training file named as new data is read as the model's data were, its label
	// column of numbers the labels (it was read as a feature and refused): the scores
	// are those of the model's own data.
	numl := "a,b,y\n"
	for i := range 30 {
		numl += fmt.Sprintf("%d.%d,%d.%d,%d\n", i%3, i, 2*(i%3), i, i%3)
	}
	os.WriteFile(filepath.Join(dir, "numl.csv"), []byte(numl), 0o644)
	wantOK(runProc(t, dir, append(train, "--data", "numl.csv", "--label-col", "y", "--out", "numl")...))
	if own, named := wantScoreLine(t, run(t, dir, "eval", "--model", "numl", "--quiet")), wantScoreLine(t, run(t, dir, "eval", "--model", "numl", "--data", "numl.csv", "--quiet")); own != named {
		t.Errorf("eval of the training file named: %q; of the model's own data: %q", named, own)
	}
}

// A run folder whose checkpoint is a link to nothing says so, rather than that the run
// stopped before its first epoch.
func TestCheckpointLinkToNothing(t *testing.T) {
	dir := t.TempDir()
	if r := run(t, dir, "train", "--quiet", "--dataset", "iris", "--restarts", "1", "--epochs", "1", "--kmeans=false", "--out", "run"); r.code != 0 {
		t.Fatalf("train: exit %d: %s", r.code, r.stderr)
	}
	ckpt := filepath.Join(dir, "run", "checkpoint.safetensors")
	os.Remove(ckpt)
	if err := os.Symlink(filepath.Join(dir, "gone.safetensors"), ckpt); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"predict", "--model", "run", "--out", "p.csv"},
		{"predict", "--model", filepath.Join("run", "checkpoint.safetensors"), "--out", "p.csv"},
		{"eval", "--model", "run"},
		{"train", "--resume", "run", "--epochs", "2"},
	} {
		wantError(t, run(t, dir, args...), 1, "checkpoint.safetensors is a link to", "gone.safetensors", "does not exist")
	}
}

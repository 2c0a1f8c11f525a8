// Package command holds emclust's verbs, one file each, on urfave/cli: each verb reads
// its flags into options and runs them; Main turns the result into an exit status.
package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"

	"emclust/launch"
	"emclust/sysmem"
	"emclust/torch"
	"emclust/train"
)

// Main runs the command line args (args[0] is the program), writing results to stdout
// and messages to stderr, and returns the exit status. The caller keeps every libtorch
// call on one OS thread (cmd/emclust).
func Main(args []string, stdout, stderr io.Writer) int {
	out := &firstError{w: stdout}
	app := &cli.App{
		Writer:    out,
		ErrWriter: stderr,
		Name:      "emclust",
		Version:   version(),
		Usage:     "cluster vectors and images with a neural mixture model trained by batch-wise EM",
		Description: "With no data flag, `emclust train` clusters the embedded UCI handwritten digits.\n" +
			"Each command that ends a run prints one line a script can read: ACC x NMI y ARI z where\n" +
			"there are labels, else clusters K sizes n1 n2 ...",
		Commands: []*cli.Command{
			trainCommand(),
			predictCommand(),
			evalCommand(),
			scoreCommand(),
			benchCommand(),
			compareCommand(),
			reportCommand(),
			embedCommand(),
			dataCommand(),
			devicesCommand(),
		},
		EnableBashCompletion: true,
		// train --nproc starts its ranks with the same command line.
		Metadata: map[string]any{"args": args},
		// With no command, show the help; an unknown command is a usage error (the
		// default would print "No help topic" and exit 1).
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageError{fmt.Errorf("unknown command %q; see emclust --help", c.Args().First())}
			}
			return cli.ShowAppHelp(c)
		},
		Before: func(c *cli.Context) error {
			// The shim is paired with this binary at run time: refuse another ABI
			// before any work.
			if err := torch.CheckABI(); err != nil {
				return err
			}
			// glibc would return a CPU step's large buffers to the kernel and fault
			// them in again on the next step, and a fresh large tensor costs a page
			// fault per 4 KiB without huge pages (docs/RESULTS.md section 10).
			// EMCLUST_MALLOC=default leaves both as they are, for comparison.
			if os.Getenv("EMCLUST_MALLOC") != "default" {
				torch.KeepFreedMemory()
				torch.AdviseHugePages()
			}
			// One intra-op thread per CPU on this OS thread, where every verb runs its
			// libtorch work, unless a verb's --threads says otherwise.
			if err := torch.SetNumThreads(runtime.NumCPU()); err != nil {
				return err
			}
			// Under `ulimit -v`, OpenBLAS hangs where its buffers come late, and
			// in some paths however early they come (docs/RESULTS.md section 68);
			// under strict overcommit its mmap fails the same way.
			room := sysmem.Free()
			if room.AddressBinds() {
				fmt.Fprintf(c.App.ErrWriter, "emclust: warning: the address space is limited to %.3g GB (ulimit -v), which leaves less than the memory free; libtorch and OpenBLAS reserve gigabytes of it, and OpenBLAS can hang where it runs out: raise the limit, or limit memory with a cgroup, which emclust's memory checks read\n", float64(room.AddressLimit)/1e9)
			}
			if room.AddressLimit > 0 || room.Strict {
				return torch.WarmBLAS()
			}
			return nil
		},
		// Errors are printed once, as one line, by main.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
	}
	prepareCommands(app.Commands, "")
	err := app.Run(args)
	if err == nil && out.err != nil {
		// A script reads the result line: one lost (a full disk) is a failure.
		err = fmt.Errorf("write stdout: %w", out.err)
	}
	if err != nil {
		var se silentError
		// --nproc: a rank that left its error has said why.
		re := new(launch.RankError)
		ranksSaid := errors.As(err, &re) && re.Said
		if !errors.As(err, &se) && !ranksSaid {
			// A rank of --nproc hands its error to the launcher, which says the
			// ranks' errors once each.
			fmt.Fprintln(launch.ErrorOut(stderr), "emclust: "+oneLine(err.Error()))
		}
		code := exitCode(err)
		if code == 2 && os.Getenv("EMCLUST_LAUNCHER") == "--nproc" {
			code = launch.RankUsageExit // Go exits 2 on a panic too: --nproc must tell them apart
		}
		return code
	}
	return 0
}

// firstError keeps the first error of the writes to w.
type firstError struct {
	w   io.Writer
	err error
}

func (f *firstError) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil && f.err == nil {
		f.err = err
	}
	return n, err
}

// Exit statuses, as README documents them: 0 success, 1 a failure at run time, 2 a
// mistake in the command line, 130 interrupted (128 + SIGINT, as shells report it).
func exitCode(err error) int {
	var ue usageError
	var ie interruptedError
	switch {
	case errors.As(err, &ue):
		return 2
	case errors.As(err, &ie):
		return 130
	case errors.As(err, new(train.SettingsError)):
		return 2 // a setting the data refuse: still the command line's
	}
	// --nproc: a rank's usage error is the command line's, shared by every rank.
	if re := new(launch.RankError); errors.As(err, &re) && re.Code == launch.RankUsageExit {
		return 2
	}
	return 1
}

// usageError marks a mistake in the command line (exit status 2); every other
// error exits 1.
type usageError struct{ error }

// interruptedError marks a command stopped by SIGINT or SIGTERM (exit status 130).
type interruptedError struct{ error }

func (e interruptedError) Unwrap() error { return e.error }

// silentError is a failure another process has already reported: a rank other than
// 0 interrupted with the run, or --nproc after its ranks. It sets the exit status and
// prints nothing.
type silentError struct{ error }

func (e silentError) Unwrap() error { return e.error }

// Where urfave/cli v2 falls short, three helpers stand in, and no verb works around it
// otherwise: prepareCommands (a parse error would print the whole help to stdout and
// exit 1), requireFlags (Required does the same), and interspersedFlags (flags after a
// positional argument would be taken as more arguments).

// invalidValue reads the value and the flag's name out of the errors of Go's flag
// package for a value it cannot parse: `invalid value "x" for flag -seed: ...`, and
// `invalid boolean value "x" for -kmeans: ...`.
func invalidValue(msg string) (value, flag string, ok bool) {
	rest, ok := strings.CutPrefix(msg, "invalid value ")
	if !ok {
		if rest, ok = strings.CutPrefix(msg, "invalid boolean value "); !ok {
			return "", "", false
		}
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", "", false
	}
	value, _ = strconv.Unquote(q)
	rest = strings.TrimPrefix(rest[len(q):], " for flag")
	if rest, ok = strings.CutPrefix(rest, " for -"); !ok {
		if rest, ok = strings.CutPrefix(rest, " -"); !ok {
			return "", "", false
		}
	}
	flag, _, _ = strings.Cut(rest, ":")
	return value, strings.TrimLeft(flag, "-"), true
}

// flagWants says what values cmd's flag name takes, by its type.
func flagWants(cmd *cli.Command, name string) string {
	for _, f := range cmd.Flags {
		if !slices.Contains(f.Names(), name) {
			continue
		}
		switch f.(type) {
		case *cli.IntFlag, *cli.Int64Flag:
			return "a whole number"
		case *cli.UintFlag, *cli.Uint64Flag:
			return "a whole number, 0 or more"
		case *cli.Float64Flag:
			return "a number"
		case *cli.DurationFlag:
			return "a duration such as 90s or 5m"
		case *cli.BoolFlag:
			return "true or false"
		}
	}
	return "another value"
}

// prepareCommands makes a flag parse error of any command a one-line usage error on
// stderr (without it urfave/cli prints the command's whole help to stdout, which
// scripts read, and exits 1), and refuses positional arguments where a command takes
// none (ArgsUsage empty) and empty values (refuseBlank).
func prepareCommands(cmds []*cli.Command, parent string) {
	for _, cmd := range cmds {
		name := strings.TrimPrefix(parent+" "+cmd.Name, " ")
		cmd.OnUsageError = func(c *cli.Context, err error, _ bool) error {
			// Go's flag package names a flag with one dash whatever was typed.
			if f, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
				f = strings.TrimLeft(f, "-")
				dashes := "--"
				if len(f) == 1 {
					dashes = "-"
				}
				err = fmt.Errorf("unknown flag %s%s%s", dashes, f, suggestFlag(cmd, f))
			} else if v, f, ok := invalidValue(err.Error()); ok {
				// Was "invalid value "x" for flag -seed: parse error".
				err = fmt.Errorf("--%s %q: want %s", f, v, flagWants(cmd, f))
				if f == "k" && strings.Contains(v, ",") {
					err = fmt.Errorf("%w; several K are compared with emclust compare --k %s", err, v)
				}
			}
			return usageError{fmt.Errorf("%s: %w (see emclust %s --help)", name, err, name)}
		}
		if len(cmd.Subcommands) == 0 {
			cmd.Before = func(c *cli.Context) error {
				if cmd.ArgsUsage == "" && c.Args().Present() {
					return usageError{fmt.Errorf("%s takes flags only; unexpected %q%s", name, c.Args().First(), argHint(cmd, c.Args().First()))}
				}
				return refuseBlank(c, name)
			}
		}
		prepareCommands(cmd.Subcommands, name)
	}
}

// suggestFlag names the command's flag that an unknown one was likely meant as: one
// it begins, or one a letter or two from it.
func suggestFlag(cmd *cli.Command, typed string) string {
	typed, _, _ = strings.Cut(typed, "=")
	best, bestDist := "", 3
	for _, f := range cmd.Flags {
		for _, name := range f.Names() {
			d := smetrics.WagnerFischer(typed, name, 1, 1, 1) // Levenshtein
			if len(typed) >= 3 && strings.HasPrefix(name, typed) {
				d = min(d, 1)
			}
			if len(name) > 1 && d < bestDist {
				best, bestDist = name, d
			}
		}
	}
	if best == "" || bestDist > len(typed)/2 {
		return ""
	}
	return fmt.Sprintf(" (--%s?)", best)
}

// argHint guesses the flag a stray argument was meant for: the model of a verb that
// applies one, the data of one that reads them.
func argHint(cmd *cli.Command, arg string) string {
	if strings.HasPrefix(arg, "-") {
		return ""
	}
	for _, name := range []string{"model", "data"} {
		for _, f := range cmd.Flags {
			if f.Names()[0] == name {
				return fmt.Sprintf(" (--%s %s?)", name, arg)
			}
		}
	}
	return ""
}

// refuseBlank refuses an empty flag value or argument: no flag of emclust's takes
// one, and `--data "$F"` with F unset read the embedded digits in its place.
func refuseBlank(c *cli.Context, cmd string) error {
	for _, f := range c.Command.Flags {
		if _, ok := f.(*cli.StringFlag); !ok {
			continue
		}
		name := f.Names()[0]
		if c.IsSet(name) && strings.TrimSpace(c.String(name)) == "" {
			return usageError{fmt.Errorf("%s: --%s %q: empty (an unset shell variable?)", cmd, name, c.String(name))}
		}
	}
	for _, a := range c.Args().Slice() {
		if strings.TrimSpace(a) == "" {
			return usageError{fmt.Errorf("%s: an empty argument (an unset shell variable?)", cmd)}
		}
	}
	return nil
}

// requireFlags returns a usage error naming the first of the flags c lacks. It stands
// in for urfave/cli's Required, which prints the whole help to stdout and exits 1.
func requireFlags(c *cli.Context, names ...string) error {
	cmd := strings.TrimPrefix(c.Command.HelpName, c.App.Name+" ")
	for _, n := range names {
		if !c.IsSet(n) || c.String(n) == "" {
			return usageError{fmt.Errorf("%s: --%s is required (see emclust %s --help)", cmd, n, cmd)}
		}
	}
	return nil
}

// selectDevice reads a --device value: a misspelt device is a usage error, a device
// this build or machine lacks is an ordinary one. On a GPU it turns cuDNN's autotuning
// on: every command runs the same few batch shapes over and over, so the search for
// the fastest convolution is paid once.
func selectDevice(s string) (torch.Device, error) {
	ok := s == "" || s == "auto" || s == "cpu" || s == "cuda"
	if n, found := strings.CutPrefix(s, "cuda:"); found && n != "" {
		ok = strings.Trim(n, "0123456789") == "" && (n == "0" || n[0] != '0')
	}
	if !ok {
		return torch.CPU, usageError{fmt.Errorf("--device %q: want auto, cpu, cuda or cuda:N", s)}
	}
	dev, err := torch.ParseDevice(s)
	if err == nil && dev.CUDA {
		torch.SetCuDNNBenchmark(true)
	}
	return dev, err
}

func (u usageError) Unwrap() error { return u.error }

// oneLine folds a multi-line message (libtorch's can span several) onto one line.
func oneLine(s string) string {
	lines := strings.Fields(strings.ReplaceAll(s, "\n", " \n "))
	return strings.Join(lines, " ")
}

// action binds a verb's two halves into a cli action: reading its flags into options
// (usage errors surface here, before any work) and running them.
func action[O any](from func(*cli.Context) (O, error), run func(context.Context, O, io.Writer, io.Writer) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		opts, err := from(c)
		if err != nil {
			return err
		}
		return run(c.Context, opts, c.App.Writer, c.App.ErrWriter)
	}
}

// endOnInterrupt runs a verb that an interrupt may end at once: one that keeps
// nothing to resume and writes each file atomically (an interrupted write leaves its
// temporary file, as the signal's default did). It exits as README says, 130 with a
// line, for SIGTERM too, which would otherwise end it with 143 and nothing said.
func endOnInterrupt(a cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sig)
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case s := <-sig:
				if launch.IsTerminal(c.App.ErrWriter) {
					fmt.Fprint(c.App.ErrWriter, "\r\033[K") // off a progress bar's line
				}
				name := "SIGTERM"
				if s == os.Interrupt {
					name = "SIGINT"
				}
				fmt.Fprintf(c.App.ErrWriter, "emclust: %s interrupted by %s\n", c.Command.Name, name)
				os.Exit(130)
			case <-done:
			}
		}()
		return a(c)
	}
}

// interspersedFlags returns the command's positional arguments, after applying any
// flags that follow them. urfave/cli stops at the first positional argument, so
// without this `emclust report RUN --out DIR` would take --out DIR as more run
// folders, and `emclust data fetch cifar10 --dir D` would refuse the --dir.
func interspersedFlags(c *cli.Context) ([]string, error) {
	cmd := strings.TrimPrefix(c.Command.HelpName, c.App.Name+" ")
	args := c.Args().Slice()
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(pos, args[i+1:]...), nil
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var flag cli.Flag
		for _, f := range c.Command.Flags {
			for _, n := range f.Names() {
				if n == name {
					flag = f
				}
			}
		}
		if flag == nil {
			return nil, usageError{fmt.Errorf("%s: flag provided but not defined: %s (see emclust %s --help)", cmd, a, cmd)}
		}
		if _, isBool := flag.(*cli.BoolFlag); isBool {
			if !hasVal {
				val = "true"
			}
		} else if !hasVal {
			if i+1 >= len(args) {
				return nil, usageError{fmt.Errorf("%s: flag needs an argument: %s", cmd, a)}
			}
			i++
			val = args[i]
		}
		if err := c.Set(name, val); err != nil {
			return nil, usageError{fmt.Errorf("%s: invalid value %q for flag %s: %v", cmd, val, a, err)}
		}
	}
	return pos, nil
}

// commit is the commit the binary was built from, as git describe gives it; make
// build sets it (-ldflags -X).
var commit string

// version names the commit the binary was built from, and the shim ABI it expects.
func version() string {
	rev := commit
	if info, ok := debug.ReadBuildInfo(); ok && rev == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		rev = info.Main.Version // go install emclust@version
	} else if ok && rev == "" {
		// go build stamps the commit itself where it may run git.
		for _, kv := range info.Settings {
			switch {
			case kv.Key == "vcs.revision":
				rev = kv.Value[:min(12, len(kv.Value))] + rev
			case kv.Key == "vcs.modified" && kv.Value == "true":
				rev += "-dirty"
			}
		}
	}
	if rev == "" || rev == "-dirty" {
		rev = "unknown commit"
	}
	return fmt.Sprintf("%s (shim ABI %d)", rev, torch.ABIVersion)
}

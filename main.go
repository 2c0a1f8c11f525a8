// Command emclust clusters vectors and images end to end with a neural network trained
// as a mixture model by batch-wise EM (Tissera et al., "Neural Mixture Models with
// Expectation-Maximization for End-to-end Deep Clustering").
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"emclust/torch"
)

func main() {
	app := &cli.App{
		Name:  "emclust",
		Usage: "cluster vectors and images with a neural mixture model trained by batch-wise EM",
		Description: "With no data flag, `emclust train` clusters the embedded UCI handwritten digits.\n" +
			"Each command that ends a run prints one line a script can read: ACC x NMI y ARI z.",
		Commands: []*cli.Command{
			trainCommand(),
			predictCommand(),
			evalCommand(),
			scoreCommand(),
			benchCommand(),
			dataCommand(),
			devicesCommand(),
		},
		EnableBashCompletion: true,
		// libtorch here starts with one intra-op thread; use every core unless a
		// command's --threads says otherwise.
		Before: func(*cli.Context) error { return torch.SetNumThreads(runtime.NumCPU()) },
		// Errors are printed once, as one line, by main.
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "emclust: "+oneLine(err.Error()))
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ error }

func (u usageError) Unwrap() error { return u.error }

// oneLine folds a multi-line message (libtorch's can span several) onto one line.
func oneLine(s string) string {
	lines := strings.Fields(strings.ReplaceAll(s, "\n", " \n "))
	return strings.Join(lines, " ")
}

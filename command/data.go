package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"emclust/data"
	"emclust/launch"
)

func dataCommand() *cli.Command {
	return &cli.Command{
		Name:  "data",
		Usage: "manage data sets",
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageError{fmt.Errorf("unknown command \"data %s\"; see emclust data --help", c.Args().First())}
			}
			return cli.ShowSubcommandHelp(c)
		},
		Subcommands: []*cli.Command{{
			Name:      "fetch",
			Usage:     "download a data set's official files, check their MD5 and unpack them",
			UsageText: "emclust data fetch NAME --dir D   (NAME: mnist, fashion-mnist, cifar10, cifar100, stl10)",
			ArgsUsage: "NAME",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "dir", Usage: "folder to put the files in (required)"},
				&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "no progress bar"},
			},
			Action: action(fetchOptionsFrom, runFetch),
		}},
	}
}

type fetchOptions struct {
	Name, Dir string
	Quiet     bool
}

func fetchOptionsFrom(c *cli.Context) (fetchOptions, error) {
	args, err := interspersedFlags(c)
	if err != nil {
		return fetchOptions{}, err
	}
	if len(args) != 1 {
		return fetchOptions{}, usageError{errors.New("data fetch takes one data set name: mnist, fashion-mnist, cifar10, cifar100 or stl10")}
	}
	if names := slices.Sorted(maps.Keys(data.DefaultArchives())); !slices.Contains(names, args[0]) {
		return fetchOptions{}, usageError{fmt.Errorf("data fetch: unknown data set %q; want one of %s", args[0], strings.Join(names, ", "))}
	}
	if err := requireFlags(c, "dir"); err != nil {
		return fetchOptions{}, err
	}
	if err := refuseFile("--dir", c.String("dir"), "name the folder to put the data set in"); err != nil {
		return fetchOptions{}, err
	}
	return fetchOptions{Name: args[0], Dir: c.String("dir"), Quiet: c.Bool("quiet")}, nil
}

func runFetch(ctx context.Context, opts fetchOptions, _, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var bar *progressbar.ProgressBar
	progress := func(done, total int64) {
		if opts.Quiet || !launch.IsTerminal(stderr) {
			return
		}
		if bar == nil || done == 0 {
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(stderr), progressbar.OptionShowBytes(true),
				progressbar.OptionSetDescription("downloading "+opts.Name), progressbar.OptionSetPredictTime(true),
				progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionThrottle(65*time.Millisecond), progressbar.OptionClearOnFinish())
		}
		bar.Set64(done)
	}
	if err := data.Fetch(ctx, opts.Name, opts.Dir, progress); err != nil {
		if ctx.Err() != nil {
			return interruptedError{err}
		}
		return err
	}
	fmt.Fprintf(stderr, "emclust: %s is in %s\n", opts.Name, opts.Dir)
	return nil
}

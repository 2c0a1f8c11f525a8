package command

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"emclust/data"
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
			Action: func(c *cli.Context) error {
				args, err := interspersedFlags(c)
				if err != nil {
					return err
				}
				if len(args) != 1 {
					return usageError{errors.New("data fetch takes one data set name: mnist, fashion-mnist, cifar10, cifar100 or stl10")}
				}
				name := args[0]
				if err := requireFlags(c, "dir"); err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
				defer stop()
				var bar *progressbar.ProgressBar
				progress := func(done, total int64) {
					if c.Bool("quiet") || !isTerminal(c.App.ErrWriter) {
						return
					}
					if bar == nil || done == 0 {
						bar = progressbar.DefaultBytes(total, "downloading "+name)
					}
					bar.Set64(done)
				}
				if err := data.Fetch(ctx, name, c.String("dir"), progress); err != nil {
					if ctx.Err() != nil {
						return interruptedError{err}
					}
					return err
				}
				fmt.Fprintf(c.App.ErrWriter, "emclust: %s is in %s\n", name, c.String("dir"))
				return nil
			},
		}},
	}
}

package command

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"emclust/train"
)

// forceFlag lets --out replace an existing file.
var forceFlag = &cli.BoolFlag{Name: "force", Usage: "replace the --out file if it exists"}

// checkOutput refuses an --out path before any work is done: a folder, a file a run
// folder owns, one of the command's inputs, or an existing file without --force.
func checkOutput(out string, force bool, inputs ...string) error {
	// Whether or not the file exists yet: a run still training writes it later.
	dir, base := filepath.Split(out)
	for _, owned := range append(train.RunFiles, ".lock") {
		if base != owned {
			continue
		}
		for _, marker := range []string{"checkpoint.safetensors", "config.json"} {
			if _, err := os.Stat(filepath.Join(dir, marker)); err == nil {
				return usageError{fmt.Errorf("--out %s belongs to the run in %s; name a file outside the run folder", out, filepath.Clean(dir))}
			}
		}
	}
	st, err := os.Stat(out)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if dir := filepath.Dir(out); dir != "." {
			if d, err := os.Stat(dir); err != nil || !d.IsDir() {
				return usageError{fmt.Errorf("--out %s: folder %s does not exist", out, dir)}
			}
		}
		return nil
	case err != nil:
		return fmt.Errorf("--out %s: %w", out, err)
	case st.IsDir():
		return usageError{fmt.Errorf("--out %s is a folder; name the file to write", out)}
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		if ist, err := os.Stat(in); err == nil && os.SameFile(st, ist) {
			return usageError{fmt.Errorf("--out %s is this command's input; name another file", out)}
		}
	}
	if !force {
		return usageError{fmt.Errorf("--out %s exists; pass --force to replace it", out)}
	}
	return nil
}

// deviceFlag and threadsFlag are the same on every command that computes. Each call
// makes a new flag: urfave/cli keeps parse state in the flag value.
func deviceFlag() cli.Flag {
	return &cli.StringFlag{Name: "device", Value: "auto", Usage: "auto, cpu, cuda or cuda:N"}
}

func threadsFlag() cli.Flag {
	return &cli.IntFlag{Name: "threads", Usage: "CPU threads for libtorch (0: one per CPU, and one for a training step too small to share)"}
}

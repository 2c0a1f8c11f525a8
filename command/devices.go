package command

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"emclust/torch"
)

func devicesCommand() *cli.Command {
	return &cli.Command{
		Name:   "devices",
		Usage:  "show the libtorch build and the devices it can use",
		Action: func(c *cli.Context) error { return runDevices(c.Context, c.App.Writer) },
	}
}

// runDevices lists the build and its devices; it has no options.
func runDevices(_ context.Context, stdout io.Writer) error {
	build := "CPU"
	if torch.BuiltWithCUDA() {
		build = "CUDA"
	}
	blas := ""
	if n := torch.BLASThreads(); n >= 0 {
		blas = fmt.Sprintf(" (OpenBLAS %d)", n)
	}
	fmt.Fprintf(stdout, "libtorch %s (%s build of the emtorch shim), %d CPU threads%s\n", torch.Version(), build, torch.NumThreads(), blas)
	fmt.Fprintln(stdout, "cpu")
	n := torch.CUDADeviceCount()
	if !torch.CUDAAvailable() {
		n = 0
	}
	for i := 0; i < n; i++ {
		name, mem, err := torch.CUDADeviceInfo(i)
		if err != nil {
			fmt.Fprintf(stdout, "cuda:%d\n", i)
			continue
		}
		fmt.Fprintf(stdout, "cuda:%d %s, %.1f GiB\n", i, name, float64(mem)/(1<<30))
	}
	if n == 0 {
		fmt.Fprintln(stdout, "no CUDA device")
	}
	return nil
}

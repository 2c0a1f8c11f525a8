package command

import (
	"context"
	"fmt"
	"io"
	"strings"

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

// backendsNote says which process-group backends the shim has: multi-process training
// needs one, and a shim built without Gloo's headers (a pip PyTorch ships none) lacks it.
func backendsNote() string {
	var have []string
	for _, b := range []torch.Backend{torch.Gloo, torch.NCCL} {
		if torch.HasBackend(b) {
			have = append(have, b.String())
		}
	}
	if len(have) == 0 {
		return "no process groups"
	}
	return "process groups: " + strings.Join(have, ", ")
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
	fmt.Fprintf(stdout, "libtorch %s (%s build of the emtorch shim, %s), %d CPU threads%s\n", torch.Version(), build, backendsNote(), torch.NumThreads(), blas)
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

package command

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"emclust/torch"
)

func devicesCommand() *cli.Command {
	return &cli.Command{
		Name:  "devices",
		Usage: "show the libtorch build and the devices it can use",
		Action: func(c *cli.Context) error {
			build := "CPU"
			if torch.BuiltWithCUDA() {
				build = "CUDA"
			}
			fmt.Fprintf(c.App.Writer, "libtorch %s (%s build of the emtorch shim), %d CPU threads\n", torch.Version(), build, torch.NumThreads())
			fmt.Fprintln(c.App.Writer, "cpu")
			n := torch.CUDADeviceCount()
			if !torch.CUDAAvailable() {
				n = 0
			}
			for i := 0; i < n; i++ {
				name, mem, err := torch.CUDADeviceInfo(i)
				if err != nil {
					fmt.Fprintf(c.App.Writer, "cuda:%d\n", i)
					continue
				}
				fmt.Fprintf(c.App.Writer, "cuda:%d %s, %.1f GiB\n", i, name, float64(mem)/(1<<30))
			}
			if n == 0 {
				fmt.Fprintln(c.App.Writer, "no CUDA device")
			}
			return nil
		},
	}
}

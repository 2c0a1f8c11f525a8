// Package torchtest gives tests the device to run on, from EMCLUST_TEST_DEVICE (cpu,
// cuda or cuda:N; default cpu), so that the same test binaries run on the CPU in CI
// and on a GPU in scripts/gpu-acceptance.sh.
package torchtest

import (
	"fmt"
	"math"
	"os"

	"emclust/torch"
)

// Env names the variable Device reads.
const Env = "EMCLUST_TEST_DEVICE"

// Device is the device named by EMCLUST_TEST_DEVICE. A test binary asked for a device
// it cannot use stops at once rather than testing the CPU in its place.
func Device() torch.Device {
	v := os.Getenv(Env)
	if v == "" {
		return torch.CPU
	}
	d, err := torch.ParseDevice(v)
	if err == nil && v == "auto" && !d.CUDA {
		err = fmt.Errorf("auto found no CUDA device")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s=%s: %v\n", Env, v, err)
		os.Exit(2)
	}
	return d
}

// Near reports whether got and want have the same length and agree element by element
// within tol, relative to want's largest magnitude (1 if want is all zeros): two ways
// of computing the same values, whose sums may come out in another order.
func Near[F float32 | float64](got, want []F, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	if scale == 0 {
		scale = 1
	}
	for i := range got {
		if !(math.Abs(float64(got[i])-float64(want[i])) <= tol*scale) {
			return false
		}
	}
	return true
}

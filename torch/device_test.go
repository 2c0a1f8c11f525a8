package torch

import (
	"fmt"
	"os"
)

// testDevice is where the tests run: EMCLUST_TEST_DEVICE, default the CPU. (Package
// torchtest does this for every other package; it imports torch, so not here.)
var testDevice = func() Device {
	v := os.Getenv("EMCLUST_TEST_DEVICE")
	if v == "" {
		return CPU
	}
	d, err := ParseDevice(v)
	if err == nil && v == "auto" && !d.CUDA {
		err = fmt.Errorf("auto found no CUDA device")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "EMCLUST_TEST_DEVICE=%s: %v\n", v, err)
		os.Exit(2)
	}
	return d
}()

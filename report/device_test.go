package report

import "emclust/torch/torchtest"

// testDevice is where the tests run: EMCLUST_TEST_DEVICE, default the CPU.
var testDevice = torchtest.Device()

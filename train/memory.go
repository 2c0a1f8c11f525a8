package train

import (
	"fmt"
	"strconv"
	"strings"

	"emclust/model"
	"emclust/torch"
)

// trainingBytes is what training holds a weight with on the CPU: the weight and its
// gradient, and each Adam's two moments, all float32.
func trainingBytes(cfg *Config) float64 {
	adams := 1
	if cfg.objective().KLStep {
		adams = 2
	}
	return 4 * float64(2+2*adams)
}

// checkNetworkFits refuses, before any weight is allocated, a network whose training
// state alone is larger than the memory free for it. Linux hands out such memory
// lazily and its OOM killer then ends the process with no message; CUDA's allocator
// fails with an error instead, so the check is the CPU's only. free is the memory
// free, ok false where it is not known (and nothing is refused).
func checkNetworkFits(spec model.Spec, cfg *Config, free uint64, ok bool) error {
	if !ok {
		return nil
	}
	if need := spec.NumParams() * trainingBytes(cfg); need <= float64(free) {
		return nil
	}
	return tooLarge(spec, cfg, fmt.Sprintf("more than the %s of memory free", humanBytes(float64(free))))
}

// buildOOM says which setting to lower when building the network ran out of memory
// (on a GPU, where checkNetworkFits does not look first); err is the allocator's.
func buildOOM(spec model.Spec, cfg *Config, dev torch.Device, err error) error {
	return tooLarge(spec, cfg, fmt.Sprintf("and building them ran out of memory on %s (%v)", dev, err))
}

// tooLarge is the error of a network too large to train: it names the setting that
// holds most of its weights (the output layer grows with --k, the rest with --hidden,
// or with --image-size for a CNN) and what training them takes; why ends the sentence.
func tooLarge(spec model.Spec, cfg *Config, why string) error {
	weights := spec.NumParams()
	flag := "--image-size"
	if spec.Arch == "mlp" {
		flag = "--hidden"
	}
	if out := outputLayerWeights(spec); out >= weights-out {
		flag = "--k"
	}
	return SettingsError{fmt.Errorf("%s: the network %s has %s weights, and training them needs %s (each weight, its gradient and Adam's moments in float32), %s: use a smaller %s",
		flag, spec.Layers(), humanCount(weights), humanBytes(weights*trainingBytes(cfg)), why, flag)}
}

// outputLayerWeights counts the weights of spec's last layer, K·Heads units wide:
// what a network without that layer lacks.
func outputLayerWeights(spec model.Spec) float64 {
	none := spec
	none.K, none.Heads = 0, 1
	return spec.NumParams() - none.NumParams()
}

// humanCount writes a count of weights the way a reader takes it in: 2.5 G, 310 M.
func humanCount(n float64) string { return withUnit(n, "") }

// humanBytes writes a size in powers of ten: 40 GB, 310 MB.
func humanBytes(n float64) string { return withUnit(n, "B") }

// withUnit writes n to three digits with an SI prefix, and past the largest one in
// powers of ten.
func withUnit(n float64, unit string) string {
	for _, p := range []struct {
		prefix string
		size   float64
	}{{"P", 1e15}, {"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
		if n >= p.size {
			if n >= 1000*p.size {
				return strings.TrimSpace(strconv.FormatFloat(n, 'e', 2, 64) + " " + unit)
			}
			return strconv.FormatFloat(n/p.size, 'g', 3, 64) + " " + p.prefix + unit
		}
	}
	return strings.TrimSpace(strconv.FormatFloat(n, 'f', 0, 64) + " " + unit)
}

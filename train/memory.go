package train

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"emclust/model"
	"emclust/sysmem"
	"emclust/torch"
)

// stateBytes is what training holds for spec's weights on the CPU, in float32: each
// weight and its gradient, and each Adam's two moments (twofold has two Adams); and
// twice the largest layer's weights, for the gradient that backward makes before it
// is added to the one kept, and for the buffer a checkpoint is saved through. Runs
// of 9 M to 64 M weights peaked at 24.3 bytes a weight under em (docs/RESULTS.md
// section 66).
func stateBytes(spec model.Spec, cfg *Config) float64 {
	return spec.NumParams()*weightBytes(cfg) + 2*4*largestLayer(spec)
}

// weightBytes is what a network that has trained holds a weight with: the weight,
// its gradient, and each Adam's two moments, in float32.
func weightBytes(cfg *Config) float64 {
	adams := 1
	if cfg.objective().KLStep {
		adams = 2
	}
	return 4 * float64(2+2*adams)
}

// memoryToCheck is the memory free that the checks below hold training to, and no
// figure where they do not run: on a GPU (CUDA's allocator fails with an error of its
// own), or under --no-memory-check.
func memoryToCheck(cfg *Config, dev torch.Device) sysmem.Room {
	if dev.CUDA || cfg.NoMemoryCheck {
		return sysmem.Room{}
	}
	return sysmem.Free()
}

// checkRestartsFit refuses, before any trains, restarts whose networks together are
// larger than the memory free on the CPU: each restart stays open until all have
// trained (trainJobs), and a run the OOM killer ended at its tenth restart had
// trained nine for nothing. What one network computes New checks as each starts.
func checkRestartsFit(cfg Config, src Source, room sysmem.Room) error {
	free, ok := room.Bytes()
	runs := cfg.RestartRuns()
	if !ok || runs < 2 {
		return nil
	}
	total, widest := 0.0, model.Spec{}
	for _, c := range NetworkCandidates(cfg) {
		spec, err := src.Spec(&c)
		if err != nil {
			return nil // New says what is wrong with it
		}
		total += float64(max(cfg.Restarts, 1)) * spec.NumParams() * weightBytes(&c)
		if spec.NumParams() > widest.NumParams() {
			widest = spec
		}
	}
	if total <= float64(free) || widest.NumParams()*weightBytes(&cfg) > float64(free) {
		return nil // fits, or one network alone does not: New says which setting
	}
	flag := "--hidden"
	if widest.Arch != "mlp" {
		flag = "--k"
	}
	return SettingsError{fmt.Errorf("--restarts %d: the %d networks (%s, %s weights) stay in memory until one is kept, %s with their gradients and Adam's moments, more than the %s of %s: use fewer --restarts or a smaller %s%s",
		cfg.Restarts, runs, widest.Layers(), humanCount(widest.NumParams()), humanBytes(total), humanBytes(float64(free)), room.What(), flag, overrideHint(room))}
}

// largestLayer counts the weights of spec's largest layer: among an MLP's, or a
// CNN's output layer, the only one that grows past a few million (with K).
func largestLayer(spec model.Spec) float64 {
	if spec.Arch != "mlp" {
		return outputLayerWeights(spec)
	}
	widths, largest := spec.MLPWidths(), 0.0
	for i := 1; i < len(widths); i++ {
		largest = max(largest, float64(widths[i-1])*float64(widths[i])+float64(widths[i]))
	}
	return largest
}

// activationBytes is what the network holds for the rows it computes at once: a
// training batch of batch rows, and an evaluation chunk of chunk rows. An MLP's batch
// keeps each layer's output before and after its ReLU and a gradient of the same
// size, in float32; a CNN's, for each image and each transformed copy the objective
// forwards, each convolution's output and its BatchNorm's, and a gradient, in the
// precision's bytes (bf16's 2 where the measured peaks halved; docs/RESULTS.md
// section 66 has them, 3.1 to 4.2 such outputs a view). An evaluation keeps no
// gradients: two layers' outputs at once for an MLP, four outputs of the largest
// convolution an image for a CNN (4.3 measured).
func activationBytes(spec model.Spec, cfg *Config, batch, chunk int) (train, eval float64) {
	rows, rowsEval := float64(batch), float64(chunk)
	if spec.Arch != "mlp" {
		sum, largest := spec.ConvOutputs()
		elem, views := 4.0, 1.0
		if cfg.Precision == "bf16" {
			elem = 2
		}
		if cfg.objective().Augmented {
			views = 2
		}
		return elem * rows * views * 3 * sum, elem * rowsEval * 4 * largest
	}
	widths := spec.MLPWidths()
	units, widest := float64(widths[0]), float64(widths[0]) // the input, once
	for _, w := range widths[1:] {
		units += 3 * float64(w) // a layer's output, its ReLU, a gradient
		widest = max(widest, float64(w))
	}
	return 4 * rows * units, 4 * 2 * rowsEval * widest
}

// evalBytesPerRow is what evaluating one row holds at once in float32: two layer
// outputs of an MLP's widest, four of a CNN's largest convolution.
func evalBytesPerRow(spec model.Spec) float64 {
	if spec.Arch != "mlp" {
		_, largest := spec.ConvOutputs()
		return 4 * 4 * largest
	}
	return 4 * 2 * float64(slices.Max(spec.MLPWidths()))
}

// evalBudget bounds the memory an evaluation chunk's activations take.
const evalBudget = 1 << 30

// evalRows is the rows an evaluation runs through spec's network at once: evalChunk,
// or fewer where their activations would pass evalBudget (a 96×96 CNN's 1024 images
// held 11 GB; docs/RESULTS.md section 66), but at least one. It depends on the network alone, so that every
// machine sums a clustering's criteria in the same chunks.
func evalRows(spec model.Spec) int {
	return int(max(1, min(evalChunk, math.Floor(evalBudget/evalBytesPerRow(spec)))))
}

// checkNetworkFits refuses, before any weight is allocated, a network whose training
// is larger than the memory free for it: its weights with their gradients and Adam's
// moments, and the activations of a training batch or an evaluation chunk of the
// data's n rows, whichever is larger. Linux hands
// out such memory lazily and its OOM killer then ends the process with no message;
// CUDA's allocator fails with an error instead, so the check is the CPU's only. room is
// the memory free (nothing is refused where it is not known). Swap is not counted as
// free: a run that fits only there crawls.
func checkNetworkFits(spec model.Spec, cfg *Config, n int, room sysmem.Room) error {
	// Each of several ranks trains its share of the global batch, and those on this
	// machine share its memory.
	world, local := max(cfg.WorldSize, 1), max(cfg.LocalRanks, 1)
	room = room.Divided(local)
	free, ok := room.Bytes()
	if !ok {
		return nil
	}
	batch, chunk := max(1, min(cfg.BatchSize, n)/world), min(evalRows(spec), n)
	train, eval := activationBytes(spec, cfg, batch, chunk)
	acts, state := max(train, eval), stateBytes(spec, cfg)
	if state+acts <= float64(free) {
		return nil
	}
	// A smaller batch is the remedy only if a batch of one would fit.
	one, _ := activationBytes(spec, cfg, 1, chunk)
	batchHelps := train > eval && state+max(one, eval) <= float64(free)
	rows := ""
	if acts > 0 {
		share := fmt.Sprintf("a batch of %d", batch)
		if world > 1 {
			share = fmt.Sprintf("a rank's %d rows of the batch", batch)
		}
		rows = fmt.Sprintf(" and computes %s of activations for the rows it takes at once (%s to train, %d to evaluate)", humanBytes(acts), share, chunk)
	}
	why := fmt.Sprintf("more than the %s of %s", humanBytes(float64(free)), room.What())
	if local > 1 && !room.AddressBinds() {
		why += fmt.Sprintf(" for each of the %d processes on this machine", local)
	}
	return tooLarge(spec, cfg, rows, acts, batchHelps, why, overrideHint(room))
}

// overrideHint ends the memory check's refusals: what it cannot count, or where a
// limit binds that no unseen memory lifts, that limit.
func overrideHint(room sysmem.Room) string {
	switch {
	case room.AddressBinds():
		return fmt.Sprintf(" (or raise the address-space limit of %s: ulimit -v)", humanBytes(float64(room.AddressLimit)))
	case room.SharedBy == sysmem.ByCommit:
		return " (or raise the commit limit: vm.overcommit_ratio or vm.overcommit_kbytes, or swap)"
	}
	return " (or, where memory the check cannot see will hold it, such as swap, add --no-memory-check)"
}

// buildOOM says which setting to lower when building the network ran out of memory
// (on a GPU, where checkNetworkFits does not look first); err is the allocator's.
func buildOOM(spec model.Spec, cfg *Config, dev torch.Device, err error) error {
	return tooLarge(spec, cfg, "", 0, false, fmt.Sprintf("and building it ran out of memory on %s (%v)", dev, err), "")
}

// tooLarge is the error of a network too large to train: what training it takes (its
// weights' state, and acts bytes of activations that rows describes), and the setting
// to lower: --k where the output layer holds most weights, --hidden or --batch-size
// where a training batch's activations are the most of it and a smaller batch would
// fit (batchHelps), else --hidden, or a folder's --image-size for a CNN: an
// evaluation's rows are not the user's to set, nor a built-in image set's size. why
// ends the sentence, hint the advice.
func tooLarge(spec model.Spec, cfg *Config, rows string, acts float64, batchHelps bool, why, hint string) error {
	weights := spec.NumParams()
	state := stateBytes(spec, cfg)
	// A linear map's one layer is its output layer: K, or the features, make it large.
	kLarge := outputLayerWeights(spec) >= weights/2 &&
		(spec.Arch != "mlp" || len(spec.Hidden) > 0 || spec.K*spec.NumHeads() >= spec.In)
	// flag names the setting first; advice ends the message.
	var flag, advice string
	switch {
	case kLarge:
		flag, advice = "--k", "use a smaller --k"
	case acts > state && batchHelps && len(spec.Hidden) > 0:
		flag, advice = "--hidden", "use a smaller --hidden or --batch-size"
	case acts > state && batchHelps:
		flag, advice = "--batch-size", "use a smaller --batch-size"
	case spec.Arch != "mlp" && cfg.Dataset == "folder":
		flag, advice = "--image-size", "use a smaller --image-size"
	case spec.Arch != "mlp":
		// A built-in set's images have the paper's size: nothing is left to lower.
		flag, advice = "--dataset "+cfg.Dataset, "free memory, or use a machine with more"
		if cfg.Precision != "bf16" {
			advice = "--precision bf16 halves the activations; else free memory, or use a machine with more"
		}
	case len(spec.Hidden) > 0:
		flag, advice = "--hidden", "use a smaller --hidden"
	default: // a linear map, large for its input's width
		flag, advice = "--hidden none", fmt.Sprintf("reduce the data's %d features first (PCA, say)", spec.In)
	}
	what := "each weight, its gradient and Adam's moments, and two copies of the largest layer, in float32"
	switch {
	case acts > 0 && cfg.Precision == "bf16" && spec.Arch != "mlp":
		what += ", and the activations, in bfloat16"
	case acts > 0:
		what += ", and the activations"
	}
	return SettingsError{fmt.Errorf("%s: the network %s has %s weights%s; training it needs %s (%s), %s: %s%s",
		flag, spec.Layers(), humanCount(weights), rows, humanBytes(state+acts), what, why, advice, hint)}
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
	// Rounded first, so that 999.6 M is written 1 G, not 1e+03 M.
	n, _ = strconv.ParseFloat(strconv.FormatFloat(n, 'g', 3, 64), 64)
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

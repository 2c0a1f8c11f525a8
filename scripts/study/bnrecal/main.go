// Command bnrecal asks whether an image run's eval-mode statistics cost it accuracy.
// Twofold training runs T(x)'s forward in training mode too, so the running means and
// variances of the batch norms and of the relevance normalisation are half the
// augmented batches'. bnrecal scores a run's model as saved, then runs the originals
// alone through it in training mode (no gradient, so only the running statistics
// move: after n batches at momentum 0.1 the old ones weigh 0.9ⁿ) and scores it again.
//
//	go run ./scripts/study/bnrecal [-batches 200] RUN...
//
// It prints, per run, the epoch and ACC, NMI and the mean max posterior before and
// after (docs/RESULTS.md section 54).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	"emclust/eval"
	"emclust/torch"
	"emclust/train"
)

// libtorch's thread team belongs to the OS thread that calls it (cmd/emclust).
func init() { runtime.LockOSThread() }

func main() {
	batches := flag.Int("batches", 200, "batches of originals run in training mode")
	flag.Parse()
	torch.SetNumThreads(runtime.NumCPU())
	torch.KeepFreedMemory()
	for _, run := range flag.Args() {
		if err := recalibrate(run, *batches); err != nil {
			fmt.Fprintf(os.Stderr, "bnrecal: %s: %v\n", run, err)
			os.Exit(1)
		}
	}
}

func recalibrate(run string, batches int) error {
	dev := torch.CPU
	m, err := train.LoadModel(run, dev)
	if err != nil {
		return err
	}
	defer m.Close()
	cfg := *m.Cfg
	cfg.Device = "cpu"
	src, err := train.OpenSource(&cfg, dev)
	if err != nil {
		return err
	}
	defer src.Close()
	before, err := scoreModel(m, src, dev)
	if err != nil {
		return err
	}
	for range batches {
		s := torch.NoGrad()
		idx := s.Narrow(s.RandPerm(src.Len(), src.IndexDevice()), 0, 0, cfg.BatchSize)
		x, _ := src.Batch(s, idx, nil)
		m.Net.ForwardHeads(s, x, true)
		if err := s.Close(); err != nil {
			return err
		}
	}
	after, err := scoreModel(m, src, dev)
	if err != nil {
		return err
	}
	fmt.Printf("%s epoch %d  saved: %s  originals' statistics: %s\n", run, m.Epoch, before, after)
	return nil
}

func scoreModel(m *train.Model, src train.Source, dev torch.Device) (string, error) {
	pred, err := train.PredictWithCriteria(m.Net, src, dev, m.Prior, m.Cfg.GammaVal)
	if err != nil {
		return "", err
	}
	sc, err := eval.Score(src.Labels(), pred.Cluster)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("ACC %.4f NMI %.4f maxpost %.4f", sc.ACC, sc.NMI, pred.Criteria.MaxPosterior), nil
}

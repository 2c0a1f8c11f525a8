package train

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"emclust/loss"
	"emclust/model"
	"emclust/torch"
)

// Prediction is the network's clustering of the whole source in eval mode.
type Prediction struct {
	Cluster   []int
	Posterior []float32 // N×K
	K         int
	// Criteria are filled by PredictWithCriteria.
	Criteria *Criteria
}

// Criteria are label-free measures of a model's clustering, over the whole data in
// eval mode: what can choose among restarts when there are no labels to score.
type Criteria struct {
	// EMObjective is Eq. em_loss over all rows: −(1/n) Σ_i Σ_j p_ij log h_ij (lower
	// is a better fit).
	EMObjective float64 `json:"em_objective"`
	// LogLikelihood is (1/n) Σ_i log Σ_j π_j h_ij, the mixture's log-likelihood with
	// h = sigmoid(a*/γ) as the component likelihoods.
	LogLikelihood float64 `json:"log_likelihood"`
	// MaxPosterior is the mean of max_j p_ij: how sure the assignments are.
	MaxPosterior float64 `json:"max_posterior"`
	// SizeEntropy is the entropy of the cluster sizes over log K: 1 for equal sizes.
	SizeEntropy float64 `json:"size_entropy"`
}

// Predict clusters every row in eval mode (running statistics), in chunks (evalRows),
// with the network's selected head.
func Predict(net *model.Net, src Source, dev torch.Device, prior *torch.Tensor) (*Prediction, error) {
	return PredictProgress(net, src, dev, prior, nil)
}

// PredictProgress is Predict telling done, if not nil, how many rows are done after
// each chunk: a large set takes a minute on a CPU.
func PredictProgress(net *model.Net, src Source, dev torch.Device, prior *torch.Tensor, done func(rows int)) (*Prediction, error) {
	preds, err := predict(net, src, dev, prior, 0, true, 0, src.Len(), done)
	if err != nil {
		return nil, err
	}
	// An input far beyond the training data's range overflows the network: its argmax
	// would be cluster 0, said nowhere. (PredictWithCriteria's sums carry it to
	// checkFinite.) Only the selected head's outputs count: only its clustering comes
	// out, and its posteriors are on the host already.
	pred := preds[net.Head()]
	if i := slices.IndexFunc(pred.Posterior, func(v float32) bool { return !isFinite(v) }); i >= 0 {
		return nil, fmt.Errorf("row %d (0-based): %w", i/pred.K, ErrNotFinite)
	}
	return pred, nil
}

// PredictWithCriteria is Predict with the Criteria of the clustering under γ.
func PredictWithCriteria(net *model.Net, src Source, dev torch.Device, prior *torch.Tensor, gamma float64) (*Prediction, error) {
	if !(gamma > 0) {
		return nil, fmt.Errorf("criteria need γ > 0, got %v", gamma)
	}
	preds, err := predict(net, src, dev, prior, gamma, true, 0, src.Len(), nil)
	if err != nil {
		return nil, err
	}
	// Only the selected head's clustering comes out: another head's overflow is no error.
	if err := checkFinite(preds[net.Head() : net.Head()+1]); err != nil {
		return nil, err
	}
	return preds[net.Head()], nil
}

// evalChunk is the most rows predict runs through the network at once (evalRows).
const evalChunk = 1024

// predict runs the model over rows from to to-1 of src in eval mode, in chunks; with
// γ > 0 it also sums the criteria. It returns every head's prediction, indexed by
// head: the network computes them all in any case, and the selected head's criteria
// then come out of the same sums whichever head a caller wants. The posteriors come
// to the host only when asked for: they are K numbers a row, where an evaluation
// during training needs one. done, if not nil, is told the rows done after each chunk.
func predict(net *model.Net, src Source, dev torch.Device, prior *torch.Tensor, gamma float64, posteriors bool, from, to int, done func(rows int)) ([]*Prediction, error) {
	chunk := evalRows(net.Spec)
	// As for convolutions (oneBLASThreadForConvolutions), OpenBLAS's spinning pool
	// slowed the products of an MLP's chunks that it did not speed up: 1.5 M rows
	// through 3→32→32→10 took 2.9–3.6 s with it on two threads and 2.2 s on one
	// (28 s and 2.8 s with the cores busy with other work), 300 000 through 512-wide
	// layers 4.9 s and 3.0 s; 1024-wide ones were no slower on two (2 cores;
	// docs/RESULTS.md section 60).
	small := net.ForwardFLOPs()*int64(chunk) < bigChunkFLOPs
	defer oneBLASThreadIf(small || len(net.ConvLayers()) > 0, dev)()
	n, k, heads := to-from, net.Spec.K, net.Spec.NumHeads()
	out := make([]*Prediction, heads)
	for h := range out {
		out[h] = &Prediction{Cluster: make([]int, n), K: k}
		if posteriors {
			out[h].Posterior = make([]float32, 0, n*k)
		}
	}
	emSum := make([]float64, heads)
	llSum := make([]float64, heads)
	maxPostSum := make([]float64, heads)
	all := torch.NoGrad()
	defer all.Close()
	rows := all.Arange(src.Len(), torch.Int64, src.IndexDevice())
	if err := all.Err(); err != nil {
		return nil, err
	}
	for lo := 0; lo < n; lo += chunk {
		s := torch.NoGrad()
		m := min(chunk, n-lo)
		idx := s.Narrow(rows, 0, from+lo, m)
		x, _ := src.Batch(s, idx, nil)
		// Row i·heads+h holds row i's scores under head h: every head in one softmax,
		// one argmax and one copy to the host.
		aStar := perHead(s, net.ForwardHeads(s, x, false), k)
		var logPrior *torch.Tensor
		if prior != nil {
			logPrior = s.Log(prior)
		}
		p := loss.Posterior(s, aStar, logPrior)
		am := s.Int64s(s.ArgMax(p, false, 1))
		var post []float32
		if posteriors {
			post = s.Float32s(p)
		}
		if gamma > 0 {
			logH := loss.LogLikelihood(s, aStar, gamma)
			if logPrior == nil {
				logPrior = s.Full([]int{1, k}, -math.Log(float64(k)), torch.Float32, dev)
			}
			em := s.Neg(s.Mul(p, logH))
			ll := s.LogSumExp(s.Add(logH, logPrior), false, 1)
			maxP := s.Max(p, false, 1)
			if heads == 1 {
				em, ll, maxP = s.Sum(em, false), s.Sum(ll, false), s.Sum(maxP, false)
			} else {
				em = s.Sum(s.Reshape(em, m, heads, k), false, 0, 2)
				ll = s.Sum(s.Reshape(ll, m, heads), false, 0)
				maxP = s.Sum(s.Reshape(maxP, m, heads), false, 0)
			}
			// The three sums of every head in one copy to the host.
			if sums := s.Float32s(s.Stack(0, em, ll, maxP)); len(sums) == 3*heads {
				for h := range heads {
					emSum[h] += float64(sums[h])
					llSum[h] += float64(sums[heads+h])
					maxPostSum[h] += float64(sums[2*heads+h])
				}
			}
		}
		if err := s.Close(); err != nil {
			return nil, err
		}
		for r, c := range am {
			i, h := r/heads, r%heads
			out[h].Cluster[lo+i] = int(c)
			if posteriors {
				out[h].Posterior = append(out[h].Posterior, post[r*k:(r+1)*k]...)
			}
		}
		if done != nil {
			done(lo + m)
		}
	}
	if gamma > 0 {
		for h, pred := range out {
			pred.Criteria = newCriteria(emSum[h], llSum[h], maxPostSum[h], pred.Cluster, k)
		}
	}
	return out, nil
}

func isFinite(x float32) bool { return !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) }

// ErrNotFinite is the error for outputs or criteria that are not all finite, as the scores of a
// network whose weights overflowed give: no clustering comes of them.
var ErrNotFinite = errors.New("the network's outputs are not finite")

// checkFinite is ErrNotFinite if any prediction's criteria are not finite. Ranks
// check after gathering theirs, so that all of them stop, or none.
func checkFinite(preds []*Prediction) error {
	for _, p := range preds {
		c := p.Criteria
		for _, v := range []float64{c.EMObjective, c.LogLikelihood, c.MaxPosterior, c.SizeEntropy} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return ErrNotFinite
			}
		}
	}
	return nil
}

// newCriteria are the criteria of a clustering from the sums over its rows of the EM
// objective's terms, the log-likelihoods and the max posteriors.
func newCriteria(emSum, llSum, maxPostSum float64, cluster []int, k int) *Criteria {
	n := float64(len(cluster))
	c := &Criteria{EMObjective: emSum / n, LogLikelihood: llSum / n, MaxPosterior: maxPostSum / n}
	sizes := make([]int, k)
	for _, cl := range cluster {
		sizes[cl]++
	}
	for _, sz := range sizes {
		if sz > 0 {
			q := float64(sz) / n
			c.SizeEntropy -= q * math.Log(q)
		}
	}
	if k > 1 {
		c.SizeEntropy /= math.Log(float64(k))
	}
	return c
}

// Package loss computes the objectives of the paper on normalised relevance scores a*:
// the EM loss (Eq. em_loss), the EM loss with augmentation (Eq. em_loss_aug), the KL
// consistency term of the two-fold optimisation (Eq. kl_loss), and IIC's mutual
// information, which the paper compares against.
package loss

import (
	"fmt"
	"math"
	"strconv"

	"emclust/torch"
)

// AutoGamma is the γ that keeps sigmoid(a*/γ) in its near-linear region for batch
// size n: normalised scores are bounded by ±(n−1)/√n, and the paper's γ = 5 at n = 128
// divides that bound (11.23) by 2.245.
func AutoGamma(n int) float64 {
	return (float64(n-1) / math.Sqrt(float64(n))) / 2.245
}

// ParseGamma reads a --gamma flag: a number > 0, or "auto" for AutoGamma(batch).
func ParseGamma(s string, batch int) (float64, error) {
	if s == "auto" {
		if batch < 2 {
			return 0, fmt.Errorf("gamma auto: batch size %d, want at least 2", batch)
		}
		return AutoGamma(batch), nil
	}
	g, err := strconv.ParseFloat(s, 64)
	if err != nil || !(g > 0) || math.IsInf(g, 0) {
		return 0, fmt.Errorf("--gamma %q: want a positive number or auto", s)
	}
	return g, nil
}

// Posterior is the E-step: p = softmax(a* + log π) along clusters (the last
// dimension), detached so that the M-step treats it as a constant. logPrior (1×K,
// or any shape that broadcasts) may be nil for the paper's uniform prior.
func Posterior(s *torch.Scope, aStar, logPrior *torch.Tensor) *torch.Tensor {
	a := s.Detach(aStar)
	if logPrior != nil {
		a = s.Add(a, logPrior)
	}
	return s.Softmax(a, -1)
}

// LogLikelihood is log h = log sigmoid(a*/γ), computed stably.
func LogLikelihood(s *torch.Scope, aStar *torch.Tensor, gamma float64) *torch.Tensor {
	return s.LogSigmoid(s.DivScalar(aStar, gamma))
}

// EM is Eq. em_loss: −(1/n) Σ_i Σ_j p_ij log sigmoid(a*_ij/γ) with p constant.
func EM(s *torch.Scope, aStar, p *torch.Tensor, gamma float64) *torch.Tensor {
	n := aStar.Dim(0)
	return s.DivScalar(s.Neg(s.Sum(s.Mul(p, LogLikelihood(s, aStar, gamma)), false)), float64(n))
}

// EMAug is Eq. em_loss_aug: the EM loss of the originals plus the log-likelihood of
// the transformed batch, both weighted by the originals' posteriors p. Each batch is
// normalised over itself before it gets here.
func EMAug(s *torch.Scope, aStar, aTrStar, p *torch.Tensor, gamma float64) *torch.Tensor {
	n := aStar.Dim(0)
	ll := s.Add(LogLikelihood(s, aStar, gamma), LogLikelihood(s, aTrStar, gamma))
	return s.DivScalar(s.Neg(s.Sum(s.Mul(p, ll), false)), float64(n))
}

// KL is Eq. kl_loss averaged over the batch: Σ_j p_ij log(p_ij/q_ij) with p given
// (detached) by the caller and q the transformed batch's posterior under the same
// prior, softmax(aTrStar + logPrior) (nil: uniform). Without the prior on q's side,
// a learned prior would keep the KL above 0 for a transform the network is
// perfectly consistent on, and push the prior's weight into the network.
func KL(s *torch.Scope, p, aTrStar, logPrior *torch.Tensor) *torch.Tensor {
	n := aTrStar.Dim(0)
	a := aTrStar
	if logPrior != nil {
		a = s.Add(a, logPrior)
	}
	logQ := s.LogSoftmax(a, 1)
	// p log p is constant in θ but keeps the value a true KL (≥ 0); clamp avoids 0·log 0.
	logP := s.Log(s.ClampMin(p, 1e-12))
	return s.DivScalar(s.Sum(s.Mul(p, s.Sub(logP, logQ)), false), float64(n))
}

// IIC is the negative mutual information between the cluster assignments of the
// originals and of their transforms (Ji et al.), from the symmetrised joint
// P = (pᵀq + qᵀp)/2n over the batch. Both sides carry gradients, as in IIC. With a
// group g the batch is that of all its ranks, each holding as many rows.
func IIC(s *torch.Scope, aStar, aTrStar *torch.Tensor, g *torch.Group) *torch.Tensor {
	n := aStar.Dim(0)
	p := s.Softmax(aStar, 1)
	q := s.Softmax(aTrStar, 1)
	joint := s.MatMul(s.Transpose(p, 0, 1), q)
	if g != nil {
		joint = s.AllReduceSum(g, joint)
		n *= g.Size()
	}
	joint = s.DivScalar(joint, float64(n))
	joint = s.DivScalar(s.Add(joint, s.Transpose(joint, 0, 1)), 2)
	joint = s.ClampMin(joint, 1e-12)
	pi := s.Sum(joint, true, 1) // K×1
	pj := s.Sum(joint, true, 0) // 1×K
	mi := s.Sum(s.Mul(joint, s.Sub(s.Sub(s.Log(joint), s.Log(pi)), s.Log(pj))), false)
	return s.Neg(mi)
}

// CrossEntropy is the mean negative log-likelihood of int64 labels under softmax(logits),
// for the supervised mode of the trainer.
func CrossEntropy(s *torch.Scope, logits, labels *torch.Tensor) *torch.Tensor {
	return s.NLLLoss(s.LogSoftmax(logits, 1), labels)
}

"""Private hyperparameter selection whose cost is accounted.

Tuning on private data leaks it (Papernot & Steinke 2022, §2): the certificate
of the released model must cover every training run that was tried and the
selection among them.  This module implements *random stopping*: run a
private mechanism Q a random number K of times (K independent of the data)
and release only the best output, and bounds the privacy of the whole:

* :func:`rdp_truncated_negative_binomial` — Papernot & Steinke, "Hyperparameter
  Tuning with Rényi Differential Privacy", ICLR 2022, **Theorem 2**: K from the
  truncated negative binomial distribution D_{η,γ} (Definition 1; η = 1 is the
  geometric distribution, η = 0 the logarithmic one).
* :func:`rdp_poisson` — the same paper, **Theorem 6**: K ~ Poisson(μ).
* :func:`liu_talwar` — Liu & Talwar, "Private Selection from Private
  Candidates", STOC 2019, **Theorem 3.4** (random stopping with stopping
  probability γ, stopped after T runs at the latest; an (ε, δ)-DP baseline).

:class:`NoisySGDClassifierCV` tunes :class:`~noisysgd.NoisySGDClassifier` with
one of these rules.  Each run Q (one candidate training run and its score) is

1. draw a candidate uniformly from the grid and a fresh uniformly random split
   of the data into a training part (n − n_val) and a validation part (n_val),
   independently of the data;
2. train the candidate on the training part (Noisy-SGD, the noise multiplier
   of that candidate, fixed before any data is read);
3. score it on the validation part by a *noisy count*: the number of correct
   predictions plus N(0, σ_s²) (sensitivity 1 under replace adjacency).

Under replace adjacency the one changed example lies either in the training
part (then the validation part is the same and the score is post-processing
of the model) or in the validation part (then the model has the same law and
only the count moves, by at most 1), so conditionally on the split the run's
Rényi divergence is at most max(ρ_train(α), α/(2σ_s²)) (Gaussian mechanism:
Mironov 2017, Proposition 7).  The split, the candidate and the batches are
drawn independently of the data with the same law on both datasets; the
Rényi divergence of order α > 1 of two mixtures with the same weights is at
most the largest of the components' (exp((α−1)D_α) is jointly convex), so
the per-run RDP curve is the order-wise **maximum** over the candidates and
the score.  For each candidate ρ_train is the order-wise minimum of the
applicable sound RDP analyses of its run (what :func:`noisysgd.epsilon`
reports as ``order-wise-minimum``; Gaussian-DP analyses enter as αμ²/2, exact
for μ-GDP).  ``composition-pld`` has no RDP curve and does not enter the
Papernot–Steinke rules; the Liu–Talwar rule, which needs (ε₁, δ₁)-DP of a run,
uses each candidate's best sound ε (PLD included) and the exact Gaussian-DP
ε of the score.  Only replace adjacency is supported (the split sizes are
then public and fixed).

The certificate covers the release of the selected model, its candidate and
its noisy validation score — nothing else: the other runs' models and scores
are never kept.  The number of runs drawn does not depend on the data.
"""

from .cv import NoisySGDClassifierCV, NoRunsDrawn
from .selection import (SELECTIONS, delta_from_rdp, draw_runs, liu_talwar, liu_talwar_horizon, liu_talwar_split,
                        rdp_poisson, rdp_truncated_negative_binomial, truncated_negative_binomial_gamma,
                        truncated_negative_binomial_mean, truncated_negative_binomial_pmf, tuning_epsilon)

__all__ = ["NoisySGDClassifierCV", "NoRunsDrawn", "SELECTIONS", "delta_from_rdp", "draw_runs", "liu_talwar",
           "liu_talwar_horizon", "liu_talwar_split", "rdp_poisson", "rdp_truncated_negative_binomial",
           "truncated_negative_binomial_gamma", "truncated_negative_binomial_mean",
           "truncated_negative_binomial_pmf", "tuning_epsilon"]

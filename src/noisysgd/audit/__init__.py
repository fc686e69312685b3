"""Empirical privacy audits: lower bounds on ε from many runs of the trainer.

A certificate says the final model is (ε, δ)-DP; an audit runs the trainer
many times on two adjacent datasets, applies a distinguishing test to each
final model, and turns the test's error counts into a lower bound on ε that
holds with a stated confidence (:mod:`.stats`).  A lower bound above the
certified ε would mean a bug — in the trainer, in the analysis, or in the
accounting between them.

* :func:`audit_at_1d` — Altschuler & Talwar's lower-bound construction
  (Theorem 4.1, Appendix A.4): one-dimensional linear losses on
  K = [−D/2, D/2], all zero but one; the test "final iterate ≥ τ".
* :func:`audit_canary` — a crafted canary in scikit-learn's digits, its
  gradient orthogonal to every other example's; the test thresholds the
  final model's loss on the canary (threshold chosen on separate runs).

Both run the real trainer, vectorised over runs
(:func:`noisysgd.train.replicas.train_replicas`).
"""

from .adversaries import AuditResult, at_1d_datasets, audit_at_1d, audit_canary, digits_canary
from .losses import Linear
from .stats import (
    EpsilonLowerBound,
    Threshold,
    choose_threshold,
    clopper_pearson,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
    evaluate_threshold,
)

__all__ = [
    "AuditResult",
    "audit_at_1d",
    "audit_canary",
    "at_1d_datasets",
    "digits_canary",
    "Linear",
    "EpsilonLowerBound",
    "Threshold",
    "choose_threshold",
    "evaluate_threshold",
    "epsilon_lower_bound",
    "clopper_pearson",
    "clopper_pearson_upper",
    "clopper_pearson_lower",
]

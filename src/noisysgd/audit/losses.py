"""A linear loss, for the lower-bound constructions of privacy audits.

ℓ(W; x̄, y) = y·x̄ᵀW: the label y is the slope along x̄.  Linear in W, so
convex and 0-smooth; its gradient y·x̄ has norm |y|·‖x̄‖.  It follows the
interface of :class:`noisysgd.train.Loss` (scalar score), so the engine and
the replica engine run it unchanged: clipping at L rescales the derivative y
to [−L/‖x̄‖, L/‖x̄‖], which keeps it constant in W — still linear.

With no features (X of shape (n, 0)) the augmented feature is x̄ = (1,), W is
a single number ω and ℓ_i(ω) = y_i·ω: Altschuler & Talwar's one-dimensional
construction (Theorem 4.1), with f_n(ω) = L(D − ω) ≃ y_n = −L (a constant
shift of a loss changes no gradient).

>>> import numpy as np
>>> c = Linear().constants(feature_clip=1.0, clip_norm=2.0)
>>> c.lipschitz, c.natural_lipschitz, c.smoothness, c.convex
(2.0, None, 0.0, True)
>>> bool(Linear().constants(feature_clip=1.0, target_bound=0.5).natural_lipschitz == 0.5 * np.sqrt(2.0))
True
"""

from __future__ import annotations

import math

import numpy as np

from ..train.losses import Loss, regression_labels, writable_array

__all__ = ["Linear"]


class Linear(Loss):
    """ℓ(W; x̄, y) = y·x̄ᵀW with real labels y (the slopes).

    φ'(s) = y (constant), φ'' = 0 ⇒ M = 0, convex.  Labels are clipped to
    [−Y, Y] when a ``target_bound`` Y is given, and then the natural Lipschitz
    constant is Y·√(R²+1); without one, the clip norm is the Lipschitz
    constant.  ``predict`` returns the score.
    """

    name = "linear"
    uses_target_bound = True

    def encode_labels(self, y, *, target_bound=None):
        return regression_labels(y, target_bound)

    def derivative(self, S, Y):
        D = S if writable_array(S) else np.empty(np.shape(S), dtype=np.result_type(S, float))
        D[...] = Y
        return D

    def value(self, W, Xbar, Y):
        return float(np.mean(Y * self.scores(W, Xbar)))

    def predict(self, W, Xbar):
        return self.scores(W, Xbar)

    def _natural(self, r2, D, Y):
        if Y is None:
            return None, 0.0, (
                "φ' = y is constant and φ'' = 0: M = 0, convex; |y| is unbounded without a target "
                "bound Y, so L is the clip norm"
            )
        return Y * math.sqrt(r2), 0.0, (
            "φ' = y with |y| ≤ Y, ‖x̄‖² ≤ R²+1: L = Y·√(R²+1); φ'' = 0: M = 0, convex"
        )

    def _no_natural_reason(self, D, Y):
        return "its natural Lipschitz constant needs target_bound"

    def _under_clipping(self, clipped, M):
        notes = ()
        if clipped:
            notes = ("the clipped derivative clip(y, ±L/‖x̄‖) is still constant in W: the clipped "
                     "loss is linear, convex and 0-smooth",)
        return True, M, notes

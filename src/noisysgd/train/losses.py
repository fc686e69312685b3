"""Generalized linear model losses with constants derived, never measured.

Every loss acts on *augmented* features x̄ = (clip_R(x), 1) ∈ R^{d+1}: each
example's features are scaled to L2 norm at most R (``feature_clip``, a
data-independent, per-example operation) and a bias coordinate 1 is
appended, so ‖x̄‖² ≤ R² + 1 and ‖x̄‖ ≥ 1 (:func:`augment`).  The parameters
W have shape (d+1,) (binary, regression) or (d+1, k) (multiclass).

A GLM loss depends on W only through the score s = x̄ᵀW (a scalar, or a
k-vector), so its gradient is ∇ℓ(W) = x̄·ℓ'(s)ᵀ and the per-example gradient
norm is a closed form, ‖∇ℓ‖ = ‖ℓ'(s)‖·‖x̄‖.  Clipping a per-example gradient
to norm L therefore rescales the *derivative*, never a gradient matrix, and
a batch gradient costs one matmul forward (scores) and one back
(X̄_Bᵀ·ψ(s)).

Clipping and convexity.  For a loss of a scalar score (:class:`BinaryLogistic`,
:class:`Squared`, :class:`Huber`, and each class of :class:`OneVsRestLogistic`)
the clipped derivative ψ(s) = clip(ℓ'(s), −τ, τ), τ = L/‖x̄‖ (τ = L/(√k·‖x̄‖)
per class for one-vs-rest), is nondecreasing (ℓ' is, ℓ being convex) and
Lipschitz with the same constant as ℓ'.  So the clipped gradient x̄·ψ(x̄ᵀW) is
the gradient of Ψ(x̄ᵀW), Ψ' = ψ: a convex loss with the same smoothness M,
whose gradient norm is at most L — the idea of Ye & Shokri's Proposition 5.2.
For :class:`Softmax` clipping the k-vector p − y to a norm below the natural
Lipschitz constant is *not* the gradient of a convex function in general: the
clipped field is not even monotone (``tests/test_train_losses.py`` exhibits
⟨G(W) − G(W'), W − W'⟩ < 0, so a gradient step expands that distance for every
step size).  Ye & Shokri's Proposition 5.2 states the contrary for softmax,
but its proof (their Appendix F.4) is not in our copy of the paper, and
eigenvalue bounds on a non-symmetric Jacobian do not give a contraction;
:meth:`Softmax.constants` therefore reports ``convex=False`` and no
smoothness when the clip norm is below the natural Lipschitz constant, and
only the composition baseline applies to such a run.

>>> import numpy as np
>>> c = BinaryLogistic().constants(feature_clip=1.0, clip_norm=0.5)
>>> c.lipschitz, round(c.natural_lipschitz, 6), c.smoothness, c.convex, c.clipped
(0.5, 1.414214, 0.5, True, True)
>>> Softmax(n_classes=3).constants(feature_clip=1.0, clip_norm=0.5).convex
False
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy.special import expit, log_expit, logsumexp

from ..rowmaps import augment_rows, row_norms

__all__ = [
    "LossConstants",
    "Loss",
    "BinaryLogistic",
    "Softmax",
    "OneVsRestLogistic",
    "Squared",
    "Huber",
    "ClassWeighted",
    "augment",
]


# --------------------------------------------------------------------------- helpers


def positive_real(name: str, value, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{name} must be a positive finite number. Found {value!r}.")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive finite number. Found {value!r}.") from None
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{name} must be a positive finite number. Found {value!r}.")
    return number


def float_dtype(dtype) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be float32 or float64. Found {dtype!r}.") from None
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64. Found {dtype!r}.")
    return dt


def augment(X, feature_clip: float, *, intercept_scaling: float = 1.0, dtype=np.float64,
            return_norms: bool = False):
    """X̄ = (clip_R(x_i), s) for every row x_i of ``X``.

    Each row is scaled by min(1, R/‖x_i‖) (R = ``feature_clip``): a
    per-example operation that does not depend on the other examples.  The
    clipping is computed in float64 and the result cast to ``dtype``.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Finite features.
    feature_clip : float
        R > 0.
    intercept_scaling : float
        s > 0, the constant appended as the bias coordinate (scikit-learn's
        liblinear convention): the intercept is s·W[-1].  ‖x̄‖² ≤ R² + s², so a
        small s spends less of the gradient's norm bound on the intercept.
    dtype : float32 or float64
    return_norms : bool
        Also return ‖x̄_i‖ = √(min(‖x_i‖, R)² + s²) (float64, shape (n,)).

    >>> Xbar = augment([[3.0, 4.0], [0.3, 0.4]], feature_clip=1.0)
    >>> np.round(Xbar, 12).tolist()
    [[0.6, 0.8, 1.0], [0.3, 0.4, 1.0]]
    >>> augment([[3.0, 4.0]], feature_clip=1.0, intercept_scaling=0.25).tolist()
    [[0.6000000000000001, 0.8, 0.25]]
    """
    R = positive_real("feature_clip", feature_clip)
    s = positive_real("intercept_scaling", intercept_scaling)
    dt = float_dtype(dtype)
    Xbar, bar_norms = augment_rows(feature_rows(X), R, dt, bias=s)
    return (Xbar, bar_norms) if return_norms else Xbar


#: The feature dtypes used as they are (no copy: features can be gigabytes).
FLOATS = (np.float64, np.float32)


def float_array(X) -> np.ndarray:
    """``X`` itself when it is a float32 or float64 array, else converted to float64."""
    return X if isinstance(X, np.ndarray) and X.dtype in FLOATS else np.asarray(X, dtype=np.float64)


def feature_rows(X) -> np.ndarray:
    """``X`` as a finite 2-D float array (:func:`float_array`), or ``ValueError`` naming it."""
    try:
        X = float_array(X)
    except (TypeError, ValueError):
        raise ValueError("X must be a 2-D array of numbers.") from None
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n, d). Found shape {X.shape}.")
    if not all_finite(X):
        raise ValueError("X must be finite. Found NaN or infinite entries.")
    return X


#: rows per block when a large array is checked block by block
_CHECK_ROWS = 1 << 14


def all_finite(X) -> bool:
    """Whether every entry of the 2-D float array ``X`` is finite, checked a block of rows
    at a time: the temporary is a block's boolean, not an n×d one (``X`` may be a
    memory-mapped file larger than memory)."""
    return all(np.isfinite(X[i:i + _CHECK_ROWS]).all() for i in range(0, X.shape[0], _CHECK_ROWS))


@dataclass(frozen=True)
class LossConstants:
    """What a loss guarantees under a feature clip R (and clip norm, domain).

    Attributes
    ----------
    lipschitz : float
        The L to put in the :class:`~noisysgd.Run`: the clip norm if one is
        given, else the natural Lipschitz constant.
    natural_lipschitz : float or None
        Bound on every per-example gradient norm of the unclipped,
        unregularized loss (``None`` when there is none without more
        information, e.g. squared loss without a diameter).
    smoothness : float or None
        M of the per-example (clipped) unregularized loss; the run's
        smoothness must be at least M + λ.  ``None`` if unknown.
    convex : bool
        Whether the (clipped) per-example gradient field is the gradient of a
        convex function.
    clipped : bool
        Whether the clip norm can be active (below the natural constant, or
        no natural constant).
    derivation : str
        The formulas and their source.
    notes : tuple of str
    """

    lipschitz: float
    natural_lipschitz: float | None
    smoothness: float | None
    convex: bool
    clipped: bool
    derivation: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        out = asdict(self)
        out["notes"] = list(self.notes)
        return out


# --------------------------------------------------------------------------- base


class Loss:
    """A per-example GLM loss ℓ(W; x̄, y) = φ(x̄ᵀW; y).

    Subclasses define the label encoding, the link derivative φ' and its
    clipped version, the mean loss and the constants.  The labels ``Y`` that
    :meth:`value`, :meth:`derivative` and :meth:`clipped_derivative` take are
    those returned by :meth:`encode_labels`.
    """

    #: number of classes (multiclass losses); ``None`` for a scalar score.
    n_classes: int | None = None
    name: str = ""
    #: whether labels are clipped to a declared ``target_bound`` (regression)
    uses_target_bound: bool = False

    # ------------------------------------------------------------- shapes/labels

    def param_shape(self, d: int) -> tuple[int, ...]:
        """Shape of W for d raw features (d + 1 with the bias)."""
        return (d + 1,) if self.n_classes is None else (d + 1, self.n_classes)

    def encode_labels(self, y, *, target_bound: float | None = None) -> np.ndarray:
        """Validated labels in the loss's internal coding (see the subclass)."""
        raise NotImplementedError

    def scores(self, W, Xbar) -> np.ndarray:
        """s = X̄W, shape (n,) or (n, k)."""
        return np.asarray(Xbar) @ np.asarray(W)

    def predict(self, W, Xbar) -> np.ndarray:
        raise NotImplementedError

    # ----------------------------------------------------------------- calculus

    def value(self, W, Xbar, Y) -> float:
        """Mean unregularized loss over the rows of X̄ (labels as encoded)."""
        raise NotImplementedError

    def derivative(self, S: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """φ'(s) per example (per class): ∇ℓ_i = x̄_i·φ'(s_i)ᵀ.  May reuse ``S``."""
        raise NotImplementedError

    def clipped_derivative(self, S, Y, thresholds) -> np.ndarray:
        """φ'(s) with each example's gradient clipped to norm L.

        ``thresholds`` = L/‖x̄_i‖ for the batch (shape (b,)); then
        ‖x̄_i‖·‖ψ_i‖ ≤ L.  Scalar-score losses clip the scalar derivative to
        [−τ_i, τ_i]; may reuse ``S``.
        """
        D = self.derivative(S, Y)
        np.minimum(D, thresholds, out=D)  # clip(φ', −τ, τ); two ufuncs are faster than np.clip
        np.maximum(D, -thresholds, out=D)
        return D

    def gradient_norms(self, W, Xbar, Y) -> np.ndarray:
        """Closed-form per-example gradient norms ‖φ'(s_i)‖·‖x̄_i‖ (unclipped)."""
        Xbar = np.asarray(Xbar, dtype=float)
        D = self.derivative(self.scores(W, Xbar), Y)
        dn = np.abs(D) if D.ndim == 1 else np.sqrt(np.einsum("ij,ij->i", D, D))
        return dn * np.sqrt(np.einsum("ij,ij->i", Xbar, Xbar))

    def gradient(self, W, Xbar, Y, *, clip_norm: float | None = None) -> np.ndarray:
        """Mean (optionally clipped) unregularized gradient over the rows of X̄."""
        Xbar = np.asarray(Xbar, dtype=float)
        S = self.scores(W, Xbar)
        if clip_norm is None:
            D = self.derivative(S, Y)
        else:
            norms = np.sqrt(np.einsum("ij,ij->i", Xbar, Xbar))
            D = self.clipped_derivative(S, Y, positive_real("clip_norm", clip_norm) / norms)
        return Xbar.T @ D / Xbar.shape[0]

    # ---------------------------------------------------------------- constants

    def constants(
        self,
        *,
        feature_clip: float,
        clip_norm: float | None = None,
        diameter: float | None = None,
        target_bound: float | None = None,
        intercept_scaling: float = 1.0,
    ) -> LossConstants:
        """Lipschitz constant, smoothness and convexity derived from R and s (and D, Y).

        Every formula below is written for the bias coordinate s = 1 (‖x̄‖² ≤
        R² + 1, as in the papers); with an intercept scaling s it holds with
        R² + s² in place of R² + 1, since it uses x̄ only through that bound.

        Parameters
        ----------
        feature_clip : float
            R: every feature vector has norm at most R before the bias is added.
        clip_norm : float, optional
            Per-example clipping norm of the unregularized gradient.
        diameter : float, optional
            D of the ball (centred at 0) the iterates are projected onto.
        target_bound : float, optional
            Y, the bound labels are clipped to (regression).
        intercept_scaling : float
            s > 0, the bias coordinate of x̄ (:func:`augment`).

        Returns
        -------
        LossConstants
        """
        R = positive_real("feature_clip", feature_clip)
        L = positive_real("clip_norm", clip_norm, optional=True)
        D = positive_real("diameter", diameter, optional=True)
        Y = positive_real("target_bound", target_bound, optional=True)
        s = positive_real("intercept_scaling", intercept_scaling)
        natural, M, derivation = self._natural(R * R + s * s, D, Y)
        if s != 1.0:
            derivation += f"; intercept scaling s = {s:g}: R²+s² in place of R²+1"
        if L is None and natural is None:
            raise ValueError(
                f"clip_norm is required for {self.name}: {self._no_natural_reason(D, Y)}. Found None."
            )
        lipschitz = natural if L is None else L
        clipped = natural is None or lipschitz < natural
        convex, smoothness, notes = self._under_clipping(clipped, M)
        if L is not None:
            if clipped:
                notes = (f"per-example gradients clipped to norm {L:g}",) + notes
            else:
                notes = (
                    f"clip norm {L:g} >= natural Lipschitz constant {natural:.6g}: clipping is a no-op",
                ) + notes
        return LossConstants(
            lipschitz=float(lipschitz),
            natural_lipschitz=None if natural is None else float(natural),
            smoothness=None if smoothness is None else float(smoothness),
            convex=bool(convex),
            clipped=bool(clipped),
            derivation=derivation,
            notes=tuple(notes),
        )

    def _natural(self, r2: float, D, Y):
        """(natural L or None, M, derivation) with r2 = R² + s² (s = 1: R² + 1)."""
        raise NotImplementedError

    def _no_natural_reason(self, D, Y) -> str:
        return "it has no natural Lipschitz constant"

    def _under_clipping(self, clipped: bool, M: float):
        """(convex, smoothness, notes) of the clipped loss.  Scalar-score GLM:
        the clipped derivative is nondecreasing and as Lipschitz as φ'."""
        notes = ()
        if clipped:
            notes = (
                "clipped derivative ψ = clip(φ', ±L/‖x̄‖) is nondecreasing with the same Lipschitz "
                "constant, so the clipped loss stays convex and M-smooth (idea of Ye & Shokri, "
                "Prop. 5.2)",
            )
        return True, M, notes

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _binary_labels(y) -> np.ndarray:
    y = _label_array(y)
    values = np.unique(y)
    if np.all(np.isin(values, (-1.0, 1.0))):
        return y.astype(np.float64)
    if np.all(np.isin(values, (0.0, 1.0))):
        return 2.0 * y.astype(np.float64) - 1.0
    raise ValueError(f"y must hold binary labels in {{0, 1}} or {{-1, +1}}. Found values {values[:5].tolist()}.")


def _label_array(y) -> np.ndarray:
    try:
        y = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("y must be a 1-D array of numbers.") from None
    if y.ndim != 1:
        raise ValueError(f"y must be a 1-D array. Found shape {y.shape}.")
    if not np.all(np.isfinite(y)):
        raise ValueError("y must be finite. Found NaN or infinite entries.")
    return y


def _n_classes(value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 2:
        raise ValueError(f"n_classes must be an integer >= 2. Found {value!r}.")
    return int(value)


def regression_labels(y, target_bound) -> np.ndarray:
    """Validated real labels, clipped to [−Y, Y] when a target bound Y is declared."""
    y = _label_array(y)
    Y = positive_real("target_bound", target_bound, optional=True)
    return y.copy() if Y is None else np.clip(y, -Y, Y)


def _class_labels(y, k: int) -> np.ndarray:
    y = _label_array(y)
    if not np.all(y == np.round(y)) or (y.size and (y.min() < 0 or y.max() >= k)):
        raise ValueError(f"y must hold integer class indices in [0, {k - 1}] (n_classes={k}).")
    return y.astype(np.intp)


# --------------------------------------------------------------------------- losses


class BinaryLogistic(Loss):
    """Logistic loss ℓ = log(1 + exp(−y·s)), labels ±1 (``{0, 1}`` are mapped to ±1).

    φ'(s) = −y·σ(−y·s), |φ'| ≤ 1 ⇒ natural L = √(R²+1); φ'' = σ(s)σ(−s) ≤ 1/4
    ⇒ M = (R²+1)/4; convex.  ``predict`` returns ±1.
    """

    name = "binary-logistic"

    def encode_labels(self, y, *, target_bound=None):
        return _binary_labels(y)

    def derivative(self, S, Y):
        S = np.multiply(S, -Y, out=S if writable_array(S) else None)
        D = expit(S, out=S)
        D *= -Y
        return D

    def value(self, W, Xbar, Y):
        return float(-np.mean(log_expit(Y * self.scores(W, Xbar))))

    def predict(self, W, Xbar):
        return np.where(self.scores(W, Xbar) >= 0, 1, -1)

    def _natural(self, r2, D, Y):
        return (
            math.sqrt(r2),
            r2 / 4.0,
            "|φ'| ≤ 1, φ'' ≤ 1/4, ‖x̄‖² ≤ R²+1: L = √(R²+1), M = (R²+1)/4 (binary case of Ye & "
            "Shokri Prop. 5.1)",
        )


class _Multiclass(Loss):
    """A loss of k class scores: labels are class indices 0..k−1, the prediction
    is the class of the largest score."""

    def __init__(self, n_classes: int):
        self.n_classes = _n_classes(n_classes)

    def encode_labels(self, y, *, target_bound=None):
        return _class_labels(y, self.n_classes)

    def predict(self, W, Xbar):
        return np.argmax(self.scores(W, Xbar), axis=1)

    def __repr__(self):
        return f"{type(self).__name__}(n_classes={self.n_classes})"


class OneVsRestLogistic(_Multiclass):
    """k binary logistic losses on one (d+1, k) matrix: Σ_c log(1 + exp(−y_c·s_c)),
    y_c = +1 for the true class and −1 for the others (labels: class indices).

    φ'_c(s) = σ(s_c) − 1[c = y] ∈ (−1, 1) ⇒ natural L = √k·√(R²+1); the Hessian
    in the scores is diagonal with entries ≤ 1/4 ⇒ M = (R²+1)/4; convex.
    Clipping bounds *each class's* derivative by L/(√k·‖x̄‖), so the whole
    per-example gradient has norm ≤ L; the clipped loss is separable, a sum
    of clipped scalar GLMs, hence still convex and M-smooth.
    """

    name = "one-vs-rest-logistic"


    def derivative(self, S, Y):
        D = expit(S, out=S if writable_array(S) else None)
        D[np.arange(D.shape[0]), Y] -= 1.0
        return D

    def clipped_derivative(self, S, Y, thresholds):
        D = self.derivative(S, Y)
        t = (thresholds / math.sqrt(self.n_classes))[:, None]
        np.minimum(D, t, out=D)
        np.maximum(D, -t, out=D)
        return D

    def value(self, W, Xbar, Y):
        S = self.scores(W, Xbar)
        signs = -np.ones_like(S)
        signs[np.arange(S.shape[0]), Y] = 1.0
        return float(-np.mean(np.sum(log_expit(signs * S), axis=1)))


    def _natural(self, r2, D, Y):
        k = self.n_classes
        return (
            math.sqrt(k * r2),
            r2 / 4.0,
            f"k = {k} classes, |φ'_c| ≤ 1, φ''_c ≤ 1/4, diagonal Hessian in the scores: "
            "L = √k·√(R²+1), M = (R²+1)/4",
        )

    def _under_clipping(self, clipped, M):
        notes = ()
        if clipped:
            notes = (
                "each class's derivative clipped to ±L/(√k·‖x̄‖): a sum of clipped scalar GLMs, "
                "each ψ_c nondecreasing and as Lipschitz as φ'_c, so convexity and M survive "
                "(idea of Ye & Shokri, Prop. 5.2)",
            )
        return True, M, notes



class Softmax(_Multiclass):
    """Multiclass cross-entropy with per-class bias (Ye & Shokri eq. (8)).

    Labels: class indices 0..k−1.  φ'(s) = softmax(s) − e_y, ‖φ'‖² ≤ 2 ⇒
    natural L = √(2(R²+1)) (their (9)); the Hessian in the scores,
    diag(p) − ppᵀ, has norm ≤ 1/2 ⇒ M = (R²+1)/2 (their (10), Prop. 5.1);
    convex.  Clipped to a norm below the natural L, the gradient field is not
    monotone in general: ``constants`` then reports ``convex=False`` and no
    smoothness (module docstring).
    """

    name = "softmax"


    def derivative(self, S, Y):
        S = S if writable_array(S) else S.copy()
        S -= S.max(axis=1, keepdims=True)
        np.exp(S, out=S)
        S /= S.sum(axis=1, keepdims=True)
        S[np.arange(S.shape[0]), Y] -= 1.0
        return S

    def clipped_derivative(self, S, Y, thresholds):
        D = self.derivative(S, Y)
        dn = np.sqrt(np.einsum("ij,ij->i", D, D))
        # min(1, τ/‖φ'‖) without dividing by zero
        D *= (thresholds / np.maximum(dn, thresholds))[:, None]
        return D

    def value(self, W, Xbar, Y):
        S = self.scores(W, Xbar)
        return float(np.mean(logsumexp(S, axis=1) - S[np.arange(S.shape[0]), Y]))


    def _natural(self, r2, D, Y):
        return (
            math.sqrt(2.0 * r2),
            r2 / 2.0,
            "‖softmax(s) − e_y‖² ≤ 2, ‖diag(p) − ppᵀ‖ ≤ 1/2, ‖x̄‖² ≤ R²+1: L = √(2(R²+1)), "
            "M = (R²+1)/2 (Ye & Shokri (9), (10), Prop. 5.1)",
        )

    def _under_clipping(self, clipped, M):
        if not clipped:
            return True, M, ()
        return False, None, (
            "the softmax gradient clipped below its natural Lipschitz constant is not the gradient "
            "of a convex function in general (the clipped field is not monotone), so no "
            "hidden-state analysis applies: only the composition baseline does. Ye & Shokri's "
            "Prop. 5.2 claims otherwise but its proof (App. F.4) is not available to check; use "
            "clip_norm >= natural Lipschitz constant (or a smaller feature_clip) for a convex run",
        )



class ClassWeighted(Loss):
    """A classification loss with every example's loss multiplied by its class's weight,
    declared publicly and at most 1: ℓ_w(W; x̄, y) = w_y·ℓ(W; x̄, y), w_y ∈ (0, 1].

    Because w_y ≤ 1, each weighted loss is convex, L-Lipschitz and M-smooth whenever ℓ
    is (its derivative is w_y·φ', its curvature w_y·φ''), so :meth:`constants` are the
    base loss's and every analysis applies unchanged; a clipped gradient scaled by
    w_y ≤ 1 stays within the clip norm, so the sensitivity is unchanged too.  Larger
    weights would raise L with them: weights are normalized (the largest is 1) by the
    estimators before they get here.  Predictions are the base loss's.

    >>> import numpy as np
    >>> loss = ClassWeighted(BinaryLogistic(), [0.25, 1.0])
    >>> S, Y = np.array([0.0, 0.0]), np.array([-1.0, 1.0])
    >>> loss.derivative(S.copy(), Y), BinaryLogistic().derivative(S.copy(), Y)
    (array([ 0.125, -0.5  ]), array([ 0.5, -0.5]))
    """

    def __init__(self, base: Loss, weights):
        if not isinstance(base, (BinaryLogistic, _Multiclass)):
            raise ValueError(f"base must be a classification loss (BinaryLogistic, Softmax, OneVsRestLogistic). "
                             f"Found {base!r}.")
        k = 2 if base.n_classes is None else base.n_classes
        try:
            w = np.asarray(weights, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise ValueError(f"weights must be {k} numbers in (0, 1]. Found {weights!r}.") from None
        if w.shape != (k,) or not np.all(np.isfinite(w)) or not np.all((w > 0) & (w <= 1)):
            raise ValueError(f"weights must be {k} numbers in (0, 1] (one per class, the largest at most 1: a "
                             f"larger weight would raise the Lipschitz constant). Found {weights!r}.")
        self.base, self.weights = base, w
        self.n_classes = base.n_classes
        self.name = f"{base.name}+class-weight"

    def param_shape(self, d):
        return self.base.param_shape(d)

    def encode_labels(self, y, *, target_bound=None):
        return self.base.encode_labels(y, target_bound=target_bound)

    def predict(self, W, Xbar):
        return self.base.predict(W, Xbar)

    def _class(self, Y) -> np.ndarray:
        return (np.asarray(Y) > 0).astype(np.intp) if self.n_classes is None else np.asarray(Y).astype(np.intp)

    def _scaled(self, D, Y):
        w = self.weights[self._class(Y)]
        D *= w if D.ndim == w.ndim else w.reshape(w.shape + (1,) * (D.ndim - w.ndim))
        return D

    def derivative(self, S, Y):
        return self._scaled(self.base.derivative(S, Y), Y)

    def clipped_derivative(self, S, Y, thresholds):
        return self._scaled(self.base.clipped_derivative(S, Y, thresholds), Y)

    def value(self, W, Xbar, Y):
        Xbar, c = np.asarray(Xbar), self._class(Y)
        return float(sum(self.weights[k] * np.sum(c == k) * self.base.value(W, Xbar[c == k], np.asarray(Y)[c == k])
                         for k in np.unique(c)) / max(len(c), 1))

    def constants(self, **kwargs) -> LossConstants:
        return self.base.constants(**kwargs)  # w ≤ 1: the base loss's L, M and convexity hold (class docstring)

    def __repr__(self):
        return f"ClassWeighted({self.base!r}, weights={[float(v) for v in self.weights]})"

    @classmethod
    def from_dict(cls, base: Loss, given: dict, labels: list) -> "ClassWeighted":
        """The loss for weights ``given`` as {class label: weight > 0} over ``labels`` (classes not
        named weigh 1), normalized so that the largest is 1.  ``LookupError`` (its argument: the
        first label not among ``labels``) or ``ValueError`` (a weight not positive and finite)."""
        unknown = [c for c in given if c not in labels]
        if unknown:
            raise LookupError(unknown[0])
        w = np.array([given.get(c, 1.0) for c in labels], dtype=float)
        if not (np.all(np.isfinite(w)) and np.all(w > 0)):
            raise ValueError(f"class weights must be positive and finite. Found {given!r}.")
        return cls(base, w / w.max())

    def record(self, labels: list) -> dict:
        """What a certificate says of the weights (public, declared)."""
        return {"weights": {str(c): float(w) for c, w in zip(labels, self.weights)},
                "note": "declared (public), normalized so that the largest is 1: each example's loss is scaled "
                        "by at most 1, so its gradient stays within the clip norm and every bound holds"}


class Squared(Loss):
    """Squared loss ½(s − y)² for regression.

    φ'(s) = s − y, φ'' = 1 ⇒ M = R²+1; convex.  With labels clipped to
    [−Y, Y] (``target_bound``) and ‖W‖ ≤ D/2 (the projection ball),
    |φ'| ≤ (D/2)·√(R²+1) + Y ⇒ natural L = ((D/2)·√(R²+1) + Y)·√(R²+1);
    without D or Y there is none, and a clip norm is required.
    """

    name = "squared"
    uses_target_bound = True

    def encode_labels(self, y, *, target_bound=None):
        return regression_labels(y, target_bound)

    def derivative(self, S, Y):
        S = S if writable_array(S) else S.copy()
        S -= Y
        return S

    def value(self, W, Xbar, Y):
        r = self.scores(W, Xbar) - Y
        return float(0.5 * np.mean(r * r))

    def predict(self, W, Xbar):
        return self.scores(W, Xbar)

    def _natural(self, r2, D, Y):
        M = r2
        if D is None or Y is None:
            return None, M, (
                "φ'' = 1, ‖x̄‖² ≤ R²+1: M = R²+1; |φ'| = |s − y| is unbounded without a diameter "
                "D and a target bound Y, so L is the clip norm"
            )
        L = (D / 2.0 * math.sqrt(r2) + Y) * math.sqrt(r2)
        return L, M, (
            "|s| ≤ (D/2)·√(R²+1) on the ball of diameter D, |y| ≤ Y: L = ((D/2)·√(R²+1) + Y)·√(R²+1); "
            "φ'' = 1: M = R²+1"
        )

    def _no_natural_reason(self, D, Y):
        missing = [name for name, v in (("diameter", D), ("target_bound", Y)) if v is None]
        return f"its natural Lipschitz constant needs {' and '.join(missing)}"


class Huber(Loss):
    """Huber loss with threshold κ (``delta``): φ'(s) = clip(s − y, −κ, κ).

    Natural L = κ·√(R²+1); φ'' ≤ 1 ⇒ M = R²+1; convex.  Labels are clipped
    to [−Y, Y] when a ``target_bound`` is given (not needed for L).
    """

    name = "huber"
    uses_target_bound = True

    def __init__(self, delta: float = 1.0):
        self.delta = positive_real("delta", delta)

    def encode_labels(self, y, *, target_bound=None):
        return Squared.encode_labels(self, y, target_bound=target_bound)

    def derivative(self, S, Y):
        S = S if writable_array(S) else S.copy()
        S -= Y
        np.clip(S, -self.delta, self.delta, out=S)
        return S

    def value(self, W, Xbar, Y):
        r = np.abs(self.scores(W, Xbar) - Y)
        k = self.delta
        return float(np.mean(np.where(r <= k, 0.5 * r * r, k * (r - 0.5 * k))))

    def predict(self, W, Xbar):
        return self.scores(W, Xbar)

    def _natural(self, r2, D, Y):
        k = self.delta
        return k * math.sqrt(r2), r2, (
            f"|φ'| ≤ κ = {k:g}, φ'' ≤ 1, ‖x̄‖² ≤ R²+1: L = κ·√(R²+1), M = R²+1"
        )

    def __repr__(self):
        return f"Huber(delta={self.delta:g})"


def writable_array(a) -> bool:
    return isinstance(a, np.ndarray) and a.flags.writeable and a.dtype.kind == "f"

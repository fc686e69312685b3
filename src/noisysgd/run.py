"""The frozen description of a Noisy-SGD run, and the papers' noise conventions.

A run is described once; every analysis is a pure function of this object and
the trainer executes exactly what it says.

Canonical noise convention (Opacus, TF Privacy, dp_accounting): the *noise
multiplier* z.  Each step adds Gaussian noise of standard deviation z·L/b to
the batch-averaged gradient, where L bounds each example's gradient norm and b
is the batch size (the fixed denominator under Poisson sampling).  A step then
moves the parameters by −η(g + noise): parameter noise of standard deviation
η·z·L/b.  The papers' σ conventions are converted at the edges
(:func:`sigma_from_noise_multiplier`, :func:`noise_multiplier_from_sigma`).
"""

from __future__ import annotations

import copy
import math
import operator
from dataclasses import dataclass, fields

__all__ = [
    "AdaptiveClip",
    "BATCHING_SCHEMES",
    "ADJACENCIES",
    "ADD_REMOVE_BATCHINGS",
    "INITIALIZATIONS",
    "NOISE_CONVENTIONS",
    "Run",
    "sigma_from_noise_multiplier",
    "noise_multiplier_from_sigma",
]

#: ``poisson``: each example independently with probability b/n (the step still
#: divides by b); ``sample``: a fresh uniform batch of exactly b examples each
#: step; ``shuffle``: a fresh random permutation each epoch, cut into ⌊n/b⌋
#: batches (the n mod b leftover examples are not used that epoch);
#: ``shuffle-once``: *one* secret, uniformly random permutation, drawn once
#: independently of the data, cut into ⌊n/b⌋ batches and reused in the same
#: order every epoch (Ye & Shokri's "shuffle and partition", Algorithm 1,
#: line 3; the analyses may average over the unknown position of an example);
#: ``cyclic``: one fixed order, the same every epoch, ⌊n/b⌋ batches — the
#: analyses take the worst position, so *any* data-independent order is
#: covered (the trainer draws a random one once, which is one such order:
#: the same batches as ``shuffle-once``, accounted without using their
#: randomness);
#: ``full``: every example every step (b = n).
BATCHING_SCHEMES = ("poisson", "sample", "shuffle", "shuffle-once", "cyclic", "full")

#: The batchings that cut one permutation per epoch into ⌊n/b⌋ batches of
#: exactly b (the n mod b leftover examples are dropped).
PARTITION_BATCHINGS = ("shuffle", "shuffle-once", "cyclic")

#: ``replace``: adjacent datasets differ in one example (gradient sensitivity
#: 2L; what the papers use).  ``add-remove``: one dataset has one example more
#: (sensitivity L under ``poisson``; the default of Opacus and dp_accounting).
ADJACENCIES = ("replace", "add-remove")

#: The batchings that admit ``add-remove``: ``poisson`` only.  Each example is
#: in each step's batch independently with the fixed probability q = b/n, the
#: divisor is the fixed b and the number of steps T is fixed, all three from
#: the run's ``n`` — under add/remove the *declared public* dataset size, not
#: the number of rows the data turn out to hold (the engine accepts any number
#: of rows for such a run).  A neighbour with one row more then runs the same
#: mechanism on the same other rows, plus that row's gradient in the steps
#: whose batch holds it: sensitivity L.  Every other batching depends on the
#: actual number of rows m: a row added at position p moves every later batch
#: of the epoch (``shuffle``, ``shuffle-once``, ``cyclic``: each step's sum moves
#: by up to 2L, at every step, and ⌊m/b⌋ itself can change), the divisor
#: (``full``: m → m+1, and the noise on the mean with it) or the chance of
#: every row to be drawn (``sample``: b/m against b/(m+1)); no analysis here
#: covers that, so :class:`Run` refuses those pairs (dp_accounting
#: likewise refuses add/remove for sampling without replacement).  See
#: docs/privacy.md.
ADD_REMOVE_BATCHINGS = ("poisson",)

#: How the start point θ₀ is drawn, independently of the data.  ``fixed``: a
#: fixed point of the constraint set (every analysis but ``chourasia``/``ryffel``
#: allows any data-independent start, random or not).  ``gaussian``:
#: θ₀ ~ Π_K(N(0, (2σ²/m)·I)) with σ in Ye & Shokri's convention — the start
#: Chourasia et al. (and Ryffel et al., Lemma 3.4) assume.
INITIALIZATIONS = ("fixed", "gaussian")

#: Papers' noise conventions.  ``altschuler-talwar``: ω ← Π[ω − η(G + Z)],
#: Z ~ N(0, σ²I).  ``ye-shokri`` (also Ryffel et al.): θ ← θ − ηg + √(2ησ²)·N(0, I).
NOISE_CONVENTIONS = ("altschuler-talwar", "ye-shokri")
_CONVENTION_ALIASES = {"ryffel": "ye-shokri", "langevin": "ye-shokri"}


def checked_integer(name: str, value, *, minimum: int = 1) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= {minimum}. Found {value!r}.")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer >= {minimum}. Found {value!r}.") from None
    if number < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}. Found {value!r}.")
    return number


def checked_real(name: str, value, *, positive: bool = True, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    kind = "a positive" if positive else "a non-negative"
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{name} must be {kind} finite number. Found {value!r}.")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {kind} finite number. Found {value!r}.") from None
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        raise ValueError(f"{name} must be {kind} finite number. Found {value!r}.")
    return number


def _learning_rate(value, steps):
    """A positive float, or an explicit schedule: a tuple of ``steps`` positive floats."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        return checked_real("learning_rate", value)
    try:
        rates = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(
            f"learning_rate must be a positive number or a sequence of them. Found {value!r}."
        ) from None
    if len(rates) != steps:
        raise ValueError(
            f"learning_rate must have one entry per step ({steps}) when it is a schedule. "
            f"Found {len(rates)} entries."
        )
    bad = [r for r in rates if not math.isfinite(r) or r <= 0]
    if bad:
        raise ValueError(f"learning_rate entries must be positive finite numbers. Found {bad[0]!r}.")
    return rates


def checked_choice(name: str, value, choices: tuple[str, ...], aliases: dict | None = None) -> str:
    key = value.strip().lower().replace("_", "-") if isinstance(value, str) else value
    if aliases and key in aliases:
        key = aliases[key]
    if key not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}. Found {value!r}.")
    return key


@dataclass(frozen=True)
class AdaptiveClip:
    """Adaptive clipping (Andrew, Thakkar, McMahan & Ramaswamy, "Differentially Private Learning
    with Adaptive Clipping", NeurIPS 2021, Algorithm 1 with the geometric update): the run's clip
    C_t follows the ``target_quantile`` γ of the per-example gradient norms.  At step t the trainer
    releases, from the same batch B_t,

    * the clipped gradient sum Σ_B clip_{C_t}(g_i) + N(0, (z_Δ·C_t)²·I), and
    * the count Σ_B (b_i − ½) + N(0, σ_b²), b_i = 1[example i was not clipped], σ_b = ``count_noise``·z
      (z the run's noise multiplier: the count's noise in units of the whole mechanism's),

    and sets C_{t+1} = C_t·exp(−``clip_learning_rate``·(b̄_t − γ)), b̄_t = count/m + ½ with m the
    expected batch size (public).  Under add/remove one example moves the gradient sum by at most
    C_t and the centred count by at most ½; under replace-one by 2C_t and 1.  Either way the pair is
    one Gaussian mechanism on a vector whose two parts shift together, and its privacy loss is that
    of a single Gaussian of noise multiplier z = (z_Δ⁻² + (2σ_b)⁻²)^(−1/2) (Andrew et al., Theorem 1:
    μ² = μ_Δ² + μ_b²), subsampled and composed as the run's batches are.  So a run's
    ``noise_multiplier`` is that combined z — what the accountant reads — and the trainer adds
    z_Δ = (z⁻² − (2σ_b)⁻²)^(−1/2) = z/√(1 − 1/(4r²)) ≥ z to the gradient, r = ``count_noise``
    (:meth:`gradient_noise_multiplier`): the quantile query costs the gradient a fixed factor of noise,
    2 % at the default r = 2.55, whatever z.
    C_0 is the run's ``lipschitz``; C_t is a function of released counts only.

    Only the composition analyses (which account every iterate and need no fixed gradient map)
    apply to such a run: the hidden-state bounds' contraction premise needs one clip for all steps.
    """

    #: Whether an analysis may certify a run with this clip (False only for audits' broken variants).
    certifiable = True
    target_quantile: float = 0.5
    clip_learning_rate: float = 0.2
    count_noise: float = 2.55
    #: Scale the step by C_0/C_t (the update's size then does not shrink with the clip; the
    #: privacy guarantee does not depend on the step).  Measured on the evidence tables
    #: (docs/accuracy.md §1b): lost less than the unscaled step against the fixed clip.
    scale_step: bool = True

    def __post_init__(self) -> None:
        q = self.target_quantile
        if not (isinstance(q, (int, float)) and not isinstance(q, bool) and 0.0 < q < 1.0):
            raise ValueError(f"target_quantile must be in (0, 1). Found {q!r}.")
        checked_real("clip_learning_rate", self.clip_learning_rate)
        checked_real("count_noise", self.count_noise)
        self.__post_init_check()

    def __post_init_check(self) -> None:  # (called by __post_init__)
        if not self.count_noise > 0.5:
            raise ValueError(f"count_noise must exceed 1/2 (the count's noise in units of the run's noise multiplier: "
                             f"at 1/2 the count alone takes the whole budget). Found {self.count_noise!r}.")

    def count_std(self, z: float) -> float:
        """σ_b = ``count_noise``·z, the noise std of the released count."""
        return self.count_noise * float(z)

    def gradient_noise_multiplier(self, z: float) -> float:
        """z_Δ with (z_Δ⁻² + (2σ_b)⁻²)^(−1/2) = ``z``, σ_b = ``count_noise``·z: the gradient's share.

        >>> round(AdaptiveClip().gradient_noise_multiplier(1.0), 4), round(AdaptiveClip(count_noise=5.0).gradient_noise_multiplier(2.0), 6)
        (1.0198, 2.010076)
        """
        return float(z) / math.sqrt(1.0 - 1.0 / (4.0 * self.count_noise ** 2))

    def to_dict(self) -> dict:
        return {"target_quantile": self.target_quantile, "clip_learning_rate": self.clip_learning_rate,
                "count_noise_per_unit_z": self.count_noise, "scale_step": self.scale_step, "citation": "Andrew, Thakkar, McMahan & Ramaswamy 2021, Alg. 1, Thm 1"}


@dataclass(frozen=True, kw_only=True)
class Run:
    """A Noisy-SGD run, validated at construction and immutable afterwards.

    Parameters
    ----------
    n : int
        Number of training examples, >= 1 — public under ``replace``.  Under
        ``add-remove`` the dataset size *declared public* before the data are
        seen: the sampling rate b/n, the divisor b and the number of steps are
        fixed from it, and the data may hold any number of rows (a neighbour
        has one more or one fewer).
    batch_size : int or None
        Batch size b with 1 <= b <= n (the expected batch size under
        ``poisson``).  For ``full`` it must be n (``None`` means n).
    batching : {"poisson", "sample", "shuffle", "shuffle-once", "cyclic", "full"}
        How batches are formed (see :data:`BATCHING_SCHEMES`).
    steps : int or None
        Number of noisy gradient steps, >= 1.  Use :meth:`from_epochs` to give
        epochs instead.  ``None`` for a run whose length is chosen elsewhere
        (:func:`~noisysgd.plan` and :func:`~noisysgd.max_epochs` vary it);
        :func:`~noisysgd.epsilon` needs it.
    learning_rate : float or sequence of float or None
        Step size η > 0: a constant, the initial η₀ of a polynomial decay (see
        ``lr_decay``), or an explicit schedule with one positive entry per step
        (stored as a tuple; its length must equal ``steps``, and fixes it when
        ``steps`` is None).  ``None`` when unknown: the composition baselines
        do not use it, and the analyses that do say so and do not apply.
    lr_decay : float
        c in [0, 1) for the polynomial schedule η_t = η₀·(t+1)^(−c), t = 0, …,
        T−1 (Altschuler & Talwar §5.3, Example 5.9); 0 (default) is a constant
        step size.  Not combined with an explicit schedule.
    noise_multiplier : float or None
        z > 0 in the canonical convention (noise std z·L/b on the mean gradient).
        ``None`` when it is to be found: :func:`~noisysgd.calibrate` ignores it;
        :func:`~noisysgd.epsilon` needs it.
    lipschitz : float
        L > 0, a bound on every example's gradient norm (Lipschitz constant or
        clipping norm).
    smoothness : float or None
        M > 0, the smoothness of each example's loss *including* any L2
        regularization (M_loss + λ); ``None`` if unknown (analyses that need
        it will not apply).
    strong_convexity : float
        m >= 0 (0 for merely convex losses); at most ``smoothness``.  With L2
        regularization λ this is λ, and the trainer applies exactly that λ.
    diameter : float or None
        D > 0, the diameter of the convex constraint set the iterates are
        projected onto; ``None`` for no constraint.
    convex : bool
        Whether every example's loss is convex (default ``False``).  Every
        hidden-state analysis needs it; the composition baseline does not.
        ``strong_convexity > 0`` implies it.
    adjacency : {"replace", "add-remove"}
        Notion of neighbouring datasets.
    initialization : {"fixed", "gaussian"}
        How the trainer draws the start θ₀, independently of the data (see
        :data:`INITIALIZATIONS`); the trainer can draw ``gaussian`` only for
        m > 0 and a constant step size (its variance is 2σ²/m).

    Examples
    --------
    >>> run = Run.from_epochs(epochs=2, n=1000, batch_size=100, batching="shuffle",
    ...                       learning_rate=0.1, noise_multiplier=1.0, lipschitz=1.0)
    >>> run.steps, run.steps_per_epoch, run.sampling_rate
    (20, 10, 0.1)
    >>> Run(n=10, batch_size=20, batching="sample", steps=1, learning_rate=0.1,
    ...     noise_multiplier=1.0, lipschitz=1.0)
    Traceback (most recent call last):
    ...
    ValueError: batch_size must be at most n (10). Found 20.
    """

    n: int
    batch_size: int | None
    batching: str
    steps: int | None = None
    learning_rate: float | tuple[float, ...] | None = None
    noise_multiplier: float | None = None
    lipschitz: float
    smoothness: float | None = None
    strong_convexity: float = 0.0
    diameter: float | None = None
    convex: bool = False
    adjacency: str = "replace"
    lr_decay: float = 0.0
    initialization: str = "fixed"
    adaptive_clip: AdaptiveClip | None = None

    def __post_init__(self) -> None:
        # (no check here may read noise_multiplier but its own: replace() checks that field alone)
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        n = checked_integer("n", self.n)
        batching = checked_choice("batching", self.batching, BATCHING_SCHEMES)
        if batching == "full" and self.batch_size is None:
            b = n
        else:
            b = checked_integer("batch_size", self.batch_size)
        if b > n:
            raise ValueError(f"batch_size must be at most n ({n}). Found {self.batch_size!r}.")
        if batching == "full" and b != n:
            raise ValueError(
                f"batch_size must equal n ({n}) for batching='full'. Found {self.batch_size!r}."
            )
        set_("n", n)
        set_("batch_size", b)
        set_("batching", batching)
        if self.steps is None and self.learning_rate is not None and not isinstance(
                self.learning_rate, (int, float)) and hasattr(self.learning_rate, "__len__"):
            set_("steps", len(self.learning_rate))  # an explicit schedule fixes the length
        set_("steps", None if self.steps is None else checked_integer("steps", self.steps))
        set_("learning_rate", None if self.learning_rate is None
             else _learning_rate(self.learning_rate, self.steps))
        decay = checked_real("lr_decay", self.lr_decay, positive=False)
        if decay >= 1.0:
            raise ValueError(f"lr_decay must be in [0, 1). Found {self.lr_decay!r}.")
        if decay > 0 and isinstance(self.learning_rate, tuple):
            raise ValueError(
                f"lr_decay must be 0 with an explicit learning_rate schedule. Found {self.lr_decay!r}."
            )
        set_("lr_decay", decay)
        set_("noise_multiplier", checked_real("noise_multiplier", self.noise_multiplier, optional=True))
        set_("lipschitz", checked_real("lipschitz", self.lipschitz))
        set_("smoothness", checked_real("smoothness", self.smoothness, optional=True))
        m = checked_real("strong_convexity", self.strong_convexity, positive=False)
        if self.smoothness is not None and m > self.smoothness:
            raise ValueError(
                f"strong_convexity must be at most smoothness ({self.smoothness!r}). Found {m!r}."
            )
        set_("strong_convexity", m)
        if not isinstance(self.convex, bool):
            raise ValueError(f"convex must be True or False. Found {self.convex!r}.")
        set_("convex", self.convex or m > 0)
        set_("diameter", checked_real("diameter", self.diameter, optional=True))
        set_("adjacency", checked_choice("adjacency", self.adjacency, ADJACENCIES))
        if self.adjacency == "add-remove" and batching not in ADD_REMOVE_BATCHINGS:
            raise ValueError(add_remove_refusal(batching))
        set_("initialization", checked_choice("initialization", self.initialization, INITIALIZATIONS))
        if self.adaptive_clip is not None and not isinstance(self.adaptive_clip, AdaptiveClip):
            raise ValueError(f"adaptive_clip must be None or a noisysgd.run.AdaptiveClip. Found {self.adaptive_clip!r}.")

    @classmethod
    def from_epochs(cls, *, epochs: int, **kwargs) -> "Run":
        """Build a run of ``epochs`` epochs of :attr:`steps_per_epoch` steps each."""
        e = checked_integer("epochs", epochs)
        if "steps" in kwargs:
            raise ValueError(f"steps must not be given with epochs. Found steps={kwargs['steps']!r}.")
        probe_kwargs = dict(kwargs)
        if not isinstance(kwargs.get("learning_rate", 1.0), (int, float)):
            probe_kwargs["learning_rate"] = 1.0  # the schedule's length is checked below
        probe = cls(steps=1, **probe_kwargs)
        return cls(steps=e * probe.steps_per_epoch, **kwargs)

    # ------------------------------------------------------------------ derived

    @property
    def constant_learning_rate(self) -> bool:
        """True when every step uses the same step size."""
        return not isinstance(self.learning_rate, tuple) and self.lr_decay == 0.0

    def require(self, *names: str, why: str) -> "Run":
        """This run, after checking that the optional fields ``names`` are set:
        ``ValueError`` naming the first missing one and ``why`` it is needed."""
        for name in names:
            if getattr(self, name) is None:
                raise ValueError(f"{name} must be given {why}. Found None.")
        return self

    @property
    def max_learning_rate(self) -> float | None:
        """The largest step size of the schedule (η₀ unless explicit; None if unknown)."""
        if isinstance(self.learning_rate, tuple):
            return max(self.learning_rate)
        return self.learning_rate

    def step_sizes(self, start: int = 0, stop: int | None = None):
        """η_t for the 0-indexed steps t = start, …, stop − 1 (a numpy array)."""
        import numpy as np

        self.require("steps", "learning_rate", why="for the step sizes")
        stop = self.steps if stop is None else stop
        if not 0 <= start <= stop <= self.steps:
            raise ValueError(f"steps range must lie in [0, {self.steps}]. Found [{start}, {stop}).")
        if isinstance(self.learning_rate, tuple):
            return np.asarray(self.learning_rate[start:stop], dtype=float)
        t = np.arange(start, stop, dtype=float)
        return self.learning_rate * (t + 1.0) ** (-self.lr_decay)

    @property
    def sampling_rate(self) -> float:
        """q = b/n: the probability that a given example is in a given batch."""
        return self.batch_size / self.n

    @property
    def steps_per_epoch(self) -> int:
        """Steps in one epoch: ⌈n/b⌉ for poisson/sample (as Opacus), ⌊n/b⌋ for
        shuffle/shuffle-once/cyclic (the n mod b leftover examples are
        dropped), 1 for full."""
        if self.batching == "full":
            return 1
        if self.batching in PARTITION_BATCHINGS:
            return self.n // self.batch_size
        return math.ceil(self.n / self.batch_size)

    @property
    def epochs(self) -> float | None:
        """steps / steps_per_epoch (may be fractional; None when steps is)."""
        return None if self.steps is None else self.steps / self.steps_per_epoch

    @property
    def epochs_touched(self) -> int | None:
        """Worst-case number of steps that use any single example under
        shuffle/shuffle-once/cyclic/full: every (possibly partial) epoch uses
        it at most once."""
        if self.steps is None:
            return None
        return math.ceil(self.steps / self.steps_per_epoch)

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity of one step's gradient *sum*: 2L under replace, L under
        add-remove (``poisson`` batches at the fixed rate b/n, the only
        batching :class:`Run` admits there: :data:`ADD_REMOVE_BATCHINGS`)."""
        if self.adjacency == "replace":
            return 2.0 * self.lipschitz
        return self.lipschitz

    @property
    def noise_to_sensitivity(self) -> float:
        """Noise std on the gradient sum divided by its sensitivity: z/2 (2L) or z (L)."""
        self.require("noise_multiplier", why="to compute a privacy bound (calibrate finds one)")
        return self.noise_multiplier * self.lipschitz / self.sensitivity

    def sigma(self, convention: str) -> float:
        """The noise level σ of this run in a paper's convention."""
        self.require("noise_multiplier", why="for the noise level")
        return sigma_from_noise_multiplier(
            self.noise_multiplier,
            convention=convention,
            lipschitz=self.lipschitz,
            batch_size=self.batch_size,
            learning_rate=self.learning_rate,
        )

    def replace(self, **changes) -> "Run":
        """A copy with some fields changed (validated again).  A change of the noise multiplier alone
        (what a calibration makes at every noise it tries) checks that field alone: no other field's
        check reads it."""
        if changes.keys() == {"noise_multiplier"}:
            new = copy.copy(self)
            object.__setattr__(new, "noise_multiplier",
                               checked_real("noise_multiplier", changes["noise_multiplier"], optional=True))
            return new
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return type(self)(**values)

    def to_dict(self) -> dict:
        """Plain JSON-ready description, derived quantities included."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["adaptive_clip"] = None if self.adaptive_clip is None else self.adaptive_clip.to_dict()
        out["sampling_rate"] = self.sampling_rate
        out["steps_per_epoch"] = self.steps_per_epoch
        out["epochs"] = self.epochs
        return out


def add_remove_refusal(batching: str) -> str:
    """The one message every entry point gives for add/remove with a batching
    outside :data:`ADD_REMOVE_BATCHINGS`."""
    what = {"full": "changes the divisor n (and the noise on the mean)",
            "sample": "changes every other row's chance b/n of being drawn"}.get(
        batching, "moves every later batch of the epoch (each step's sum by up to 2L)")
    return (f"adjacency='add-remove' needs batching='poisson'. Found batching={batching!r}: "
            f"adding a row {what}, which no analysis covers. Use adjacency='replace', or batching='poisson'.")


def _convention(convention: str) -> str:
    return checked_choice("convention", convention, NOISE_CONVENTIONS, _CONVENTION_ALIASES)


def sigma_from_noise_multiplier(
    noise_multiplier: float,
    *,
    convention: str,
    lipschitz: float,
    batch_size: int,
    learning_rate: float | None = None,
) -> float:
    """σ of a paper's convention for a canonical noise multiplier z.

    ``altschuler-talwar``: the step is −η(G + Z), Z ~ N(0, σ²I); matching
    η·z·L/b gives σ = z·L/b.

    ``ye-shokri`` (and Ryffel et al.): the step adds √(2ησ²)·N(0, I); matching
    √(2η)·σ = η·z·L/b gives σ = z·L·√(η/2)/b (needs ``learning_rate``).

    >>> sigma_from_noise_multiplier(2.0, convention="altschuler-talwar", lipschitz=1.0, batch_size=4)
    0.5
    >>> sigma_from_noise_multiplier(2.0, convention="ye-shokri", lipschitz=1.0, batch_size=1,
    ...                             learning_rate=0.5)
    1.0
    """
    z = checked_real("noise_multiplier", noise_multiplier)
    return z * _sigma_per_unit_z(convention, lipschitz, batch_size, learning_rate)


def noise_multiplier_from_sigma(
    sigma: float,
    *,
    convention: str,
    lipschitz: float,
    batch_size: int,
    learning_rate: float | None = None,
) -> float:
    """Canonical noise multiplier z for a paper's σ; inverse of :func:`sigma_from_noise_multiplier`.

    >>> noise_multiplier_from_sigma(0.5, convention="altschuler-talwar", lipschitz=1.0, batch_size=4)
    2.0
    """
    s = checked_real("sigma", sigma)
    return s / _sigma_per_unit_z(convention, lipschitz, batch_size, learning_rate)


def _sigma_per_unit_z(convention, lipschitz, batch_size, learning_rate) -> float:
    conv = _convention(convention)
    L = checked_real("lipschitz", lipschitz)
    b = checked_integer("batch_size", batch_size)
    if conv == "altschuler-talwar":
        return L / b
    if learning_rate is None:
        raise ValueError(f"learning_rate is required for convention {conv!r}. Found None.")
    eta = checked_real("learning_rate", learning_rate)
    return L * math.sqrt(eta / 2.0) / b

"""noisysgd: Noisy-SGD for convex models, with hidden-state privacy accounting.

>>> import noisysgd
>>> run = noisysgd.Run.from_epochs(epochs=10, n=60000, batch_size=256, batching="poisson",
...                                learning_rate=0.5, noise_multiplier=1.0, lipschitz=1.0)
>>> report = noisysgd.epsilon(run, delta=1e-5)   # every analysis; the smallest sound ε
>>> report.best.analysis, round(report.epsilon, 3)
('composition-pld', 9.451)
>>> print(report.results["ye-shokri"].reason)
needs strongly convex losses (strong_convexity m > 0, e.g. L2 regularization λ = m); found m = 0
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("noisysgd")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

from .accountant import Calibration, EpochBudget, EpsilonReport, calibrate, epsilon, max_epochs  # noqa: E402
from .analyses import ANALYSES, get_analysis  # noqa: E402
from .planning import Plan, plan  # noqa: E402
from .estimators import NoisySGDClassifier, NoisySGDRegressor  # noqa: E402
from .rdp import (  # noqa: E402
    DEFAULT_ORDERS,
    OrderGridWarning,
    RDPNumericsWarning,
    epsilon_from_rdp,
    gaussian_rdp,
    sampled_gaussian_rdp,
)
from .run import (  # noqa: E402
    ADJACENCIES,
    BATCHING_SCHEMES,
    INITIALIZATIONS,
    Run,
    noise_multiplier_from_sigma,
    sigma_from_noise_multiplier,
)

__all__ = [
    "__version__",
    "Run",
    "BATCHING_SCHEMES",
    "ADJACENCIES",
    "INITIALIZATIONS",
    "sigma_from_noise_multiplier",
    "noise_multiplier_from_sigma",
    "epsilon",
    "EpsilonReport",
    "calibrate",
    "Calibration",
    "max_epochs",
    "EpochBudget",
    "plan",
    "Plan",
    "NoisySGDClassifier",
    "NoisySGDRegressor",
    "ANALYSES",
    "get_analysis",
    "DEFAULT_ORDERS",
    "gaussian_rdp",
    "sampled_gaussian_rdp",
    "epsilon_from_rdp",
    "RDPNumericsWarning",
    "OrderGridWarning",
]

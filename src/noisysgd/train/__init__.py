"""The trainer: Noisy-SGD for GLMs, exactly as the privacy analyses assume it.

:func:`train` runs the algorithm a :class:`noisysgd.Run` describes (the same
object the accountant reads); :func:`sgd` is its non-private baseline on the
same code path.  Losses (:mod:`.losses`) derive their Lipschitz constant,
smoothness and convexity from the declared feature clip (and domain, label
bound); batch streams are in :mod:`.batching`.
"""

from .batching import batches, run_batches
from .engine import RNGStreams, TrainResult, noisy_sgd_core, rng_streams, sgd, train
from .checkpoint import Checkpointing
from .declared import Bounds, Execution
from .leaks import PrivacyLeakWarning, check_declared_constants, encode_labels
from .losses import (
    BinaryLogistic,
    ClassWeighted,
    Huber,
    Loss,
    LossConstants,
    OneVsRestLogistic,
    Softmax,
    Squared,
    augment,
)

__all__ = [
    "train",
    "sgd",
    "noisy_sgd_core",
    "TrainResult",
    "rng_streams",
    "RNGStreams",
    "batches",
    "run_batches",
    "augment",
    "Loss",
    "LossConstants",
    "BinaryLogistic",
    "ClassWeighted",
    "Softmax",
    "OneVsRestLogistic",
    "Squared",
    "Huber",
    "PrivacyLeakWarning",
    "check_declared_constants",
    "encode_labels",
    "Checkpointing",
    "Bounds",
    "Execution",
]

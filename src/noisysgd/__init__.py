"""noisysgd: Noisy-SGD for convex models, with hidden-state privacy accounting.

>>> import noisysgd
>>> run = noisysgd.Run.from_epochs(epochs=10, n=60000, batch_size=256, batching="poisson",
...                                learning_rate=0.5, noise_multiplier=1.0, lipschitz=1.0)
>>> report = noisysgd.epsilon(run, delta=1e-5)   # every analysis; the smallest sound ε
>>> report.best.analysis, round(report.epsilon, 3)
('composition-pld', 1.767)
>>> print(report.results["ye-shokri"].reason)
needs strongly convex losses (strong_convexity m > 0, e.g. L2 regularization λ = m); found m = 0
"""


# The public names, imported on first use (PEP 562): `import noisysgd` and the
# CLI's `--help` stay fast; scipy, scikit-learn and dp_accounting are loaded by
# the functions that need them.
_LAZY = {
    "Calibration": "accountant", "EpochBudget": "accountant", "EpsilonReport": "accountant",
    "calibrate": "accountant", "epsilon": "accountant", "max_epochs": "accountant",
    "ANALYSES": "analyses", "get_analysis": "analyses",
    "Plan": "planning", "plan": "planning",
    "NoisySGDClassifier": "estimators", "NoisySGDRegressor": "estimators",
    "NoisySGDClassifierCV": "tuning",
    "PublicRangeScaler": "scalers", "CompositionFallbackWarning": "config",
    "auto_config": "config",
    "LinearModel": "model", "load_model": "model",
    "DEFAULT_ORDERS": "rdp", "OrderGridWarning": "rdp", "RDPNumericsWarning": "rdp",
    "epsilon_from_rdp": "rdp", "gaussian_rdp": "rdp", "sampled_gaussian_rdp": "rdp",
    "ADJACENCIES": "run", "BATCHING_SCHEMES": "run", "INITIALIZATIONS": "run", "Run": "run",
    "noise_multiplier_from_sigma": "run", "sigma_from_noise_multiplier": "run",
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("noisysgd")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


def __getattr__(name: str):
    if name == "__version__":  # read from the installed metadata on first use (40 ms)
        globals()["__version__"] = value = _version()
        return value
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'noisysgd' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | {"__version__"})


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
    "NoisySGDClassifierCV",
    "PublicRangeScaler",
    "CompositionFallbackWarning",
    "auto_config",
    "load_model",
    "LinearModel",
    "ANALYSES",
    "get_analysis",
    "DEFAULT_ORDERS",
    "gaussian_rdp",
    "sampled_gaussian_rdp",
    "epsilon_from_rdp",
    "RDPNumericsWarning",
    "OrderGridWarning",
]

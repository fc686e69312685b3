"""Independent high-precision references (mpmath) for the Rényi numerics.

Nothing here shares code with ``noisysgd.rdp``: integer orders use the exact
binomial expansion of A_α = E_{μ₀}[((1−q) + q·μ₁/μ₀)^α] at 60 significant
digits; fractional orders integrate that expectation numerically (mpmath
tanh-sinh quadrature, split where the integrand changes shape).
"""

from __future__ import annotations

import mpmath as mp


def sgm_rdp_mp(alpha, q, sigma, dps: int = 60):
    """D_α((1−q)N(0,σ²) + qN(1,σ²) ‖ N(0,σ²)) as an mpmath number."""
    with mp.workdps(dps):
        a, q, s = mp.mpf(alpha), mp.mpf(q), mp.mpf(sigma)
        if q == 1:
            return a / (2 * s**2)
        if a == mp.floor(a):
            n = int(a)
            total = mp.fsum(
                mp.binomial(n, k) * (1 - q) ** (n - k) * q**k * mp.e ** ((k * k - k) / (2 * s**2))
                for k in range(n + 1)
            )
            return mp.log(total) / (a - 1)

        def integrand(z):
            density = mp.npdf(z, 0, s)
            ratio = (1 - q) + q * mp.e ** ((2 * z - 1) / (2 * s**2))
            return density * ratio**a

        # The integrand is a mixture of bumps near 0 and near α (where μ₀·(μ₁/μ₀)^α
        # peaks); split there and at the crossover z₀ so tanh-sinh sees smooth pieces.
        z0 = s**2 * mp.log(1 / q - 1) + mp.mpf(1) / 2
        points = sorted({mp.mpf(0), mp.mpf(1), a, z0})
        width = 40 * s + a
        nodes = [points[0] - width] + points + [points[-1] + width]
        a_alpha = mp.quad(integrand, nodes)
        # A_α − 1 is what matters for small RDP; E[ratio] = 1 exactly.
        return mp.log(a_alpha) / (a - 1)


def gdp_epsilon_mp(mu: float, delta: float) -> float:
    """ε(δ) of a pair of unit Gaussians μ apart (Dong, Roth & Su 2022, Cor. 2.13), in mpmath:
    δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2), solved by bisection (decreasing in ε)."""
    mp.mp.dps = 40
    mu = mp.mpf(mu)
    f = lambda e: mp.ncdf(-e / mu + mu / 2) - mp.e ** e * mp.ncdf(-e / mu - mu / 2) - delta  # noqa: E731
    lo, hi = mp.mpf(0), mp.mpf(200)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return float(hi)

"""How far the taylor fit lands from the best objective found, one start (u = 0) against the
multi-start fit, on random problems whose probe deltas share a component (README, PRISM's
representations). Prints both summaries; about 7 minutes of one core's CPU time.

Each problem: n items, k attributes; D+ = z + g + e, D- = z - g + e' with z a shared
item-level component of scale ``shared``; the target is s0 + a z + b g.w + noise. gamma is
the one grouped CV picks from the default grid; the reference is the lowest objective of the
multi-start fit and 31 Levenberg-Marquardt runs from u = 0 and 30 random starts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

import judgecal.calibrate.prism as prism
from judgecal.calibrate.prism import PRISM


def problem(n, attrs, seed, shared, a, b, noise, sg):
    rng = np.random.default_rng(seed)
    common = rng.normal(0, shared, n)[:, None]
    g = rng.normal(0, sg, (n, attrs))
    plus, minus = common + g + rng.normal(0, 0.1, (n, attrs)), common - g + rng.normal(0, 0.1, (n, attrs))
    s0 = rng.normal(3, 1, n)
    y = s0 + a * common[:, 0] + b * g @ rng.normal(0, 1, attrs) + rng.normal(0, noise, n)
    D = np.empty((n, 2 * attrs))
    D[:, 0::2], D[:, 1::2] = plus, minus
    names = [f"a{j}:{d}" for j in range(attrs) for d in ("more", "less")]
    return pd.DataFrame(np.column_stack([s0, D]), columns=["baseline", *names]), y


def objectives_from(X, y, gamma, learn, starts):
    """The objective reached by one LM run of the module's residuals from each start."""
    s0 = X["baseline"].to_numpy()
    plus, minus = X.filter(like=":more").to_numpy(), X.filter(like=":less").to_numpy()
    U, t = prism._unpenalised(s0, y, learn, True)
    n = len(y)
    T = np.hstack([(plus - minus) / 2, (plus + minus) / 2])
    m = prism._scale(T)
    Tt, tt = prism._project_out(U, T, t)
    return [2 * least_squares(prism._taylor_residuals, u0, prism._taylor_jacobian, method="lm", xtol=1e-15,
                              ftol=1e-15, gtol=1e-15, args=(Tt, tt, np.sqrt(n * gamma * m))).cost / n
            for u0 in starts]


def main(problems: int = 150) -> None:
    rng = np.random.default_rng(2)
    grid = np.logspace(-3, 3, 13)
    real = prism._taylor_starts
    one, multi = [], []
    for seed in range(problems):
        n, attrs = int(rng.choice([40, 80, 200])), int(rng.choice([2, 4, 8]))
        shared, a, b = rng.choice([0.5, 1, 3, 10]), rng.normal(0, 3), rng.normal(0, 1)
        noise, sg = rng.choice([0.1, 0.5, 1.0]), rng.choice([0.1, 0.4])
        X, y = problem(n, attrs, seed, shared, a, b, noise, sg)
        learn = bool(rng.integers(2))
        gamma = PRISM(gammas=grid, representation="taylor", learn_baseline=learn).fit(X, y, np.arange(n) // 4).gamma_
        prism._taylor_starts = lambda Tt, tt, w, warm: [warm]  # one start: u = 0 at a single gamma
        try:
            f_one = PRISM(gammas=gamma, representation="taylor", learn_baseline=learn).fit(X, y).objective(X, y)
        finally:
            prism._taylor_starts = real
        f_multi = PRISM(gammas=gamma, representation="taylor", learn_baseline=learn).fit(X, y).objective(X, y)
        starts = [np.zeros(attrs)] + [rng.normal(0, 2, attrs) for _ in range(30)]
        best = min(min(objectives_from(X, y, gamma, learn, starts)), f_multi)
        one.append(f_one / best)
        multi.append(f_multi / best)
    for name, r in (("one start (u = 0)", np.array(one)), ("multi-start", np.array(multi))):
        print(f"{name}: at most {100 * (r.max() - 1):.1f}% above the best found; over 1% in {(r > 1.01).sum()} "
              f"of {len(r)}")


if __name__ == "__main__":
    main()

"""Benchmark (a): one PRISM fit with 5-fold grouped CV over a 13-value penalty grid on
1,600 items x 29 columns (baseline + 14 attributes x more/less), on one core.
Target: under 0.5 s."""

import time

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from _common import save
from judgecal.calibrate import DEFAULT_GAMMAS, PRISM


def main(repeats: int = 7):
    rng = np.random.default_rng(0)
    n, attrs = 1600, 14
    D = rng.normal(0, 0.3, size=(n, 2 * attrs))
    s0 = rng.normal(3, 1, n)
    y = s0 - D @ rng.normal(0, 1, 2 * attrs) + rng.normal(0, 0.5, n)
    X = pd.DataFrame(np.column_stack([s0, D]),
                     columns=["baseline"] + [f"a{j}:{d}" for j in range(attrs) for d in ("more", "less")])
    groups = np.repeat(np.arange(100), 16)
    times = {}
    with threadpool_limits(limits=1):
        for lb in (False, True):
            ts = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                PRISM(gammas=DEFAULT_GAMMAS, learn_baseline=lb, cv=5).fit(X, y, groups)
                ts.append(time.perf_counter() - t0)
            times["alpha-PRISM" if lb else "PRISM"] = float(np.median(ts))
    save("prism_fit", {"items": n, "columns": X.shape[1], "gammas": len(DEFAULT_GAMMAS), "folds": 5,
                       "threads": 1, "median_seconds": times, "target_seconds": 0.5})


if __name__ == "__main__":
    main()

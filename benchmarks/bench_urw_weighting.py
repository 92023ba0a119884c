"""Benchmark (URW): weighting 1,000,000 verdicts with N_cal = 2,000 on one core.
Target: under 1 s (fit + raw weights + per-response normalised scores)."""

import time

import numpy as np
from threadpoolctl import threadpool_limits

from _common import save
from judgecal.calibrate.urw import URW


def main(repeats: int = 5):
    rng = np.random.default_rng(0)
    cal_v, cal_y = rng.integers(0, 7, 2000) / 6, rng.integers(0, 2, 2000)
    v = rng.integers(0, 7, 1_000_000) / 6
    response = np.repeat(np.arange(200_000), 5)  # 5 criteria per response
    times = []
    with threadpool_limits(limits=1):
        for _ in range(repeats):
            t0 = time.perf_counter()
            URW().fit(cal_v, cal_y).response_scores(v, response)
            times.append(time.perf_counter() - t0)
    save("urw_weighting", {"verdicts": len(v), "n_cal": 2000, "responses": 200_000, "threads": 1,
                           "median_seconds": float(np.median(times)), "target_seconds": 1.0})


if __name__ == "__main__":
    main()
